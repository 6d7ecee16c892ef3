"""End to end through the console script, with a real (temporary) MLflow SQLite store."""

import json

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli

pytestmark = pytest.mark.slow


def _runs(uri, exp="simllm"):
    c = MlflowClient(tracking_uri=uri)
    e = c.get_experiment_by_name(exp)
    return [] if e is None else c.search_runs([e.experiment_id], max_results=1000)


def test_default_run_prints_table_and_logs(tmp_path, mlflow_uri):
    p = run_cli([f"tracking.uri={mlflow_uri}", f"hydra.run.dir={tmp_path}/job"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "TTFT ms" in p.stdout and "TPOT ms" in p.stdout and "tok/s" in p.stdout
    job = tmp_path / "job"
    for f in ("summary.json", "table.parquet", "assumptions.md", "config.yaml"):
        assert (job / f).exists(), f
    runs = _runs(mlflow_uri)
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    r = runs[0].data
    assert r.metrics["ttft_ms_p50"] == pytest.approx(
        json.loads((job / "summary.json").read_text())["summary"]["ttft_ms_p50"])
    assert r.params["hardware.name"] == "h100_sxm"
    assert r.tags["simllm.engine"] == "analytical" and len(r.tags["simllm.config_hash"]) == 16
    arts = {a.path for a in MlflowClient(tracking_uri=mlflow_uri).list_artifacts(runs[0].info.run_id)}
    assert {"summary.json", "table.parquet", "assumptions.md", "config.yaml"} <= arts


def test_four_job_multirun(tmp_path, mlflow_uri):
    p = run_cli(["-m", "hardware=h100_sxm,h200", "partition.tp=1,2", f"tracking.uri={mlflow_uri}",
                 f"hydra.sweep.dir={tmp_path}/sweep"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "4 done, 0 failed" in p.stdout
    runs = _runs(mlflow_uri)
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    parents = [r for r in runs if r.data.tags.get("simllm.role") == "sweep"]
    assert len(children) == 4 and len(parents) == 1
    assert all(r.info.status == "FINISHED" for r in runs)
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    for r in children:
        assert r.data.metrics["ttft_ms_p50"] > 0 and r.data.metrics["tpot_ms_p50"] > 0
    # more bandwidth, lower TPOT (same compute): h200 < h100 at equal tp
    tpot = {(r.data.params["hardware.name"], r.data.params["partition.tp"]):
            r.data.metrics["tpot_ms_p50"] for r in children}
    assert tpot[("h200", "1")] < tpot[("h100_sxm", "1")]


@pytest.mark.parametrize("override,field", [
    ("hardware.hbm_bandwidth=-3", "hardware.hbm_bandwidth"),
    ("partition.tp=3", "partition.tp"),
    ("model=nope", "model/nope"),
])
def test_bad_override_exits_nonzero_naming_field(tmp_path, mlflow_uri, override, field):
    p = run_cli([override, f"tracking.uri={mlflow_uri}", f"hydra.run.dir={tmp_path}/job"],
                cwd=tmp_path)
    assert p.returncode != 0
    assert field in p.stderr
    assert not any(r.info.status == "RUNNING" for r in _runs(mlflow_uri))


def test_failing_job_does_not_lose_the_others(tmp_path, mlflow_uri):
    p = run_cli(["-m", "partition.tp=1,3", f"tracking.uri={mlflow_uri}",
                 f"hydra.sweep.dir={tmp_path}/sweep"], cwd=tmp_path)
    assert p.returncode == 1
    assert "1 done, 1 failed" in p.stdout and "partition.tp" in p.stdout
    assert (tmp_path / "sweep/0/summary.json").exists()
    assert "partition.tp = 3" in (tmp_path / "sweep/1/error.txt").read_text()
    runs = _runs(mlflow_uri)
    assert not any(r.info.status == "RUNNING" for r in runs)
    parent = [r for r in runs if r.data.tags.get("simllm.role") == "sweep"][0]
    assert parent.info.status == "FAILED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.info.status for r in children) == ["FAILED", "FINISHED"]
    failed = [r for r in children if r.info.status == "FAILED"][0]
    arts = {a.path for a in MlflowClient(tracking_uri=mlflow_uri).list_artifacts(failed.info.run_id)}
    assert "error.txt" in arts and "partition.tp" in failed.data.tags["summary.error"]


def test_not_fitting_model_finishes_without_latency(tmp_path, mlflow_uri):
    p = run_cli(["model=llama_3_1_70b", "hardware=h100_sxm", "partition=tp1",
                 f"tracking.uri={mlflow_uri}", f"hydra.run.dir={tmp_path}/job"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "does not fit" in p.stdout
    (run,) = _runs(mlflow_uri)
    assert run.info.status == "FINISHED"
    assert run.data.metrics["fits_in_memory"] == 0.0
    assert "ttft_ms_p50" not in run.data.metrics and "tpot_ms_p50" not in run.data.metrics
    assert "weights" in run.data.tags["summary.memory_reason"]
