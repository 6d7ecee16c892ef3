"""Paged KV cache: capacity in blocks from the memory model, and the prefix cache (LRU).

Capacity per replica (vLLM's profiling step, in closed form): ``engine.analytical.kvcache.capacity``
(weights with expert shard, group scales and uneven stages; MLA latent whole on every TP rank)
    blocks       floor(tokens / block_size)
The activation peak is taken at the scheduler's largest iteration: max_num_batched_tokens tokens
and max_num_seqs sequences.

Prefix cache: entries are prefix blocks of ``block_tokens`` prompt tokens keyed by their hash
(Mooncake's hash_ids). An entry in use by a running request is pinned; unpinned entries are kept
in least-recently-used order and evicted first under memory pressure. Each entry occupies
block_tokens / block_size KV blocks of the replica's pool.
"""

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from engine.analytical import kvcache
from engine.spec import Specs


@dataclass(frozen=True)
class KvCapacity:
    blocks: int
    tokens: float
    kv_capacity_gb: float        # per device
    weights_gb: float            # per device
    activation_gb: float         # per device
    fits: bool


def kv_capacity(specs: Specs, block_size: int, max_batched_tokens: int, max_seqs: int) -> KvCapacity:
    """KV blocks of one replica from the analytical engine's footprint
    (``engine.analytical.kvcache.capacity``, the one both engines use), at the scheduler's
    largest iteration (max_batched_tokens tokens, max_seqs sequences)."""
    m, p, c, hw = specs.model, specs.partition, specs.calibration, specs.hardware
    k = kvcache.capacity(m, p.tp, p.pp, p.ep, p.sp, float(max_batched_tokens), float(max_seqs),
                         hw.hbm_capacity_bytes, c.memory_reserve_bytes, specs.kv_usable_fraction)
    tokens = float(k["tokens"])
    blocks = int(tokens // block_size)
    return KvCapacity(blocks=blocks, tokens=tokens, kv_capacity_gb=float(k["kv_capacity"]) / 1e9,
                      weights_gb=float(k["weights"]) / 1e9,
                      activation_gb=float(k["activations"]) / 1e9, fits=blocks > 0)


class PrefixCache:
    """Prefix blocks by hash: pinned (in use, refcounted) or unpinned (LRU, evictable)."""

    tiered = False     # engine.des.tiers.TieredPrefixCache: lower tiers behind this one

    def __init__(self, pages_per_entry: int):
        self.pages_per_entry = pages_per_entry
        self.lru: OrderedDict = OrderedDict()   # hash -> None, oldest first, unpinned
        self.pins: dict = {}                    # hash -> refcount, pinned
        self.evictions = 0

    @property
    def pages(self) -> int:
        return (len(self.lru) + len(self.pins)) * self.pages_per_entry

    @property
    def evictable_pages(self) -> int:
        return len(self.lru) * self.pages_per_entry

    def match(self, hashes, limit: int) -> int:
        """Number of leading hashes (at most ``limit``) present in the cache."""
        n = 0
        lru, pins = self.lru, self.pins
        for h in hashes[:limit]:
            if h in pins or h in lru:
                n += 1
            else:
                break
        return n

    def acquire(self, hashes) -> None:
        """Pin present entries (a hit)."""
        lru, pins = self.lru, self.pins
        for h in hashes:
            if h in pins:
                pins[h] += 1
            else:
                del lru[h]
                pins[h] = 1

    def insert_pinned(self, hashes) -> int:
        """Add (or pin, if present) the entries of a freshly prefilled prompt; returns how many
        were new (their pages move from the request into the cache)."""
        new = 0
        lru, pins = self.lru, self.pins
        for h in hashes:
            if h in pins:
                pins[h] += 1
            elif h in lru:
                del lru[h]
                pins[h] = 1
            else:
                pins[h] = 1
                new += 1
        return new

    def release(self, hashes) -> None:
        """Unpin; an entry no request uses becomes the most recently used evictable one."""
        lru, pins = self.lru, self.pins
        for h in hashes:
            c = pins[h] - 1
            if c:
                pins[h] = c
            else:
                del pins[h]
                lru[h] = None

    def evict(self, pages: int) -> int:
        """Evict least-recently-used unpinned entries until ``pages`` pages are freed (or none
        left); returns the pages freed."""
        freed = 0
        lru = self.lru
        while freed < pages and lru:
            lru.popitem(last=False)
            freed += self.pages_per_entry
            self.evictions += 1
        return freed


def pages(tokens, block_size: int):
    """KV blocks holding ``tokens`` tokens: ceil(tokens / block_size) (numpy-friendly)."""
    return -(-np.asarray(tokens) // block_size) if isinstance(tokens, np.ndarray) else -(-tokens // block_size)
