"""Memory: KV-cache bytes, per-device footprints, fit, and KV capacity.

Units: bytes. Vectorised: every argument may be a numpy array; results broadcast.
"""

import numpy as np

from engine.spec import DTYPE_BYTES, ModelSpec


def kv_bytes_per_token(model: ModelSpec) -> float:
    """KV-cache bytes one token adds over all layers: 2 (K and V) x L x nkv x dh x kv_bytes.

    Llama-2-7B (32 layers, 32 KV heads of 128, bf16): 2*32*32*128*2 = 524,288 bytes/token.
    """
    return 2.0 * model.num_layers * model.num_kv_heads * model.head_dim * DTYPE_BYTES[model.kv_dtype]


def kv_shard_factor(num_kv_heads: int, tp, pp, sp):
    """How many ways one token's KV is split across the devices of a replica.

    TP splits KV heads (tp devices share nkv heads; when tp > nkv each head is replicated, so the
    split stops at nkv); PP splits layers; SP splits tokens. Factor = min(tp, nkv) x pp x sp.
    """
    return np.minimum(tp, num_kv_heads) * pp * sp


def activation_peak_bytes(model: ModelSpec, tokens, batch, tp):
    """Peak activation working set on one device during a forward pass of ``tokens`` tokens, bytes.

    Estimate: the widest live tensors of a layer, the residual stream plus the FFN's gate/up output,
    tokens x (2h + 2f/tp) x act_bytes, plus fp32 logits of the last token of each sequence,
    batch x V x 4 / tp. (Frameworks size this by a profiling pass; this is its first-order form.)
    """
    f = model.expert_ffn_size * max(model.experts_per_token, 1) if model.is_moe else model.ffn_size
    act = DTYPE_BYTES[model.activation_dtype]
    return tokens * (2 * model.hidden_size + 2 * f / tp) * act + batch * model.vocab_size * 4.0 / tp


def kv_capacity_bytes(hbm_capacity_bytes, weights_bytes, activation_bytes, reserve_bytes,
                      usable_fraction):
    """KV capacity per device: (HBM - weights - activations - reserve) x usable fraction, bytes.

    The usable fraction stands for allocator fragmentation and what a framework keeps back
    (vLLM's gpu_memory_utilization); it comes from the calibration group. Negative -> 0.
    """
    free = hbm_capacity_bytes - weights_bytes - activation_bytes - reserve_bytes
    return np.maximum(free, 0.0) * usable_fraction
