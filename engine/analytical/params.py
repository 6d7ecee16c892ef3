"""Parameter counts and weight bytes derived from the architecture.

All counts are numbers of weights (elements); bytes = count x bytes per weight (``precision``).
Per layer of a decoder block (h = hidden, nh/nkv = query/KV heads, dh = head dim, f = FFN size):

    attention (MHA/GQA/MQA)  q: h*nh*dh   k, v: h*nkv*dh each   o: nh*dh*h  -> h*dh*(2*nh + 2*nkv)
    attention (MLA, DeepSeek-V2/V3 "multi-head latent attention", arXiv 2405.04434 sec. 2.1):
        q   = h*rq + rq + rq*nh*(dn + dr)   with a q_lora_rank rq bottleneck (+ its RMSNorm);
              h*nh*(dn + dr) without one (rq = 0)
        kv  = h*(rkv + dr) + rkv + rkv*nh*(dn + dv)   (down-projection to the latent + rotary key,
              the latent's RMSNorm, up-projection to per-head keys and values)
        o   = nh*dv*h
        (rkv = kv_lora_rank, dr = qk_rope_head_dim, dn = qk_nope_head_dim, dv = v_head_dim)
    dense FFN   gated (SwiGLU): gate, up, down = 3*h*f;  plain MLP: 2*h*f
    MoE FFN     router h*E + E routed experts + S shared experts, each 3*h*f_e (gated)
    norms       2*h (pre-attention and pre-FFN RMSNorm weights)

An MoE model's first ``first_dense_layers`` layers (DeepSeek's first_k_dense_replace) carry a dense
FFN of ``ffn_size`` instead of the experts. Plus the input embedding V*h, the final norm h, and
the LM head V*h unless tied to the embedding. Checked against the published totals of
Llama-2-7B, Llama-3.1-8B/70B/405B, Mixtral-8x7B and DeepSeek-V3 (../shared/data/model_configs/
SOURCES.md) in tests/engine/test_params.py.
"""

from dataclasses import dataclass

from engine.spec import ModelSpec


@dataclass(frozen=True)
class ParamCounts:
    """Weight counts of one model (elements, not bytes).

    total: every weight held in memory.
    per_token_matmul: weights one token multiplies through in the decoder body (attention + the
        FFN experts it is routed to + shared experts + router); the FLOPs per token are 2x this.
    lm_head: the output projection (V*h), used once per sequence in prefill, once per token in
        decode.
    experts: the routed-expert weights of all layers (0 for dense models).
    embedding: the input embedding table (a lookup, read B rows per step, not streamed).
    attention: attention projections (and their internal norms) of all layers.
    expert_each: weights of one routed expert in one layer (0 for dense models).
    moe_layers: number of layers with routed experts.
    """

    total: float
    per_token_matmul: float
    lm_head: float
    experts: float
    embedding: float
    derived: bool
    attention: float = 0.0
    expert_each: float = 0.0
    moe_layers: int = 0

    @property
    def active(self) -> float:
        """Weights one token touches, SOURCES.md convention: body per token + embedding + LM head."""
        return self.per_token_matmul + self.embedding + self.lm_head


def _ffn_weights(model: ModelSpec, ffn_size: int) -> int:
    """Weights of one FFN block of width ``ffn_size``: 3*h*f gated, 2*h*f plain."""
    return (3 if model.gated_mlp else 2) * model.hidden_size * ffn_size


def mla_weights_per_layer(model: ModelSpec) -> int:
    """MLA projections of one layer (see module docstring), weights."""
    h, nh = model.hidden_size, model.num_heads
    rq, rkv = model.q_lora_rank, model.kv_lora_rank
    dn, dr, dv = model.qk_nope_head_dim, model.qk_rope_head_dim, model.v_head_dim
    q = (h * rq + rq + rq * nh * (dn + dr)) if rq else h * nh * (dn + dr)
    kv = h * (rkv + dr) + rkv + rkv * nh * (dn + dv)
    o = nh * dv * h
    return q + kv + o


def attention_weights_per_layer(model: ModelSpec) -> int:
    """Attention projections of one layer: h*dh*(2*nh + 2*nkv) weights (MLA: see module doc)."""
    if model.attention == "mla":
        return mla_weights_per_layer(model)
    return model.hidden_size * model.head_dim * (2 * model.num_heads + 2 * model.num_kv_heads)


def layer_split(model: ModelSpec) -> tuple[int, int]:
    """(dense-FFN layers, MoE layers): all layers dense for a dense model; for an MoE the first
    ``first_dense_layers`` are dense and the rest carry experts."""
    if not model.is_moe:
        return model.num_layers, 0
    return model.first_dense_layers, model.num_layers - model.first_dense_layers


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
    l_dense, l_moe = layer_split(model)
    dense_ffn = _ffn_weights(model, model.ffn_size)
    if model.is_moe:
        expert = _ffn_weights(model, model.expert_ffn_size)
        router = h * model.num_experts
        shared = model.num_shared_experts * expert
        moe_total = router + model.num_experts * expert + shared
        moe_active = router + model.experts_per_token * expert + shared
    else:
        expert = moe_total = moe_active = 0
    embedding = model.vocab_size * h
    lm_head = embedding  # same shape whether tied or not; tied means it is stored once
    body = L * (attn + norms) + l_dense * dense_ffn + l_moe * moe_total
    total = body + embedding + h + (0 if model.tied_embeddings else lm_head)
    return ParamCounts(
        total=float(total),
        per_token_matmul=float(L * attn + l_dense * dense_ffn + l_moe * moe_active),
        lm_head=float(lm_head),
        experts=float(l_moe * model.num_experts * expert),
        embedding=float(embedding),
        derived=True,
        attention=float(L * attn),
        expert_each=float(expert),
        moe_layers=l_moe,
    )


def gemm_shapes(model: ModelSpec, tp: int) -> list[tuple[str, int, int, int]]:
    """The dense matmuls one token passes through on one tensor-parallel rank, as
    (name, n, k, layers): an (m x k) by (k x n) GEMM in ``layers`` layers, m = the pass's tokens.

    Column-parallel projections split n by tp, row-parallel ones split k (Megatron-LM layout,
    Shoeybi et al. 2019); KV heads are replicated when tp > nkv (n per rank uses max(nkv/tp, 1)):
        GQA/MQA  qkv (nh/tp + 2 max(nkv/tp, 1)) dh x h;  o  h x nh dh/tp
        MLA      q_a rq x h and kv_a (rkv + dr) x h replicated; q_b nh(dn+dr)/tp x rq (h without
                 q_lora); kv_b nh(dn+dv)/tp x rkv; o h x nh dv/tp
        dense FFN (first_dense_layers of an MoE, every layer of a dense model)
                 gate+up 2f/tp x h (f/tp plain MLP); down h x f/tp
        MoE      router E x h (replicated); shared experts like a dense FFN of S f_e
    Routed experts are priced by the MoE kernel, and the LM head (V/tp x h, m = logits) apart.
    With tp = 1 the sum of n k x layers is ``param_counts(model).per_token_matmul`` less the routed
    experts and the MLA norm weights (tests/engine/test_params.py).
    """
    h, L = model.hidden_size, model.num_layers
    nh = model.num_heads // tp
    out = []
    if model.attention == "mla":
        rq, rkv = model.q_lora_rank, model.kv_lora_rank
        dn, dr, dv = model.qk_nope_head_dim, model.qk_rope_head_dim, model.v_head_dim
        if rq:
            out += [("q_a", rq, h, L), ("q_b", nh * (dn + dr), rq, L)]
        else:
            out.append(("q", nh * (dn + dr), h, L))
        out += [("kv_a", rkv + dr, h, L), ("kv_b", nh * (dn + dv), rkv, L), ("o", h, nh * dv, L)]
    else:
        nkv = max(model.num_kv_heads // tp, 1)
        out += [("qkv", (nh + 2 * nkv) * model.head_dim, h, L),
                ("o", h, nh * model.head_dim, L)]
    l_dense, l_moe = layer_split(model)
    up = 2 if model.gated_mlp else 1
    if l_dense:
        f = model.ffn_size // tp
        out += [("ffn_up", up * f, h, l_dense), ("ffn_down", h, f, l_dense)]
    if l_moe:
        out.append(("router", model.num_experts, h, l_moe))
        if model.num_shared_experts:
            fs = model.num_shared_experts * model.expert_ffn_size // tp
            out += [("shared_up", up * fs, h, l_moe), ("shared_down", h, fs, l_moe)]
    return out
