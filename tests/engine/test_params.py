"""Parameter counts and KV sizes derived from the architecture vs the published / independently
recomputed figures in ../shared/data/model_configs/SOURCES.md (its verification table)."""

import json

import pytest

from engine.analytical.memory import kv_bytes_per_token
from engine.analytical.params import param_counts
from runner.convert import model_spec
from tests.conftest import SHARED_DATA

# model option, SOURCES.md total (B), active (B) or None, KV bytes/token bf16
PUBLISHED = [
    ("llama_2_7b", 6.74, None, 524_288),
    ("llama_3_1_8b", 8.03, None, 131_072),
    ("llama_3_1_70b", 70.55, None, 327_680),
    ("mixtral_8x7b", 46.70, 12.88, 131_072),
]


@pytest.mark.parametrize("name,total,active,kv", PUBLISHED)
def test_counts_match_published(cfg_of, name, total, active, kv):
    m = model_spec(cfg_of(f"model={name}"))
    pc = param_counts(m)
    assert pc.total / 1e9 == pytest.approx(total, rel=0.01)
    if active is not None:
        # active = body per-token weights + embedding + LM head + norms (SOURCES.md convention)
        act = pc.per_token_matmul + pc.embedding + pc.lm_head
        assert act / 1e9 == pytest.approx(active, rel=0.01)
    assert kv_bytes_per_token(m) == kv


@pytest.mark.parametrize("name,hf", [("llama_2_7b", "llama-2-7b"), ("llama_3_1_8b", "llama-3.1-8b"),
                                     ("llama_3_1_70b", "llama-3.1-70b"),
                                     ("mixtral_8x7b", "mixtral-8x7b")])
def test_conf_matches_hf_config(cfg_of, name, hf):
    """The shipped conf/model YAMLs carry the numbers of the HF config.json they cite."""
    j = json.loads((SHARED_DATA / "model_configs" / f"{hf}.json").read_text())
    m = cfg_of(f"model={name}").model
    assert m.num_layers == j["num_hidden_layers"]
    assert m.hidden_size == j["hidden_size"]
    assert m.num_heads == j["num_attention_heads"]
    assert m.num_kv_heads == j["num_key_value_heads"]
    assert m.head_dim == j.get("head_dim", j["hidden_size"] // j["num_attention_heads"])
    assert m.ffn_size == j["intermediate_size"]
    assert m.vocab_size == j["vocab_size"]
    assert m.tied_embeddings == j.get("tie_word_embeddings", False)
    assert m.num_experts == j.get("num_local_experts", 0)
    assert m.experts_per_token == j.get("num_experts_per_tok", 0)


def test_num_params_override_sets_weights(cfg_of):
    pc = param_counts(model_spec(cfg_of("model=llama_7b_specsheet")))
    assert pc.total == pc.per_token_matmul == 7.2e9
    assert pc.lm_head == pc.experts == pc.embedding == 0
