"""Every analytical switch is reachable from the command line (compose API) and converts to the
engine's spec; the dataclass defaults mirror conf/engine/analytical.yaml."""

import dataclasses

import pytest

from engine.analytical import run
from engine.errors import SpecError
from engine.spec import AnalyticalSpec
from runner.convert import specs_from_config


def _flat(obj, prefix=""):
    out = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            out.update(_flat(v, f"{prefix}{f.name}."))
        else:
            out[prefix + f.name] = v
    return out


def test_dataclass_defaults_mirror_the_yaml(cfg_of):
    conf = _flat(specs_from_config(cfg_of()).analytical)
    code = _flat(AnalyticalSpec())
    assert conf.keys() == code.keys()
    for k, v in conf.items():
        assert v == (pytest.approx(code[k]) if isinstance(v, float) else code[k]), k


@pytest.mark.parametrize("word,value", [("none", 0.0), ("full", 1.0), ("0.25", 0.25)])
def test_overlap_words_and_fractions(cfg_of, word, value):
    s = specs_from_config(cfg_of(f"engine.analytical.overlap={word}"))
    assert s.analytical.overlap == value


def test_bad_switches_name_the_field(cfg_of):
    with pytest.raises(SpecError, match=r"engine\.analytical\.overlap"):
        specs_from_config(cfg_of("engine.analytical.overlap=most"))
    with pytest.raises(SpecError, match=r"engine\.analytical\.allreduce"):
        specs_from_config(cfg_of("engine.analytical.allreduce=butterfly"))
    with pytest.raises(SpecError, match=r"engine\.analytical\.disagg\.link_bandwidth"):
        specs_from_config(cfg_of("engine.analytical.disagg.link_bandwidth=5 TFLOPS"))


def test_units_convert_with_pint(cfg_of):
    s = specs_from_config(cfg_of("engine.analytical.disagg.link_bandwidth=400 Gb/s",
                                 "engine.analytical.disagg.link_latency=3 us",
                                 "engine.analytical.disagg.per_wr=0.5"))
    assert s.analytical.disagg.link_bandwidth_bytes_s == pytest.approx(50e9)
    assert s.analytical.disagg.link_latency_s == pytest.approx(3e-6)
    assert s.analytical.disagg.per_wr_s == pytest.approx(0.5e-6)   # bare number: us


def test_moe_fp8_tp8_chunked_disagg_from_the_cli(cfg_of):
    """No code edits: MoE + FP8 + TP=8 + chunked prefill + disaggregation + speculation by config."""
    cfg = cfg_of("model=mixtral_8x7b", "partition=tp8", "model.weight_dtype=fp8",
                 "model.activation_dtype=fp8", "model.kv_dtype=fp8",
                 "engine.analytical.prefill_chunk=256", "engine.analytical.chunk_search=true",
                 "engine.analytical.disagg.enabled=true", "engine.analytical.disagg.prefill_tp=4",
                 "engine.analytical.spec_decode.method=draft",
                 "engine.analytical.spec_decode.draft_model=llama_3_1_8b", "workload.prompt_len=1024")
    specs = specs_from_config(cfg)
    assert specs.model.math_dtype == "fp8"
    s = run(specs).summary
    # 1024-token prompts in 256-token passes, prompts one after another
    assert s["fits_in_memory"] and s["prefill_passes"] == 4 * specs.workload.batch_size
    for k in ("disagg_ttft_ms", "spec_tpot_ms", "chunk_star", "energy_j_per_token", "batch_star"):
        assert k in s


def test_group_quantised_weights_from_the_cli(cfg_of):
    s = specs_from_config(cfg_of("model.weight_dtype=int4", "model.weight_group_size=128"))
    assert s.model.weight_group_size == 128 and s.model.math_dtype == "bf16"


def test_pareto_mode_from_the_cli(cfg_of):
    cfg = cfg_of("model=llama_3_1_70b", "engine.analytical.pareto.enabled=true",
                 "engine.analytical.pareto.devices=8", "engine.analytical.pareto.batches=[1,8,64]",
                 "workload.prompt_len=1024", "workload.output_len=128")
    r = run(specs_from_config(cfg))
    assert r.summary["pareto_points"] == r.table.height > 0
    assert r.summary["pareto_frontier_points"] == int(r.table["on_frontier"].sum())
    assert r.summary["max_throughput_partition"].startswith("PP")
