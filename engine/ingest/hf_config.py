"""HuggingFace ``config.json`` -> ModelSpec fields, with what was detected and assumed.

Field mapping (HF key -> ModelSpec field), with the aliases model families use:

    num_hidden_layers (n_layer, num_layers)            -> num_layers
    hidden_size (n_embd, d_model)                      -> hidden_size
    num_attention_heads (n_head)                       -> num_heads
    num_key_value_heads (multi_query -> 1; absent -> num_heads, MHA) -> num_kv_heads
    head_dim (absent -> hidden_size / num_heads)       -> head_dim
    intermediate_size (n_inner, ffn_dim)               -> ffn_size
    vocab_size                                         -> vocab_size
    tie_word_embeddings (absent -> false, stated)      -> tied_embeddings
    hidden_act silu/swiglu/gelu_* gated families       -> gated_mlp
    max_position_embeddings (absent -> 0, stated)      -> context_length

Detected: attention kind (MHA if kv heads = heads, MQA if 1, GQA between, MLA when
``kv_lora_rank`` is set: q_lora_rank, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim,
v_head_dim); MoE (Mixtral/gpt-oss ``num_local_experts``, Qwen-MoE ``num_experts`` +
``moe_intermediate_size`` (+ ``shared_expert_intermediate_size``), DeepSeek ``n_routed_experts``,
``n_shared_experts``, ``first_k_dense_replace``); sliding-window attention (``layer_types`` with
"sliding_attention" entries, Mistral-style ``sliding_window`` on every layer, Qwen2
``use_sliding_window`` + ``max_window_layers``); the dtype (``torch_dtype``/``dtype``, and
``quantization_config``: fp8 block quantisation -> fp8 weights with one fp32 scale per block,
MXFP4 -> fp4 weights with one 1-byte scale per 32).

An architecture that lacks a required key raises :class:`HFConfigError` naming the key (and the
aliases tried); a count that is not an integer from 1 to 2^31 - 1 as JSON writes it (``4096.5``,
``1e30``, ``"big"``, ``true``) a SpecError naming the file and key. Nothing is rounded.
"""

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path

from engine.errors import SpecError
from engine.spec import ModelSpec


#: The largest count a config.json field may hold (layers, widths, heads, vocabulary, context):
#: int32, the type token ids and sizes have in the serving frameworks; beyond it a value is a typo
#: (``vocab_size: 1e30``), not a model.
MAX_COUNT = 2**31 - 1


class HFConfigError(ValueError):
    """A config.json that cannot be mapped; names the file and the missing or unsupported key."""

    def __init__(self, path: str, key: str, reason: str):
        self.path, self.key = path, key
        super().__init__(f"{path}: {key}: {reason}")


#: torch dtype names -> ModelSpec dtypes
TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
                "float": "fp32", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "int8": "int8"}

#: model_type families whose MLP is gated (gate, up, down projections: SwiGLU / GeGLU).
GATED_FAMILIES = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                  "deepseek_v2", "deepseek_v3", "gpt_oss", "gemma", "gemma2", "gemma3_text",
                  "phi3", "olmo", "olmo2", "granite", "cohere", "internlm2", "yi", "baichuan"}
#: model_type families with a plain two-matrix MLP.
PLAIN_FAMILIES = {"gpt2", "gpt_neox", "gptj", "opt", "bloom", "falcon", "gpt_bigcode", "phi", "starcoder2"}

#: Fields of ModelSpec that describe the architecture (the JSON supplies them).
ARCH_FIELDS = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "ffn_size",
               "vocab_size", "attention", "tied_embeddings", "gated_mlp", "num_experts",
               "experts_per_token", "expert_ffn_size", "num_shared_experts", "first_dense_layers",
               "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
               "sliding_window", "sliding_window_layers", "context_length")


@dataclass
class HFModel:
    """The mapped fields plus what was detected and assumed (for the YAML comments)."""

    fields: dict
    notes: dict = field(default_factory=dict)        # field -> where it came from
    assumptions: list = field(default_factory=list)
    model_type: str = ""
    source: str = ""

    def model_spec(self) -> ModelSpec:
        known = {f.name for f in fields(ModelSpec)}
        return ModelSpec(**{k: v for k, v in self.fields.items() if k in known})


#: HF ``layer_types`` entries -> layer kind of ``engine.spec.model.LAYER_KINDS`` (a model's
#: ``layer_groups`` count them). An entry naming no modelled kind ("linear_attention", "mamba")
#: is refused by name rather than priced as full attention; a new kind adds its entry here.
HF_LAYER_KINDS = {"full_attention": "full", "attention": "full", "sliding_attention": "sliding"}


def layer_kind(path, entry) -> str:
    """The layer kind of one ``layer_types`` entry (``HF_LAYER_KINDS``; any other entry that
    names a sliding window counts as "sliding"). Raises HFConfigError for an unmodelled kind."""
    kind = HF_LAYER_KINDS.get(str(entry)) or ("sliding" if "sliding" in str(entry) else None)
    if kind is None:
        raise HFConfigError(path, "layer_types", f"entry {entry!r} is no modelled layer kind "
                            f"({', '.join(sorted(HF_LAYER_KINDS))})")
    return kind


def _get(cfg: dict, path: str, keys, *, default=None, required=True):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k], k
    if required:
        alias = f" (also tried {', '.join(keys[1:])})" if len(keys) > 1 else ""
        raise HFConfigError(path, keys[0], f"missing; needed for ModelSpec{alias}")
    return default, None


def load(path) -> dict:
    """Read a config.json (a text-config nested under ``text_config`` is taken as the model)."""
    try:     # utf-8-sig: a UTF-8 byte-order mark (as Windows editors save) is read as text's start
        cfg = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except (ValueError, UnicodeDecodeError) as e:      # JSONDecodeError is a ValueError
        raise SpecError(str(path), f"not JSON ({str(e)[:80]})", "a HuggingFace config.json "
                        "(a JSON object)") from None
    if not isinstance(cfg, dict):
        raise SpecError(str(path), f"a JSON {type(cfg).__name__}", "a HuggingFace config.json (a JSON object)")
    if isinstance(cfg.get("text_config"), dict) and "num_hidden_layers" not in cfg:
        cfg = {**cfg["text_config"], "_outer_model_type": cfg.get("model_type")}
    return cfg


def from_config(cfg: dict, name: str, path: str = "config.json") -> HFModel:
    """Map an HF config dict to ModelSpec fields. Raises HFConfigError naming a missing key."""
    f: dict = {"name": name}
    notes: dict = {}
    assumptions: list = []
    mt = str(cfg.get("model_type", ""))

    def take(fld, keys, **kw):
        v, k = _get(cfg, path, keys, **kw)
        if k:
            notes[fld] = k
        return v

    def count(fld, keys, v=None, key=None, minimum=1):
        """A positive integer (a count of layers, a width, heads) as config.json writes it: a JSON
        integer (or a float with no fraction, 4096.0), at most MAX_COUNT; ``v``/``key``: a value
        already looked up (optional keys), else ``keys`` are tried in turn."""
        if key is None:
            v = take(fld, keys)
            key = notes.get(fld, keys[0])
        if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v)
                or not minimum <= v <= MAX_COUNT):
            least = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise SpecError(f"{path}: {key}", v, f"{least} up to {MAX_COUNT} (2^31 - 1)")
        return int(v)

    def optional(fld, key, minimum=1):
        """An optional count: ``key``'s value checked as ``count`` does, None when absent."""
        v = cfg.get(key)
        if v is None:
            return None
        notes[fld] = key
        return count(fld, (key,), v, key, minimum)

    f["num_layers"] = count("num_layers", ("num_hidden_layers", "n_layer", "num_layers"))
    f["hidden_size"] = count("hidden_size", ("hidden_size", "n_embd", "d_model"))
    f["num_heads"] = count("num_heads", ("num_attention_heads", "n_head"))
    h, nh = f["hidden_size"], f["num_heads"]
    kv = optional("num_kv_heads", "num_key_value_heads")
    if kv is not None:
        f["num_kv_heads"] = kv
    elif cfg.get("multi_query"):
        f["num_kv_heads"] = 1
        notes["num_kv_heads"] = "multi_query: true"
    else:
        f["num_kv_heads"] = nh
        notes["num_kv_heads"] = "absent: num_attention_heads (MHA)"
    if cfg.get("head_dim") is not None:
        f["head_dim"] = optional("head_dim", "head_dim")
    else:
        if h % nh:
            raise HFConfigError(path, "head_dim", f"missing and hidden_size {h} is not a multiple of "
                                                  f"num_attention_heads {nh}")
        f["head_dim"] = h // nh
        notes["head_dim"] = "hidden_size / num_attention_heads"
    ffn_key = next((k for k in ("intermediate_size", "n_inner", "ffn_dim") if cfg.get(k) is not None), None)
    inter = optional("ffn_size", ffn_key) if ffn_key else None
    moe_inter = optional("expert_ffn_size", "moe_intermediate_size")
    if inter is None and moe_inter is None:
        raise HFConfigError(path, "intermediate_size", "missing; needed for ModelSpec.ffn_size "
                                                       "(also tried n_inner, ffn_dim, moe_intermediate_size)")
    f["ffn_size"] = inter or moe_inter
    notes["ffn_size"] = ffn_key if inter else "moe_intermediate_size (no dense FFN size given)"
    f["vocab_size"] = count("vocab_size", ("vocab_size", "padded_vocab_size"))
    # the context length: prompt + output tokens of one request, checked by both engines and the server
    ctx = optional("context_length", "max_position_embeddings")
    if ctx is None:
        assumptions.append("max_position_embeddings absent: no context length, request lengths not checked "
                           "against one (set model.context_length)")
    else:
        f["context_length"] = ctx

    # tied embeddings
    if "tie_word_embeddings" in cfg:
        f["tied_embeddings"] = bool(cfg["tie_word_embeddings"])
        notes["tied_embeddings"] = "tie_word_embeddings"
    else:
        f["tied_embeddings"] = False
        notes["tied_embeddings"] = "absent: assumed untied"
        assumptions.append("tie_word_embeddings absent: LM head assumed separate from the embedding")

    # gated MLP
    act = str(cfg.get("hidden_act") or cfg.get("activation_function") or "")
    if mt in GATED_FAMILIES:
        f["gated_mlp"], notes["gated_mlp"] = True, f"model_type {mt}: gated MLP (gate, up, down)"
    elif mt in PLAIN_FAMILIES:
        f["gated_mlp"], notes["gated_mlp"] = False, f"model_type {mt}: plain MLP (up, down)"
    elif act in ("silu", "swiglu", "swish"):
        f["gated_mlp"], notes["gated_mlp"] = True, f"hidden_act {act}"
        assumptions.append(f"model_type {mt!r} not known: MLP assumed gated (hidden_act {act})")
    else:
        raise HFConfigError(path, "model_type", f"{mt!r} with hidden_act {act!r}: cannot tell whether the "
                                                f"MLP is gated; known families: {', '.join(sorted(GATED_FAMILIES | PLAIN_FAMILIES))}")

    # MoE
    n_exp, exp_key = _get(cfg, path, ("num_local_experts", "num_experts", "n_routed_experts"), required=False)
    n_exp = count("num_experts", (), n_exp, exp_key, minimum=0) if exp_key else 0
    if n_exp > 1:
        k, kkey = _get(cfg, path, ("num_experts_per_tok", "experts_per_token", "moe_topk", "top_k"))
        f["num_experts"], f["experts_per_token"] = n_exp, count("experts_per_token", (), k, kkey)
        notes["num_experts"], notes["experts_per_token"] = exp_key, kkey
        f["expert_ffn_size"] = moe_inter or inter
        notes["expert_ffn_size"] = "moe_intermediate_size" if moe_inter else "intermediate_size (each expert)"
        shared = int(cfg.get("n_shared_experts") or 0)
        if shared:
            notes["num_shared_experts"] = "n_shared_experts"
        elif cfg.get("shared_expert_intermediate_size"):
            size = int(cfg["shared_expert_intermediate_size"])
            if size % f["expert_ffn_size"]:
                raise HFConfigError(path, "shared_expert_intermediate_size",
                                    f"{size} is not a multiple of moe_intermediate_size {f['expert_ffn_size']}; "
                                    "ModelSpec's shared experts have the routed experts' size")
            shared = size // f["expert_ffn_size"]
            notes["num_shared_experts"] = (f"shared_expert_intermediate_size {size} = {shared} x "
                                           f"moe_intermediate_size")
            assumptions.append(f"one shared expert of width {size} counted as {shared} experts of width "
                               f"{f['expert_ffn_size']} (same weights and FLOPs; the shared-expert gate is left out)")
        f["num_shared_experts"] = shared
        dense_first = int(cfg.get("first_k_dense_replace") or 0)
        if dense_first:
            notes["first_dense_layers"] = "first_k_dense_replace"
        mlp_only = cfg.get("mlp_only_layers") or []
        if mlp_only:
            if sorted(mlp_only) != list(range(len(mlp_only))):
                raise HFConfigError(path, "mlp_only_layers", f"{mlp_only}: ModelSpec supports dense layers "
                                                             "only as the leading layers")
            dense_first = max(dense_first, len(mlp_only))
            notes["first_dense_layers"] = "mlp_only_layers"
        step = int(cfg.get("decoder_sparse_step") or cfg.get("moe_layer_freq") or 1)
        if step != 1:
            raise HFConfigError(path, "decoder_sparse_step", f"{step}: MoE on every {step}th layer is not "
                                                             "representable (ModelSpec: leading dense layers only)")
        f["first_dense_layers"] = dense_first
    # MLA
    if cfg.get("kv_lora_rank"):
        f["attention"] = "mla"
        for fld in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            f[fld] = count(fld, (fld,))
        f["q_lora_rank"] = optional("q_lora_rank", "q_lora_rank", minimum=0) or 0
        notes["attention"] = "kv_lora_rank set: multi-head latent attention"
        f["head_dim"] = f["qk_nope_head_dim"] + f["qk_rope_head_dim"]
        notes["head_dim"] = "qk_nope_head_dim + qk_rope_head_dim"
        if f["num_heads"] % f["num_kv_heads"]:
            f["num_kv_heads"] = f["num_heads"]
        assumptions.append(f"MLA: num_key_value_heads {cfg.get('num_key_value_heads')} is nominal; the KV cache "
                           f"holds kv_lora_rank + qk_rope_head_dim = {f['kv_lora_rank'] + f['qk_rope_head_dim']} "
                           "elements per token per layer")
    else:
        kvh = f["num_kv_heads"]
        f["attention"] = "mha" if kvh == nh else ("mqa" if kvh == 1 else "gqa")
        notes["attention"] = f"{kvh} KV heads of {nh} query heads"

    # sliding window
    layer_types = cfg.get("layer_types")
    window = cfg.get("sliding_window")
    if layer_types:
        kinds = [layer_kind(path, t) for t in layer_types]
        n_slide = kinds.count("sliding")
        if n_slide:
            if not window:
                raise HFConfigError(path, "sliding_window", "layer_types has sliding layers but no window size")
            f["sliding_window"], f["sliding_window_layers"] = int(window), n_slide
            notes["sliding_window_layers"] = f"layer_types: {n_slide} sliding_attention of {len(layer_types)}"
    elif window and cfg.get("use_sliding_window", True) is not False:
        if "max_window_layers" in cfg and "use_sliding_window" in cfg:
            # Qwen2: layers from max_window_layers on use the window
            n_slide = max(0, f["num_layers"] - int(cfg["max_window_layers"]))
            note = f"use_sliding_window true, layers >= max_window_layers {cfg['max_window_layers']}"
        else:
            n_slide = f["num_layers"]
            note = "sliding_window on every layer (Mistral-style)"
        if n_slide and int(window) < int(cfg.get("max_position_embeddings") or 10**12):
            f["sliding_window"], f["sliding_window_layers"] = int(window), n_slide
            notes["sliding_window_layers"] = note
    elif window and cfg.get("use_sliding_window") is False:
        notes["sliding_window"] = "use_sliding_window false: full attention"

    # dtype
    td = cfg.get("torch_dtype") or cfg.get("dtype")
    if td:
        f["weight_dtype"] = TORCH_DTYPES.get(str(td).replace("torch.", ""), None)
        if f["weight_dtype"] is None:
            raise HFConfigError(path, "torch_dtype", f"{td!r} not one of {', '.join(TORCH_DTYPES)}")
        notes["weight_dtype"] = f"torch_dtype {td}"
    else:
        f["weight_dtype"] = "bf16"
        notes["weight_dtype"] = "torch_dtype absent: bf16 assumed"
        assumptions.append("torch_dtype absent: bf16 assumed (weights unless quantised, KV cache, activations)")
    # KV cache and activations in the checkpoint's own float type
    f["kv_dtype"] = f["activation_dtype"] = f["weight_dtype"]
    notes["kv_dtype"] = notes["activation_dtype"] = notes["weight_dtype"]
    q = cfg.get("quantization_config") or {}
    qm = str(q.get("quant_method", "")).lower()
    if qm == "fp8":
        f["weight_dtype"] = "fp8"
        notes["weight_dtype"] = (f"quantization_config fp8 ({q.get('fmt', '')}, block "
                                 f"{q.get('weight_block_size')}): fp8 weights")
        block = q.get("weight_block_size") or []
        if block:
            f["weight_group_size"] = int(math.prod(block))
            f["weight_scale_dtype"] = "fp32"
            notes["weight_group_size"] = f"weight_block_size {block}: one scale per {f['weight_group_size']} weights"
            notes["weight_scale_dtype"] = "block scales stored as float32 (weight_scale_inv)"
        assumptions.append("fp8 checkpoint: every weight counted at 1 byte + its block scale (embeddings, norms and "
                           "the LM head kept in higher precision are counted as fp8 too)")
        if q.get("activation_scheme"):
            f["activation_dtype"] = "fp8"
            notes["activation_dtype"] = f"activation_scheme {q['activation_scheme']}: W8A8, matmuls in fp8"
    elif qm == "mxfp4":
        skipped = ", ".join(q.get("modules_to_not_convert") or []) or "none listed"
        f["weight_dtype"], f["weight_group_size"], f["weight_scale_dtype"] = "fp4", 32, "fp8"
        notes["weight_dtype"] = "quantization_config mxfp4: fp4 weights"
        notes["weight_group_size"] = "MXFP4: one shared scale per 32 weights"
        notes["weight_scale_dtype"] = "E8M0 scales, 1 byte"
        assumptions.append(f"MXFP4 checkpoint: weights counted at fp4 + one 1-byte scale per 32; the modules it "
                           f"leaves in {f['activation_dtype']} ({skipped}) are counted at fp4 too, since ModelSpec "
                           "has one weight dtype (weight bytes a few % low; model.weight_dtype=bf16 gives the upper bound)")
    elif qm:
        assumptions.append(f"quantization_config {qm} not applied: ModelSpec has one weight dtype; weights counted "
                           f"as {f['weight_dtype']} (set model.weight_dtype to approximate)")
        notes["weight_dtype"] += f"; checkpoint quantised with {qm} (not applied)"
    if cfg.get("num_nextn_predict_layers"):
        assumptions.append(f"num_nextn_predict_layers {cfg['num_nextn_predict_layers']}: the multi-token-prediction "
                           "module is not counted (it serves speculative decoding, not the main model)")
    if f["weight_dtype"] == "fp32":
        notes["weight_dtype"] += " (served as fp32)"
    return HFModel(fields=f, notes=notes, assumptions=assumptions, model_type=mt, source=path)


def read(path, name: str | None = None) -> HFModel:
    """Map the config.json at ``path``; ``name`` defaults to the file stem (dashes, dots -> _)."""
    path = str(path)
    stem = Path(path).stem
    if stem == "config":
        stem = Path(path).parent.name or "model"
    name = name or stem.replace("-", "_").replace(".", "_").lower()
    return from_config(load(path), name, path)


def apply_hf_config(model: dict, path) -> dict:
    """``model.hf_config`` support: the JSON supplies the architecture fields and the name; the
    config's dtypes and num_params stay (they are choices of the study, not of the checkpoint)."""
    try:
        hf = read(path)
    except (OSError, ValueError) as e:      # missing file, bad JSON, unmappable architecture
        raise SpecError("model.hf_config", str(path), f"a readable HF config.json that maps to ModelSpec ({e})") from None
    out = dict(model)
    for k in ARCH_FIELDS:
        out[k] = hf.fields.get(k, {f.name: f.default for f in fields(ModelSpec)}[k])
    out["name"] = hf.fields["name"]
    return out


def yaml_text(hf: HFModel, command: str = "") -> str:
    """conf/model/NAME.yaml text: the fields, each with the config.json key it came from."""
    f = hf.fields
    out = [f"# {f['name']}: mapped from {hf.source} (model_type {hf.model_type or '?'})"
           + (f" by `{command}`" if command else "") + ".",
           "defaults:", "  - model_schema", f"name: {f['name']}", f"source: \"{hf.source}\""]
    defaults = {x.name: x.default for x in fields(ModelSpec)}
    for k in ARCH_FIELDS + ("weight_dtype", "kv_dtype", "activation_dtype", "weight_group_size", "weight_scale_dtype"):
        v = f.get(k, defaults[k])
        if k not in f and v == defaults[k]:
            continue
        text = f"{k}: {str(v).lower() if isinstance(v, bool) else v}"
        note = hf.notes.get(k, "")
        out.append(f"{text:<28} # {note}" if note else text)
    if hf.assumptions:
        out.append("# Assumptions:")
        out += [f"#  - {a}" for a in hf.assumptions]
    return "\n".join(out) + "\n"
