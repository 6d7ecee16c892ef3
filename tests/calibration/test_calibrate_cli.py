"""simllm-calibrate end to end (in process): a CSV measurement made by a noiseless DES run with
known efficiencies and overhead (0.6, 0.7, 2 ms) -> conf/calibration/NAME.yaml and noise/NAME.yaml
that the schema accepts, holding those values, the data's sha256, the error tables; an MLflow
run with the fitted parameters."""

import hashlib
import os
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from engine.des import DesSpec, simulate
from engine.spec import WorkloadSpec
from engine.spec.workload import LengthDist
from runner.tools import calibrate
from runner.schema import CalibrationSchema, NoiseSchema
from tests.calibration.conftest import NO_HOST_OVERRIDES


@pytest.fixture(scope="module")
def measured_csv(base_specs, tmp_path_factory):
    wl = WorkloadSpec(prompt_len=1024, output_len=32, num_requests=40, arrival="closed_loop", concurrency=1,
                      prompt_dist=LengthDist(kind="lognormal", sigma=0.7, low=128, high=4096), seed=2)
    cal = replace(base_specs.calibration, compute_efficiency=0.6, memory_bandwidth_efficiency=0.7,
                  step_overhead_s=0.002)
    t = simulate(replace(base_specs, workload=wl, calibration=cal), DesSpec()).result.table
    path = tmp_path_factory.mktemp("meas") / "measured.csv"
    t.select(["request_id", "prompt_len", "output_len", "ttft_ms", "tpot_ms"]).rename(
        {"prompt_len": "input_len"}).write_csv(path)
    return path


def test_cli_writes_calibration_and_mlflow_run(measured_csv, tmp_path, mlflow_uri):
    rc = calibrate.main([str(measured_csv), "--name", "fitted_test", "--concurrency", "1", "--rounds", "1",
                         "--max-nfev", "25", "--conf-dir", str(tmp_path / "conf"), "--output-dir",
                         str(tmp_path / "out"), "--tracking-uri", mlflow_uri, "calibration=specsheet",
                         *NO_HOST_OVERRIDES])   # as the measurement was made (conftest.base_specs)
    assert rc == 0
    text = (tmp_path / "conf" / "calibration" / "fitted_test.yaml").read_text()
    doc = yaml.safe_load(text)
    assert doc["compute_efficiency"] == pytest.approx(0.6, rel=0.03)
    assert doc["memory_bandwidth_efficiency"] == pytest.approx(0.7, rel=0.03)
    sha = hashlib.sha256(measured_csv.read_bytes()).hexdigest()
    # the data is named relative to the project root (os.path.relpath), never by its absolute path
    rel = os.path.relpath(measured_csv, Path(calibrate.__file__).resolve().parents[2])
    assert sha in doc["provenance"] and f"fit to {rel} (" in doc["provenance"]
    assert f" {measured_csv}" not in text
    assert "before" in text and "after" in text and "bandwidth efficiency" in text   # tables
    body = {k: v for k, v in doc.items() if k != "defaults"}
    OmegaConf.merge(OmegaConf.structured(CalibrationSchema), body)                    # schema accepts
    noise = yaml.safe_load((tmp_path / "conf" / "calibration" / "noise" / "fitted_test.yaml").read_text())
    OmegaConf.merge(OmegaConf.structured(NoiseSchema), noise)
    report = next((tmp_path / "out").glob("fitted_test-*")) / "report.md"
    text = report.read_text()
    assert "Diagnosis" in text
    # every fitted parameter printed with its 95 % range and whether the data pin it
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and " .. " in ln]
    assert len(rows) == 6 and all(ln.split("|")[-2].strip() in ("yes", "**not pinned**") for ln in rows)

    from mlflow.tracking import MlflowClient

    c = MlflowClient(tracking_uri=mlflow_uri)
    runs = c.search_runs([c.get_experiment_by_name("calibration").experiment_id])
    assert len(runs) == 1
    r = runs[0]
    assert r.data.params["data_sha256"] == sha
    assert float(r.data.params["compute_efficiency"]) == pytest.approx(0.6, rel=0.03)
    assert abs(r.data.metrics["err_after_ttft_p50"]) < 0.05
    assert {a.path for a in c.list_artifacts(r.info.run_id)} >= {"report.md", "fit.json", "fitted_test.yaml"}


def test_cli_refuses_overwrite_and_bad_file(measured_csv, tmp_path, capsys):
    (tmp_path / "conf" / "calibration").mkdir(parents=True)
    (tmp_path / "conf" / "calibration" / "x.yaml").write_text("other\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("request_id,input_len,output_len,ttft_ms,tpot_ms\n0,12,4,oops,3\n")
    assert calibrate.main([str(bad), "--name", "x", "--no-tracking", "--conf-dir", str(tmp_path / "conf")]) == 2
    err = capsys.readouterr().err
    assert "bad.csv: record 2 (line): field 'ttft_ms'" in err
