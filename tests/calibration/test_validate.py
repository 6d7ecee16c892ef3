"""simllm-validate: rows -> engine choice / skip reason, one prediction checked against a hand
roofline, the printed error table and its MLflow run.

Hand check (GF-01-like row: Llama-2-7B bf16, batch 1, A100 80GB at 2.039 TB/s): a decode step
streams the non-embedding weights, (6.738e9 - 32000 x 4096) x 2 B = 13.21 GB, plus the KV cache
(<= 205 positions x 0.5 MB = 0.1 GB) at 2.039 TB/s x memory_bandwidth_efficiency; the compute
(2 x 6.6e9 FLOP at 312 TFLOPS) is 1/400 of that, so TPOT = bytes / (BW x eff) + the calibration's
per-step and per-token overheads to within 2 %.
"""

import csv
import math
from pathlib import Path

import pytest

from runner.tools import validate

HEADER = ["id", "model", "params_b", "hardware", "num_gpus", "precision", "framework",
          "framework_version", "tp", "pp", "batch_or_concurrency", "input_len", "output_len", "metric",
          "value", "unit", "source_url_or_repo_path", "quote_or_table_ref", "notes"]


def _row(**kw):
    base = dict.fromkeys(HEADER, "")
    base.update(params_b="7", num_gpus="1", tp="1", pp="1", framework="gpt-fast", unit="tok/s")
    base.update(kw)
    return base


ROWS = [
    _row(id="A-1", model="Llama-2-7B", hardware="A100-SXM4-80GB (330W cap)", precision="bf16",
         batch_or_concurrency="1", input_len="5", metric="decode_tok_s_per_user", value="100"),
    _row(id="A-2", model="LLaMA 7B", hardware="H100-SXM5-80GB", precision="FP8", framework="TensorRT-LLM",
         batch_or_concurrency="1", input_len="128", output_len="1", metric="ttft_ms", value="7", unit="ms"),
    _row(id="D-1", model="Llama-3.1-8B", hardware="H100-SXM5-80GB", precision="FP8",
         framework="TensorRT-LLM (trtllm-bench)", batch_or_concurrency="max (offline, inf rate)",
         input_len="128", output_len="128", metric="output_throughput_tok_s", value="28000"),
    _row(id="S-1", model="Llama-3.1-8B-Instruct", hardware="A100-SXM4-80GB", precision="BF16",
         framework="SGLang", batch_or_concurrency="request_rate=4 req/s (1200 prompts)",
         input_len="ShareGPT (var)", output_len="ShareGPT (var)", metric="tpot_ms", value="13", unit="ms"),
    _row(id="X-1", model="Llama-2-7B", hardware="RTX 4090", precision="FP8", batch_or_concurrency="1",
         input_len="2048", output_len="1", metric="ttft_ms", value="73", unit="ms"),
    _row(id="X-2", model="Llama-2-70B-chat", hardware="H100-SXM5-80GB (DGX H100)", precision="FP8", num_gpus="8",
         tp="submitter-chosen", batch_or_concurrency="offline (all samples)", input_len="OpenOrca (var, <=1024)",
         output_len="~290 mean (var)", metric="output_throughput_tok_s", value="24524"),
]


def test_rows_to_cases():
    cases = {c.id: c for c in map(validate.build_case, ROWS)}
    assert cases["A-1"].engine == "analytical" and cases["A-1"].metric == "tpot"
    assert cases["A-1"].measured == pytest.approx(10.0)                       # 1000 / 100 tok/s
    assert cases["A-1"].workload == {"prompt_len": 5, "output_len": 200, "batch_size": 1}
    assert cases["A-2"].engine == "analytical" and "model.weight_dtype=fp8" in cases["A-2"].overrides
    assert cases["D-1"].engine == "des" and cases["D-1"].workload["arrival"] == "batch"
    # the framework profile picks the DES scheduler (conf/framework/trtllm.yaml: orca, no-evict)
    assert "framework=trtllm" in cases["D-1"].overrides and cases["D-1"].framework == "trtllm"
    assert cases["S-1"].engine == "des" and cases["S-1"].workload["rate_rps"] == 4.0
    assert cases["S-1"].framework == "sglang" and cases["S-1"].key == "tpot_ms_p50"
    assert "no hardware config" in cases["X-1"].skip and cases["X-1"].skip_kind == "no hardware config"
    # TP "submitter-chosen": chosen when composing; 8 GPUs; OpenOrca lengths
    assert cases["X-2"].auto_tp_gpus == 8 and cases["X-2"].workload["dataset"] == "openorca"


def test_batch1_tpot_against_hand_roofline():
    case = validate.build_case(ROWS[0])
    r = validate.Runner("default", extra=("calibration.cost.backend=roofline",))   # the hand roofline
    pred = r.predict(case)
    cal, fw = r.specs(case)[0].calibration, r.specs(case)[0].framework
    hand = ((6.738e9 - 32000 * 4096) * 2 / (2.039e12 * cal.memory_bandwidth_efficiency)
            + cal.step_overhead_s + cal.launch_overhead_s + cal.per_token_overhead_s
            + fw.step_overhead_s + fw.per_output_token_s) * 1e3    # + the row's profile host costs
    assert pred == pytest.approx(hand, rel=0.02)


def test_cli_prints_table_summary_and_skips(tmp_path, capsys, mlflow_uri):
    path = tmp_path / "dev.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER)
        w.writeheader()
        w.writerows([ROWS[0], ROWS[1], ROWS[4],
                     _row(id="X-3", model="Foo-13B", hardware="H100-SXM5-80GB", batch_or_concurrency="1",
                          input_len="128", output_len="1", metric="ttft_ms", value="7", unit="ms")])
    rc = validate.main(["--csv", str(path), "--output-dir", str(tmp_path / "out"), "--tracking-uri", mlflow_uri])
    assert rc == 0
    out = capsys.readouterr().out
    assert "A-1" in out and "A-2" in out and "median |error|" in out and "max |error|" in out
    assert "skipped (2):" in out and "no hardware config for 'RTX 4090'" in out
    assert "coverage: predicted 2 of 4 rows; skipped: no hardware config 1, no model config 1" in out
    rows = list(csv.DictReader(open(next((tmp_path / "out").glob("*")) / "table.csv")))
    a1 = next(r for r in rows if r["id"] == "A-1")
    assert float(a1["signed_error"]) == pytest.approx(float(a1["predicted"]) / 10.0 - 1, rel=1e-9)

    from mlflow.tracking import MlflowClient

    c = MlflowClient(tracking_uri=mlflow_uri)
    run = c.search_runs([c.get_experiment_by_name("validation").experiment_id])[0]
    assert run.data.params["rows"] == "4" and run.data.params["skipped"] == "2"
    assert math.isfinite(run.data.metrics["tpot_median_abs_error"])


def test_missing_csv_is_one_line_error(tmp_path, capsys):
    assert validate.main(["--csv", str(tmp_path / "nope.csv"), "--no-tracking"]) == 2
    assert "nope.csv" in capsys.readouterr().err


def test_ttft_parts_add_up_to_the_prediction(tmp_path, capsys):
    """--ttft-parts: the DES TTFT row's predicted mean taken apart. Independent checks: the parts
    are differences of consecutive timestamps of each request, so path + queue + prefill +
    first_token is the predicted mean (to the table's 4 significant figures); ahead is a part of
    queue; path holds at least the profile's API-server time per request (conf/framework/sglang.yaml
    per_request_overhead, read here from the YAML) for every request."""
    import yaml

    row = _row(id="C-1", model="Qwen3-32B", params_b="32.8", hardware="H100-SXM5-80GB", num_gpus="2", tp="2",
               precision="BF16", framework="SGLang", framework_version="0.5.1.post1",
               batch_or_concurrency="concurrency=4", input_len="1024", output_len="128", metric="ttft_ms",
               value="300", unit="ms (mean)",
               notes="aiconfigurator silicon e2e, agg, closed loop: 4 concurrent requests per worker, fixed ISL/OSL, mean TTFT/TPOT")
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER)
        w.writeheader()
        w.writerow(row)
    assert validate.main(["--csv", str(path), "--ttft-parts", "--no-tracking", "--output-dir", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "TTFT along the request's path" in out
    lines = out[out.index("TTFT along the request's path"):].splitlines()
    head = [h.strip() for h in lines[1].strip("|").split("|")]
    cells = dict(zip(head, (v.strip() for v in lines[3].strip("|").split("|"))))
    assert cells["id"] == "C-1"
    v = {k: float(cells[k]) for k in ("predicted", "path", "queue", "ahead", "prefill", "first_token")}
    assert v["path"] + v["queue"] + v["prefill"] + v["first_token"] == pytest.approx(v["predicted"], rel=2e-3)
    assert 0 <= v["ahead"] <= v["queue"] + 1e-9
    conf = yaml.safe_load((Path(validate.__file__).resolve().parents[3] / "conf" / "framework" / "sglang.yaml").read_text())
    api_ms = float(str(conf["per_request_overhead"]).split()[0]) / 1e3   # "1.58e+04 us" -> ms
    assert v["path"] >= api_ms * 0.999
