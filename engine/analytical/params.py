"""Parameter counts and weight bytes derived from the architecture.

All counts are numbers of weights (elements); bytes = count x DTYPE_BYTES[weight_dtype].
Per layer of a decoder block (h = hidden, nh/nkv = query/KV heads, dh = head dim, f = FFN size):

    attention   q: h*nh*dh   k, v: h*nkv*dh each   o: nh*dh*h      -> h*dh*(2*nh + 2*nkv)
    dense FFN   gated (SwiGLU): gate, up, down = 3*h*f;  plain MLP: 2*h*f
    MoE FFN     router h*E + E routed experts + S shared experts, each 3*h*f_e (gated)
    norms       2*h (pre-attention and pre-FFN RMSNorm weights)

plus the input embedding V*h, the final norm h, and the LM head V*h unless tied to the embedding.
Checked against published totals (Llama-2-7B 6.74B, Llama-3.1-8B 8.03B, Mixtral-8x7B 46.70B) in
tests/engine/test_params.py.
"""

from dataclasses import dataclass

from engine.spec import ModelSpec


@dataclass(frozen=True)
class ParamCounts:
    """Weight counts of one model (elements, not bytes).

    total: every weight held in memory.
    per_token_matmul: weights one token multiplies through in the decoder body (attention + the
        FFN experts it is routed to); the FLOPs per token are 2x this.
    lm_head: the output projection (V*h), used once per sequence in prefill, once per token in
        decode.
    experts: the routed-expert weights of all layers (0 for dense models).
    embedding: the input embedding table (a lookup, read B rows per step, not streamed).
    """

    total: float
    per_token_matmul: float
    lm_head: float
    experts: float
    embedding: float
    derived: bool


def _ffn_weights(model: ModelSpec, ffn_size: int) -> int:
    """Weights of one FFN block of width ``ffn_size``: 3*h*f gated, 2*h*f plain."""
    return (3 if model.gated_mlp else 2) * model.hidden_size * ffn_size


def attention_weights_per_layer(model: ModelSpec) -> int:
    """q, k, v, o projections of one layer: h*dh*(2*nh + 2*nkv) weights."""
    return model.hidden_size * model.head_dim * (2 * model.num_heads + 2 * model.num_kv_heads)


def param_counts(model: ModelSpec) -> ParamCounts:
    """Weight counts of ``model`` (see module docstring for the formulas).

    When ``model.num_params`` is given (a spec-sheet study), total = per_token_matmul =
    num_params and lm_head = experts = embedding = 0: the sheet's convention that a token costs
    2*N FLOPs and a decode step streams all N weights.
    """
    h, L = model.hidden_size, model.num_layers
    if model.num_params is not None:
        n = float(model.num_params)
        return ParamCounts(total=n, per_token_matmul=n, lm_head=0.0, experts=0.0, embedding=0.0,
                           derived=False)
    attn = attention_weights_per_layer(model)
    norms = 2 * h
    if model.is_moe:
        expert = _ffn_weights(model, model.expert_ffn_size)
        router = h * model.num_experts
        shared = model.num_shared_experts * expert
        ffn_total = router + model.num_experts * expert + shared
        ffn_active = router + model.experts_per_token * expert + shared
        experts = L * model.num_experts * expert
    else:
        ffn_total = ffn_active = _ffn_weights(model, model.ffn_size)
        experts = 0
    embedding = model.vocab_size * h
    lm_head = embedding  # same shape whether tied or not; tied means it is stored once
    total = L * (attn + ffn_total + norms) + embedding + h + (0 if model.tied_embeddings else lm_head)
    return ParamCounts(
        total=float(total),
        per_token_matmul=float(L * (attn + ffn_active)),
        lm_head=float(lm_head),
        experts=float(experts),
        embedding=float(embedding),
        derived=True,
    )
