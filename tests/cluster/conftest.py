"""Fixtures of the cluster tests: the single-node SLURM cluster (tests/cluster/slurm.py), a local
Ray cluster (``ray start --head``) and the PostgreSQL-backed MLflow server (benchmarks/_pgserver.py,
the recipe of tests/runner/test_postgres.py). Each skips, naming the reason, where its packages
are missing or its daemons do not start (.ci/cluster.sh installs them)."""

import importlib.util
import subprocess
import threading

import pytest

from tests.cluster.slurm import ClusterUnavailable, start_slurm

#: Clusters and servers being stopped in the background (``_stop_later``).
_STOPPING: list[threading.Thread] = []


def _stop_later(cm, what: str) -> None:
    """Leave the exit of a started context manager (stopping a cluster's daemons or the tracking
    server: 6-15 s here, almost all of it waiting for processes to end) to a thread, so that the
    worker goes on with its next tests meanwhile; ``_stopped`` waits for it before the session
    ends. Each cluster and server has its own folder and ports, so nothing later meets it."""
    t = threading.Thread(target=cm.__exit__, args=(None, None, None), name=f"stopping {what}")
    t.start()
    _STOPPING.append(t)


@pytest.fixture(scope="session", autouse=True)
def _stopped():
    """At the session's end: every cluster and server of ``_stop_later`` stopped (joined)."""
    yield
    for t in _STOPPING:
        t.join(timeout=180)
    alive = [t.name for t in _STOPPING if t.is_alive()]
    assert not alive, f"still stopping after 180 s: {alive}"


def _need_module(name: str, extra: str):
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[{extra}]'; .ci/cluster.sh does)")


@pytest.fixture(scope="module")
def slurm(request):
    _need_module("hydra_plugins.hydra_submitit_launcher", "cluster")
    request.getfixturevalue("_mlflow_server_starting")   # the server comes up while the daemons do
    cm = start_slurm(cpus=2)
    try:
        cluster = cm.__enter__()   # on an error here the context manager has cleaned up itself
    except ClusterUnavailable as e:
        pytest.skip(f"no SLURM cluster: {e}")
    yield cluster
    _stop_later(cm, "the SLURM cluster")


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
    _stop_later(cm, "the MLflow server")


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
    cm = start_ray(head, worker)
    try:
        address = cm.__enter__()   # on an error here the context manager has cleaned up itself
    except RayUnavailable as e:
        pytest.skip(f"no Ray cluster: {e}")
    yield address
    _stop_later(cm, "the Ray cluster")
