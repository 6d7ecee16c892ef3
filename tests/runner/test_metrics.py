"""One metric registry (engine.result.METRICS) read by every consumer, and one MLflow module
(runner.tracking) on MlflowClient with one default tracking URI."""

import os
import re

import pytest
from omegaconf import OmegaConf

from engine.result import METRICS, metric, report_metrics, row_metrics, unit_of
from runner import tracking
from tests.conftest import CONF, ROOT, compose_specs


@pytest.fixture(scope="module")
def produced():
    """Summary keys the engines produce: analytical default + its Pareto sweep, and a small DES."""
    from engine import des
    from engine.analytical import run

    keys = set(run(compose_specs()).summary)
    keys |= set(run(compose_specs("engine.analytical.pareto.enabled=true",
                                  "engine.analytical.pareto.batches=[1,8]")).summary)
    keys |= set(des.run(compose_specs("engine=des", "workload=poisson_chat",
                                      "workload.num_requests=20")).summary)
    return keys


def test_every_registered_metric_is_produced(produced):
    assert len({m.name for m in METRICS}) == len(METRICS)
    assert {m.name for m in METRICS} <= produced, {m.name for m in METRICS} - produced


def test_units_from_the_registry_or_the_name():
    assert unit_of("throughput_tok_s_per_gpu") == "tok/s/GPU"       # registered
    assert unit_of("ttft_ms_p99_9") == unit_of("disagg_handoff_ms") == "ms"   # name says ms
    assert unit_of("kv_capacity_gb") == "GB" and unit_of("goodput_rps") == "requests/s"
    assert unit_of("num_completed") == ""


def test_printed_row_and_report_columns_come_from_the_registry(cfg_of):
    from runner.tools import report
    from runner.job import summary_line

    s = {"ttft_ms_p50": 12.345, "tpot_ms_p50": 6.0, "throughput_tok_s": 1234.4,
         "throughput_tok_s_per_gpu": 617.2, "bound": "memory", "fits_in_memory": True}
    row = summary_line(cfg_of(), s)
    assert list(row) == ["hardware", "model", "framework", "tp", "pp", "batch", "prompt", "output", "TTFT ms",
                         "TPOT ms", "tok/s", "tok/s/GPU", "bound", "fits"]
    assert (row["TTFT ms"], row["tok/s"], row["bound"], row["fits"]) == ("12.35", "1,234", "memory", True)
    des = summary_line(cfg_of("engine=des"), {**s, "num_requests": 300, "ttft_ms_p99": 40.0})
    assert [k for k in des if k not in ("hardware", "model", "framework", "tp", "pp")] == \
        ["requests", "TTFT ms", "TTFT p99 ms", "TPOT ms", "TPOT p99 ms", "tok/s", "tok/s/GPU", "bound", "fits"]
    assert [m.label for m in row_metrics("des")] == list(des)[5:]
    assert report._METRICS + report._TAGS == tuple(
        (m.label, f"summary.{m.name}" if m.text else m.name) for m in report_metrics()
        if not m.text) + tuple((m.label, f"summary.{m.name}") for m in report_metrics() if m.text)


def test_a_new_metric_reaches_mlflow_unregistered(mlflow_uri, tmp_path):
    """No whitelist: an unregistered number is a metric, an unregistered string a summary tag."""
    assert metric("brand_new_ms") is None
    job = tmp_path / "job"
    job.mkdir()
    rid = tracking.log_job(mlflow_uri, "m", "r", {"p": 1}, {"brand_new_ms": 1.5, "brand_new_kind": "x",
                                                             "flag": True}, {}, job)
    r = tracking.client(mlflow_uri).get_run(rid).data
    assert r.metrics["brand_new_ms"] == 1.5 and r.tags["summary.brand_new_kind"] == "x"
    assert r.metrics["flag"] == 1.0 and r.tags["summary.flag"] == "true"


def test_reading_runs_back_leaves_the_global_tracking_uri_alone(mlflow_uri, tmp_path, monkeypatch):
    import mlflow

    from runner.tools import runs

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    before = mlflow.get_tracking_uri()
    job = tmp_path / "job"
    job.mkdir()
    ids = [tracking.log_job(mlflow_uri, "m", f"r{i}", {"x": i}, {"ttft_ms_p50": float(i)}, {}, job)
           for i in range(3)]
    df = runs.select(mlflow_uri, experiment="m")
    assert sorted(df["run_id"].to_list()) == sorted(ids)
    assert sorted(df["metrics.ttft_ms_p50"].to_list()) == [0.0, 1.0, 2.0]
    assert sorted(df["params.x"].to_list()) == ["0", "1", "2"]
    assert df["start_time"].dtype.is_temporal()
    assert runs.runs_by_id(mlflow_uri, ids[::-1])["run_id"].to_list() == ids[::-1]
    assert mlflow.get_tracking_uri() == before and "MLFLOW_TRACKING_URI" not in os.environ


def test_one_default_tracking_uri(monkeypatch):
    from runner.tools import calibrate
    from runner.schema import TrackingSchema

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert OmegaConf.load(CONF / "tracking" / "mlflow.yaml").uri == tracking.DEFAULT_URI
    assert TrackingSchema().uri == tracking.DEFAULT_URI == tracking.default_uri()
    assert calibrate.parser().parse_args(["m.csv", "--name", "x"]).tracking_uri is None  # -> default_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://server:5000")
    assert tracking.default_uri() == "http://server:5000"


def test_only_the_tracking_module_talks_to_mlflow():
    """No private MLflow API, no global URI change, one module importing MLflow (validate.py
    is left to its owner: see the calibration round-trip notes)."""
    bad = []
    for p in sorted((ROOT / "runner").glob("**/*.py")) + sorted((ROOT / "engine").glob("**/*.py")):
        text = p.read_text()
        rel = p.relative_to(ROOT).as_posix()
        if re.search(r"mlflow\._|set_tracking_uri\(", text):
            bad.append(f"{rel}: private API or global URI")
        if rel != "runner/tracking.py" and re.search(r"^\s*(import mlflow|from mlflow)", text, re.M):
            bad.append(f"{rel}: imports mlflow")
    assert not bad, bad
