"""Wall time and overhead per job of the launchers on one DES grid: joblib, SLURM (submitit) and
Ray, each with its jobs tracked on the PostgreSQL-backed MLflow server.

    python benchmarks/bench_launchers.py [--jobs 24] [--launchers joblib,slurm,ray]

The grid is the cluster tests' one (docs/scale.md, "On a SLURM cluster": ``engine=des`` at its
``workload.num_requests``, ``workload.prompt_len`` swept) at ``--jobs`` points, run to completion
by each launcher with ``tracking=server`` on a throw-away MLflow server (benchmarks/_pgserver.py):
``joblib`` (two workers), ``submitit_slurm`` on the single-node SLURM cluster of
tests/cluster/slurm.py (started here: two CPUs, one CPU per task) and ``ray`` on the local Ray
cluster of tests/cluster/ray.py (a head and one worker node of two CPUs). Each launcher gets the
same two CPUs. Per launcher: wall time, wall seconds per job, the extra wall seconds per job over
joblib's, the client's CPU-s per job and the tracking server's CPU-s (server + database) per job.

The client is the launching ``simllm`` process and every process it waited for (getrusage of
its children): with joblib that includes the jobs themselves (its workers are the client's
children); with SLURM and Ray the jobs run in the cluster's processes (slurmstepd, Ray's
workers) and the client's figure is the submission and the waiting alone. Launchers whose
cluster cannot start here are listed as skipped with the reason.

Prints the load average before and after (the machine may be shared); writes the figures as a
benchmark record (``--json``, default benchmarks/results/launchers.json; ``python
benchmarks/record.py --only launchers`` writes it and SUMMARY.md): per launcher a row of wall-s
and client CPU-s per job and a row of the server's CPU-s per job. The per-job cost of MLflow at
1,000 jobs is benchmarks/bench_mlflow_scale.py. Nothing is asserted.
"""

import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._measure import Bench  # noqa: E402
from benchmarks._pgserver import mlflow_postgres_server  # noqa: E402
from tests.cluster import ledger as L  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _grid(n: int) -> list[str]:
    """The SLURM grid of docs/scale.md at ``n`` points (its ``range(a,b,c)`` sweep, extended)."""
    return L.grid_overrides(L.doc_commands("slurm")[1], n)


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
    bench = Bench("launchers", __doc__, reps=1)
    bench.parser.add_argument("--jobs", type=int, default=24, help="grid points (default 24)")
    bench.parser.add_argument("--launchers", default="joblib,slurm,ray")
    a = bench.parse_args()
    import contextlib
    import tempfile

    load0 = open("/proc/loadavg").read().split()[:3]
    work = Path(tempfile.mkdtemp(prefix="simllm-bench-launchers-"))
    rows, skipped = {}, {}
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
    load1 = open("/proc/loadavg").read().split()[:3]

    n = a.jobs
    print(f"DES grid of {n} jobs ({' '.join(_grid(n))}), two CPUs per launcher, tracking=server "
          f"(PostgreSQL); load average {' '.join(load0)} -> {' '.join(load1)}")
    base = rows.get("joblib", {}).get("wall_s")
    print(f"{'launcher':<10}{'rc':>4}{'finished':>10}{'wall s':>10}{'wall s/job':>12}{'+s/job vs joblib':>18}"
          f"{'client CPU-s/job':>18}{'server CPU-s/job':>18}")
    for name, r in rows.items():
        extra = "" if base is None or name == "joblib" else f"{(r['wall_s'] - base) / n:+.2f}"
        print(f"{name:<10}{r['rc']:>4}{r['finished']:>10}{r['wall_s']:>10.1f}{r['wall_s'] / n:>12.2f}"
              f"{extra:>18}{r['launcher_cpu_s'] / n:>18.3f}{r['server_cpu_s'] / n:>18.3f}")
        bench.record(f"{name}: wall and client CPU per job, {n} DES jobs", [r["launcher_cpu_s"] / n],
                     [r["wall_s"] / n], kind="client", rc=r["rc"], finished=r["finished"], lost=r["lost"])
        bench.record(f"{name}: tracking server CPU per job", [r["server_cpu_s"] / n], [r["wall_s"] / n],
                     kind="server")
    for name, why in skipped.items():
        print(f"{name:<10} skipped: {why}")
    bench.info.update(jobs=n, grid=_grid(n), load_before=load0, load_after=load1, launchers=rows,
                      skipped=skipped)
    bench.finish()


if __name__ == "__main__":
    main()
