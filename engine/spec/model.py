"""ModelSpec: a decoder-only transformer's architecture and the dtypes it is served in."""

from dataclasses import dataclass
from typing import Optional

from engine.errors import SpecError
from engine.spec._check import one_of, positive, positive_int

#: Bytes per element of each storage dtype. 4-bit formats are 0.5 byte before group scales.
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}

ATTENTION_KINDS = ("mha", "gqa", "mqa", "mla")

#: Layer kinds (``LayerGroup.kind``), as vLLM's kv_cache_interface describes memory per layer kind:
#: full attention (MHA/GQA/MQA), sliding-window attention, MLA's latent cache. A state-space
#: (Mamba) layer would be one more kind: no per-token KV, ``state_bytes_per_seq`` per sequence.
LAYER_KINDS = ("full", "sliding", "mla")


@dataclass(frozen=True)
class LayerGroup:
    """``count`` layers of one kind that keep and attend the same positions.

    window              W positions a query attends and the cache keeps (0 = all; sliding only)
    kv_bytes_per_token  K/V bytes one token adds to one layer of the group
                        (``ModelSpec.kv_elems_per_layer_token`` x bytes of kv_dtype)
    state_bytes_per_seq bytes one sequence holds in one layer whatever its length (a recurrent
                        state; 0 for every attention kind)
    A sequence of n tokens holds count x (min(n, W) x kv_bytes_per_token + state_bytes_per_seq)
    bytes in the group (``engine.analytical.window``, ``engine.analytical.memory``)."""

    kind: str
    count: int
    window: int = 0
    kv_bytes_per_token: float = 0.0
    state_bytes_per_seq: float = 0.0


@dataclass(frozen=True)
class ModelSpec:
    """Architecture numbers as in a HuggingFace ``config.json``.

    ``num_params`` may be given directly, as simple spec-sheet studies do ("a 7.2e9-param model");
    the weight bytes and per-token matmul FLOPs then come from it, and the architecture fields only
    feed the attention and KV-cache terms. Without it the engine derives the count from the
    architecture (see ``engine.analytical.params``).

    MoE: ``num_experts`` routed experts of FFN size ``expert_ffn_size``, ``experts_per_token``
    active per token, ``num_shared_experts`` always active. ``num_experts = 0`` is a dense FFN.
    ``first_dense_layers`` (DeepSeek's first_k_dense_replace) leading layers use a dense FFN of
    ``ffn_size`` instead.

    MLA (DeepSeek-style multi-head latent attention, ``attention = "mla"``): queries through a
    ``q_lora_rank`` bottleneck (0 = none), keys/values from a ``kv_lora_rank`` latent plus a
    ``qk_rope_head_dim`` rotary part; per-head dims ``qk_nope_head_dim`` (+ rope) for q/k and
    ``v_head_dim`` for v. The KV cache holds kv_lora_rank + qk_rope_head_dim elements per layer.

    Sliding-window attention: ``sliding_window_layers`` of the layers attend to at most
    ``sliding_window`` past tokens (0 = full attention everywhere).

    ``context_length``: the most tokens one request may hold, prompt and output together
    (config.json's ``max_position_embeddings``; 0 = not stated, not checked). Both engines and
    ``simllm-serve`` refuse a longer request (``engine.spec.bundle.Specs``, ``engine.des.run``,
    ``engine.des.live``).

    Precision: weights, KV cache and activations each have a dtype. Block/group-quantised weights
    (int4/fp4 with one scale per ``weight_group_size`` weights, 0 = per-channel, i.e. negligible)
    store one ``weight_scale_dtype`` scale per group. ``compute_dtype`` is the precision of the
    matmuls, which picks the peak ('auto' = the wider of weights and activations).
    """

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn_size: int
    vocab_size: int
    attention: str = "gqa"
    tied_embeddings: bool = False
    gated_mlp: bool = True
    num_experts: int = 0
    experts_per_token: int = 0
    expert_ffn_size: int = 0
    num_shared_experts: int = 0
    first_dense_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0
    sliding_window_layers: int = 0
    context_length: int = 0
    num_params: float | None = None
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    activation_dtype: str = "bf16"
    weight_group_size: int = 0
    weight_scale_dtype: str = "bf16"
    compute_dtype: str = "auto"

    #: Config-only keys (conf/model/*.yaml): where the numbers come from, and a HF config.json
    #: whose architecture replaces the option's (runner.convert.model_spec reads it).
    CONFIG_EXTRA = (("source", str, ""), ("hf_config", Optional[str], None))

    _group = "model"

    def __post_init__(self):
        g = self._group
        if not self.name:
            raise SpecError(f"{g}.name", self.name, "a non-empty model name")
        for f in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "ffn_size",
                  "vocab_size"):
            positive_int(g, f, getattr(self, f))
        for f in ("num_experts", "experts_per_token", "expert_ffn_size", "num_shared_experts",
                  "first_dense_layers", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
                  "qk_nope_head_dim", "v_head_dim", "sliding_window", "sliding_window_layers", "context_length"):
            positive_int(g, f, getattr(self, f), minimum=0)
        one_of(g, "attention", self.attention, ATTENTION_KINDS)
        for f in ("weight_dtype", "kv_dtype", "activation_dtype", "weight_scale_dtype"):
            one_of(g, f, getattr(self, f), tuple(DTYPE_BYTES))
        positive_int(g, "weight_group_size", self.weight_group_size, minimum=0)
        one_of(g, "compute_dtype", self.compute_dtype, ("auto", "bf16", "fp16", "fp8", "int8", "fp4"))
        positive(g, "num_params", self.num_params, allow_none=True)
        if self.num_heads % self.num_kv_heads:
            raise SpecError(f"{g}.num_kv_heads", self.num_kv_heads,
                            f"a divisor of num_heads={self.num_heads}")
        expected_kv = {"mha": self.num_heads, "mqa": 1}.get(self.attention)
        if expected_kv is not None and self.num_kv_heads != expected_kv:
            raise SpecError(f"{g}.num_kv_heads", self.num_kv_heads,
                            f"{expected_kv} for attention={self.attention}")
        if self.attention == "mla" and not (self.kv_lora_rank and self.qk_rope_head_dim
                                            and self.qk_nope_head_dim and self.v_head_dim):
            raise SpecError(f"{g}.kv_lora_rank", self.kv_lora_rank,
                            "MLA needs kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim and "
                            "v_head_dim > 0")
        if self.first_dense_layers > self.num_layers:
            raise SpecError(f"{g}.first_dense_layers", self.first_dense_layers,
                            f"at most num_layers={self.num_layers}")
        if self.sliding_window_layers > self.num_layers:
            raise SpecError(f"{g}.sliding_window_layers", self.sliding_window_layers,
                            f"at most num_layers={self.num_layers}")
        if self.sliding_window_layers and not self.sliding_window:
            raise SpecError(f"{g}.sliding_window", self.sliding_window,
                            "a window > 0 when sliding_window_layers > 0")
        if self.attention == "gqa" and not (1 < self.num_kv_heads < self.num_heads):
            raise SpecError(f"{g}.attention", self.attention,
                            f"'mha' or 'mqa' for num_kv_heads={self.num_kv_heads} of {self.num_heads}")
        if self.num_experts:
            if not (1 <= self.experts_per_token <= self.num_experts):
                raise SpecError(f"{g}.experts_per_token", self.experts_per_token,
                                f"between 1 and num_experts={self.num_experts}")
            positive_int(g, "expert_ffn_size", self.expert_ffn_size)

    @property
    def kv_elems_per_layer_token(self) -> int:
        """KV-cache elements one token adds to one attention layer.

        MHA/GQA/MQA: 2 x nkv x dh (a key and a value per KV head).
        MLA (DeepSeek-V2 sec. 2.1.2): the compressed latent c_KV (kv_lora_rank) plus the decoupled
        rotary key (qk_rope_head_dim), shared by all heads: 512 + 64 = 576 for DeepSeek-V3.
        """
        if self.attention == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    @property
    def layer_groups(self) -> tuple:
        """The layers by kind (``LayerGroup``), derived from the fields: the L - Lw full-attention
        layers (kind "mla" for MLA) first, then the Lw = ``sliding_window_layers`` "sliding" layers
        of window W = ``sliding_window``; empty groups left out. Every layer holds
        ``kv_elems_per_layer_token`` x bytes of kv_dtype per token it keeps."""
        kvb = self.kv_elems_per_layer_token * DTYPE_BYTES[self.kv_dtype]
        lw = self.sliding_window_layers
        out = []
        if self.num_layers - lw:
            out.append(LayerGroup("mla" if self.attention == "mla" else "full", self.num_layers - lw,
                                  0, kvb))
        if lw:
            out.append(LayerGroup("sliding", lw, self.sliding_window, kvb))
        return tuple(out)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def math_dtype(self) -> str:
        """Precision the matmuls run in: the wider of weights and activations.

        Weight-only quantisation (W4A16, W8A16) dequantises to the activation dtype, so it computes
        at the activation precision; W8A8-fp8 computes in fp8. ``compute_dtype`` overrides it.
        """
        if self.compute_dtype != "auto":
            return self.compute_dtype
        if DTYPE_BYTES[self.weight_dtype] >= DTYPE_BYTES[self.activation_dtype]:
            wide = self.weight_dtype
        else:
            wide = self.activation_dtype
        return "bf16" if wide == "fp32" else wide
