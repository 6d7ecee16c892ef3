"""Tracking store away: one quick probe per sweep, pending markers at once, one warning; a store
that dies mid-sweep is tried by one job only; ``simllm-sync`` afterwards recreates the sweep's
parent run with its children, and counts only FINISHED runs as logged.

Nothing listens on 127.0.0.1:9 (the discard port): a connection there is refused at once. The
expected numbers are read independently from the job directories (summary.json, overrides.yaml)
and compared with what the MLflow store holds.
"""

import json
import shutil
import time
from pathlib import Path

import polars as pl
import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from runner import tracking
from runner.job import PENDING, track_job_dir
from runner.tools import sync
from tests.conftest import run_cli

DEAD = "http://127.0.0.1:9"
GRID = ["partition.tp=1,2", "workload.batch_size=1,8"]


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "warning" in line.lower()]


@pytest.fixture(scope="module")
def down_sweep(tmp_path_factory):
    """A 4-job basic sweep run against the dead URI (once for the module); (dir, process, wall s)."""
    tmp = tmp_path_factory.mktemp("down")
    t0 = time.perf_counter()
    p = run_cli(["-m", *GRID, f"tracking.uri={DEAD}", f"hydra.sweep.dir={tmp}/sweep",
                 "print_table=false"], cwd=tmp)
    return tmp / "sweep", p, time.perf_counter() - t0


def _copy(sweep: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "sweep"
    shutil.copytree(sweep, dst)
    return dst


def test_probe_is_quick_and_names_the_error(mlflow_uri):
    t0 = time.perf_counter()
    reason = tracking.probe(DEAD)
    assert reason and "refused" in reason.lower() and time.perf_counter() - t0 < 2
    assert tracking.probe(mlflow_uri) is None


def test_marker_is_left_once_and_read_by_later_jobs(tmp_path, monkeypatch):
    monkeypatch.setenv(tracking.SWEEP_ENV, str(tmp_path))
    monkeypatch.delenv(tracking.DOWN_ENV, raising=False)
    assert tracking.first_report(ValueError("param too long")) is True  # said, per job; no marker
    assert not (tmp_path / tracking.DOWN_MARKER).exists()
    monkeypatch.setenv(tracking.PROBED_ENV, DEAD)
    assert tracking.down_reason(DEAD) is None
    err = OSError("HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded")
    assert tracking.first_report(err, DEAD) is True                    # first job: says so
    assert tracking.first_report(err, DEAD) is False                   # the next ones: silent
    down = tracking.down_reason(DEAD)
    assert down is not None and down.announced and "Max retries" in str(down)


@pytest.mark.slow
def test_sweep_against_dead_uri_is_quick_pending_and_warns_once(down_sweep):
    sweep, p, wall = down_sweep
    assert p.returncode == 0, p.stderr
    # MLflow's default retries waited ~2-4 minutes per job here; the sweep's probe fails in ~ms
    assert wall < 120, wall
    jobs = sorted(d for d in sweep.iterdir() if d.name.isdigit())
    assert len(jobs) == 4
    for d in jobs:
        assert (d / "summary.json").exists() and (d / PENDING).exists()
        assert json.loads((d / PENDING).read_text())["uri"] == DEAD
    warns = _warnings(p.stderr)
    assert len(warns) == 1 and DEAD in warns[0] and "simllm-sync" in warns[0], p.stderr
    assert "4 job(s) not yet in MLflow" in p.stdout
    assert not (sweep / tracking.DOWN_MARKER).exists()   # cleared at the sweep's end
    table = pl.read_parquet(sweep / "sweep_table.parquet")
    assert table.height == 4 and (sweep / "sweep_latency.png").exists()


@pytest.mark.slow
@pytest.mark.parametrize("launcher", [["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
                                      ["hydra/sweeper=simllm"]], ids=["joblib", "batched"])
def test_other_launchers_also_fall_back_at_once(tmp_path, launcher):
    p = run_cli(["-m", *launcher, *GRID, f"tracking.uri={DEAD}", f"hydra.sweep.dir={tmp_path}/s",
                 "print_table=false"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    jobs = [d for d in (tmp_path / "s").iterdir() if d.name.isdigit()]
    assert len(jobs) == 4 and all((d / PENDING).exists() for d in jobs)
    assert len(_warnings(p.stderr)) == 1, p.stderr


@pytest.mark.slow
def test_store_dying_mid_sweep_is_tried_by_one_job_only(down_sweep, tmp_path, monkeypatch, capsys):
    """The sweep's probe had reached the store (PROBED_ENV), then it went away: the first job
    waits for MLflow's bounded retries and leaves the marker; the next job does not try."""
    sweep = _copy(down_sweep[0], tmp_path)
    for k in (tracking.DOWN_ENV, tracking.PARENT_ENV):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv(tracking.SWEEP_ENV, str(sweep))
    monkeypatch.setenv(tracking.PROBED_ENV, DEAD)
    monkeypatch.setenv(tracking.EXPERIMENT_ENV, "1")
    cfg = OmegaConf.create({"uri": DEAD, "experiment": "simllm"})
    times = []
    for n in ("0", "1"):
        (sweep / n / PENDING).unlink()
        t0 = time.perf_counter()
        assert track_job_dir(cfg, sweep / n, fresh=True) is None
        times.append(time.perf_counter() - t0)
        assert (sweep / n / PENDING).exists()
    assert (sweep / tracking.DOWN_MARKER).exists()
    assert times[0] < 30 and times[1] < 1, times     # bounded retries, then none at all
    assert len(_warnings(capsys.readouterr().err)) == 1


@pytest.mark.slow
def test_sync_recreates_parent_and_children(down_sweep, tmp_path, mlflow_uri, capsys):
    sweep = _copy(down_sweep[0], tmp_path)
    assert sync.main([str(sweep), "--uri", mlflow_uri]) == 0
    assert "4 synced" in capsys.readouterr().out
    c = MlflowClient(tracking_uri=mlflow_uri)
    runs = c.search_runs([c.get_experiment_by_name("simllm").experiment_id])
    parents = [r for r in runs if r.data.tags.get("simllm.role") == "sweep"]
    kids = [r for r in runs if r.data.tags.get("simllm.role") != "sweep"]
    assert len(parents) == 1 and len(kids) == 4
    pid = parents[0].info.run_id
    assert all(r.data.tags["mlflow.parentRunId"] == pid for r in kids)
    assert all(r.info.status == "FINISHED" for r in runs)
    assert not any((d / PENDING).exists() for d in sweep.iterdir() if d.is_dir())
    # each child holds its job's numbers (read from the job's own summary.json)
    by_uid = {r.data.tags["simllm.job_uid"]: r for r in kids}
    for d in (sweep / n for n in "0123"):
        doc = json.loads((d / "summary.json").read_text())
        assert by_uid[doc["job_uid"]].data.metrics["ttft_ms_p50"] == pytest.approx(doc["summary"]["ttft_ms_p50"])
    # the parent: counts, the sweep's overrides as given on the command line, table and plot
    p = parents[0].data
    assert p.metrics["jobs_done"] == 4 and p.metrics["jobs_failed"] == 0 and p.metrics["jobs_total"] == 4
    assert p.params["sweep.partition.tp"] == "1,2" and p.params["sweep.workload.batch_size"] == "1,8"
    arts = {a.path for a in c.list_artifacts(pid)}
    assert {"sweep_table.parquet", "sweep_table.csv", "sweep_latency.png"} <= arts
    table = pl.read_parquet(c.download_artifacts(pid, "sweep_table.parquet", str(tmp_path / "dl")))
    want = {json.loads((sweep / str(r["job"]) / "summary.json").read_text())["summary"]["tpot_ms_p50"]
            for r in table.iter_rows(named=True)}
    assert set(table["tpot_ms_p50"].to_list()) == want and table.height == 4
    # idempotent: a second sync finds nothing; a restored marker is "already logged", no new run
    assert sync.main([str(sweep), "--uri", mlflow_uri]) == 0
    (sweep / "0" / PENDING).write_text(json.dumps({"uri": mlflow_uri, "experiment": "simllm"}))
    assert sync.main([str(sweep)]) == 0
    assert "1 already logged" in capsys.readouterr().out
    assert len(c.search_runs([c.get_experiment_by_name("simllm").experiment_id])) == 5


def _job_with_run(down_sweep, tmp_path, mlflow_uri, status):
    """A pending job dir (its sweep dir copied) and a run with its job_uid left ``status``."""
    sweep = _copy(down_sweep[0], tmp_path)
    for n in "123":
        shutil.rmtree(sweep / n)
    job = sweep / "0"
    uid = json.loads((job / "summary.json").read_text())["job_uid"]
    c = MlflowClient(tracking_uri=mlflow_uri)
    exp = tracking.experiment_id(mlflow_uri, "simllm")
    run = c.create_run(exp, tags={"simllm.job_uid": uid, "simllm.sweep_id":
                                  json.loads((job / "summary.json").read_text())["sweep_id"]})
    if status != "RUNNING":
        c.set_terminated(run.info.run_id, status=status)
    return sweep, job, run.info.run_id, c, exp


@pytest.mark.slow
@pytest.mark.parametrize("status", ["FAILED", "RUNNING"])
def test_failed_or_running_run_is_not_counted_as_synced(down_sweep, tmp_path, mlflow_uri, capsys, status):
    sweep, job, rid, c, exp = _job_with_run(down_sweep, tmp_path, mlflow_uri, status)
    assert sync.main([str(sweep), "--uri", mlflow_uri]) == 0
    out = capsys.readouterr().out
    assert "0 already logged" in out and "1 synced" in out
    # the broken run was completed in place: FINISHED, with the job's metrics; no second run
    runs = [r for r in c.search_runs([exp]) if r.data.tags.get("simllm.role") != "sweep"]
    assert [r.info.run_id for r in runs] == [rid]
    assert runs[0].info.status == "FINISHED" and "ttft_ms_p50" in runs[0].data.metrics
    assert not (job / PENDING).exists()


@pytest.mark.slow
def test_marker_stays_when_completing_the_run_fails(down_sweep, tmp_path, mlflow_uri, capsys, monkeypatch):
    sweep, job, rid, c, exp = _job_with_run(down_sweep, tmp_path, mlflow_uri, "FAILED")

    def broken(*a, **k):
        raise ConnectionError("upload broke off")

    monkeypatch.setattr(tracking, "log_run", broken)
    assert sync.main([str(sweep), "--uri", mlflow_uri]) == 1
    cap = capsys.readouterr()
    assert "0 synced, 0 already logged, 1 still pending" in cap.out and "upload broke off" in cap.err
    assert (job / PENDING).exists()
    assert "upload broke off" in json.loads((job / PENDING).read_text())["error"]
    assert c.get_run(rid).info.status == "FAILED"


def test_sync_bad_directory_is_one_line_exit_2(tmp_path, capsys):
    assert sync.main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0] and "no such directory" in err[0]


@pytest.mark.slow
def test_single_run_against_dead_uri_warns_once(tmp_path):
    t0 = time.perf_counter()
    p = run_cli([f"tracking.uri={DEAD}", f"hydra.run.dir={tmp_path}/job"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert time.perf_counter() - t0 < 60 and (tmp_path / "job" / PENDING).exists()
    assert len(_warnings(p.stderr)) == 1 and "simllm-sync" in p.stderr
