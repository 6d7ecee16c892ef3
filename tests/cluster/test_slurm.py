"""A DES grid and a ``simllm-plan`` search through ``hydra/launcher=submitit_slurm`` on a real
single-node SLURM cluster (tests/cluster/slurm.py: one node, two CPUs), tracked on the
PostgreSQL-backed MLflow server, with faults: a running job and a pending one cancelled with
``scancel``, a running job killed with SIGKILL while it logs; then ``resume=true``.

What is asserted is counted from the MLflow server alone (tests/cluster/ledger.py): after the
resume every grid point has exactly one FINISHED run (none lost, none duplicated) and no run is
RUNNING. The expected numbers follow from the grid itself: N points (``workload.prompt_len`` 128, 160, ...,
each a distinct config hash), so N FINISHED runs, and the resume's summary reruns exactly the
points without a FINISHED run before it (its ``done`` plus ``skipped`` is N, ``skipped`` equals
the FINISHED count before the resume), as an array of that many tasks alone. The log of each
phase is printed (``pytest -s``).
"""

import importlib.util
import re
import time

import pytest

from tests.cluster import ledger as L
from tests.conftest import require_shared

pytestmark = pytest.mark.slow

#: The page's commands (docs/scale.md, "On a SLURM cluster"): pip install, the grid, the same grid
#: with resume=true, the plan search. The page's grid has 100 points (the issue's "100-job DES
#: grid"), one SLURM array task each, two at a time (two CPUs, one per task). Each job is its own
#: Python process, whose start-up (imports) is most of its cost: the DES run of 8 requests is a
#: small part of it. The resume submits only the points without a FINISHED run (the sweeper skips
#: the others before submitting: hydra_plugins/simllm_sweeper/basic.py).
PIP, PAGE_GRID_CMD, PAGE_RESUME_CMD, PLAN_CMD = L.doc_commands("slurm")
#: The test runs the page's two grid commands as written, their sweep cut to its first N points
#: (ledger.with_points; benchmarks/bench_launchers.py runs the same grid at 24 points by default).
#: Why 24 shows all that the page's 100 do: the faults hit the array's first tasks (a running and a
#: pending one at once, which two CPUs give from the third task on, and a third running one killed
#: while it logs), so every fault lands whatever N is, and after them the array's other ~20 tasks
#: still run on and log their runs while the launcher has already stopped (the page's "the array's
#: other tasks go on"); the resume then has both kinds of point: a majority FINISHED, to skip
#: before submitting, and the three the faults cost, to submit as an array of their own. Each count
#: asserted below is derived from N, so none is weaker for the smaller grid. Each task costs
#: ~3 CPU-s (start-up); the page's 100 took 180-250 s of the test's wall time on two cores.
N = 24
GRID_CMD, RESUME_CMD = (L.with_points(c, N) for c in (PAGE_GRID_CMD, PAGE_RESUME_CMD))
#: how long a phase of N jobs may take before the test gives up on it (a hang, not a speed
#: figure: generous for a loaded two-CPU machine)
PHASE_TIMEOUT_S = 600 + 15 * N
#: the grid's own overrides (no launcher, no tracking), for the Ray test and the benchmark
GRID = L.grid_overrides(GRID_CMD)


def _wait(pred, timeout_s, what, step=0.2):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _array_states(slurm):
    """{array task index: state} of the queue's array tasks."""
    return {int(j.split("_")[1]): s for j, s in slurm.jobs() if "_" in j and "[" not in j}


def _sacct(slurm, job_id: str, submitted: int = N) -> dict:
    """Array tasks by final state, from sacct, for an array of ``submitted`` tasks. A task
    cancelled while pending never leaves the array's pending record, so sacct has no line of its
    own for it: those are counted as cancelled too (``never_ran`` names them). ``accounted``:
    the task indices sacct has a line for."""
    acc = {int(k.split("_")[1]): v for k, v in slurm.accounted().items()
           if k.startswith(f"{job_id}_") and "[" not in k}
    vals = list(acc.values())
    never = sorted(set(range(submitted)) - set(acc))
    return {"submitted": submitted, "accounted": sorted(acc), "finished": vals.count("COMPLETED"),
            "failed": sum(v in ("FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT") for v in vals),
            "cancelled": vals.count("CANCELLED") + len(never), "never_ran": never}


def _settled(slurm, job_id: str, lines: int, timeout_s: float = 120) -> None:
    """Wait (at most ``timeout_s``, then go on) until sacct has a final state for ``lines`` of the
    array's tasks: slurmctld hands a task's end to slurmdbd some time after squeue stops listing
    it, and a task that ended just before the queue drained could be missing from the count (a
    grid task counted as never run, on a loaded machine)."""
    def done():
        acc = [v for k, v in slurm.accounted().items() if k.startswith(f"{job_id}_") and "[" not in k]
        return len(acc) >= lines and not {"PENDING", "RUNNING", "COMPLETING"} & set(acc)

    deadline = time.time() + timeout_s
    while not done() and time.time() < deadline:
        time.sleep(1)


def _array_id(sweep) -> str:
    """The SLURM array's job id, from submitit's folder of one of its tasks (``<array>_<task>``;
    the folder also holds ``.submission_file_<hex>.sh``, which a bare ``*_*`` matched too, and an
    array of a few tasks, as the resume's is, often listed it first)."""
    ids = _wait(lambda: [m.group(1) for p in (sweep / ".submitit").glob("*")
                         if (m := re.fullmatch(r"(\d+)_\d+", p.name))],
                120, "the submitit array folder")
    return ids[0]


def test_slurm_grid_faults_then_resume(slurm, mlflow_server, tmp_path, capsys):
    exp = "slurm_grid"
    sweep = tmp_path / "grid"
    p = L.cli([*L.with_uri(GRID_CMD[1:], mlflow_server), f"hydra.sweep.dir={sweep}"], tmp_path, slurm.env)
    t0 = time.time()
    faults = {}
    try:
        states = _wait(lambda: (lambda s: s if "RUNNING" in s.values() and "PENDING" in s.values()
                                else None)(_array_states(slurm)), 240, "running and pending array tasks")
        array = _array_id(sweep)
        running = min(i for i, s in states.items() if s == "RUNNING")
        pending = max(i for i, s in states.items() if s == "PENDING")
        slurm.cmd("scancel", f"{array}_{running}")
        slurm.cmd("scancel", f"{array}_{pending}")
        faults.update(scancel_running=running, scancel_pending=pending)

        # SIGKILL a running job's Python process, at the moment it logs its run if it can be
        # caught there (pending_sync.json is written just before the tracking calls)
        try:
            idx, pid = _wait(lambda: L.uploading(sweep, (running, pending)), 120,
                             "a job in its tracking calls", step=0.05)
        except AssertionError:
            pids = {int(i): p for i, p in L.job_pids("SLURM_ARRAY_TASK_ID", cmd_part="submitit").items()
                    if int(i) not in (running, pending)}
            assert pids, "no running job left to kill"
            idx, pid = min(pids.items())
        L.sigkill(pid)
        faults["sigkill"] = idx
        out, err = p.communicate(timeout=PHASE_TIMEOUT_S)
    finally:
        if p.poll() is None:
            p.kill()
    _wait(lambda: not slurm.jobs(), PHASE_TIMEOUT_S, "the queue to drain", step=1)   # the array outlives the launcher
    _settled(slurm, array, N - 1)   # every task but the one cancelled while pending has a record
    first = {**_sacct(slurm, array), **L.ledger(mlflow_server, exp, N), "rc": p.returncode,
             "wall_s": round(time.time() - t0, 1)}

    t1 = time.time()
    r = L.cli([*L.with_uri(RESUME_CMD[1:], mlflow_server), f"hydra.sweep.dir={tmp_path}/resume"],
              tmp_path, slurm.env)
    rout, rerr = r.communicate(timeout=PHASE_TIMEOUT_S)
    assert r.returncode == 0, rout[-3000:] + rerr[-3000:]
    resumed = L.counts_line(rout)
    array2 = _array_id(tmp_path / "resume")
    _wait(lambda: not slurm.jobs(), 120, "the queue to drain")
    # the resume submits only the points without a FINISHED run: one array task each
    unfinished = N - (first["FINISHED"] - first["duplicated"])
    _settled(slurm, array2, unfinished)
    second = {**_sacct(slurm, array2, unfinished), **L.ledger(mlflow_server, exp, N), "skipped": resumed["skipped"],
              "resumed": resumed["done"],
              "rc": r.returncode, "wall_s": round(time.time() - t1, 1)}
    log = [L.table(f"SLURM grid, {N} DES jobs (faults: {faults})",
                   [("1 grid + faults", first), ("2 resume=true", second)]),
           f"  grid launcher exit {first['rc']} in {first['wall_s']} s; its last stderr line: "
           f"{(err.strip().splitlines() or [''])[-1][:300]}",
           f"  resume exit {second['rc']} in {second['wall_s']} s; its summary: "
           f"{next(x for x in rout.splitlines() if x.startswith('simllm multirun'))}"]
    log += ["  " + x for x in rerr.splitlines() if "resume:" in x]
    for name, phase, job in (("grid", first, array), ("resume", second, array2)):
        el = slurm.elapsed_s(job)
        if el:   # where the wall time goes: the tasks' own run time vs the queue's turn-around
            log.append(f"  {name}: {len(el)} tasks ran {sum(el) / len(el):.1f} s each on average (sacct), "
                       f"{slurm.cpus} at a time; {phase['wall_s'] / N:.2f} s wall per job")
    log.append(f"  the grid, its faults and the resume: {round(time.time() - t0, 1)} s wall")
    L.report(capsys, "\n".join(log))

    # the faults took effect: the two cancelled tasks and the killed one are not COMPLETED
    assert first["cancelled"] >= 2 and first["finished"] <= N - 3, first
    assert first["never_ran"] == [pending], first
    assert first["lost"] >= 3, first   # each fault cost its point its FINISHED run
    # after the resume: nothing lost, nothing twice, nothing RUNNING
    assert second["lost"] == 0 and second["duplicated"] == 0 and second["running"] == 0, second
    assert second["FINISHED"] == N
    assert resumed["done"] + resumed["skipped"] == N and resumed["failed"] == 0
    assert resumed["skipped"] == first["FINISHED"] - first["duplicated"]
    # the finished points were skipped before submitting: the array held the others alone
    assert second["accounted"] == list(range(unfinished)) and second["finished"] == unfinished
    assert resumed["done"] == unfinished


def test_slurm_plan_search(slurm, mlflow_server, tmp_path, capsys):
    """simllm-plan with its candidate jobs on SLURM: one job per candidate (a SLURM array of two),
    each logging a child run under the plan's parent run on the server. A second search with its
    running candidate job cancelled (scancel) ends with that candidate reported failed, the other
    one found, the parent run closed and no run left RUNNING. (The log's ``lost`` for a plan
    search counts candidates without a FINISHED run.)"""
    require_shared("traces", "azure2023_conv.csv")   # experiment=capacity replays the Azure trace
    exp = "slurm_plan"
    plan = L.with_uri(PLAN_CMD[1:], mlflow_server)
    rows = []
    t0 = time.time()
    p = L.cli([*plan, "--out", str(tmp_path / "plan"), "--quiet"], tmp_path, slurm.env,
              script="simllm-plan")
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, out[-2000:] + err[-3000:]
    led = L.ledger(mlflow_server, exp, 2)
    rows.append(("1 plan search", {"submitted": 2, **led, "rc": p.returncode}))
    wall = round(time.time() - t0, 1)
    rs = L.runs(mlflow_server, exp)
    parent = [r for r in rs if r.data.tags.get("simllm.role") == "plan"]
    assert len(parent) == 1 and parent[0].info.status == "FINISHED"
    kids = {r.data.tags["mlflow.runName"]: r for r in rs
            if r.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id}
    assert set(kids) == {"plan:h100_sxm:TP1:co", "plan:h100_sxm:TP2:co"}
    assert all(r.info.status == "FINISHED" and r.data.metrics["max_rps"] > 0 for r in kids.values())
    assert (tmp_path / "plan" / "plan.md").exists()
    assert led["running"] == 0

    # the same search with one running candidate job cancelled
    exp2 = "slurm_plan_cancel"
    p = L.cli([*plan, f"tracking.experiment={exp2}", "--out", str(tmp_path / "plan2")], tmp_path, slurm.env,
              script="simllm-plan")
    try:
        job = _wait(lambda: next((j for j, s in slurm.jobs() if s == "RUNNING" and "_" in j), None), 300,
                    "a running candidate job")
        slurm.cmd("scancel", job)
        out2, err2 = p.communicate(timeout=900)
    finally:
        if p.poll() is None:
            p.kill()
    _wait(lambda: not slurm.jobs(), 300, "the queue to drain")
    led2 = L.ledger(mlflow_server, exp2, 2)
    rows.append(("2 plan, a job scancelled", {"submitted": 2, "cancelled": 1, **led2, "rc": p.returncode}))
    failed = [x for x in (tmp_path / "plan2" / "plan.csv").read_text().splitlines() if "no result (launcher exit" in x]
    L.report(capsys, "\n".join([L.table("SLURM simllm-plan (2 candidates)", rows),
                                f"  first search {wall} s; second: exit {p.returncode}, "
                                f"cancelled job {job}; its row in plan.csv: {failed[:1]}"]))
    parents = [r for r in L.runs(mlflow_server, exp2) if r.data.tags.get("simllm.role") == "plan"]
    assert p.returncode == 0 and len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert led2["running"] == 0 and led2["FINISHED"] == 1 and led2["duplicated"] == 0, led2
    assert len(failed) == 1, out2[-2000:] + err2[-3000:]


def test_page_installs_the_extra():
    """The page's ``pip install -e '.[cluster]'`` is what .ci/cluster.sh runs: the launcher is there."""
    assert PIP == ["pip", "install", "-e", ".[cluster]"]
    if importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None:
        pytest.skip("the cluster extra is not installed")
    assert "cluster" in (L.ROOT / ".ci" / "cluster.sh").read_text()
