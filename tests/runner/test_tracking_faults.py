"""The runner and its MLflow store under faults: sweeps starting together on a new SQLite store,
sweeps killed (SIGKILL, SIGTERM) at random points and resumed, a tracking server killed mid-sweep
and ``simllm-sync`` afterwards, a mistyped grid value. Each asserts 0 lost, 0 duplicated and 0
runs left RUNNING.

The expected runs are read independently of MLflow: from the job directories (each
summary.json's job_uid and config_hash) and from the grid itself (its size); the store is read
back with MlflowClient.
"""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from runner import tracking
from runner.job import PENDING
from runner.tools import sync
from tests.conftest import run_cli, start_mlflow_server

EXE = Path(sys.executable).parent


def _runs(uri: str) -> tuple[list, list]:
    """(job runs, sweep parent runs) of every experiment of the store."""
    c = MlflowClient(tracking_uri=uri)
    runs = c.search_runs([e.experiment_id for e in c.search_experiments()], max_results=50000)
    return ([r for r in runs if r.data.tags.get("simllm.role") != "sweep"],
            [r for r in runs if r.data.tags.get("simllm.role") == "sweep"])


def _uids(sweep: Path) -> dict:
    """job_uid -> config_hash of each job directory of a sweep that wrote its summary."""
    out = {}
    for d in sweep.iterdir():
        if d.name.isdigit() and (d / "summary.json").exists():
            doc = json.loads((d / "summary.json").read_text())
            out[doc["job_uid"]] = doc["config_hash"]
    return out


def _popen(args, cwd, **kw):
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.Popen([str(EXE / "simllm"), *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


def _wait_for_summaries(sweep: Path, n: int, proc, timeout=120) -> None:
    deadline = time.time() + timeout
    while len(list(sweep.glob("*/summary.json"))) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, f"fewer than {n} jobs done"
        time.sleep(0.02)


# --- 1. store creation under concurrency ---------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4])
def test_sweeps_starting_together_on_a_new_store(tmp_path, n):
    """n sweeps of 2 jobs start at once on a store that does not exist yet: the first creates and
    migrates it under the lock file, the others wait and use it. Every job of every sweep is one
    FINISHED run, every parent is FINISHED, nothing is left pending."""
    uri = f"sqlite:///{tmp_path}/store/mlflow.db"
    procs = [_popen(["-m", "hydra/sweeper=simllm", "partition.tp=1,2", f"tracking.uri={uri}",
                     f"hydra.sweep.dir={tmp_path}/s{i}", "print_table=false"], tmp_path)
             for i in range(n)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * n, outs
    assert not any("warning" in err.lower() for _, err in outs), outs
    expected = {}
    for i in range(n):
        expected.update(_uids(tmp_path / f"s{i}"))
        assert not list((tmp_path / f"s{i}").glob(f"*/{PENDING}"))
    assert len(expected) == 2 * n                      # the grids' size
    kids, parents = _runs(uri)
    by_uid = Counter(r.data.tags["simllm.job_uid"] for r in kids)
    assert set(by_uid) == set(expected) and set(by_uid.values()) == {1}     # 0 lost, 0 duplicated
    assert {r.info.status for r in kids + parents} == {"FINISHED"} and len(parents) == n
    assert (tmp_path / "store" / "mlflow.db.lock").exists()


# --- 3. no run left RUNNING ----------------------------------------------------------------------

def test_end_dead_runs_ends_only_runs_of_dead_processes_of_this_host(mlflow_uri):
    dead = subprocess.Popen(["true"])
    dead.wait()                      # a PID that no longer runs (reuse within the test: unlikely)
    c = tracking.client(mlflow_uri)
    exp = tracking.experiment_id(mlflow_uri, "simllm")
    host = socket.gethostname()
    mine = tracking.owner_tags()
    runs = {
        "dead": {tracking.HOST_TAG: host, tracking.PID_TAG: str(dead.pid)},
        "live": mine,
        "reused": {**mine, tracking.PID_START_TAG: "1"},      # this PID, but started at another time
        "elsewhere": {tracking.HOST_TAG: host + "-other", tracking.PID_TAG: str(dead.pid)},
        "untagged": {},
    }
    ids = {k: c.create_run(exp, tags=t).info.run_id for k, t in runs.items()}
    done = c.create_run(exp, tags=runs["dead"]).info.run_id
    c.set_terminated(done, "FINISHED")
    ended = tracking.end_dead_runs(mlflow_uri, exp)
    assert sorted(ended) == sorted([ids["dead"], ids["reused"]])
    status = {k: c.get_run(i).info.status for k, i in ids.items()}
    assert status == {"dead": "KILLED", "live": "RUNNING", "reused": "KILLED",
                      "elsewhere": "RUNNING", "untagged": "RUNNING"}
    assert c.get_run(done).info.status == "FINISHED"


def _kill_and_resume(tmp_path, mlflow_uri, sig, n_done, grid, launcher=()):
    """Start the sweep, send ``sig`` once ``n_done`` jobs have written their summary (plus a
    random fraction of a job), then resume=true and simllm-sync. Returns (sweep dir, the killed
    process's return code, its stderr, the store's counts right after the kill)."""
    sweep = tmp_path / "sweep"
    args = ["-m", *launcher, *grid, f"tracking.uri={mlflow_uri}", f"hydra.sweep.dir={sweep}",
            "print_table=false"]
    p = _popen(args, tmp_path)
    _wait_for_summaries(sweep, n_done, p)
    time.sleep(random.uniform(0, 0.05))
    os.killpg(p.pid, sig)
    _, err = p.communicate(timeout=120)
    kids, parents = _runs(mlflow_uri)
    after_kill = Counter(r.info.status for r in kids + parents)
    r = run_cli([*args, "resume=true"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sync.main([str(sweep)]) in (0,)
    return sweep, p.returncode, err, after_kill


def _assert_exactly_once(mlflow_uri, n_configs):
    """Every config hash of the grid has exactly one FINISHED run holding metrics; no run of the
    store (jobs and parents) is RUNNING."""
    kids, parents = _runs(mlflow_uri)
    fin = Counter(r.data.tags["simllm.config_hash"] for r in kids
                  if r.info.status == "FINISHED" and "ttft_ms_p50" in r.data.metrics)
    assert len(fin) == n_configs and set(fin.values()) == {1}, fin     # 0 lost, 0 duplicated
    assert not [r for r in kids + parents if r.info.status == "RUNNING"]


GRID = ["partition.tp=1,2", "workload.batch_size=1,2,3,4,5,6"]   # 12 configs


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume(tmp_path_factory, _migrated_store):
    """SIGKILL (nothing of the process runs) after 1..10 jobs: resume=true ends the killed
    process's runs KILLED (its PID is gone) and runs what has no FINISHED run; simllm-sync
    completes a job killed during its upload (its marker was written first)."""
    rng = random.Random(29)
    for n_done in rng.sample(range(1, 11), 3):
        tmp = tmp_path_factory.mktemp(f"kill{n_done}")
        (tmp / "store").mkdir()
        shutil.copy(_migrated_store, tmp / "store" / "mlflow.db")
        uri = f"sqlite:///{tmp}/store/mlflow.db"
        _, rc, _, _ = _kill_and_resume(tmp, uri, signal.SIGKILL, n_done, GRID, ["hydra/sweeper=simllm"])
        assert rc == -signal.SIGKILL
        _assert_exactly_once(uri, 12)


@pytest.mark.slow
def test_sigterm_ends_the_sweep_and_its_runs(tmp_path, mlflow_uri):
    """SIGTERM unwinds: a run being logged is completed, the parent ends KILLED (nothing RUNNING
    before any resume), the exit status is 128 + 15, and resume=true completes the grid."""
    _, rc, err, after = _kill_and_resume(tmp_path, mlflow_uri, signal.SIGTERM, 3, GRID,
                                         ["hydra/sweeper=simllm"])
    assert rc == 128 + signal.SIGTERM, err
    assert after["RUNNING"] == 0 and after["KILLED"] >= 1, after
    _assert_exactly_once(mlflow_uri, 12)


@pytest.mark.slow
def test_killed_joblib_sweep_leaves_no_workers(tmp_path, mlflow_uri):
    """SIGKILL of the launching process of a joblib sweep: its workers end with it (they are
    told to by the kernel: PR_SET_PDEATHSIG); resume=true then completes the grid."""
    sweep = tmp_path / "sweep"
    p = _popen(["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *GRID,
                f"tracking.uri={mlflow_uri}", f"hydra.sweep.dir={sweep}", "print_table=false"], tmp_path)
    _wait_for_summaries(sweep, 2, p, timeout=240)
    os.kill(p.pid, signal.SIGKILL)      # the launcher alone, not its process group
    p.communicate(timeout=60)
    deadline = time.time() + 30
    while True:
        left = subprocess.run(["pgrep", "-s", str(p.pid)], capture_output=True, text=True).stdout.split()
        if not left or time.time() > deadline:
            break
        time.sleep(0.5)
    for pid in left:   # do not leave them behind if the assertion fails
        os.kill(int(pid), signal.SIGKILL)
    assert left == []
    r = run_cli(["-m", *GRID, f"tracking.uri={mlflow_uri}", f"hydra.sweep.dir={sweep}",
                 "print_table=false", "resume=true", "hydra/sweeper=simllm"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sync.main([str(sweep)]) == 0
    _assert_exactly_once(mlflow_uri, 12)


@pytest.mark.slow
def test_mistyped_grid_value_is_hydras_error_and_ends_the_parent(tmp_path, mlflow_uri):
    """The batched sweeper reports a value that does not convert as the basic sweeper's compose
    does (Hydra's few lines, no traceback); the sweep's parent run ends FAILED."""
    for sweeper in ("simllm", "basic"):
        p = run_cli(["-m", f"hydra/sweeper={sweeper}", "workload.batch_size=1,x",
                     f"tracking.uri={mlflow_uri}", f"hydra.sweep.dir={tmp_path}/{sweeper}"], cwd=tmp_path)
        assert p.returncode == 1
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 8, p.stderr
        assert "Error merging override workload.batch_size=x" in p.stderr
        assert "full_key: workload.batch_size" in p.stderr
    kids, parents = _runs(mlflow_uri)
    assert kids == [] and sorted(r.info.status for r in parents) == ["FAILED", "FAILED"]


# --- 2. exactly-once sync ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def one_job(tmp_path_factory):
    """One job directory written with tracking off (its summary.json, config.yaml)."""
    tmp = tmp_path_factory.mktemp("one")
    p = run_cli(["tracking.enabled=false", f"hydra.run.dir={tmp}/job", "print_table=false"], cwd=tmp)
    assert p.returncode == 0, p.stderr
    return tmp / "job"


def _pending(job: Path, uri: str, **extra) -> Path:
    marker = job / PENDING
    marker.write_text(json.dumps({"uri": uri, "experiment": "simllm", **extra}))
    return marker


def test_finished_run_missing_metrics_is_completed_not_counted(one_job, tmp_path, mlflow_uri, capsys):
    job = shutil.copytree(one_job, tmp_path / "job")
    doc = json.loads((job / "summary.json").read_text())
    c = tracking.client(mlflow_uri)
    exp = tracking.experiment_id(mlflow_uri, "simllm")
    rid = c.create_run(exp, tags={"simllm.job_uid": doc["job_uid"]}).info.run_id
    c.set_terminated(rid, "FINISHED")           # FINISHED, but none of the job's metrics
    _pending(job, mlflow_uri)
    assert sync.main([str(job)]) == 0
    assert "1 synced, 0 already logged" in capsys.readouterr().out
    runs = c.search_runs([exp])
    assert [r.info.run_id for r in runs] == [rid] and runs[0].info.status == "FINISHED"
    assert runs[0].data.metrics["ttft_ms_p50"] == pytest.approx(doc["summary"]["ttft_ms_p50"])
    assert not (job / PENDING).exists()


def test_job_being_uploaded_by_its_live_process_is_left_to_it(one_job, tmp_path, mlflow_uri, capsys):
    """The marker a job writes before its first tracking call names its process: while it lives
    simllm-sync leaves the job alone; once it is gone (killed mid-upload) sync uploads it."""
    job = shutil.copytree(one_job, tmp_path / "job")
    _pending(job, mlflow_uri, state="uploading", **tracking.owner_tags())
    assert sync.main([str(job)]) == 0
    assert "1 job(s) being uploaded by their own running process" in capsys.readouterr().out
    assert (job / PENDING).exists()
    dead = subprocess.Popen(["true"])
    dead.wait()
    _pending(job, mlflow_uri, state="uploading",
             **{**tracking.owner_tags(), tracking.PID_TAG: str(dead.pid)})
    assert sync.main([str(job)]) == 0
    assert "1 synced" in capsys.readouterr().out and not (job / PENDING).exists()


def test_marker_is_written_before_the_first_tracking_call(one_job, tmp_path, mlflow_uri, monkeypatch):
    """A job stopped inside its upload (here: the store's create_run raises KeyboardInterrupt, as
    Ctrl-C or SIGTERM through runner.app._stop would) still has its marker, naming this process."""
    from omegaconf import OmegaConf

    from runner.job import track_job_dir

    job = shutil.copytree(one_job, tmp_path / "job")
    for k in (tracking.SWEEP_ENV, tracking.DOWN_ENV, tracking.PARENT_ENV, tracking.EXPERIMENT_ENV):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv(tracking.PROBED_ENV, mlflow_uri)

    def stopped(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(tracking, "log_job", stopped)
    with pytest.raises(KeyboardInterrupt):
        track_job_dir(OmegaConf.create({"uri": mlflow_uri, "experiment": "simllm"}), job, fresh=True)
    marker = json.loads((job / PENDING).read_text())
    assert marker["state"] == "uploading" and marker[tracking.PID_TAG] == str(os.getpid())


# --- 4. tracking server killed mid-sweep ---------------------------------------------------------

@pytest.fixture
def mlflow_server(tmp_path, _migrated_store):
    """A local `mlflow server` on a SQLite store (copied from the migrated template); yields
    (uri, start, kill): the server can be killed and started again on the same port."""
    store = tmp_path / "server"
    store.mkdir()
    shutil.copy(_migrated_store, store / "mlflow.db")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    procs = []

    def start():
        procs.append(start_mlflow_server(f"sqlite:///{store}/mlflow.db", store / "artifacts", port,
                                         store / "server.log"))

    def kill():
        os.killpg(procs[-1].pid, signal.SIGKILL)
        procs[-1].wait()

    start()
    yield uri, start, kill
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.slow
def test_server_killed_mid_sweep_then_sync(tmp_path, mlflow_server):
    """The server dies after 4 of 20 jobs: one job finds it gone and says so once, the rest write
    their markers without trying; the sweep ends 0. With the server back, simllm-sync leaves every
    job as one FINISHED child of the sweep's one parent, which ends FINISHED."""
    uri, start, kill = mlflow_server
    sweep = tmp_path / "sweep"
    p = _popen(["-m", "hydra/sweeper=simllm", "partition.tp=1,2",
                "workload.batch_size=1,2,3,4,5,6,7,8,9,10", "tracking=server", f"tracking.uri={uri}",
                f"hydra.sweep.dir={sweep}", "print_table=false"], tmp_path)
    _wait_for_summaries(sweep, 4, p)
    kill()
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    warnings = [line for line in err.splitlines() if "warning" in line.lower()]
    assert len(warnings) == 1 and "simllm-sync" in warnings[0], err
    expected = _uids(sweep)
    assert len(expected) == 20
    start()
    assert sync.main([str(sweep)]) == 0
    kids, parents = _runs(uri)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    by_uid = Counter(r.data.tags["simllm.job_uid"] for r in kids)
    assert set(by_uid) == set(expected) and set(by_uid.values()) == {1}     # 0 lost, 0 duplicated
    assert {r.info.status for r in kids} == {"FINISHED"}
    assert {r.data.tags["mlflow.parentRunId"] for r in kids} == {parents[0].info.run_id}
    assert parents[0].data.metrics["jobs_done"] == 20
    assert not list(sweep.glob(f"*/{PENDING}"))
