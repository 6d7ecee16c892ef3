"""KV capacity of one replica in blocks, from the memory model (vLLM's profiling step, in closed
form): ``engine.analytical.kvcache.capacity`` (weights with expert shard, group scales and uneven
stages; MLA latent whole on every TP rank)
    blocks       floor(tokens / block_size)
The activation peak is taken at the scheduler's largest iteration: max_num_batched_tokens tokens
and max_num_seqs sequences. A speculative draft's share comes off in engine.des.extras.kv_blocks.
"""

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


def pages(tokens, block_size: int):
    """KV blocks holding ``tokens`` tokens: ceil(tokens / block_size) (numpy-friendly)."""
    return -(-np.asarray(tokens) // block_size) if isinstance(tokens, np.ndarray) else -(-tokens // block_size)


__all__ = ["KvCapacity", "kv_capacity", "pages"]
