"""What a sweep left on the tracking server, counted from MLflow alone, and the processes of a
cluster's jobs (to kill one outright). Used by the SLURM and Ray tests and benchmarks/bench_launchers.py."""

import os
import re
import shlex
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]


def runs(uri: str, experiment: str) -> list:
    c = MlflowClient(tracking_uri=uri)
    e = c.get_experiment_by_name(experiment)
    if e is None:
        return []
    out, token = [], None
    while True:
        page = c.search_runs([e.experiment_id], max_results=200, page_token=token)   # short requests
        out += list(page)
        token = page.token
        if not token:
            return out


def ledger(uri: str, experiment: str, expected: int) -> dict:
    """Counts over the experiment's runs: job runs by status, sweep/plan parent runs by status,
    ``lost`` (grid points, by config hash, with no FINISHED run: ``expected`` minus those with
    one), ``duplicated`` (FINISHED runs beyond the first of a config hash) and ``running``
    (runs of any kind still RUNNING)."""
    rs = runs(uri, experiment)
    parents = [r for r in rs if r.data.tags.get("simllm.role") in ("sweep", "plan")]
    jobs = [r for r in rs if r not in parents]
    finished = Counter(r.data.tags.get("simllm.config_hash") for r in jobs if r.info.status == "FINISHED")
    status = Counter(r.info.status for r in jobs)
    return {"runs": len(jobs), "FINISHED": status["FINISHED"], "FAILED": status["FAILED"],
            "KILLED": status["KILLED"], "RUNNING": status["RUNNING"],
            "parents": dict(Counter(r.info.status for r in parents)),
            "lost": expected - len(finished), "duplicated": sum(n - 1 for n in finished.values()),
            "running": sum(r.info.status == "RUNNING" for r in rs)}


def counts_line(stdout: str) -> dict | None:
    """The multirun summary line ``simllm multirun: D done, F failed, S skipped`` as numbers."""
    m = re.search(r"simllm multirun: (\d+) done, (\d+) failed, (\d+) skipped", stdout)
    return None if m is None else dict(zip(("done", "failed", "skipped"), map(int, m.groups())))


def job_pids(env_key: str, env_value: str | None = None, cmd_part: str = "") -> dict[str, int]:
    """{value of ``env_key`` in the process's environment: pid} of the Python processes whose
    command line holds ``cmd_part`` (Linux /proc; root or the same user)."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if "python" not in cmd or cmd_part not in cmd:
                continue
            env = dict(kv.split("=", 1) for kv in (d / "environ").read_bytes().decode(errors="replace")
                       .split("\0") if "=" in kv)
        except OSError:
            continue
        if env_key in env and (env_value is None or env[env_key] == env_value):
            out[env[env_key]] = int(d.name)
    return out


def uploading(sweep: Path, exclude=()) -> tuple[int, int] | None:
    """(job number, pid) of a job of ``sweep`` caught in its tracking calls: its
    pending_sync.json says ``uploading`` and names the process (runner.job.track_job_dir)."""
    import json

    for marker in sweep.glob("*/pending_sync.json"):
        try:
            doc = json.loads(marker.read_text())
        except (OSError, ValueError):
            continue
        idx = marker.parent.name
        if doc.get("state") == "uploading" and idx.isdigit() and int(idx) not in exclude:
            pid = int(doc["simllm.pid"])
            if Path(f"/proc/{pid}").exists():
                return int(idx), pid
    return None


def sigkill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def cli(args: list[str], cwd: Path, env: dict | None = None, script: str = "simllm") -> subprocess.Popen:
    """Start a console script with the test's interpreter, output captured as text."""
    # the sweep's probe of the tracking server waits up to 30 s (3 s by default): a two-core CI
    # machine running the cluster's daemons can be slower than that to answer the first request
    e = dict(os.environ, SIMLLM_TRACKING_PROBE_TIMEOUT_S="30", **(env or {}))
    e.pop("MLFLOW_TRACKING_URI", None)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), e.get("PYTHONPATH")]))
    return subprocess.Popen([str(Path(sys.executable).parent / script), *args], cwd=cwd, env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def table(title: str, rows: list[tuple[str, dict]]) -> str:
    """A plain text table of ledgers (one row per phase) for the test's log: jobs (``submitted``,
    ``finished``, ``failed``, ``cancelled`` by the launcher or cluster; ``skipped`` and
    ``resumed``, i.e. run again, by a ``resume=true`` sweep), then the tracking server's runs by
    status, ``lost`` and ``duplicated`` (``ledger``)."""
    keys = ["submitted", "finished", "failed", "cancelled", "skipped", "resumed", "FINISHED", "FAILED", "KILLED",
            "RUNNING", "lost", "duplicated"]
    lines = [title, "phase".ljust(28) + "".join(k.rjust(11) for k in keys)]
    for name, row in rows:
        lines.append(name.ljust(28) + "".join(str(row.get(k, "")).rjust(11) for k in keys))
    return "\n".join(lines)


def report(capsys, text: str) -> None:
    """Print a test's log past pytest's capture, and append it to $SIMLLM_CLUSTER_LOG if set."""
    with capsys.disabled():
        print("\n" + text)
    if os.environ.get("SIMLLM_CLUSTER_LOG"):
        with open(os.environ["SIMLLM_CLUSTER_LOG"], "a") as f:
            f.write(text + "\n\n")


#: What docs/scale.md writes for the tracking server's address; the tests put the real one there.
DOC_URI = "http://mlflow-host:5000"


def doc_commands(kind: str) -> list[list[str]]:
    """The command lines of the ``<!-- cluster-commands KIND -->`` block of docs/scale.md, split as
    the shell would: the cluster tests run these (the page's commands are the tests' commands)."""
    text = (ROOT / "docs" / "scale.md").read_text()
    block = text.split(f"<!-- cluster-commands {kind} -->", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def grid_size(argv: list[str]) -> int:
    """Points of the grid's one ``range(a,b,c)`` sweep."""
    m = next(re.search(r"=range\((\d+),(\d+),(\d+)\)", a) for a in argv if "=range(" in a)
    return len(range(*map(int, m.groups())))


def grid_overrides(argv: list[str], points: int | None = None) -> list[str]:
    """The grid's own overrides of a page command ``argv`` (program and ``-m`` dropped, hydra.* and
    tracking.* left out); ``points``: its ``range(a,b,c)`` sweep cut or extended to that many
    points, 1 giving the first value alone (a single job, not a sweep)."""
    out = []
    for x in argv[2:]:
        if x.startswith(("hydra", "tracking")):
            continue
        if points is not None and "=range(" in x:
            key, rng = x.split("=", 1)
            a, _, c = map(int, rng[len("range("):-1].split(","))
            x = f"{key}={a}" if points == 1 else f"{key}=range({a},{a + c * points},{c})"
        out.append(x)
    return out


def with_points(argv: list[str], points: int) -> list[str]:
    """A page command ``argv`` whole (launcher, tracking and all) with its one ``range(a,b,c)``
    sweep cut to its first ``points`` values (at least two: a sweep)."""
    if points < 2:
        raise ValueError(f"points = {points}: expected at least 2 (a sweep)")
    if points > grid_size(argv):
        raise ValueError(f"points = {points}: expected at most the page's {grid_size(argv)}")
    cut = grid_overrides([*argv[:2], *(x for x in argv[2:] if "=range(" in x)], points)[0]
    return [cut if "=range(" in x else x for x in argv]


def with_uri(argv: list[str], uri: str) -> list[str]:
    return [a.replace(DOC_URI, uri) for a in argv]
