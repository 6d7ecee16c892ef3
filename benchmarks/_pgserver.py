"""A throw-away local MLflow tracking server on a PostgreSQL backend store, for benchmarks.

The same recipe as the fixture of tests/runner/test_postgres.py (initdb in a temp dir, loopback
only, ``mlflow server --workers 1``), as a context manager that raises instead of skipping.
``cpu_s()`` sums the CPU time of the server's and the database's process trees so far, so a
benchmark can report what the tracking side costs besides the client.
"""

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _tree_cpu_s(root_pids) -> float:
    """user + system CPU-s of the processes in ``root_pids`` and all their descendants (Linux
    /proc; the children they already reaped are included through cutime/cstime)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for d in glob.glob("/proc/[0-9]*/stat"):
        try:
            text = Path(d).read_text()
        except OSError:
            continue
        rest = text[text.rindex(")") + 2:].split()
        pid, ppid = int(d.split("/")[2]), int(rest[1])
        stats[pid] = (ppid, sum(int(x) for x in rest[11:15]) / tick)
    todo, seen, total = list(root_pids), set(), 0.0
    while todo:
        p = todo.pop()
        if p in seen or p not in stats:
            continue
        seen.add(p)
        total += stats[p][1]
        todo += [c for c, (pp, _) in stats.items() if pp == p]
    return total


class Server:
    def __init__(self, uri: str, pids: list):
        self.uri = uri
        self.pids = pids

    def cpu_s(self) -> float:
        return _tree_cpu_s(self.pids)


@contextlib.contextmanager
def mlflow_postgres_server(workers: int = 1):
    """Yield a Server (``.uri`` http://127.0.0.1:PORT, ``.cpu_s()``); everything removed after."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        raise RuntimeError("PostgreSQL is not installed (initdb/pg_ctl not found)")
    as_user = []
    if os.geteuid() == 0:  # postgres refuses to run as root: use the distribution's user
        pwd.getpwnam("postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data = Path(tempfile.mkdtemp(prefix="simllm-pg-"))
    art = Path(tempfile.mkdtemp(prefix="simllm-pgart-"))
    if as_user:
        shutil.chown(data, "postgres", "postgres")
    port = _free_port()
    subprocess.run([*as_user, initdb, "-D", str(data), "-U", "postgres", "--auth=trust"],
                   check=True, capture_output=True)
    opts = f"-p {port} -k {data} -c listen_addresses=127.0.0.1"
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-o", opts, "-l", str(data / "log"), "-w",
                    "-t", "60", "start"], check=True, capture_output=True)
    proc = log = None
    try:
        subprocess.run([*as_user, _pg_bin("createdb") or "createdb", "-h", "127.0.0.1", "-p", str(port),
                        "-U", "postgres", "mlflow"], check=True, capture_output=True)
        pg_pid = int((data / "postmaster.pid").read_text().split()[0])
        sport = _free_port()
        log = open(art / "server.log", "w")
        exe = Path(sys.executable).parent / "mlflow"
        proc = subprocess.Popen([str(exe), "server", "--backend-store-uri",
                                 f"postgresql+psycopg2://postgres@127.0.0.1:{port}/mlflow",
                                 "--artifacts-destination", (art / "artifacts").as_uri(),
                                 "--host", "127.0.0.1", "--port", str(sport), "--workers", str(workers)],
                                stdout=log, stderr=subprocess.STDOUT)
        uri = f"http://127.0.0.1:{sport}"
        deadline = time.time() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {(art / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(uri + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("mlflow server did not become healthy in 180 s")
                time.sleep(1)
        yield Server(uri, [proc.pid, pg_pid])
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:   # still starting: the database is stopped all the same
                proc.kill()
                proc.wait(timeout=30)
        if log is not None:
            log.close()
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(art, ignore_errors=True)
