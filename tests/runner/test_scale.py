"""Runner at scale and under faults: parallel launcher, tracking down + sync, resume."""

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli

pytestmark = pytest.mark.slow


def _children(uri, exp="simllm"):
    c = MlflowClient(tracking_uri=uri)
    e = c.get_experiment_by_name(exp)
    runs = [] if e is None else c.search_runs([e.experiment_id], max_results=1000)
    return [r for r in runs if r.data.tags.get("simllm.role") != "sweep"], runs


def test_joblib_six_jobs_all_finished(tmp_path, mlflow_uri):
    p = run_cli(["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                 "hardware=h100_sxm,h200,b200", "partition.tp=1,2", f"tracking.uri={mlflow_uri}",
                 f"hydra.sweep.dir={tmp_path}/sweep", "print_table=false"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    children, runs = _children(mlflow_uri)
    assert len(children) == 6 and len(runs) == 7
    assert all(r.info.status == "FINISHED" for r in runs)
    assert len({r.data.tags["simllm.config_hash"] for r in children}) == 6
    parent = [r for r in runs if r.data.tags.get("simllm.role") == "sweep"][0]
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in children)


def test_tracking_down_then_sync_once(tmp_path, mlflow_uri):
    # nothing listens on port 9 (discard): every MLflow call fails fast
    env = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "2"}
    p = run_cli(["tracking.uri=http://127.0.0.1:9", f"hydra.run.dir={tmp_path}/job"], cwd=tmp_path,
                env_extra=env)
    assert p.returncode == 0, p.stderr
    assert "simllm-sync" in p.stderr and "TTFT ms" in p.stdout
    assert (tmp_path / "job/summary.json").exists() and (tmp_path / "job/pending_sync.json").exists()
    exe = ["--uri", mlflow_uri]
    for _ in range(2):  # idempotent: the second sync finds nothing new to log
        s = run_cli([str(tmp_path / "job"), *exe], cwd=tmp_path, script="simllm-sync")
        assert s.returncode == 0, s.stderr
    children, _ = _children(mlflow_uri)
    assert len(children) == 1 and children[0].info.status == "FINISHED"
    assert not (tmp_path / "job/pending_sync.json").exists()
    # a marker that comes back (e.g. a crash after logging) does not duplicate the run
    (tmp_path / "job/pending_sync.json").write_text(
        f'{{"uri": "{mlflow_uri}", "experiment": "simllm", "error": "x"}}')
    s = run_cli([str(tmp_path / "job")], cwd=tmp_path, script="simllm-sync")
    assert s.returncode == 0
    assert len(_children(mlflow_uri)[0]) == 1


def test_resume_skips_finished(tmp_path, mlflow_uri):
    base = [f"tracking.uri={mlflow_uri}", "print_table=false"]
    p = run_cli(["-m", "partition.tp=1,2", *base, f"hydra.sweep.dir={tmp_path}/a"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = run_cli(["-m", "partition.tp=1,2,4", "resume=true", *base, f"hydra.sweep.dir={tmp_path}/b"],
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "1 done, 0 failed, 2 skipped" in p.stdout
    children, _ = _children(mlflow_uri)
    assert sorted(r.data.params["partition.tp"] for r in children) == ["1", "2", "4"]


def test_submitit_local_launcher(tmp_path, mlflow_uri):
    """The cluster path (submitit) on one machine: jobs run in separate processes."""
    p = run_cli(["-m", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=5",
                 "hardware=h100_sxm,h200", f"tracking.uri={mlflow_uri}", "print_table=false",
                 f"hydra.sweep.dir={tmp_path}/sweep"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    children, runs = _children(mlflow_uri)
    assert len(children) == 2 and all(r.info.status == "FINISHED" for r in runs)


def test_batched_sweeper_matches_basic_path(tmp_path, mlflow_uri):
    """hydra/sweeper=simllm gives the same jobs, files, metrics and config hashes as the basic
    sweeper, and still isolates a failing job (partition.tp=3)."""
    import json

    grid = ["hardware=h100_sxm,h200", "partition.tp=1,2,3", "workload.batch_size=1,8",
            "hardware.hbm_bandwidth=3TB/s", f"tracking.uri={mlflow_uri}", "print_table=false"]
    a = run_cli(["-m", *grid, f"hydra.sweep.dir={tmp_path}/basic"], cwd=tmp_path)
    b = run_cli(["-m", "hydra/sweeper=simllm", *grid, f"hydra.sweep.dir={tmp_path}/fast"],
                cwd=tmp_path)
    assert a.returncode == b.returncode == 1  # the tp=3 jobs fail in both
    assert "8 done, 4 failed" in a.stdout and "8 done, 4 failed" in b.stdout

    def jobs(d):
        out = {}
        for sub in (tmp_path / d).iterdir():
            if (sub / "summary.json").exists():
                doc = json.loads((sub / "summary.json").read_text())
                out[tuple(sorted(doc["overrides"]))] = (doc["config_hash"], doc["summary"])
        return out

    basic, fast = jobs("basic"), jobs("fast")
    assert basic.keys() == fast.keys() and len(basic) == 12
    for k in basic:
        assert basic[k] == fast[k]
    children, runs = _children(mlflow_uri)
    assert sum(r.info.status == "FINISHED" for r in children) == 16
    assert sum(r.info.status == "FAILED" for r in children) == 8
