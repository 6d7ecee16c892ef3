"""Parameter counts and KV sizes derived from the architecture vs the published / independently
recomputed figures in tests/data/model_configs/SOURCES.md (its verification table; a copy of
../shared/data/model_configs/SOURCES.md)."""

import dataclasses
import json

import pytest

from engine.analytical.memory import kv_bytes_per_token
from engine.analytical.params import param_counts
from runner.convert import model_spec
from tests.conftest import DATA

# model option, SOURCES.md total (B), active (B) or None, KV bytes/token bf16
PUBLISHED = [
    ("llama_2_7b", 6.74, None, 524_288),
    ("llama_3_1_8b", 8.03, None, 131_072),
    ("llama_3_1_70b", 70.55, None, 327_680),
    ("mixtral_8x7b", 46.70, 12.88, 131_072),
    ("llama_3_1_405b", 405.85, None, 516_096),
    # MLA: 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes = 70,272
    ("deepseek_v3", 671.0, 37.5, 70_272),
]


@pytest.mark.parametrize("name,total,active,kv", PUBLISHED)
def test_counts_match_published(cfg_of, name, total, active, kv):
    m = model_spec(cfg_of(f"model={name}"))
    pc = param_counts(m)
    assert pc.total / 1e9 == pytest.approx(total, rel=0.01)
    if active is not None:
        # active = body per-token weights + embedding + LM head + norms (SOURCES.md convention)
        act = pc.per_token_matmul + pc.embedding + pc.lm_head
        assert act == pc.active
        assert act / 1e9 == pytest.approx(active, rel=0.01)
    # kv_dtype may be fp8 in a shipped YAML; SOURCES.md gives bf16 bytes
    assert kv_bytes_per_token(dataclasses.replace(m, kv_dtype="bf16")) == kv


# Published totals (SOURCES.md "published" column / model cards): Llama-3.1-8B "8B" (8.03B),
# 70B (70.55B), 405B (405.85B), Mixtral 46.7B, DeepSeek-V3 671B. All within 1 %.
@pytest.mark.parametrize("name,published", [("llama_3_1_8b", 8.03e9), ("llama_3_1_70b", 70.55e9),
                                            ("llama_3_1_405b", 405.85e9),
                                            ("mixtral_8x7b", 46.7e9), ("deepseek_v3", 671e9)])
def test_within_one_percent_of_published(cfg_of, name, published):
    pc = param_counts(model_spec(cfg_of(f"model={name}")))
    assert abs(pc.total / published - 1) < 0.01


def test_deepseek_v3_by_hand(cfg_of):
    """DeepSeek-V3 counted term by term from its config.json (h=7168, 128 heads):
    MLA per layer  q: 7168*1536 + 1536 + 1536*128*(128+64) = 48,760,320
                   kv: 7168*(512+64) + 512 + 512*128*(128+128) = 20,906,496
                   o: 128*128*7168 = 117,440,512                -> 187,107,328
    dense FFN (3 layers) 3*7168*18432 = 396,361,728; expert 3*7168*2048 = 44,040,192
    MoE layer: router 7168*256 + 257 experts (256 routed + 1 shared) x expert
    norms 2*7168 per layer; embedding = LM head = 129280*7168; final norm 7168."""
    pc = param_counts(model_spec(cfg_of("model=deepseek_v3")))
    attn, dense, expert = 187_107_328, 396_361_728, 44_040_192
    moe = 7168 * 256 + 257 * expert
    emb = 129280 * 7168
    total = 61 * (attn + 2 * 7168) + 3 * dense + 58 * moe + 2 * emb + 7168
    assert pc.total == total
    assert pc.experts == 58 * 256 * expert
    active_body = 61 * attn + 3 * dense + 58 * (7168 * 256 + 9 * expert)
    assert pc.per_token_matmul == active_body


def test_deepseek_conf_matches_hf_config(cfg_of):
    j = json.loads((DATA / "model_configs" / "deepseek-v3.json").read_text())
    m = cfg_of("model=deepseek_v3").model
    for ours, theirs in [("num_layers", "num_hidden_layers"), ("hidden_size", "hidden_size"),
                         ("num_heads", "num_attention_heads"), ("ffn_size", "intermediate_size"),
                         ("vocab_size", "vocab_size"), ("num_experts", "n_routed_experts"),
                         ("experts_per_token", "num_experts_per_tok"),
                         ("expert_ffn_size", "moe_intermediate_size"),
                         ("num_shared_experts", "n_shared_experts"),
                         ("first_dense_layers", "first_k_dense_replace"),
                         ("q_lora_rank", "q_lora_rank"), ("kv_lora_rank", "kv_lora_rank"),
                         ("qk_rope_head_dim", "qk_rope_head_dim"),
                         ("qk_nope_head_dim", "qk_nope_head_dim"), ("v_head_dim", "v_head_dim")]:
        assert m[ours] == j[theirs], ours


@pytest.mark.parametrize("name,hf", [("llama_2_7b", "llama-2-7b"), ("llama_3_1_8b", "llama-3.1-8b"),
                                     ("llama_3_1_70b", "llama-3.1-70b"),
                                     ("mixtral_8x7b", "mixtral-8x7b"),
                                     ("llama_3_1_405b", "llama-3.1-405b")])
def test_conf_matches_hf_config(cfg_of, name, hf):
    """The shipped conf/model YAMLs carry the numbers of the HF config.json they cite."""
    j = json.loads((DATA / "model_configs" / f"{hf}.json").read_text())
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


def test_sliding_window_kv_and_pairs():
    """Two layers, one of them windowed to W=4 tokens; 1 KV head of dim 1 in fp32 (8 bytes/layer).
    A 10-token sequence caches 10 + min(10, 4) = 14 layer-positions = 112 bytes. Prefill of 10
    tokens: full layer 10*11/2 = 55 pairs, windowed layer 1+2+3+4*7 = 34 pairs -> 89.
    A decode token at context 10 attends those 14 cached layer-positions (the step model prices
    decode attention on memory.kv_layer_positions)."""
    from engine.analytical import attention, memory
    from engine.spec import ModelSpec

    m = ModelSpec(name="w", num_layers=2, hidden_size=4, num_heads=1, num_kv_heads=1, head_dim=1,
                  ffn_size=4, vocab_size=8, attention="mha", sliding_window=4,
                  sliding_window_layers=1, kv_dtype="fp32")
    assert memory.kv_layer_positions(m, 10) == 14
    assert memory.kv_layer_positions(m, 10) * memory.kv_bytes_per_layer_token(m) == 112
    assert attention.prefill_layer_pairs(m, 10) == 89
    # chunk of 3 after 5 cached: full 3*5 + 6 = 21, windowed positions 6,7,8 -> 4*3 = 12
    assert attention.prefill_layer_pairs(m, 3, 5) == 33


def test_mla_kv_is_not_split_by_tp(cfg_of):
    """MLA's latent is shared by all heads: TP ranks each keep all of it (kv_heads = 1)."""
    from engine.analytical import memory

    m = model_spec(cfg_of("model=deepseek_v3"))
    assert memory.kv_heads(m) == 1
    assert memory.kv_shard_factor(memory.kv_heads(m), 8, 1, 1) == 1
