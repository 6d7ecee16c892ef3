"""Memory: KV-cache bytes, per-device footprints, fit, and KV capacity.

Units: bytes. Vectorised: every argument may be a numpy array; results broadcast.
"""

import numpy as np

from engine.analytical import window
from engine.spec import DTYPE_BYTES, ModelSpec


def kv_elems_per_layer_token(model: ModelSpec) -> int:
    """KV-cache elements one token adds to one attention layer: 2 x nkv x dh (MHA/GQA/MQA), or
    kv_lora_rank + qk_rope_head_dim (MLA); derivation at ``ModelSpec.kv_elems_per_layer_token``."""
    return model.kv_elems_per_layer_token


def kv_bytes_per_layer_token(model: ModelSpec) -> float:
    """KV bytes one token adds to one layer: kv_elems_per_layer_token x bytes of kv_dtype."""
    return kv_elems_per_layer_token(model) * DTYPE_BYTES[model.kv_dtype]


def kv_bytes_per_token(model: ModelSpec) -> float:
    """KV-cache bytes one token adds over all layers when every layer keeps it (full attention):
    sum over layer groups of count x KV bytes per layer-token = L x kv_elems_per_layer_token x
    kv_bytes for a uniform model.

    Llama-2-7B (32 layers, 32 KV heads of 128, bf16): 2*32*32*128*2 = 524,288 bytes/token;
    DeepSeek-V3 (61 layers, MLA 512 + 64, bf16): 61*576*2 = 70,272 bytes/token.
    Sliding-window layers keep at most ``sliding_window`` tokens: see ``sequence_kv_bytes``.
    """
    return sum(g.count * g.kv_bytes_per_token for g in model.layer_groups)


def kv_layer_positions(model: ModelSpec, context_len):
    """Sum over layers of the cached positions a sequence of ``context_len`` tokens holds
    [layer-positions]: sum over ``model.layer_groups`` of count x min(n, W)
    (``window.kept_positions``) = (L - Lw) x n + Lw x min(n, W) with Lw = sliding_window_layers
    keeping only the last W = sliding_window tokens. Without windows: L x n.
    """
    return window.kept_positions(model.layer_groups, context_len)


def sequence_kv_bytes(model: ModelSpec, context_len):
    """KV (and recurrent-state) bytes one sequence of ``context_len`` tokens holds over all
    layers: sum over ``model.layer_groups`` of count x (min(n, W) x KV bytes per layer-token
    + state bytes per sequence) [bytes]. Uniform attention layers: kv_layer_positions x
    kv_bytes_per_layer_token."""
    return sum(g.count * (window.kept(context_len, g.window) * g.kv_bytes_per_token
                          + g.state_bytes_per_seq) for g in model.layer_groups)


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
