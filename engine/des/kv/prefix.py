"""The prefix cache of one replica's HBM (LRU).

Prefix cache: entries are prefix blocks of ``block_tokens`` prompt tokens keyed by their hash
(Mooncake's hash_ids). An entry in use by a running request is pinned; unpinned entries are kept
in least-recently-used order and evicted first under memory pressure. Each entry occupies
block_tokens / block_size KV blocks of the replica's pool.
"""

from collections import OrderedDict


class PrefixCache:
    """Prefix blocks by hash: pinned (in use, refcounted) or unpinned (LRU, evictable)."""

    tiered = False     # engine.des.kv.tiers.TieredPrefixCache: lower tiers behind this one

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


__all__ = ["PrefixCache"]
