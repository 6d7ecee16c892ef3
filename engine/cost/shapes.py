"""Roofline quantities of each operator: FLOPs, HBM bytes, and the precision its math runs at.

Every function returns (flops, bytes) per call on one GPU, as float arrays (numpy broadcasting
over the array arguments). These are the x-axes of the transfer curves (engine.cost.transfer) and
the plain roofline the benchmark compares against. Units: FLOP and byte.
"""

import numpy as np

from engine.errors import SpecError

#: GEMM table dtype -> (precision of the peak it runs at, activation bytes/elt, weight bytes/elt).
#: Weight-only formats (int8_wo, int4_wo) dequantise to bf16 and multiply at the bf16 rate; nvfp4
#: multiplies at the fp4 rate; fp8_block is fp8 with one scale per 128x128 block (scales ignored).
GEMM_DTYPES = {
    "bf16": ("bf16", 2.0, 2.0),
    "fp16": ("bf16", 2.0, 2.0),
    "fp8": ("fp8", 1.0, 1.0),
    "fp8_block": ("fp8", 1.0, 1.0),
    "int8_wo": ("bf16", 2.0, 1.0),
    "int4_wo": ("bf16", 2.0, 0.5),
    "nvfp4": ("fp4", 0.5, 0.5),
}
#: MoE table dtypes: the GEMM ones plus the MXFP4 expert formats of gpt-oss
#: (w4a16: 4-bit weights, bf16 math; w4a8: 4-bit weights, fp8 math).
MOE_DTYPES = {**GEMM_DTYPES, "mxfp4_w4a16": ("bf16", 2.0, 0.5), "mxfp4_w4a8": ("fp8", 1.0, 0.5)}
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}

#: DeepSeek-V3 MLA head geometry the measured MLA tables use: q/k head dim 128 (no-rope) + 64
#: (rope), v head dim 128, compressed KV latent 512 + 64 rope per token (absorbed decode).
MLA_QK, MLA_V, MLA_LATENT = 192, 128, 576


def _f(x):
    return np.asarray(x, dtype=np.float64)


def gemm(m, n, k, dtype: str):
    """C[m,n] = A[m,k] B[k,n]: flops = 2 m n k; bytes = m k a + k n w + m n 2 (bf16 output)."""
    _, a, w = GEMM_DTYPES[dtype]
    m, n, k = _f(m), _f(n), _f(k)
    return 2.0 * m * n * k, m * k * a + k * n * w + m * n * 2.0


def causal_pairs(isl):
    """Query-key pairs of causal attention over a prompt of isl tokens: isl (isl + 1) / 2."""
    isl = _f(isl)
    return isl * (isl + 1.0) / 2.0


def attn_prefill(batch, isl, heads, kv_heads, head_dim, kv_dtype: str):
    """Prefill attention of one layer (heads per GPU), prompts from scratch.

    flops = 4 batch heads head_dim pairs (QK^T and PV, 2 flops per multiply-add each);
    bytes = batch isl head_dim (2 heads x 2 bytes [Q in, O out] + 2 kv_heads x kv bytes [K, V]).
    """
    b, s = _f(batch), _f(isl)
    flops = 4.0 * b * heads * head_dim * causal_pairs(s)
    byts = b * s * head_dim * (4.0 * heads + 2.0 * kv_heads * KV_BYTES[kv_dtype])
    return flops, byts


def attn_decode(batch, ctx, heads, kv_heads, head_dim, kv_dtype: str):
    """One decode step of one layer: each of batch sequences attends over ctx cached tokens.

    flops = 4 batch ctx heads head_dim; bytes = batch ctx 2 kv_heads head_dim kv_bytes (the KV
    cache read, which dominates) + batch heads head_dim 4 (q in, o out in bf16).
    """
    b, c = _f(batch), _f(ctx)
    flops = 4.0 * b * c * heads * head_dim
    byts = b * c * 2.0 * kv_heads * head_dim * KV_BYTES[kv_dtype] + b * heads * head_dim * 4.0
    return flops, byts


def mla_prefill(batch, isl, heads, dtype: str = "bf16"):
    """DeepSeek MLA prefill attention core (per layer, heads per GPU), decompressed K/V.

    flops = 2 batch heads pairs (192 + 128) [QK^T over the 192-dim q/k, PV over the 128-dim v];
    bytes = batch isl heads (192 + 192 + 128 + 128) x 2 (q, k, v in and o out, bf16).
    """
    b, s = _f(batch), _f(isl)
    flops = 2.0 * b * heads * causal_pairs(s) * (MLA_QK + MLA_V)
    byts = b * s * heads * (2 * MLA_QK + 2 * MLA_V) * 2.0
    return flops, byts


def mla_decode(batch, ctx, heads, dtype: str = "bf16"):
    """DeepSeek MLA decode attention core in absorbed form (per layer, heads per GPU).

    Each query head attends over the 576-wide compressed latent: flops = 2 batch heads ctx
    (576 + 512); bytes = batch ctx 576 kv_bytes (the latent cache read, shared by all heads).
    """
    b, c = _f(batch), _f(ctx)
    flops = 2.0 * b * heads * c * (MLA_LATENT + 512)
    byts = b * c * MLA_LATENT * KV_BYTES.get(dtype, 2.0)
    return flops, byts


def moe_active_experts(tokens, topk, num_experts, ep):
    """Expected experts on one GPU that receive at least one token (uniform routing):
    (E / ep) (1 - (1 - topk / E)^tokens)."""
    t = _f(tokens)
    return (num_experts / ep) * (1.0 - np.power(1.0 - min(topk / num_experts, 1.0), t))


def moe(tokens, hidden, inter, topk, num_experts, tp, ep, dtype: str):
    """Routed-expert block of one layer on one GPU (gated MLP experts: gate, up, down).

    token-expert pairs on this GPU = tokens topk / ep (balanced routing); each pair costs
    3 x 2 hidden (inter / tp) flops. bytes = weights of the experts touched
    (moe_active_experts x 3 hidden inter/tp x weight bytes) + activations in and out.
    """
    _, a, w = MOE_DTYPES[dtype]
    t = _f(tokens)
    i = inter / tp
    flops = 6.0 * hidden * i * t * topk / ep
    byts = moe_active_experts(t, topk, num_experts, ep) * 3.0 * hidden * i * w + t * hidden * (a + 2.0)
    return flops, byts


def collective_bus_bytes(op: str, message_bytes, n_gpus):
    """Bytes each GPU sends over its link for one collective of message_bytes (ring algorithms):
    all-reduce 2 (n-1)/n S, all-gather and all-to-all (n-1)/n S."""
    s, n = _f(message_bytes), _f(n_gpus)
    f = 2.0 if op == "all_reduce" else 1.0
    return f * (n - 1.0) / n * s


def scaleup_link(peaks: dict, hw_name: str, op: str, n_gpus: int) -> float:
    """The chip's scale-up link bandwidth per direction (byte/s) a collective ``op`` over
    ``n_gpus`` GPUs runs on; SpecError naming the field when the sheet gives none."""
    link = peaks["scaleup_bandwidth"]
    if link is None:
        raise SpecError("hardware.scaleup_bandwidth", None,
                        f"a link bandwidth for {hw_name} ({op} over {n_gpus} GPUs)")
    return link
