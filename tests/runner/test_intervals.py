"""Intervals reach the job files, the printed row, assumptions.md and MLflow (compose API, run_job,
a temp SQLite store); off means none; bad level or table fail with the key named.

The error model is a test table: ten residuals 0.00, 0.01 ... 0.09 in every regime of the
default job's metrics (analytical -> load static; vllm_v1; bf16 -> 16-bit; h100_sxm has vLLM
tables -> backend measured). By hand: c = median = 0.045, scores |r - c| sorted =
0.005, 0.005, 0.015, 0.015, ..., 0.045, 0.045; 80 %: k = ceil(11 x 0.8) = 9 -> q = 0.045, so
lo = p exp(-(c + q)) = p exp(-0.09) and hi = p exp(-(c - q)) = p."""

import json
import math

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from engine.errors import SpecError
from engine.uncertainty import fit
from runner.job import run_job

METRICS = ("ttft", "tpot", "e2e", "throughput")


@pytest.fixture
def table(tmp_path):
    regs = [{"metric": m, "stat": s, "load": "static", "framework": "vllm_v1", "precision": "16-bit",
             "backend": "measured"} for m in METRICS for s in ("center", "tail") for _ in range(10)]
    res = np.tile(np.arange(10) / 100, len(METRICS) * 2)
    return str(fit(regs, res).save(tmp_path / "t.json"))


def test_job_carries_intervals_everywhere(cfg_of, mlflow_uri, tmp_path, table, capsys):
    cfg = cfg_of(f"uncertainty.table={table}", f"tracking.uri={mlflow_uri}", "tracking.experiment=iv")
    job = tmp_path / "job"
    run_job(cfg, job, [])
    s = json.loads((job / "summary.json").read_text())["summary"]
    for k in ("ttft_ms_p50", "tpot_ms_p50", "throughput_tok_s"):
        assert s[f"{k}_lo"] == pytest.approx(s[k] * math.exp(-0.09), rel=1e-6)
        assert s[f"{k}_hi"] == pytest.approx(s[k], rel=1e-6)
    assert s["uncertainty_level"] == 0.8
    out = capsys.readouterr().out
    assert f"{s['ttft_ms_p50']:,.2f} ({s['ttft_ms_p50_lo']:,.2f}-{s['ttft_ms_p50_hi']:,.2f})" in out
    notes = (job / "assumptions.md").read_text()
    assert "10 validation rows" in notes and "metric=ttft|load=static|band=none|stat=center" in notes.replace("\\|", "|")
    c = MlflowClient(tracking_uri=mlflow_uri)
    (run,) = c.search_runs([c.get_experiment_by_name("iv").experiment_id])
    assert run.data.metrics["ttft_ms_p50_lo"] == pytest.approx(s["ttft_ms_p50_lo"])
    assert run.data.metrics["tpot_ms_p50_hi"] == pytest.approx(s["tpot_ms_p50_hi"])


def test_off_means_none(cfg_of, tmp_path, table):
    cfg = cfg_of(f"uncertainty.table={table}", "uncertainty.enabled=false", "tracking.enabled=false",
                 "print_table=false")
    run_job(cfg, tmp_path / "job", [])
    s = json.loads((tmp_path / "job" / "summary.json").read_text())["summary"]
    assert not any(k.endswith(("_lo", "_hi")) for k in s) and "uncertainty_level" not in s


@pytest.mark.parametrize("over, key", [("uncertainty.level=1.5", "uncertainty.level"),
                                       ("uncertainty.table=/nonexistent/t.json", "uncertainty.table")])
def test_bad_input_names_the_key(cfg_of, tmp_path, over, key):
    cfg = cfg_of(over, "tracking.enabled=false", "print_table=false")
    with pytest.raises(SpecError, match=key):
        run_job(cfg, tmp_path / "job", [])
    assert not (tmp_path / "job" / "summary.json").exists()
