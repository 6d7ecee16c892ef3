"""Per-job cost of the runner on a 1,000-job grid of analytical jobs, MLflow included.

    python benchmarks/bench_runner.py [--jobs 1000] [--jobs-basic 40] [--server] [--checkout DIR]

The grid: hardware.hbm_bandwidth (5) x partition.tp (2) x workload.batch_size (1..jobs/10).
Paths (each a whole fresh ``simllm`` process; CPU-s = user + system of that process alone):
  batched sqlite   ``simllm -m hydra/sweeper=simllm ...`` into a fresh embedded SQLite store
                   (``--log-params swept``: hydra.sweeper.log_params=swept, fewer params a run)
  batched server   the same against a local ``mlflow server`` on PostgreSQL (``--server``); the
                   server's and the database's CPU-s are reported too
  basic sqlite     Hydra's basic sweeper on a --jobs-basic subset
  plain sqlite     the reference: a plain ``@hydra.main`` + MLflow job (benchmarks/_plain_app.py)
                   on the basic sweeper, same number of jobs; basic and plain run interleaved,
                   --reps times each (min and median; target: basic no worse than plain)
  vectorised       ``engine.analytical.sweep`` of the whole grid in one call (engine call alone)
CPU-ms per job = the process's CPU-s / jobs (amortised: start-up included). Each store is
created before timing (printed, not counted). The results are read back from the store and
hashed (overrides -> metrics of every run): equal digests, identical results. --checkout DIR
runs another simllm checkout (PYTHONPATH) with this environment: the before/after comparison.
Target: <= 60 CPU-ms per job on the batched path, sqlite and server.
"""

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._measure import Bench, run_child  # noqa: E402

BW = ["2TB/s", "3TB/s", "4TB/s", "5TB/s", "6TB/s"]
TP = [1, 2]


def fresh_store(uri: str) -> None:
    from runner import tracking

    tracking.experiment_id(uri, "bench")


def digest(uri: str, exp: str = "bench") -> dict:
    """{runs, statuses, params per run, sha256 of overrides -> metrics} of an experiment's job runs
    (the overrides without tracking.* and hydra.*, which name this benchmark's temp paths)."""
    from runner import tracking

    e = tracking.client(uri).get_experiment_by_name(exp)
    rows = [r for r in tracking.search_runs(uri, experiment_ids=[e.experiment_id])
            if r.get("tags.simllm.role") != "sweep" and "tags.simllm.overrides" in r]
    res = {}
    for r in rows:
        key = " ".join(sorted(o for o in r["tags.simllm.overrides"].split()
                              if not o.startswith(("tracking.", "hydra."))))
        res[key] = {k: r[k] for k in sorted(r) if k.startswith("metrics.")}
    nparams = [sum(k.startswith("params.") for k in r) for r in rows]
    return {"runs": len(rows), "status": sorted({r["status"] for r in rows}),
            "sha256": hashlib.sha256(json.dumps(res, sort_keys=True).encode()).hexdigest()[:16],
            "params_per_run": (sum(nparams) / len(nparams)) if nparams else 0}


def main():
    bench = Bench("bench_runner", __doc__, reps=1)
    ap = bench.parser
    ap.add_argument("--jobs", type=int, default=1000, help="jobs of the batched grid (a multiple of 10)")
    ap.add_argument("--jobs-basic", type=int, default=40, help="jobs on the basic sweeper (and plain)")
    ap.add_argument("--server", action="store_true", help="also against mlflow server on PostgreSQL")
    ap.add_argument("--no-sqlite", action="store_true", help="skip the batched sqlite path")
    ap.add_argument("--checkout", default=None, help="measure this simllm checkout (PYTHONPATH)")
    ap.add_argument("--log-params", default=None, choices=("all", "swept"),
                    help="hydra.sweeper.log_params of the batched paths (default: the sweeper's)")
    args = bench.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="simllm-bench-"))
    env = dict(os.environ)
    if args.checkout:
        env["PYTHONPATH"] = str(Path(args.checkout).resolve())
    exe = str(Path(sys.executable).parent / "simllm")
    nb = args.jobs // 10
    grid = [f"hardware.hbm_bandwidth={','.join(BW)}", f"partition.tp={','.join(map(str, TP))}",
            f"workload.batch_size={','.join(str(b) for b in range(1, nb + 1))}", "print_table=false",
            "tracking.experiment=bench"]
    n = len(BW) * len(TP) * nb
    bench.info.update(jobs=n, checkout=args.checkout or "installed", log_params=args.log_params or "default")
    batched = [exe, "-m", "hydra/sweeper=simllm", "hydra.sweeper.progress_every=0",
               *([f"hydra.sweeper.log_params={args.log_params}"] if args.log_params else []), *grid]
    try:
        if not args.no_sqlite:
            for rep in range(bench.reps):
                uri = f"sqlite:///{tmp / f'fast{rep}' / 'mlflow.db'}"
                fresh_store(uri)
                r = run_child([*batched, f"tracking.uri={uri}", f"hydra.sweep.dir={tmp}/fast{rep}"],
                              cwd=tmp, env=env)
                d = digest(uri)
                bench.record("batched sweeper, sqlite", [r["cpu_s"]], [r["wall_s"]], r["peak_mb"], n=n,
                             unit="jobs", kind="process", results=d)
                print(f"batched sqlite: {n} jobs {r['cpu_s']:.1f} CPU-s = {r['cpu_s'] / n * 1e3:.0f} CPU-ms/job,"
                      f" wall {r['wall_s']:.1f} s; results {d}", flush=True)
        if args.server:
            from benchmarks._pgserver import mlflow_postgres_server

            with mlflow_postgres_server() as srv:
                for rep in range(bench.reps):
                    uri = srv.uri
                    exp = f"bench{rep}"
                    from runner import tracking

                    tracking.experiment_id(uri, exp)
                    s0 = srv.cpu_s()
                    r = run_child([*batched[:-1], f"tracking.experiment={exp}", f"tracking.uri={uri}",
                                   f"hydra.sweep.dir={tmp}/srv{rep}"], cwd=tmp, env=env)
                    scpu = srv.cpu_s() - s0
                    d = digest(uri, exp)
                    bench.record("batched sweeper, PostgreSQL server", [r["cpu_s"]], [r["wall_s"]],
                                 r["peak_mb"], n=n, unit="jobs", kind="process", results=d,
                                 server_cpu_s=scpu, server_cpu_per_job_ms=scpu / n * 1e3)
                    print(f"batched server: {n} jobs {r['cpu_s']:.1f} CPU-s = "
                          f"{r['cpu_s'] / n * 1e3:.0f} CPU-ms/job (server + postgres {scpu / n * 1e3:.0f}"
                          f" CPU-ms/job), wall {r['wall_s']:.1f} s; results {d}", flush=True)
        if args.jobs_basic:
            # basic sweeper vs the plain app, interleaved, --reps times each (min/median)
            k = max(2, args.jobs_basic // 2)
            sub = [f"hardware.hbm_bandwidth={BW[0]},{BW[1]}",
                   f"workload.batch_size={','.join(str(b) for b in range(1, k + 1))}",
                   "print_table=false", "tracking.experiment=bench"]
            app = str(Path(__file__).resolve().parent / "_plain_app.py")
            basic, plain, digests = [], [], set()
            for rep in range(bench.reps):
                uri = f"sqlite:///{tmp / f'basic{rep}' / 'mlflow.db'}"
                fresh_store(uri)
                basic.append(run_child([exe, "-m", *sub, f"tracking.uri={uri}",
                                        f"hydra.sweep.dir={tmp}/basic{rep}"], cwd=tmp, env=env))
                d = digest(uri)
                digests.add(d["sha256"])
                uri = f"sqlite:///{tmp / f'plain{rep}' / 'mlflow.db'}"
                fresh_store(uri)
                plain.append(run_child([sys.executable, app, "-m", "hbm_bandwidth=2e12,3e12",
                                        f"batch_size={','.join(str(b) for b in range(1, k + 1))}", f"uri={uri}",
                                        f"hydra.sweep.dir={tmp}/plain{rep}"], cwd=tmp, env=env))
                print(f"basic {basic[-1]['cpu_s'] / (2 * k) * 1e3:.0f} CPU-ms/job, plain "
                      f"{plain[-1]['cpu_s'] / (2 * k) * 1e3:.0f}; results {d}", flush=True)
            bench.record("basic sweeper, sqlite", [r["cpu_s"] for r in basic], [r["wall_s"] for r in basic],
                         max(r["peak_mb"] or 0 for r in basic), n=2 * k, unit="jobs", kind="process",
                         results=d, digests=sorted(digests))
            bench.record("plain @hydra.main + MLflow, basic sweeper", [r["cpu_s"] for r in plain],
                         [r["wall_s"] for r in plain], max(r["peak_mb"] or 0 for r in plain), n=2 * k,
                         unit="jobs", kind="process")

        from benchmarks.bench_analytical import specs
        from engine.analytical import sweep
        import numpy as np

        s = specs()
        axes = dict(hbm_bandwidth_bytes_s=np.array([2e12, 3e12, 4e12, 5e12, 6e12]), tp=np.array(TP),
                    batch_size=np.arange(1, nb + 1))
        bench.region("vectorised sweep, same grid (engine call)", lambda: sweep(s, **axes), n=n,
                     unit="points", reps=max(5, bench.reps))
        doc = bench.finish()
        for r in doc["rows"]:
            if r["label"].startswith("batched"):
                ok = r["cpu_per_item_ms"] <= 60
                print(f"{r['label']}: {r['cpu_per_item_ms']:.0f} CPU-ms/job, target <= 60: "
                      f"{'met' if ok else 'NOT met'}")
        rows = {r["label"]: r for r in doc["rows"]}
        b, p = rows.get("basic sweeper, sqlite"), rows.get("plain @hydra.main + MLflow, basic sweeper")
        if b and p:
            ok = b["cpu_per_item_ms"] <= p["cpu_per_item_ms"]
            print(f"basic sweeper {b['cpu_per_item_ms']:.0f} CPU-ms/job vs plain {p['cpu_per_item_ms']:.0f} "
                  f"(min of {b['cpu_s']['n']}), target no worse: {'met' if ok else 'NOT met'}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
