"""Shared fixtures: Hydra compose API over the project's conf/, and a migrated MLflow SQLite store
created once per test session and copied for each test that needs a clean one."""

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.core.global_hydra import GlobalHydra

from runner.compose import compose
from runner.paths import shared_data

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"

# Every `mlflow server` the tests start (start_mlflow_server below, the cluster tests' PostgreSQL
# one) inherits this. Left on, MLflow's server-side job execution (GenAI evaluation jobs, which
# simllm never submits) starts seven more Python processes beside the web worker: on a two-core
# machine a server start then cost 15-16 CPU-s instead of 7, and it answered 10 s later.
os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
#: Small data the core tests need, shipped with the project (tests/data/README.md: sources, licenses).
DATA = Path(__file__).resolve().parent / "data"
#: External reference data (paths.shared_data: ../shared/data beside the checkout, or
#: $SIMLLM_SHARED_DATA; runner.paths resolves it). Absent in a clone alone: see ``require_shared``.
SHARED_DATA = shared_data()


def require_shared(*parts: str) -> Path:
    """A file or folder of the external data; skips the calling test, naming it, where it is absent
    (a clone without ../shared). Only tests that need the external data use this (runner.paths.
    shared_file, by contrast, only builds the path)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"external data {path} not present (../shared/data or $SIMLLM_SHARED_DATA)")
    return path


@pytest.fixture(scope="session", autouse=True)
def _registered():
    from runner import experiments, schema

    schema.register()
    experiments.register()


#: Composed configs by their overrides, once per test session (a compose costs 0.1-0.5 s; many
#: tests compose the same few): ``cfg_of`` hands out copies. Interpolations (${oc.env:...}) stay
#: unresolved in the copies, so a test that sets an environment variable still sees it.
_COMPOSED: dict = {}


@pytest.fixture
def cfg_of():
    """cfg_of(*overrides) -> composed DictConfig (compose API, no job run; a fresh copy of the
    session's one compose per override list)."""

    def _compose(*overrides):
        key = tuple(overrides)
        if key not in _COMPOSED:
            _COMPOSED[key] = compose(overrides, CONF)
        return copy.deepcopy(_COMPOSED[key])

    yield _compose
    GlobalHydra.instance().clear()


@pytest.fixture(scope="session")
def _migrated_store(tmp_path_factory) -> Path:
    """An MLflow SQLite store with all schema migrations applied (slow: done once)."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("mlflow_template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def mlflow_uri(_migrated_store, tmp_path) -> str:
    """A fresh, already-migrated SQLite tracking URI for one test."""
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    shutil.copy(_migrated_store, db)
    return f"sqlite:///{db}"


def run_cli(args, cwd, env_extra=None, timeout=300, script="simllm"):
    """Run a console script (default ``simllm``) in a subprocess; returns CompletedProcess."""
    env = dict(os.environ, **(env_extra or {}))
    env.pop("MLFLOW_TRACKING_URI", None)
    exe = Path(sys.executable).parent / script
    return subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def start_mlflow_server(backend_uri: str, artifacts: Path, port: int, log_path: Path,
                        timeout_s: float = 180) -> subprocess.Popen:
    """Start ``mlflow server`` on 127.0.0.1:``port`` (one worker, its own process group, output
    appended to ``log_path``) and wait until /health answers; fails the test if it exits or does
    not answer in ``timeout_s``."""
    import time
    import urllib.request

    log = open(log_path, "a")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "mlflow"), "server",
                             "--backend-store-uri", backend_uri, "--artifacts-destination",
                             artifacts.as_uri(), "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1"], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    log.close()
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"mlflow server exited: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                if resp.status == 200:
                    return proc
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    pytest.fail(f"mlflow server did not become healthy in {timeout_s:g} s")


def compose_specs(*overrides):
    """Engine specs of the default config with ``overrides`` (compose API, no job run)."""
    from runner.convert import specs_from_config

    key = tuple(overrides)
    if key not in _COMPOSED:
        _COMPOSED[key] = compose(overrides, CONF)
    return specs_from_config(copy.deepcopy(_COMPOSED[key]))


@pytest.fixture
def specs_with(base_specs):
    """specs_with(**workload fields) -> the package's ``base_specs`` with that WorkloadSpec
    (prompt 512 / output 128 unless given). Each test package defines ``base_specs``."""
    from dataclasses import replace

    from engine.spec import WorkloadSpec

    def _make(**wl):
        wl.setdefault("prompt_len", 512)
        wl.setdefault("output_len", 128)
        return replace(base_specs, workload=WorkloadSpec(**wl))

    return _make


# --- order of the tests and where the time went (pytest-xdist) -----------------------------------

#: pytest-xdist's units of work under ``--dist loadscope`` (a module, or a class of it) that run for
#: minutes, in the order they are handed out, before everything else (.ci/run passes
#: ``--no-loadscope-reorder``, which keeps the order set here). xdist's own order hands out the
#: scopes with the most tests first: these few-test ones came last, and one of them alone then ran
#: on for minutes after the other workers had finished. Their times: ``--scope-times``. The live
#: round trip (tests/live/test_live_cli.py: a slowed clock, little CPU) is left to the slow group
#: after them: its fit of the observed lateness wants a machine not also running the SLURM and Ray
#: grids' jobs on every core.
RUN_FIRST = (
    "tests/cluster/test_slurm.py",     # a SLURM cluster, a 24-task array, then the unfinished points
    "tests/cluster/test_ray.py",       # a Ray cluster, a third of a 24-job grid, then the rest
    "tests/calibration/test_roundtrip.py::TestPoisson50",    # the round trips: DES runs only
    "tests/calibration/test_roundtrip.py::TestClosed16",
    "tests/calibration/test_roundtrip.py::TestPoisson80",
    "tests/calibration/test_roundtrip.py::TestConcurrency1",
)


def _scope(nodeid: str) -> str:
    """A test's unit of work under ``--dist loadscope``: its class, else its module (the rule of
    pytest-xdist's LoadScopeScheduling)."""
    return nodeid.rsplit("::", 1)[0]


def pytest_collection_modifyitems(config, items):
    """Tests ordered by scope: ``RUN_FIRST`` in its order, then the modules with tests marked
    ``slow`` (end-to-end runs), then the rest; within each group the modules with the most tests
    first (xdist's own order), a module's scopes together, ties in collection order."""
    first = {s: i for i, s in enumerate(RUN_FIRST)}
    scopes: dict[str, list] = {}
    for item in items:
        scopes.setdefault(_scope(item.nodeid), []).append(item)
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    rank = {m: (1 if any(i.get_closest_marker("slow") for i in its) else 2, -len(its), n)
            for n, (m, its) in enumerate(modules.items())}

    def key(scope):
        return (0, first[scope], 0) if scope in first else rank[scope.split("::", 1)[0]]

    items[:] = [item for scope in sorted(scopes, key=key) for item in scopes[scope]]


def pytest_addoption(parser):
    parser.addoption("--scope-times", type=int, default=0, metavar="N",
                     help="after the run, list the N scopes (modules or classes: pytest-xdist's units of "
                          "work under --dist loadscope) that took longest, with their worker, CPU time, "
                          "start and end, and each worker's busy time")


_TIMES = {"on": False, "cpu": 0.0, "scopes": {}, "workers": {}}


def pytest_configure(config):
    _TIMES["on"] = bool(config.getoption("scope_times", 0))


def _cpu_s() -> float:
    """CPU seconds of this process and the child processes it has waited for."""
    import resource

    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """With ``--scope-times``: each phase's report carries the CPU seconds spent since the previous
    one (``cpu_s`` in its user properties, which pytest-xdist sends to the controller)."""
    report = yield
    if _TIMES["on"]:
        now = _cpu_s()
        report.user_properties = [*report.user_properties, ("cpu_s", now - (_TIMES["cpu"] or now))]
        _TIMES["cpu"] = now
    return report


def pytest_runtest_logreport(report):
    if not _TIMES["on"] or not report.start:
        return
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    worker = getattr(gateway, "id", "main")
    cpu = sum(v for k, v in report.user_properties if k == "cpu_s")
    for table, name in ((_TIMES["scopes"], _scope(report.nodeid)), (_TIMES["workers"], worker)):
        t = table.setdefault(name, {"wall": 0.0, "cpu": 0.0, "start": report.start, "stop": report.stop,
                                    "workers": set()})
        t["wall"] += report.duration
        t["cpu"] += cpu
        t["start"], t["stop"] = min(t["start"], report.start), max(t["stop"], report.stop)
        t["workers"].add(worker)


def pytest_terminal_summary(terminalreporter, config):
    n, scopes = config.getoption("scope_times", 0), _TIMES["scopes"]
    if not n or not scopes:
        return
    tr = terminalreporter
    t0 = min(v["start"] for v in scopes.values())
    tr.write_sep("=", f"{n} longest scopes (wall: setup + call + teardown of their tests; CPU: the "
                      f"worker's and its waited-for subprocesses', not daemons')")
    tr.write_line(f"{'wall s':>8} {'CPU s':>7}  {'worker':8} {'from..to s':>13}  scope")
    for scope, v in sorted(scopes.items(), key=lambda kv: -kv[1]["wall"])[:n]:
        tr.write_line(f"{v['wall']:8.1f} {v['cpu']:7.1f}  {','.join(sorted(v['workers'])):8} "
                      f"{v['start'] - t0:6.0f}..{v['stop'] - t0:<6.0f} {scope}")
    for w, v in sorted(_TIMES["workers"].items()):
        tr.write_line(f"worker {w}: {v['wall']:.1f} s in tests ({v['cpu']:.1f} CPU-s), its last test "
                      f"ended {v['stop'] - t0:.0f} s after the first began")
