"""The benchmark-row grammar (runner.tools.rowgrammar) and the example CSV validated end to end
(tests/calibration/data/benchmark_rows.csv: one row of each kind; README "Benchmark rows").
The example's measured values are illustrative: the test checks what each row is compared with
and that every row is predicted or skipped with its reason, not the accuracy."""

import csv
import math
from pathlib import Path

import pytest

from runner.tools import rowgrammar as rg
from runner.tools import validate
from tests.conftest import require_shared

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("text, kind, value, prompts", [
    ("1", "batch", 1, 0), ("batch=8", "batch", 8, 0), ("Concurrency=32", "concurrency", 32, 0),
    ("64 concurrent", "concurrency", 64, 0), ("request_rate=4 req/s (1200 prompts)", "rate", 4, 1200),
    ("2.5 req/s", "rate", 2.5, 0), ("request_rate=INF", "offline", 0, 0),
    ("max (offline, inf rate)", "offline", 0, 0), ("offline, all at once (5000 prompts)", "offline", 0, 5000),
    ("server (Poisson, target QPS in log)", "server", 0, 0),
])
def test_load_grammar(text, kind, value, prompts):
    assert rg.parse_load(text) == rg.Load(kind, float(value), prompts)


@pytest.mark.parametrize("metric, unit, group, stat, scale", [
    ("ttft_ms", "ms", "ttft", "p50", 1.0), ("ttft_ms", "ms (mean)", "ttft", "mean", 1.0),
    ("mean_ttft_ms", "ms", "ttft", "mean", 1.0), ("p99_itl_ms", "ms", "itl", "p99", 1.0),
    ("e2e_latency_ms", "s (mean)", "e2e", "mean", 1000.0), ("median_tpot_ms", "ms", "tpot", "p50", 1.0),
    ("output_throughput_tok_s", "tok/s", "throughput", "p50", 1.0),
])
def test_metric_grammar(metric, unit, group, stat, scale):
    m = rg.parse_metric(metric, unit)
    assert (m.group, m.stat, m.scale) == (group, stat, scale)


@pytest.mark.parametrize("name, option, quant", [
    ("meta-llama/Meta-Llama-3.1-8B-Instruct-FP8", "llama_3_1_8b", "fp8"),
    ("Meta-Llama-3-70B-Instruct", "llama_3_1_70b", ""), ("LLaMA 7B (Llama-1/2 7B dims, MHA)", "llama_2_7b", ""),
    ("Llama-2-13b-chat-hf", "llama_2_13b", ""), ("EleutherAI/gpt-j-6b", "gpt_j_6b", ""),
    ("neuralmagic/Llama-2-7b-chat-AWQ", "llama_2_7b", "int4"), ("Mixtral-8x7B-v0.1 (MoE)", "mixtral_8x7b", ""),
])
def test_model_aliases(name, option, quant):
    assert rg.resolve_model(name) == (option, None, quant)


@pytest.mark.parametrize("name, option", [
    ("H100 80GB (SXM5)", "h100_sxm"), ("H100-SXM5-80GB", "h100_sxm"), ("NVIDIA H200 141GB", "h200"),
    ("A100-SXM4-80GB (330W cap)", "a100_sxm_80gb"), ("AMD MI300X-192GB", "mi300x"),
])
def test_hardware_aliases(name, option):
    assert rg.resolve_hardware(name) == option


@pytest.mark.parametrize("name", ["H100 80GB (PCIe)", "A100 40GB", "RTX 4090"])
def test_hardware_without_config_is_a_reason(name):
    r = rg.resolve_hardware(name)
    assert isinstance(r, rg.Skip) and name in r.detail


@pytest.mark.parametrize("fw, version, profile", [
    ("vLLM", "0.6.0", "vllm_v0"), ("vllm", "v0.10.1", "vllm_v1"), ("vLLM", "", "vllm_v1"),
    ("vLLM-ROCm (AMD MLPerf harness)", "MLPerf v4.1 submission", "vllm_v0"),
    ("TensorRT-LLM (trtllm-bench)", "v0.17", "trtllm_v0"), ("TensorRT-LLM (trtllm-bench, PyTorch backend)", "~v1.0", "trtllm"),
    ("TensorRT-LLM (NVIDIA MLPerf harness)", "MLPerf v4.1 submission", "trtllm_v0"), ("TensorRT-LLM", "1.0.0rc3", "trtllm"), ("TensorRT-LLM", "", "trtllm"), ("SGLang", "0.3.0", "sglang_v03"), ("SGLang", "0.5.1.post1", "sglang"), ("gpt-fast", "", "gpt_fast"), ("llama.cpp", "", "generic"),
])
def test_framework_profile_from_row(fw, version, profile):
    assert rg.pick_framework(fw, version)[0] == profile


def test_example_csv_end_to_end(tmp_path, capsys):
    require_shared("traces", validate.SHAREGPT_TRACE)   # its dataset rows draw ShareGPT lengths: skip without
    rc = validate.main(["--csv", str(DATA / "benchmark_rows.csv"), "--no-tracking", "--des-scale", "0.1",
                        "--model-config", f"Qwen2.5-7B={DATA / 'qwen2.5-7b-config.json'}",
                        "--output-dir", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "coverage: predicted 8 of 11 rows; skipped: no hardware config 1, server rate not stated 1, " \
           "no model config 1" in out
    assert "median |error| / MAPE / signed median per framework profile:" in out
    assert "median |error| / MAPE / signed median per precision:" in out
    rows = {r["id"]: r for r in csv.DictReader(open(next(tmp_path.glob("*")) / "table.csv"))}
    # like with like: a published mean against the simulated mean, p99 against p99, the median
    # when the statistic is not stated; a per-user decode rate as TPOT
    expect = {"EX-BATCH1": ("analytical", "tpot_ms_p50"), "EX-STATIC": ("analytical", "throughput_tok_s"),
              "EX-CLOSED": ("des", "ttft_ms_mean"), "EX-E2E": ("des", "e2e_ms_mean"),
              "EX-RATE": ("des", "itl_ms_p99"), "EX-INF": ("des", "throughput_tok_s"),
              "EX-OFFLINE": ("des", "total_throughput_tok_s"), "EX-HFCONFIG": ("des", "tpot_ms_p50")}
    for rid, (engine, key) in expect.items():
        r = rows[rid]
        assert (r["engine"], r["compared_with"]) == (engine, key), rid
        assert math.isfinite(float(r["predicted"])) and float(r["predicted"]) > 0, rid
    assert rows["EX-CLOSED"]["framework"] == "vllm_v1" and rows["EX-CLOSED"]["precision"] == "fp8"
    assert float(rows["EX-E2E"]["measured"]) == pytest.approx(1600.0)        # 1.6 s (mean) in ms
    assert float(rows["EX-BATCH1"]["measured"]) == pytest.approx(10.0)       # 1000 / 100 tok/s
    assert "qwen2.5-7b-config.json" in rows["EX-HFCONFIG"]["how"]
    for rid in ("EX-NOHW", "EX-SERVER", "EX-NOMODEL"):
        assert rows[rid]["skipped"], rid


def test_bad_model_config_names_the_option(capsys):
    assert validate.main(["--csv", str(DATA / "benchmark_rows.csv"), "--no-tracking",
                          "--model-config", "Qwen2.5-7B"]) == 2
    assert "--model-config" in capsys.readouterr().err


def test_half_split_fits_on_half_and_reports_the_other(tmp_path, capsys):
    import json

    require_shared("traces", validate.SHAREGPT_TRACE)

    rc = validate.main(["--csv", str(DATA / "benchmark_rows.csv"), "--no-tracking", "--des-scale", "0.1",
                        "--model-config", f"Qwen2.5-7B={DATA / 'qwen2.5-7b-config.json'}",
                        "--half-split", "--max-nfev", "2", "--output-dir", str(tmp_path)])
    assert rc == 0
    assert "half split: fitted on 4 rows" in capsys.readouterr().out
    doc = json.loads((next(tmp_path.glob("*")) / "summary.json").read_text())["half_split"]
    # the 8 predicted rows sorted by id: 0, 2, 4, 6 fitted, 1, 3, 5, 7 held out
    assert sum(s["n"] for s in doc["fit"].values()) == 4 == sum(s["n"] for s in doc["held_out"].values())
    assert set(doc["params"]) == set(validate.FIT_PARAMS)


def test_error_statistics_and_concurrency_bands():
    """MAPE is the mean of |e|, the signed median the median of e (hand values: errors -0.5, -0.1,
    +0.2 -> |e| 0.5, 0.1, 0.2: median 0.2, mean 0.2667, max 0.5, signed median -0.1); closed-loop
    rows fall in the band of their clients per replica."""
    from runner.tools.validate.cases import Case
    from runner.tools.validate.report import _stats, breakdown, load_band

    s = _stats([-0.5, -0.1, 0.2])
    assert s["n"] == 3 and s["median_abs_error"] == pytest.approx(0.2)
    assert s["mape"] == pytest.approx(0.8 / 3) and s["max_abs_error"] == pytest.approx(0.5)
    assert s["signed_median"] == pytest.approx(-0.1)
    cases = []
    for i, (users, err) in enumerate([(1, 0.1), (16, -0.2), (17, 0.3), (128, -0.3), (512, 0.05)]):
        c = Case(f"R{i}", "ttft", 100.0, engine="des",
                 workload={"arrival": "closed_loop", "concurrency": users})
        c.predicted = 100.0 * (1 + err)
        cases.append(c)
    cases.append(Case("P", "ttft", 100.0, engine="des", workload={"arrival": "poisson"}, predicted=150.0))
    assert [load_band(c) for c in cases] == ["1", "2-16", "17-128", "17-128", "129+", ""]
    per = breakdown(cases, load_band)
    assert list(per) == ["", "1", "2-16", "17-128", "129+"]
    assert per["17-128"]["ttft"]["n"] == 2 and per["17-128"]["ttft"]["signed_median"] == pytest.approx(0.0)
    assert per["17-128"]["ttft"]["mape"] == pytest.approx(0.3)


def test_metrics_of_one_point_share_one_simulation(monkeypatch):
    """The TTFT and TPOT rows of one benchmark point are read from one simulation (the runner keys
    summaries on the setup, not the row id); another profile's host terms do not re-run it."""
    from runner.tools.validate.cases import build_case
    from runner.tools.validate.predict import Runner

    base = {"model": "Llama-3.1-8B", "hardware": "H100-SXM5-80GB", "num_gpus": "1", "precision": "BF16",
            "framework": "vLLM", "framework_version": "0.10", "tp": "1", "pp": "1",
            "batch_or_concurrency": "concurrency=4", "input_len": "256", "output_len": "32", "unit": "ms (mean)"}
    a = build_case({**base, "id": "X-ttft", "metric": "ttft_ms", "value": "50"})
    b = build_case({**base, "id": "X-tpot", "metric": "tpot_ms", "value": "8"})
    assert not a.skip and not b.skip
    r = Runner("default", des_scale=0.1)
    calls = []
    real = Runner._summary
    monkeypatch.setattr(Runner, "_summary", lambda self, *x: calls.append(1) or real(self, *x))
    p = {"framework.sglang.step_overhead_s": 1e-3}
    va, vb = r.predict(a, p), r.predict(b, {"framework.sglang.step_overhead_s": 2e-3})
    assert len(calls) == 1 and math.isfinite(va) and math.isfinite(vb) and va > vb
    r.predict(b, {"framework.vllm_v1.step_overhead_s": 1e-3})
    assert len(calls) == 2


def test_half_split_keeps_a_points_metrics_together():
    """Rows of one benchmark point (its TTFT and TPOT) land in the same half; points alternate:
    three points A, B, C (ids A-tpot < A-ttft < B-... by hand) -> fit half A + C, held out B."""
    from runner.tools.validate.cases import build_case
    from runner.tools.validate.fit import halves

    base = {"model": "Llama-3.1-8B", "hardware": "H100-SXM5-80GB", "num_gpus": "1", "precision": "BF16",
            "framework": "vLLM", "framework_version": "0.10", "tp": "1", "pp": "1", "unit": "ms (mean)",
            "input_len": "256", "output_len": "32"}
    cases = [build_case({**base, "id": f"{p}-{m}", "metric": f"{m}_ms", "value": "10",
                         "batch_or_concurrency": f"concurrency={n}"})
             for p, n in (("A", 4), ("B", 8), ("C", 16)) for m in ("ttft", "tpot")]
    fit, held = halves(cases)
    assert sorted(c.id for c in fit) == ["A-tpot", "A-ttft", "C-tpot", "C-ttft"]
    assert sorted(c.id for c in held) == ["B-tpot", "B-ttft"]


def test_des_scale_keeps_a_benchmark_clients_run_length():
    """A closed loop run by a benchmark client measures over the client's run (AIPerf: 20 N
    requests), so --des-scale does not shorten it: the same TTFT at scale 0.25 and 1; a Poisson
    row (no client) runs max(100, 0.25 x 400) = 100 requests instead of 400 and its summary counts
    them."""
    from runner.tools.validate.cases import build_case
    from runner.tools.validate.predict import Runner

    base = {"model": "Llama-3.1-8B", "hardware": "H100-SXM5-80GB", "num_gpus": "1", "precision": "BF16",
            "framework": "vLLM", "framework_version": "0.10", "tp": "1", "pp": "1", "unit": "ms (mean)",
            "input_len": "256", "output_len": "32", "metric": "ttft_ms", "value": "50"}
    closed = build_case({**base, "id": "C-ttft", "batch_or_concurrency": "concurrency=8"})
    rate = build_case({**base, "id": "R-ttft", "batch_or_concurrency": "request_rate=4 (400 prompts)"})
    assert closed.workload["client"] == "aiperf" and rate.workload["num_requests"] == 400
    full, quarter = Runner("default", des_scale=1.0), Runner("default", des_scale=0.25)
    assert quarter.predict(closed) == full.predict(closed)
    s = quarter._summary(rate, *quarter.specs(rate), None)
    assert s["num_requests"] == 100
