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
