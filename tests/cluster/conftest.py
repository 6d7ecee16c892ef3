"""Fixtures of the cluster tests: the single-node SLURM cluster (tests/cluster/slurm.py), a local
Ray cluster (``ray start --head``) and the PostgreSQL-backed MLflow server (benchmarks/_pgserver.py,
the recipe of tests/runner/test_postgres.py). Each skips, naming the reason, where its packages
are missing or its daemons do not start (.ci/cluster.sh installs them)."""

import importlib.util
import subprocess

import pytest

from tests.cluster.slurm import ClusterUnavailable, start_slurm


def _need_module(name: str, extra: str):
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[{extra}]'; .ci/cluster.sh does)")


@pytest.fixture(scope="module")
def slurm():
    _need_module("hydra_plugins.hydra_submitit_launcher", "cluster")
    try:
        with start_slurm(cpus=2) as cluster:
            yield cluster
    except ClusterUnavailable as e:
        pytest.skip(f"no SLURM cluster: {e}")


@pytest.fixture(scope="module")
def mlflow_server():
    """http://127.0.0.1:PORT of an MLflow server on a throw-away PostgreSQL store."""
    from benchmarks._pgserver import mlflow_postgres_server

    try:
        cm = mlflow_postgres_server()
        server = cm.__enter__()
    except (RuntimeError, KeyError, OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"no PostgreSQL-backed MLflow server: {e}")
    try:
        yield server.uri
    finally:
        cm.__exit__(None, None, None)
