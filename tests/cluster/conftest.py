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
def slurm(request):
    _need_module("hydra_plugins.hydra_submitit_launcher", "cluster")
    request.getfixturevalue("_mlflow_server_starting")   # the server comes up while the daemons do
    try:
        with start_slurm(cpus=2) as cluster:
            yield cluster
    except ClusterUnavailable as e:
        pytest.skip(f"no SLURM cluster: {e}")


@pytest.fixture(scope="module")
def _mlflow_server_starting():
    """The PostgreSQL-backed MLflow server started in a thread: a Future of its URI. The cluster
    fixtures ask for it before they start their own daemons, so both come up at once (each mostly
    waits on processes starting)."""
    from concurrent.futures import ThreadPoolExecutor

    from benchmarks._pgserver import mlflow_postgres_server

    cm = mlflow_postgres_server()

    def start() -> str:
        server = cm.__enter__()   # on an error here the context manager has cleaned up itself
        from mlflow.tracking import MlflowClient

        try:
            MlflowClient(tracking_uri=server.uri).search_experiments()   # its first answer is the slow one
        except BaseException:
            cm.__exit__(None, None, None)
            raise
        return server.uri

    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(start)
        yield future
        try:
            future.result()
        except BaseException:     # it did not start: nothing to stop
            return
        cm.__exit__(None, None, None)


@pytest.fixture(scope="module")
def mlflow_server(_mlflow_server_starting):
    """http://127.0.0.1:PORT of an MLflow server on a throw-away PostgreSQL store."""
    try:
        return _mlflow_server_starting.result()
    except (RuntimeError, KeyError, OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"no PostgreSQL-backed MLflow server: {e}")


@pytest.fixture(scope="module")
def ray_cluster(request):
    """A local Ray cluster, docs/scale.md's two ``ray start`` commands: a head node that runs no
    tasks (``--num-cpus=0``) and one worker node of two CPUs, each started with
    ``--block`` in its own process group and stopped by signalling that group (``ray stop`` would
    stop every Ray process of the machine). Yields the head's address (host:port)."""
    _need_module("hydra_plugins.hydra_ray_launcher", "ray")
    request.getfixturevalue("_mlflow_server_starting")   # the server comes up while the nodes do
    from tests.cluster.ledger import doc_commands
    from tests.cluster.ray import RayUnavailable, start_ray

    _, head, worker, *_ = doc_commands("ray")
    try:
        with start_ray(head, worker) as address:
            yield address
    except RayUnavailable as e:
        pytest.skip(f"no Ray cluster: {e}")
