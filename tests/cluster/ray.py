"""A throw-away local Ray cluster: ``ray start --head`` (no CPUs of its own: it only schedules)
and one worker node, both on this machine, in a temporary folder, stopped on exit.

``ray start --block`` keeps each ``ray start`` in the foreground with its daemons as children, so
stopping that process group stops exactly this cluster's processes (``ray stop`` stops every Ray
process of the machine). ``worker_pids()`` lists the Python processes of the worker node's task
workers (to kill one)."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class RayUnavailable(RuntimeError):
    """Ray cannot be started here (the message says why)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ours(tmp: str) -> list[int]:
    """Processes whose command line names this cluster's temp folder (its daemons)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if tmp in (d / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(d.name))
            except OSError:
                pass
    return out


@contextlib.contextmanager
def start_ray(head: list[str], worker: list[str], timeout_s: float = 120):
    """Run ``head`` and then ``worker`` (``ray start ...`` argument lists, as docs/scale.md writes
    them: port 6379 there is replaced by a free one) with ``--block``, this cluster's temporary
    folder and the loopback address added; yield the head's address."""
    exe = Path(sys.executable).parent / "ray"
    if not exe.exists():
        raise RayUnavailable(f"{exe} not found (pip install -e '.[ray]')")
    tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")   # short: Ray's socket paths must fit 107 bytes
    port = _free_port()
    # RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0: a node stops at once on SIGTERM, without first
    # asking the GCS to drain it; on the head the GCS is in the same process group, stopped by
    # the same signal, so that request waited out its 30 s and the stop took 32 s instead of ~2
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    common = ["--block"]
    procs = []
    logs = [Path(tmp) / "head.log", Path(tmp) / "worker.log"]
    try:
        with open(logs[0], "w") as log:
            procs.append(subprocess.Popen(
                [str(exe), *[a.replace("6379", str(port)) for a in head[1:]], f"--temp-dir={tmp}",
                 "--node-ip-address=127.0.0.1", *common],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        address = f"127.0.0.1:{port}"
        _wait_nodes(exe, address, 1, procs, logs, timeout_s)
        with open(logs[1], "w") as log:
            procs.append(subprocess.Popen(
                [str(exe), *[a.replace("6379", str(port)) for a in worker[1:]], "--node-ip-address=127.0.0.1",
                 *common],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        _wait_nodes(exe, address, 2, procs, logs, timeout_s)
        yield address
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
        deadline = time.time() + 20
        while _ours(tmp) and time.time() < deadline:
            time.sleep(0.5)
        for pid in _ours(tmp):    # a daemon that outlived its group (setsid) is ended by pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


def _wait_nodes(exe, address, n, procs, logs, timeout_s):
    """Wait until ``n`` nodes are alive in the cluster at ``address``: one client process connects
    (``ray.init`` waits for the head's GCS) and polls ``ray.nodes()`` every 0.2 s, restarted if it
    fails; a ``ray start`` that exits meanwhile ends the wait with its log. (A new client for every
    check cost 2-3 s of start-up each: importing Ray and connecting.)"""
    code = ("import time, ray; ray.init(address=%r, logging_level='ERROR', log_to_driver=False)\n"
            "while sum(1 for x in ray.nodes() if x['Alive']) < %d: time.sleep(0.2)\n" % (address, n))
    deadline = time.time() + timeout_s
    checker = None
    try:
        while time.time() < deadline:
            for p, log in zip(procs, logs):
                if p.poll() is not None:
                    raise RayUnavailable(f"ray start exited {p.returncode}: {log.read_text(errors='replace')[-1500:]}")
            if checker is None or checker.poll() is not None:
                if checker is not None and checker.returncode == 0:
                    return
                if checker is not None:
                    time.sleep(1)
                checker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, start_new_session=True,
                                           env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
            time.sleep(0.2)
    finally:
        if checker is not None and checker.poll() is None:
            checker.kill()
            checker.wait()
    raise RayUnavailable(f"{n} Ray node(s) not alive in {timeout_s:g} s: {logs[-1].read_text(errors='replace')[-1500:]}")
