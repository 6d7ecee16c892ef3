"""HF config.json adapter: every file in tests/data/model_configs (a copy of
../shared/data/model_configs) imports, the detected
architecture matches the model cards, and parameter counts match SOURCES.md within 1 %."""

import json

import pytest

from engine.analytical import run
from engine.analytical.memory import kv_bytes_per_token
from engine.analytical.params import param_counts
from engine.ingest import hf_config
from engine.ingest.hf_config import HFConfigError
from runner.convert import specs_from_config
from runner.tools.import_cli import main as import_main
from tests.conftest import DATA

CONFIGS = DATA / "model_configs"

# SOURCES.md verification table. published: the model card / paper total, with the most digits
# given there ("7B (6.74B)" -> 6.74); computed: the independent recomputation in the same table
# (total, active incl. embedding + LM head). Published active figures are rounded to two digits
# (3.3B for 3.35B), so active is checked against the recomputation.
COUNTS = {
    "llama-2-7b": (6.74, 6.74, None),
    "llama-2-70b": (68.98, 68.98, None),
    "llama-3.1-8b": (8.0, 8.03, None),
    "llama-3.1-70b": (70.0, 70.55, None),
    "llama-3.1-405b": (405.0, 405.85, None),
    "mixtral-8x7b": (46.7, 46.70, 12.88),
    "qwen2.5-72b": (72.7, 72.71, None),
    "qwen3-32b": (32.8, 32.76, None),
    "qwen3-30b-a3b": (30.5, 30.53, 3.35),
    "qwen3-235b-a22b": (235.0, 235.09, 22.19),
    "deepseek-v3": (671.0, 671.0, 37.5),
    "gpt-oss-120b": (116.8, 116.8, 5.71),
    "gpt-oss-20b": (20.9, 20.9, 4.19),
}

# What the model cards / SOURCES.md say about each architecture:
# attention, kv heads, experts (routed, active, shared), first dense layers, sliding layers, kv bytes/token bf16
ARCH = {
    "llama-2-7b": ("mha", 32, (0, 0, 0), 0, 0, 524_288),
    "llama-2-70b": ("gqa", 8, (0, 0, 0), 0, 0, 327_680),
    "llama-3.1-8b": ("gqa", 8, (0, 0, 0), 0, 0, 131_072),
    "llama-3.1-70b": ("gqa", 8, (0, 0, 0), 0, 0, 327_680),
    "llama-3.1-405b": ("gqa", 8, (0, 0, 0), 0, 0, 516_096),
    "mixtral-8x7b": ("gqa", 8, (8, 2, 0), 0, 0, 131_072),
    "qwen2.5-72b": ("gqa", 8, (0, 0, 0), 0, 0, 327_680),
    "qwen3-32b": ("gqa", 8, (0, 0, 0), 0, 0, 262_144),
    "qwen3-30b-a3b": ("gqa", 4, (128, 8, 0), 0, 0, 98_304),
    "qwen3-235b-a22b": ("gqa", 4, (128, 8, 0), 0, 0, 192_512),
    "deepseek-v3": ("mla", None, (256, 8, 1), 3, 0, 70_272),
    "gpt-oss-120b": ("gqa", 8, (128, 4, 0), 0, 18, 73_728),
    "gpt-oss-20b": ("gqa", 8, (32, 4, 0), 0, 12, 49_152),
}


def test_every_shared_config_is_covered():
    assert sorted(p.stem for p in CONFIGS.glob("*.json")) == sorted(COUNTS)


@pytest.mark.parametrize("stem", sorted(COUNTS))
def test_param_counts_within_one_percent(stem):
    published, computed, active = COUNTS[stem]
    pc = param_counts(hf_config.read(CONFIGS / f"{stem}.json").model_spec())
    assert pc.total / 1e9 == pytest.approx(published, rel=0.01)
    assert pc.total / 1e9 == pytest.approx(computed, rel=0.01)
    if active is not None:
        act = pc.per_token_matmul + pc.embedding + pc.lm_head
        assert act / 1e9 == pytest.approx(active, rel=0.01)


@pytest.mark.parametrize("stem", sorted(ARCH))
def test_detected_architecture(stem):
    attn, kvh, (e, k, shared), dense_first, sliding, kv_bytes = ARCH[stem]
    m = hf_config.read(CONFIGS / f"{stem}.json").model_spec()
    assert m.attention == attn
    if kvh is not None:
        assert m.num_kv_heads == kvh
    assert (m.num_experts, m.experts_per_token, m.num_shared_experts) == (e, k, shared)
    assert m.first_dense_layers == dense_first
    assert m.sliding_window_layers == sliding
    bf16 = m.__class__(**{**m.__dict__, "kv_dtype": "bf16"})
    assert kv_bytes_per_token(bf16) == kv_bytes


def test_dtypes_and_mla_fields():
    ds = hf_config.read(CONFIGS / "deepseek-v3.json").model_spec()
    assert (ds.q_lora_rank, ds.kv_lora_rank, ds.qk_rope_head_dim, ds.qk_nope_head_dim, ds.v_head_dim) == \
        (1536, 512, 64, 128, 128)
    assert ds.weight_dtype == "fp8" and ds.activation_dtype == "fp8"      # fp8 e4m3 block quantisation
    assert (ds.weight_group_size, ds.weight_scale_dtype) == (128 * 128, "fp32")   # one fp32 scale per block
    assert hf_config.read(CONFIGS / "llama-2-7b.json").model_spec().weight_dtype == "fp16"
    oss = hf_config.read(CONFIGS / "gpt-oss-20b.json")
    assert oss.model_spec().sliding_window == 128
    # MXFP4: 4-bit weights with one 1-byte scale per 32 -> 0.5 + 1/32 bytes per weight; stated
    assert (oss.model_spec().weight_dtype, oss.model_spec().weight_group_size) == ("fp4", 32)
    assert any("MXFP4" in a for a in oss.assumptions)


def test_tied_embeddings_and_mqa_and_qwen_moe_shared_expert():
    """Synthetic configs for what the shared set lacks: tied embeddings + MQA (Falcon-7B-like) and
    a Qwen1.5-MoE-like shared expert 4x the routed width (5632 = 4 x 1408)."""
    falcon = {"model_type": "falcon", "num_hidden_layers": 32, "hidden_size": 4544,
              "num_attention_heads": 71, "multi_query": True, "ffn_dim": 18176, "vocab_size": 65024,
              "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
    m = hf_config.from_config(falcon, "falcon").model_spec()
    assert m.attention == "mqa" and m.num_kv_heads == 1 and m.tied_embeddings and not m.gated_mlp
    qmoe = {"model_type": "qwen2_moe", "num_hidden_layers": 24, "hidden_size": 2048,
            "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632,
            "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_experts": 60,
            "num_experts_per_tok": 4, "vocab_size": 151936, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16", "decoder_sparse_step": 1, "mlp_only_layers": []}
    q = hf_config.from_config(qmoe, "qwen_moe")
    assert q.model_spec().num_shared_experts == 4 and q.model_spec().expert_ffn_size == 1408
    assert any("shared expert" in a for a in q.assumptions)


@pytest.mark.parametrize("drop,key", [("num_hidden_layers", "num_hidden_layers"),
                                      ("num_attention_heads", "num_attention_heads"),
                                      ("intermediate_size", "intermediate_size")])
def test_missing_field_is_named(tmp_path, drop, key):
    cfg = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    cfg.pop(drop)
    p = tmp_path / "broken.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(HFConfigError) as e:
        hf_config.read(p)
    assert key in str(e.value) and "broken.json" in str(e.value)


def test_unmappable_architecture_is_a_clear_error():
    cfg = {"model_type": "mamba", "num_hidden_layers": 64, "hidden_size": 2560,
           "num_attention_heads": 1, "intermediate_size": 5120, "vocab_size": 50280,
           "hidden_act": "relu"}
    with pytest.raises(HFConfigError, match="model_type"):
        hf_config.from_config(cfg, "m")


def test_hf_config_option_supplies_architecture(cfg_of):
    """model.hf_config=PATH: the JSON's architecture replaces the option's; dtypes stay."""
    path = CONFIGS / "qwen3-32b.json"
    specs = specs_from_config(cfg_of(f"model.hf_config={path}", "partition=tp8", "hardware=h200"))
    assert specs.model.name == "qwen3_32b" and specs.model.num_layers == 64 and specs.model.hidden_size == 5120
    assert run(specs).summary["params_b"] == pytest.approx(32.76, rel=0.01)
    same = specs_from_config(cfg_of("model.hf_config=" + str(CONFIGS / "llama-3.1-8b.json")))
    assert same.model == specs_from_config(cfg_of("model=llama_3_1_8b")).model


def test_hfconfig_command_writes_a_composable_model(tmp_path, cfg_of):
    out = tmp_path / "qwen3_30b_a3b.yaml"
    assert import_main(["hfconfig", str(CONFIGS / "qwen3-30b-a3b.json"), "--out", str(out)]) == 0
    from omegaconf import OmegaConf
    from runner.schema import ModelSchema
    node = OmegaConf.create(out.read_text())
    node.pop("defaults")
    cfg = cfg_of("hardware=h200")
    cfg.model = OmegaConf.merge(OmegaConf.structured(ModelSchema), node)
    s = specs_from_config(cfg)
    assert s.model.num_experts == 128 and s.model.expert_ffn_size == 768
    assert param_counts(s.model).total / 1e9 == pytest.approx(30.53, rel=0.01)


GENERATED_MODELS = ["llama_2_70b", "qwen2_5_72b", "qwen3_32b", "qwen3_30b_a3b", "qwen3_235b_a22b",
                    "gpt_oss_20b", "gpt_oss_120b"]


@pytest.mark.parametrize("name", GENERATED_MODELS)
def test_committed_model_yaml_equals_regenerated(name):
    """conf/model/NAME.yaml written by `simllm-import hfconfig ../shared/data/model_configs/X.json`
    (run from the project root) is what the adapter gives today."""
    from tests.conftest import CONF

    text = (CONF / "model" / f"{name}.yaml").read_text()
    rel = text.split("mapped from ", 1)[1].split(" ", 1)[0]
    hf = hf_config.read(CONFIGS / rel.rsplit("/", 1)[1], name)
    hf.source = rel
    assert hf_config.yaml_text(hf, f"simllm-import hfconfig {rel} --name {name}") == text


def test_bad_hf_config_option_is_a_spec_error(cfg_of, tmp_path):
    from engine.errors import SpecError

    with pytest.raises(SpecError, match="model.hf_config"):
        specs_from_config(cfg_of(f"model.hf_config={tmp_path / 'nope.json'}"))
    broken = tmp_path / "broken.json"
    broken.write_text('{"model_type": "llama", "hidden_size": 4096}')
    with pytest.raises(SpecError, match="num_hidden_layers"):
        specs_from_config(cfg_of(f"model.hf_config={broken}"))
