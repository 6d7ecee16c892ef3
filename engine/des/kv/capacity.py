"""KV capacity of one replica in blocks, from the memory model (vLLM's profiling step, in closed
form): ``engine.analytical.kvcache.capacity`` (weights with expert shard, group scales and uneven
stages; MLA latent whole on every TP rank), by the framework profile's own rule
(``kvcache.framework_rule``: free_fraction, vLLM's total_fraction, SGLang's static_fraction)
    blocks       floor(tokens / block_size)
The activation peak is taken at the scheduler's largest iteration: max_num_batched_tokens tokens
and max_num_seqs sequences. A speculative draft's weights and KV beside the target's come off (``replica_blocks``).
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
    largest iteration (max_batched_tokens tokens, max_seqs sequences), sized by the framework
    profile's rule (``kvcache.framework_rule``)."""
    m, p, c, hw = specs.model, specs.partition, specs.calibration, specs.hardware
    rule = kvcache.framework_rule(specs.framework, max_batched_tokens)
    k = kvcache.capacity(m, p.tp, p.pp, p.ep, p.sp, float(max_batched_tokens), float(max_seqs),
                         hw.visible_bytes, c.memory_reserve_bytes, specs.kv_usable_fraction,
                         rule)
    tokens = float(k["tokens"])
    blocks = int(tokens // block_size)
    return KvCapacity(blocks=blocks, tokens=tokens, kv_capacity_gb=float(k["kv_capacity"]) / 1e9,
                      weights_gb=float(k["weights"]) / 1e9,
                      activation_gb=float(k["activations"]) / 1e9, fits=blocks > 0)


def pages(tokens, block_size: int):
    """KV blocks holding ``tokens`` tokens: ceil(tokens / block_size) (numpy-friendly)."""
    return -(-np.asarray(tokens) // block_size) if isinstance(tokens, np.ndarray) else -(-tokens // block_size)


def replica_blocks(specs, des, cap: KvCapacity) -> int:
    """KV blocks of a replica (``cap``: engine.des.kv.kv_capacity) with a speculative
    draft's weights and KV beside the target's (engine.analytical.specdec.draft_memory): the room
    less the draft weights (x the usable fraction under the free_fraction rule, whose room is a
    share of what is free; whole under vLLM's and SGLang's rules, which count the draft among the
    weights loaded before KV is sized), over target + draft KV bytes per token."""
    if specs.analytical.spec_decode.method == "none" or cap.tokens <= 0:
        return cap.blocks
    from engine.analytical import specdec
    p = specs.partition
    w_d, kvd = specdec.draft_memory(specs, p.tp, p.ep, p.sp)
    w_d, kvd = float(w_d), float(kvd)
    if not (w_d or kvd):
        return cap.blocks
    room = cap.kv_capacity_gb * 1e9
    per_token = room / cap.tokens                 # the target's KV bytes per token per device
    share = specs.kv_usable_fraction if specs.framework.kv_rule == "free_fraction" else 1.0
    tokens = max(room - w_d * share, 0.0) / (per_token + kvd)
    return int(tokens // des.kv.block_size)


__all__ = ["KvCapacity", "kv_capacity", "replica_blocks", "pages"]
