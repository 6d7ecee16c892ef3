"""The DES grid of tests/cluster/test_slurm.py through ``hydra/launcher=ray`` on a local Ray
cluster (tests/cluster/ray.py: ``ray start --head`` and one worker node of two CPUs), tracked on
the PostgreSQL-backed MLflow server, in the project's own environment (the ``ray`` extra: the Ray
launcher beside the joblib one). Faults: a task's worker process killed with SIGKILL while it
logs its run, then the launching process itself killed with SIGKILL mid-grid (its tasks die with
it: Ray ends the tasks of a driver that is gone); then ``resume=true``.

Asserted from the MLflow server alone (tests/cluster/ledger.py): after the resume each of the N
grid points has exactly one FINISHED run, none is lost or duplicated and none is RUNNING; the
resume's summary reruns exactly the points without a FINISHED run (done + skipped = N, skipped =
the FINISHED count before it), and only those are launched as Ray tasks. The joblib launcher runs a grid in the same environment too.
"""

import os
import signal
import time
from pathlib import Path

import pytest

from tests.cluster import ledger as L
from tests.cluster.test_slurm import GRID, N, _wait

#: The page's commands (docs/scale.md, "On a Ray cluster"): pip install, the head, the worker node,
#: the grid, the same grid with resume=true. The fixture starts the nodes (tests/cluster/ray.py).
PIP, HEAD, WORKER, PAGE_GRID_CMD, PAGE_RESUME_CMD = L.doc_commands("ray")
DOC_ADDRESS = "127.0.0.1:6379"
#: The page's grid (100 points, as the SLURM page's) cut to the SLURM test's N points
#: (ledger.with_points; why N is enough: tests/cluster/test_slurm.py). Here the worker is killed
#: in the grid's first jobs and the launcher once a third of the grid (8 points) is FINISHED, so
#: the resume again has both kinds of point: FINISHED ones to skip, the other two thirds to run.
GRID_CMD, RESUME_CMD = (L.with_points(c, N) for c in (PAGE_GRID_CMD, PAGE_RESUME_CMD))

pytestmark = pytest.mark.slow


def _cmd(argv, address, uri):
    return [x.replace(DOC_ADDRESS, address) for x in L.with_uri(argv[1:], uri)]


def _busy() -> list[int]:
    """Ray worker processes running a Hydra job now (their process title is ``ray::_run_job``)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "cmdline").read_bytes().startswith(b"ray::_run_job"):
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def test_ray_grid_faults_then_resume(ray_cluster, mlflow_server, tmp_path, capsys):
    exp = "ray_grid"
    sweep = tmp_path / "grid"
    t0 = time.time()
    p = L.cli([*_cmd(GRID_CMD, ray_cluster, mlflow_server), f"hydra.sweep.dir={sweep}"], tmp_path)
    faults = {}
    try:
        try:
            idx, pid = _wait(lambda: L.uploading(sweep), 300, "a job in its tracking calls", step=0.05)
        except AssertionError:
            pid = _wait(_busy, 60, "a busy Ray worker")[0]
            idx = "?"
        os.kill(pid, signal.SIGKILL)
        faults["sigkill_worker"] = idx
        # the driver dies once a third of the grid is in MLflow
        _wait(lambda: L.ledger(mlflow_server, exp, N)["FINISHED"] >= N // 3, 600, "a third of the grid")
        p.send_signal(signal.SIGKILL)
        faults["sigkill_launcher"] = f"after {L.ledger(mlflow_server, exp, N)['FINISHED']} FINISHED"
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    time.sleep(3)
    _wait(lambda: not _busy(), 120, "the driver's tasks to end")
    done_dirs = sum((sweep / str(i) / "summary.json").exists() for i in range(N))
    first = {"submitted": N, "finished": done_dirs, **L.ledger(mlflow_server, exp, N), "rc": p.returncode,
             "wall_s": round(time.time() - t0, 1)}

    t1 = time.time()
    r = L.cli([*_cmd(RESUME_CMD, ray_cluster, mlflow_server), f"hydra.sweep.dir={tmp_path}/resume"],
              tmp_path)
    rout, rerr = r.communicate(timeout=900)
    assert r.returncode == 0, rout[-3000:] + rerr[-3000:]
    resumed = L.counts_line(rout)
    # the jobs the launcher ran: Hydra's run_job writes .hydra/config.yaml into each job's folder
    # (on the worker node); a point skipped before launching has skipped.json alone
    jobs = [d for d in (tmp_path / "resume").iterdir() if d.is_dir() and d.name.isdigit()]
    launched = sum((d / ".hydra" / "config.yaml").exists() for d in jobs)
    unfinished = N - (first["FINISHED"] - first["duplicated"])
    second = {"submitted": launched, "finished": resumed["done"], "skipped": resumed["skipped"], "resumed": resumed["done"],
              "failed": resumed["failed"], **L.ledger(mlflow_server, exp, N), "rc": r.returncode,
              "wall_s": round(time.time() - t1, 1)}
    log = [L.table(f"Ray grid, {N} DES jobs (faults: {faults})",
                   [("1 grid + faults", first), ("2 resume=true", second)]),
           f"  grid launcher exit {first['rc']} (SIGKILL) after {first['wall_s']} s",
           f"  resume exit {second['rc']} in {second['wall_s']} s; its summary: "
           f"{next(x for x in rout.splitlines() if x.startswith('simllm multirun'))}"]
    log += ["  " + x for x in rerr.splitlines() if "resume:" in x]
    L.report(capsys, "\n".join(log))

    assert first["rc"] == -signal.SIGKILL
    assert first["lost"] >= 1, first     # the launcher died before the grid's end
    assert second["lost"] == 0 and second["duplicated"] == 0 and second["running"] == 0, second
    assert second["FINISHED"] == N
    assert resumed["done"] + resumed["skipped"] == N and resumed["failed"] == 0
    assert resumed["skipped"] == first["FINISHED"] - first["duplicated"]
    # the finished points were skipped before launching: Ray ran the others alone
    assert len(jobs) == N and launched == unfinished == resumed["done"]
    # every job run of the resume is a child of its sweep's parent run (the jobs ran on the
    # worker node, not in the launching process: the sweep's settings reached them)
    rs = L.runs(mlflow_server, exp)
    parent = [x for x in rs if x.data.tags.get("simllm.role") == "sweep"
              and x.data.tags.get("simllm.sweep_id") == str(tmp_path / "resume")]
    assert len(parent) == 1 and parent[0].info.status == "FINISHED"
    kids = [x for x in rs if x.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id]
    assert len(kids) == resumed["done"]


def test_joblib_grid_in_the_same_environment(tmp_path, mlflow_uri):
    """The joblib launcher in the environment that holds the Ray launcher (the ``ray`` extra
    pins joblib below 1.6 and cloudpickle below 3): two parallel DES jobs, both FINISHED."""
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    p = L.cli(["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *GRID[:2],
               "workload.prompt_len=128,160", "print_table=false", f"tracking.uri={mlflow_uri}",
               f"hydra.sweep.dir={tmp_path}/sweep"], tmp_path)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    assert L.counts_line(out) == {"done": 2, "failed": 0, "skipped": 0}
    led = L.ledger(mlflow_uri, "simllm", 2)
    assert led["FINISHED"] == 2 and led["lost"] == 0 and led["running"] == 0


def test_page_installs_the_extra():
    """The page's ``pip install -e '.[ray]'`` is what .ci/cluster.sh runs; both launchers import."""
    assert PIP == ["pip", "install", "-e", ".[ray]"]
    assert "ray" in (L.ROOT / ".ci" / "cluster.sh").read_text()
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    import hydra_plugins.hydra_joblib_launcher  # noqa: F401
    import joblib

    assert tuple(map(int, joblib.__version__.split(".")[:2])) < (1, 6)
