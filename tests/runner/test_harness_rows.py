"""Benchmark rows deployed by a harness: the row names it (cell or notes), the harness's engine
settings follow its generator rules, and the closed-loop case runs the DES with them.

Expected values are worked out by hand from the rules quoted in runner.tools.rowgrammar
(aiconfigurator's generator rule_plugin/benchmark/*.rule: max_num_tokens = batch + ISL + 1500,
TensorRT-LLM's rounded up to its 32-token block; SGLang's max_prefill_tokens = ISL + 1500)."""

import pytest

from runner.tools import rowgrammar as rg
from runner.tools.validate.cases import build_case

_NOTES = ("aiconfigurator silicon e2e, agg, closed loop: 16 concurrent requests per worker "
          "(total silicon_concurrency 16, 1 worker(s)), fixed ISL/OSL, mean TTFT/TPOT")


@pytest.mark.parametrize("cell,notes,want", [
    ("", _NOTES, "aiconfigurator_agg"), ("aiconfigurator_agg", "", "aiconfigurator_agg"),
    ("none", _NOTES, "none"), ("", "aiconfigurator silicon e2e, disagg", "none"),
    ("", "fixed ISL/OSL", "none"),
])
def test_row_names_its_harness(cell, notes, want):
    assert rg.parse_harness(cell, notes) == want


def test_harness_settings_by_framework():
    v = rg.harness_settings("aiconfigurator_agg", "vllm_v1", 16, 1024)
    assert v["framework.max_num_seqs"] == 16
    assert v["framework.max_num_batched_tokens"] == 16 + 1024 + 1500          # 2540
    assert v["framework.cuda_graph_sizes"] == "[" + ",".join(map(str, range(1, 17))) + "]"
    t = rg.harness_settings("aiconfigurator_agg", "trtllm", 16, 1024)
    assert t["framework.max_num_batched_tokens"] == 2560                       # 2540 -> 80 blocks of 32
    assert t["framework.chunked_prefill"] is False   # the templates' enable_chunked_prefill default(false)
    assert rg.harness_settings("aiconfigurator_agg", "trtllm", 12, 1000)["framework.max_num_batched_tokens"] == 2528
    # the engine-args templates' kv_cache_config.free_gpu_memory_fraction default(0.80); vLLM and
    # SGLang templates set no memory fraction (their engines' own defaults stay)
    assert t["framework.kv_usable_fraction"] == 0.8 and "framework.kv_usable_fraction" not in v
    # ... 0.80 in 1.0.0rc3's template, 0.90 in 1.2.0rc6.post1's (the row's framework_version)
    assert rg.harness_settings("aiconfigurator_agg", "trtllm", 16, 1024, "1.0.0rc3")["framework.kv_usable_fraction"] == 0.8
    assert rg.harness_settings("aiconfigurator_agg", "trtllm", 16, 1024, "1.2.0rc6.post1")["framework.kv_usable_fraction"] == 0.9
    s = rg.harness_settings("aiconfigurator_agg", "sglang", 64, 4096)
    assert s["framework.max_num_batched_tokens"] == 4096 + 1500 and s["framework.max_num_seqs"] == 64
    assert "framework.scheduler" not in s        # mixed chunks contradicted by the rows: prefill-first stays
    assert "framework.kv_usable_fraction" not in s
    assert rg.harness_settings("none", "vllm_v1", 16, 1024) == {}
    assert rg.harness_settings("aiconfigurator_agg", "generic", 16, 1024) == {}


_ROW = {"model": "Qwen3-32B", "hardware": "H100-SXM5-80GB", "num_gpus": "2", "precision": "BF16",
        "framework": "vLLM", "framework_version": "0.12.0", "tp": "2", "pp": "1",
        "batch_or_concurrency": "concurrency=8", "input_len": "1024", "output_len": "1024",
        "metric": "ttft_ms", "unit": "ms (mean)", "value": "154", "id": "X-1", "notes": _NOTES}


def test_closed_loop_case_carries_the_harness_settings_and_the_des_runs_them():
    from engine.des.config import deployment
    from tests.conftest import compose_specs

    c = build_case(_ROW)
    assert "framework.max_num_batched_tokens=2532" in c.overrides            # 8 + 1024 + 1500
    assert "framework.max_num_seqs=8" in c.overrides
    assert "deployed as aiconfigurator_agg" in c.how
    plain = build_case({**_ROW, "notes": "fixed ISL/OSL"})
    assert not any(o.startswith("framework.max_num") for o in plain.overrides)
    specs = compose_specs(*c.overrides, "engine=des", "workload=closed_loop")
    _, des = deployment(specs)
    assert des.scheduling.max_num_seqs == 8 and des.token_budget == 2532


def test_trtllm_harness_row_gets_the_templates_kv_pool():
    """A TensorRT-LLM row deployed by the harness: its KV pool is 0.8 / 0.9 of the profile's
    (free_fraction rule: pool = fraction x (HBM - weights - activations - reserve), the rest
    unchanged by the harness), to the block."""
    from engine.des.kv.capacity import kv_capacity
    from tests.conftest import compose_specs

    row = {**_ROW, "framework": "TensorRT-LLM (aiconfigurator silicon benchmark)",
           "framework_version": "1.0.0rc3", "precision": "FP8", "tp": "1", "num_gpus": "1"}
    c = build_case(row)
    assert "framework.kv_usable_fraction=0.8" in c.overrides
    base = [o for o in c.overrides if not o.startswith("framework.kv_usable_fraction")]
    caps = [kv_capacity(compose_specs(*ovr, "engine=des", "workload=closed_loop"), 32, 2532, 8)
            for ovr in (c.overrides, base)]
    assert caps[1].fits and caps[0].blocks == pytest.approx(caps[1].blocks * 0.8 / 0.9, abs=1)
