"""HBM traffic (bytes moved between HBM and the chip) of prefill and decode. Vectorised.

Weights are streamed once per forward pass (per chunk); the KV cache is written once per new
token and read once per decode step for every cached position; activations are read and written
once per matmul (no cross-kernel fusion assumed).
"""

import numpy as np

from engine.spec import ModelSpec


def activation_elems_per_token(model: ModelSpec) -> float:
    """Activation elements read + written per token over all layers (input + output of each matmul).

    Per layer: qkv  h + (nh + 2 nkv) dh;  attention out  nh dh (read q, write out: 2 nh dh);
    o-proj  nh dh + h;  FFN (gated) per active FFN of width f: h + 2f (gate, up) and f + h (down)
    [plain MLP: h + f and f + h]. Active FFNs: 1 for dense layers, top-k + shared for MoE layers.
    MLA (rq, rkv, dr, dn, dv as in ``params``): q path h + rq + rq + nh(dn+dr) [h + nh(dn+dr)
    without rq]; kv path h + (rkv+dr) + rkv + nh(dn+dv); attention 2 nh dv; o-proj nh dv + h.
    """
    from engine.analytical.params import layer_split

    h, nh, nkv, dh = model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim
    if model.attention == "mla":
        rq, rkv = model.q_lora_rank, model.kv_lora_rank
        dn, dr, dv = model.qk_nope_head_dim, model.qk_rope_head_dim, model.v_head_dim
        q = (h + 2 * rq + nh * (dn + dr)) if rq else h + nh * (dn + dr)
        attn = q + (h + (rkv + dr) + rkv + nh * (dn + dv)) + 2 * nh * dv + (nh * dv + h)
    else:
        attn = (h + (nh + 2 * nkv) * dh) + 2 * nh * dh + (nh * dh + h)

    def ffn(f):
        return (h + (2 * f if model.gated_mlp else f)) + (f + h)

    l_dense, l_moe = layer_split(model)
    moe = (model.experts_per_token + model.num_shared_experts) * ffn(model.expert_ffn_size) if l_moe else 0
    return float(model.num_layers * attn + l_dense * ffn(model.ffn_size) + l_moe * moe)


def elementwise_elems_per_token(model: ModelSpec) -> float:
    """Activation elements the element-wise kernels between the matmuls read + write per token
    over all layers (what a measured GEMM's time does not hold; kernel-priced passes add it).

    Per layer: two fused residual-add + RMSNorm (read x and the residual, write both: 4h each);
    rotary embedding of q and k (read + write: 2 (nh + nkv) dh; MLA: the rope part 2 (nh + 1) dr);
    the gated activation silu(gate) x up per active FFN of width f (read 2f, write f: 3f; plain
    MLP: read f, write f). Active FFNs as in ``activation_elems_per_token``.
    """
    from engine.analytical.params import layer_split

    h, nh, nkv, dh = model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim
    rope = 2 * (nh + 1) * model.qk_rope_head_dim if model.attention == "mla" else 2 * (nh + nkv) * dh
    per_layer = 8 * h + rope

    def act(f):
        return 3 * f if model.gated_mlp else 2 * f

    l_dense, l_moe = layer_split(model)
    moe = (model.experts_per_token + model.num_shared_experts) * act(model.expert_ffn_size) if l_moe else 0
    return float(model.num_layers * per_layer + l_dense * act(model.ffn_size) + l_moe * moe)


def expected_experts_touched(num_experts, experts_per_token, tokens):
    """Expected distinct routed experts one layer touches for ``tokens`` tokens.

    With uniform, independent top-k routing each expert is missed by one token with probability
    (1 - k/E), so E[touched] = E * (1 - (1 - k/E)^T). T=1 gives k; T -> inf gives E.
    """
    return num_experts * (1.0 - np.power(1.0 - experts_per_token / num_experts, tokens))
