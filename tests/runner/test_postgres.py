"""Round trip through a real MLflow tracking server on a PostgreSQL backend store.

Starts a throw-away PostgreSQL cluster (initdb in a temp dir, loopback only) and `mlflow server`
on it, runs a small multirun with tracking=server against it and reads the runs back. Skipped,
with the reason printed, only where PostgreSQL is not installed or cannot start (.ci/run installs
it from the distribution's packages).
"""

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import run_cli, start_mlflow_server

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@pytest.fixture
def postgres(tmp_path):
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL is not installed (initdb/pg_ctl not found); .ci/run installs it")
    as_user = []
    if os.geteuid() == 0:  # postgres refuses to run as root: use the distribution's user
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server")
        as_user = ["runuser", "-u", "postgres", "--"]
    # outside pytest's tmp tree: its parents are private to root, and postgres must reach it
    data = Path(tempfile.mkdtemp(prefix="simllm-pg-"))
    if as_user:
        shutil.chown(data, "postgres", "postgres")
    port = _free_port()
    r = subprocess.run([*as_user, initdb, "-D", str(data), "-U", "postgres", "--auth=trust"],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"PostgreSQL initdb failed: {r.stderr.strip()[-300:]}")
    opts = f"-p {port} -k {data} -c listen_addresses=127.0.0.1"
    r = subprocess.run([*as_user, pg_ctl, "-D", str(data), "-o", opts, "-l", str(data / "log"),
                        "-w", "-t", "60", "start"], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"PostgreSQL did not start: {r.stderr.strip()[-300:]}")
    try:
        subprocess.run([*as_user, _pg_bin("createdb") or "createdb", "-h", "127.0.0.1", "-p",
                        str(port), "-U", "postgres", "mlflow"], check=True, capture_output=True)
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/mlflow"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def mlflow_server(postgres, tmp_path):
    port = _free_port()
    proc = start_mlflow_server(postgres, tmp_path / "artifacts", port, tmp_path / "mlflow-server.log")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_multirun_against_postgres_backed_server(tmp_path, mlflow_server):
    from mlflow.tracking import MlflowClient

    p = run_cli(["-m", "tracking=server", f"tracking.uri={mlflow_server}", "tracking.experiment=pg",
                 "partition.tp=1,2", "print_table=false", f"hydra.sweep.dir={tmp_path}/sweep"],
                cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    c = MlflowClient(tracking_uri=mlflow_server)
    exp = c.get_experiment_by_name("pg")
    assert exp is not None, p.stderr
    runs = c.search_runs([exp.experiment_id])
    children = [r for r in runs if r.data.tags.get("simllm.role") != "sweep"]
    assert len(runs) == 3 and len(children) == 2
    assert all(r.info.status == "FINISHED" for r in runs)
    assert sorted(r.data.params["partition.tp"] for r in children) == ["1", "2"]
    assert all(r.data.metrics["tpot_ms_p50"] > 0 for r in children)
    arts = {a.path for a in c.list_artifacts(children[0].info.run_id)}
    assert "summary.json" in arts
