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
    [plain MLP: h + f and f + h]. Active FFNs: 1 for dense, top-k + shared for MoE.
    """
    h, nh, nkv, dh = model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim
    attn = (h + (nh + 2 * nkv) * dh) + 2 * nh * dh + (nh * dh + h)
    if model.is_moe:
        f, n_ffn = model.expert_ffn_size, model.experts_per_token + model.num_shared_experts
    else:
        f, n_ffn = model.ffn_size, 1
    ffn = (h + (2 * f if model.gated_mlp else f)) + (f + h)
    return float(model.num_layers * (attn + n_ffn * ffn))


def expected_experts_touched(num_experts, experts_per_token, tokens):
    """Expected distinct routed experts one layer touches for ``tokens`` tokens.

    With uniform, independent top-k routing each expert is missed by one token with probability
    (1 - k/E), so E[touched] = E * (1 - (1 - k/E)^T). T=1 gives k; T -> inf gives E.
    """
    return num_experts * (1.0 - np.power(1.0 - experts_per_token / num_experts, tokens))


def weight_bytes_streamed(total_bytes, expert_bytes, embedding_bytes, num_experts, experts_per_token,
                          tokens):
    """Weight bytes one forward pass over ``tokens`` tokens streams from HBM.

    All non-expert weights (the input embedding excepted: a lookup of ``tokens`` rows, ignored)
    plus the routed experts actually touched: expert_bytes x E[touched]/E.
    """
    dense_part = total_bytes - expert_bytes - embedding_bytes
    if num_experts:
        frac = expected_experts_touched(num_experts, experts_per_token, tokens) / num_experts
        return dense_part + expert_bytes * frac
    return dense_part + 0.0 * tokens
