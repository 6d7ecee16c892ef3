"""simllm-bundle -> simllm-replay on a clean directory, against a real (temporary) MLflow store."""

import gzip
import json

import pytest
from mlflow.tracking import MlflowClient

from runner.tools import bundle
from runner.job import run_job


@pytest.fixture
def run_id(cfg_of, mlflow_uri, tmp_path):
    """One analytical job of the jalapeno preset (800 TFLOPS, 4 TB/s), logged to a fresh store."""
    overrides = ["experiment=jalapeno_sensitivity", "hardware.peak_bf16=800TFLOPS",
                 "hardware.hbm_bandwidth=4TB/s", f"tracking.uri={mlflow_uri}", "print_table=false"]
    run_job(cfg_of(*overrides), tmp_path / "job", overrides[:3])
    c = MlflowClient(tracking_uri=mlflow_uri)
    (run,) = c.search_runs([c.get_experiment_by_name("jalapeno_sensitivity").experiment_id])
    return run.info.run_id


def test_bundle_is_small_and_replays_bit_exact(run_id, mlflow_uri, tmp_path, capsys):
    out = tmp_path / "bundle"
    bundle.bundle_cli([run_id, "-o", str(out), "--uri", mlflow_uri])
    files = {p.name for p in out.iterdir()}
    assert files == {"bundle.yaml", "expected.json", "manifest.json", "README.md"}
    assert sum(p.stat().st_size for p in out.iterdir()) < 12_000  # a few KB without a trace
    m = json.loads((out / "manifest.json").read_text())
    assert m["run_id"] == run_id and m["engine"] == "analytical" and m["rtol"] == 0.0
    assert m["command"] == ("simllm experiment=jalapeno_sensitivity hardware.peak_bf16=800TFLOPS "
                            "hardware.hbm_bandwidth=4TB/s")
    assert m["packages"]["mlflow"] and m["git_commit"] and len(m["config_hash"]) == 16
    expected = json.loads((out / "expected.json").read_text())
    assert expected["tpot_ms_p50"] == MlflowClient(tracking_uri=mlflow_uri).get_run(
        run_id).data.metrics["tpot_ms_p50"]
    assert str(tmp_path) not in (out / "bundle.yaml").read_text()  # nothing machine-specific
    replay_dir = tmp_path / "replay"
    bundle.replay_cli([str(out), "-o", str(replay_dir)])
    assert f"OK: {len(expected)} metrics reproduced (bit-exact)" in capsys.readouterr().out
    assert (replay_dir / "summary.json").exists() and (replay_dir / "config.yaml").exists()
    got = json.loads((replay_dir / "summary.json").read_text())["summary"]
    assert got == expected
    # nothing was logged by the replay: still exactly one run in the store
    c = MlflowClient(tracking_uri=mlflow_uri)
    assert len(c.search_runs([c.get_experiment_by_name("jalapeno_sensitivity").experiment_id])) == 1


def test_tampered_bundle_fails_with_a_readable_diff(run_id, mlflow_uri, tmp_path, capsys):
    out = tmp_path / "bundle"
    bundle.make(mlflow_uri, run_id, out)
    expected = json.loads((out / "expected.json").read_text())
    true_tpot = expected["tpot_ms_p50"]
    expected["tpot_ms_p50"] = true_tpot * 1.01
    expected["bound"] = "compute"
    (out / "expected.json").write_text(json.dumps(expected))
    with pytest.raises(SystemExit) as e:
        bundle.replay_cli([str(out), "-o", str(tmp_path / "replay")])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert "2 metric(s) differ (bit-exact)" in err and "MISMATCH" in err
    line = next(ln for ln in err.splitlines() if "tpot_ms_p50" in ln)
    assert repr(true_tpot * 1.01) in line and repr(true_tpot) in line and "-9.9" in line
    assert any("bound" in ln and "'compute'" in ln and "'memory'" in ln for ln in err.splitlines())


def test_replay_refuses_a_used_output_dir(run_id, mlflow_uri, tmp_path):
    out = tmp_path / "bundle"
    bundle.make(mlflow_uri, run_id, out)
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("x")
    with pytest.raises(SystemExit, match="not empty"):
        bundle.replay(out, used)


def test_tolerance_and_diff():
    assert bundle.diff({"a": 1.0, "b": "x"}, {"a": 1.0, "b": "x"}, 0.0) == []
    assert bundle.diff({"a": 1.0}, {"a": 1.0 + 1e-12}, 0.0) == [("a", 1.0, 1.0 + 1e-12)]
    assert bundle.diff({"a": 1.0}, {"a": 1.0 + 1e-12}, 1e-9) == []
    assert bundle.diff({"a": None}, {"a": None, "c": 2.0}, 0.0) == [("c", "<absent>", 2.0)]


def test_trace_keys_and_compression(tmp_path):
    cfg = {"workload": {"trace": {"path": "data/azure.csv", "format": "csv"}, "seed": 3},
           "model": {"path": "not-a-trace"}}
    assert bundle._trace_keys(cfg) == [("workload.trace.path", "data/azure.csv")]
    assert bundle._trace_keys({"workload": {"trace": {"path": ""}}}) == []
    # the gzip round trip replay relies on
    src = tmp_path / "t.csv"
    src.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + "0.1,512,128\n" * 2000)
    with open(src, "rb") as f, gzip.open(tmp_path / "t.csv.gz", "wb", compresslevel=9) as g:
        g.write(f.read())
    assert (tmp_path / "t.csv.gz").stat().st_size < src.stat().st_size / 20
    assert gzip.decompress((tmp_path / "t.csv.gz").read_bytes()) == src.read_bytes()


def test_des_run_with_a_trace_bundles_it_compressed_and_replays(cfg_of, mlflow_uri, tmp_path, capsys):
    overrides = ["engine=des", "workload=azure_conv_2k", "workload.num_requests=100",
                 f"tracking.uri={mlflow_uri}", "tracking.experiment=des", "print_table=false"]
    run_job(cfg_of(*overrides), tmp_path / "job", overrides[:3])
    c = MlflowClient(tracking_uri=mlflow_uri)
    (run,) = c.search_runs([c.get_experiment_by_name("des").experiment_id])
    out = tmp_path / "bundle"
    bundle.make(mlflow_uri, run.info.run_id, out)
    m = json.loads((out / "manifest.json").read_text())
    (t,) = m["trace"]
    assert t["key"] == "workload.trace.path" and t["file"] == "trace/azure_conv_2k.csv.gz"
    assert m["engine"] == "des" and m["rtol"] == bundle.DEFAULT_RTOL
    assert "path: trace/azure_conv_2k.csv" in (out / "bundle.yaml").read_text()
    assert (out / t["file"]).stat().st_size < 25_000  # 38 KB of CSV, gzip -9
    rows, _ = bundle.replay(out, tmp_path / "replay")
    assert rows == []
