"""Tracking server down, then back: how long a grid waits for a dead server, and how long
``simllm-sync`` takes to upload it afterwards.

1. A 100-job analytical grid (``partition.tp`` x ``workload.batch_size`` x ``workload.prompt_len``,
   4 x 5 x 5) with ``tracking.uri=http://127.0.0.1:9`` (nothing listens on the discard port), its
   sweep directory in a temp dir: wall and CPU seconds, jobs with ``pending_sync.json``, warning
   lines printed.
2. A local ``mlflow server`` on a free loopback port (SQLite backend and artifacts in the temp
   dir; its start is not timed), then ``simllm-sync SWEEP --uri http://127.0.0.1:PORT``: wall and
   CPU seconds, and what the store then holds (children under the sweep's parent run).

    python benchmarks/bench_tracking_down.py [--sweeper basic|simllm] [--keep]
"""

import argparse
import json
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

GRID = ["partition.tp=1,2,4,8", "workload.batch_size=1,2,4,8,16",
        "workload.prompt_len=128,256,512,1024,2048"]   # 4 x 5 x 5 = 100 jobs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed(cmd, cwd) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run ``cmd``; (result, wall s, CPU s of the child processes)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return p, wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def _server(tmp: Path):
    port = _free_port()
    exe = Path(sys.executable).parent / "mlflow"
    log = open(tmp / "server.log", "w")
    proc = subprocess.Popen([str(exe), "server", "--backend-store-uri", f"sqlite:///{tmp / 'mlflow.db'}",
                             "--artifacts-destination", (tmp / "artifacts").as_uri(),
                             "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
                            stdout=log, stderr=subprocess.STDOUT)
    uri = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 300:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited: {(tmp / 'server.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return proc, uri, time.perf_counter() - t0
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("mlflow server did not become healthy in 300 s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeper", choices=("basic", "simllm"), default="basic")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (printed)")
    args = ap.parse_args(argv)
    bindir = Path(sys.executable).parent
    tmp = Path(tempfile.mkdtemp(prefix="bench_tracking_down_"))
    sweep = tmp / "sweep"
    try:
        cmd = [str(bindir / "simllm"), "-m", *GRID, "tracking.uri=http://127.0.0.1:9",
               f"hydra.sweep.dir={sweep}", "print_table=false"]
        if args.sweeper == "simllm":
            cmd.insert(2, "hydra/sweeper=simllm")
        p, wall, cpu = _timed(cmd, tmp)
        jobs = [d for d in sweep.iterdir() if d.is_dir() and d.name.isdigit()]
        pending = sum((d / "pending_sync.json").exists() for d in jobs)
        warnings = sum("warning" in line.lower() for line in p.stderr.splitlines())
        print(f"server down, {args.sweeper} sweeper: {len(jobs)} jobs in {wall:.1f} s wall, "
              f"{cpu:.1f} CPU-s (exit {p.returncode}); {pending} pending_sync.json; "
              f"{warnings} warning line(s)")
        if p.returncode:
            print(p.stderr[-3000:], file=sys.stderr)
            return 1
        proc, uri, boot = _server(tmp)
        try:
            s, wall, cpu = _timed([str(bindir / "simllm-sync"), str(sweep), "--uri", uri], tmp)
            print(f"simllm-sync of {pending} jobs to mlflow server ({uri}, SQLite; started in "
                  f"{boot:.1f} s, not timed): {wall:.1f} s wall, {cpu:.1f} CPU-s (exit {s.returncode})")
            print("  " + (s.stdout.strip().splitlines() or ["?"])[-1])
            if s.returncode:
                print(s.stderr[-3000:], file=sys.stderr)
            from mlflow.tracking import MlflowClient

            c = MlflowClient(tracking_uri=uri)
            exp = c.get_experiment_by_name("simllm")
            runs = list(c.search_runs([exp.experiment_id], max_results=1000))
            parents = [r for r in runs if r.data.tags.get("simllm.role") == "sweep"]
            pid = parents[0].info.run_id if parents else None
            kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == pid]
            fin = sum(r.info.status == "FINISHED" for r in kids)
            arts = sorted(a.path for a in c.list_artifacts(pid)) if pid else []
            print(f"  store: {len(parents)} parent run ({parents[0].info.status if parents else '-'}, "
                  f"metrics {json.dumps({k: v for k, v in sorted(parents[0].data.metrics.items())}) if parents else '-'}, "
                  f"artifacts {arts}), {len(kids)} children ({fin} FINISHED)")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
