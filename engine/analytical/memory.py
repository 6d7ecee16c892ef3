"""Memory: KV-cache bytes, per-device footprints, fit, and KV capacity.

Units: bytes. Vectorised: every argument may be a numpy array; results broadcast.
"""

import numpy as np

from engine.spec import DTYPE_BYTES, ModelSpec


def kv_elems_per_layer_token(model: ModelSpec) -> int:
    """KV-cache elements one token adds to one layer.

    MHA/GQA/MQA: 2 x nkv x dh (a key and a value per KV head).
    MLA (DeepSeek-V2 sec. 2.1.2): the compressed latent c_KV (kv_lora_rank) plus the decoupled
    rotary key (qk_rope_head_dim), shared by all heads: 512 + 64 = 576 for DeepSeek-V3.
    """
    if model.attention == "mla":
        return model.kv_lora_rank + model.qk_rope_head_dim
    return 2 * model.num_kv_heads * model.head_dim


def kv_bytes_per_layer_token(model: ModelSpec) -> float:
    """KV bytes one token adds to one layer: kv_elems_per_layer_token x bytes of kv_dtype."""
    return kv_elems_per_layer_token(model) * DTYPE_BYTES[model.kv_dtype]


def kv_bytes_per_token(model: ModelSpec) -> float:
    """KV-cache bytes one token adds over all layers when every layer keeps it (full attention):
    L x kv_elems_per_layer_token x kv_bytes.

    Llama-2-7B (32 layers, 32 KV heads of 128, bf16): 2*32*32*128*2 = 524,288 bytes/token;
    DeepSeek-V3 (61 layers, MLA 512 + 64, bf16): 61*576*2 = 70,272 bytes/token.
    Sliding-window layers keep at most ``sliding_window`` tokens: see ``kv_layer_positions``.
    """
    return model.num_layers * kv_bytes_per_layer_token(model)


def kv_layer_positions(model: ModelSpec, context_len):
    """Sum over layers of the cached positions a sequence of ``context_len`` tokens holds
    [layer-positions]:  (L - Lw) x n + Lw x min(n, W)
    with Lw = sliding_window_layers keeping only the last W = sliding_window tokens.
    KV bytes of the sequence = this x kv_bytes_per_layer_token. Without windows: L x n.
    """
    L, lw, w = model.num_layers, model.sliding_window_layers, model.sliding_window
    if not lw:
        return L * context_len
    return (L - lw) * context_len + lw * np.minimum(context_len, w)


def kv_heads(model: ModelSpec) -> int:
    """KV heads that tensor parallelism can split the cache over: nkv, or 1 for MLA (the latent
    is shared by all heads, so every TP rank keeps the whole latent, as vLLM and SGLang do)."""
    return 1 if model.attention == "mla" else model.num_kv_heads


def kv_shard_factor(num_kv_heads: int, tp, pp, sp):
    """How many ways one token's KV is split across the devices of a replica.

    TP splits KV heads (tp devices share nkv heads; when tp > nkv each head is replicated, so the
    split stops at nkv); PP splits layers; SP splits tokens. Factor = min(tp, nkv) x pp x sp.
    Pass ``kv_heads(model)`` (1 for MLA).
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
