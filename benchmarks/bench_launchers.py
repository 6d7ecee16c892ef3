"""Wall time and overhead per job of the launchers on one DES grid, and the per-job cost of MLflow
on the PostgreSQL-backed tracking server.

    python benchmarks/bench_launchers.py [--jobs 24] [--mlflow-jobs 1000] [--launchers joblib,slurm,ray]

The grid is the cluster tests' one (docs/scale.md: ``engine=des workload.num_requests=20``,
``workload.prompt_len`` swept) at ``--jobs`` points, run to completion by each launcher with
``tracking=server`` on a throw-away MLflow server (benchmarks/_pgserver.py): ``joblib`` (two
workers), ``submitit_slurm`` on the single-node SLURM cluster of tests/cluster/slurm.py (two CPUs,
one CPU per task) and ``ray`` on the local Ray cluster of tests/cluster/ray.py (a head and one
worker node of two CPUs). Each launcher gets the same two CPUs. Per launcher: wall time, wall
seconds per job, the extra wall seconds per job over joblib's, and the tracking server's CPU-s
(server + database) per job. Launchers whose cluster cannot start here are listed as skipped with
the reason.

``--mlflow-jobs``: the per-job MLflow cost at that many jobs: an analytical grid of that size
through the batched sweeper (``hydra/sweeper=simllm``, every job in one process, so the figure
is the tracking calls and not process start-up), wall and client CPU-s per job and the server's
CPU-s per job. Prints the load average before and after (the machine may be shared); writes
benchmarks/results/bench_launchers.json. Nothing is asserted.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._pgserver import mlflow_postgres_server  # noqa: E402
from tests.cluster import ledger as L  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _grid(n: int) -> list[str]:
    return ["engine=des", "workload.num_requests=20", f"workload.prompt_len=range(128,{128 + 32 * n},32)",
            "print_table=false"]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(argv, env, server, n, exp, out_dir) -> dict:
    c0, s0, w0 = _children_cpu(), server.cpu_s(), time.perf_counter()
    p = L.cli([*argv, "tracking=server", f"tracking.uri={server.uri}", f"tracking.experiment={exp}",
               f"hydra.sweep.dir={out_dir}"], out_dir.parent, env)
    out, err = p.communicate(timeout=3600)
    wall = time.perf_counter() - w0
    led = L.ledger(server.uri, exp, n)
    return {"rc": p.returncode, "wall_s": wall, "launcher_cpu_s": _children_cpu() - c0,
            "server_cpu_s": server.cpu_s() - s0, "finished": led["FINISHED"], "lost": led["lost"],
            "summary": L.counts_line(out), "stderr_tail": err.strip().splitlines()[-1:] if p.returncode else []}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=24)
    ap.add_argument("--mlflow-jobs", type=int, default=1000)
    ap.add_argument("--launchers", default="joblib,slurm,ray")
    a = ap.parse_args()
    import contextlib
    import tempfile

    load0 = open("/proc/loadavg").read().split()[:3]
    work = Path(tempfile.mkdtemp(prefix="simllm-bench-launchers-"))
    rows, skipped, res = {}, {}, {}
    with mlflow_postgres_server() as server, contextlib.ExitStack() as stack:
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=server.uri).search_experiments()
        # warm-up, not counted: the server's first logged run pays for its lazy start-up (schema
        # checks, its background job consumers), which would land on the first launcher measured
        _run(["-m", "partition.tp=1", "print_table=false"], {}, server, 1, "bench_warmup", work / "warmup")
        for name in a.launchers.split(","):
            env, launch = {}, []
            try:
                if name == "joblib":
                    launch = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
                elif name == "slurm":
                    from tests.cluster.slurm import start_slurm

                    cluster = stack.enter_context(start_slurm(cpus=2))
                    env = cluster.env
                    launch = ["hydra/launcher=submitit_slurm", "hydra.launcher.partition=debug",
                              "hydra.launcher.cpus_per_task=1", "hydra.launcher.timeout_min=60"]
                elif name == "ray":
                    import importlib.util

                    if importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None:
                        raise RuntimeError("hydra-ray-launcher not installed (pip install -e '.[ray]')")
                    from tests.cluster.ray import start_ray

                    _, head, worker, *_ = L.doc_commands("ray")
                    address = stack.enter_context(start_ray(head, worker))
                    launch = ["hydra/launcher=ray", f"hydra.launcher.ray.init.address={address}",
                              "+hydra.launcher.ray.init.object_store_memory=null",
                              "+hydra.launcher.ray.remote.num_cpus=1"]
                else:
                    raise RuntimeError(f"unknown launcher {name!r} (joblib, slurm, ray)")
            except Exception as e:  # noqa: BLE001 - reported, the others still run
                skipped[name] = f"{type(e).__name__}: {e}"[:300]
                continue
            rows[name] = _run(["-m", *_grid(a.jobs), *launch], env, server, a.jobs, f"bench_{name}",
                              work / name)
        if a.mlflow_jobs:
            n = a.mlflow_jobs
            # 1000 analytical points: 10 batch sizes x 100 prompt lengths
            k = max(1, n // 10)
            grid = ["hydra/sweeper=simllm", "workload.batch_size=range(1,11)",
                    f"workload.prompt_len=range(64,{64 + 8 * k},8)", "print_table=false"]
            res = _run(["-m", *grid], {}, server, 10 * k, "bench_mlflow", work / "mlflow")
            res["jobs"] = 10 * k
    load1 = open("/proc/loadavg").read().split()[:3]

    print(f"DES grid of {a.jobs} jobs, two CPUs per launcher, tracking=server (PostgreSQL); "
          f"load average {' '.join(load0)} -> {' '.join(load1)}")
    base = rows.get("joblib", {}).get("wall_s")
    print(f"{'launcher':<10}{'rc':>4}{'finished':>10}{'wall s':>10}{'s/job':>9}{'+s/job vs joblib':>18}"
          f"{'server CPU-s/job':>18}")
    for name, r in rows.items():
        extra = "" if base is None or name == "joblib" else f"{(r['wall_s'] - base) / a.jobs:+.2f}"
        print(f"{name:<10}{r['rc']:>4}{r['finished']:>10}{r['wall_s']:>10.1f}{r['wall_s'] / a.jobs:>9.2f}"
              f"{extra:>18}{r['server_cpu_s'] / a.jobs:>18.3f}")
    for name, why in skipped.items():
        print(f"{name:<10} skipped: {why}")
    if res:
        j = res["jobs"]
        print(f"MLflow at {j} jobs (batched sweeper, one process): {res['finished']} FINISHED, "
              f"wall {res['wall_s']:.1f} s = {1000 * res['wall_s'] / j:.1f} ms/job; client CPU "
              f"{1000 * res['launcher_cpu_s'] / j:.1f} ms/job; server CPU {1000 * res['server_cpu_s'] / j:.1f} ms/job")
    out = ROOT / "benchmarks" / "results" / "bench_launchers.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"jobs": a.jobs, "load_before": load0, "load_after": load1, "launchers": rows,
                               "skipped": skipped, "mlflow": res}, indent=1, default=str))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
