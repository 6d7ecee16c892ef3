"""``resume=true`` skips the finished points in the launching process (the default sweeper,
hydra_plugins/simllm_sweeper/basic.py): the launcher is handed only the points without a
FINISHED run.

A grid of 6 points (partition.tp x workload.batch_size, each a distinct config hash) runs with
the joblib launcher on a temp SQLite store; then one point's run is deleted and another's is
marked KILLED (what ``resume=true`` makes of a run whose process died). The expected numbers
follow from that alone: the resume launches exactly those 2 points (Hydra's run_job writes
``.hydra/config.yaml`` into the folder of every job it launches, so the folders holding one are
the launched jobs), the other 4 are skipped without being launched (``skipped.json`` only), the
summary reads 2 done, 0 failed, 4 skipped, and afterwards every point has exactly one FINISHED
run. The resume runs in batches of 4 (``hydra.sweeper.max_batch_size``): the job numbers stay
0..5, each once, as the skipped ones take the numbers after the launched ones of their batch.
"""

import json

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli

pytestmark = pytest.mark.slow   # two sweeps through the console script, like tests/runner/test_scale.py

TP, BATCH = ("1", "2", "4"), ("1", "8")
GRID = [f"partition.tp={','.join(TP)}", f"workload.batch_size={','.join(BATCH)}"]
POINTS = {(tp, b) for tp in TP for b in BATCH}


def _point(overrides) -> tuple[str, str]:
    o = dict(str(x).partition("=")[::2] for x in overrides)
    return o["partition.tp"], o["workload.batch_size"]


def _runs(uri: str) -> list:
    c = MlflowClient(tracking_uri=uri)
    exp = c.get_experiment_by_name("simllm")
    return [r for r in c.search_runs([exp.experiment_id], max_results=1000)
            if r.data.tags.get("simllm.role") != "sweep"]


def test_resume_launches_only_unfinished_points(tmp_path, mlflow_uri):
    base = ["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *GRID,
            f"tracking.uri={mlflow_uri}", "print_table=false"]
    p = run_cli([*base, f"hydra.sweep.dir={tmp_path}/grid"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "6 done, 0 failed, 0 skipped" in p.stdout
    runs = {(r.data.params["partition.tp"], r.data.params["workload.batch_size"]): r for r in _runs(mlflow_uri)}
    assert set(runs) == POINTS

    client = MlflowClient(tracking_uri=mlflow_uri)
    deleted, killed = ("2", "8"), ("4", "1")
    client.delete_run(runs[deleted].info.run_id)
    client.set_terminated(runs[killed].info.run_id, "KILLED")
    unfinished = {deleted, killed}

    r = run_cli([*base, "resume=true", "hydra.sweeper.max_batch_size=4",
                 f"hydra.sweep.dir={tmp_path}/resume"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 done, 0 failed, 4 skipped" in r.stdout

    jobs = {int(d.name): d for d in (tmp_path / "resume").iterdir() if d.is_dir() and d.name.isdigit()}
    assert sorted(jobs) == list(range(6))
    launched = {n for n, d in jobs.items() if (d / ".hydra" / "config.yaml").exists()}
    skipped = {n for n, d in jobs.items() if (d / "skipped.json").exists()}
    assert len(launched) == 2 and len(skipped) == 4 and not launched & skipped
    # batch 1 (points 0-3: tp=1 b=1,8, tp=2 b=1,8): tp=2 b=8 launched as job 0, the rest 1-3;
    # batch 2 (tp=4 b=1,8): tp=4 b=1 launched as job 4, tp=4 b=8 skipped as job 5
    assert launched == {0, 4} and skipped == {1, 2, 3, 5}
    ran = {_point(json.loads((jobs[n] / "summary.json").read_text())["overrides"]) for n in launched}
    assert ran == unfinished
    finished = {r.data.tags["simllm.config_hash"]: _point(r.data.tags["simllm.overrides"].split())
                for r in _runs(mlflow_uri) if r.info.status == "FINISHED"}
    for n in skipped:
        doc = json.loads((jobs[n] / "skipped.json").read_text())
        # the hash computed before launching is the one the point's own job recorded
        assert finished[doc["config_hash"]] == _point(doc["overrides"])
        assert doc["overrides"] == yaml.safe_load((jobs[n] / ".hydra" / "overrides.yaml").read_text())
    assert {_point(doc) for doc in (json.loads((jobs[n] / "skipped.json").read_text())["overrides"]
                                    for n in skipped)} == POINTS - unfinished

    after = _runs(mlflow_uri)
    per_point = {pt: sum(1 for x in after if x.info.status == "FINISHED"
                         and (x.data.params["partition.tp"], x.data.params["workload.batch_size"]) == pt)
                 for pt in POINTS}
    assert per_point == {pt: 1 for pt in POINTS}
    assert not any(x.info.status == "RUNNING" for x in after)
