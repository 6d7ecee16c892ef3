"""The per-job cost of MLflow tracking on the PostgreSQL-backed server as its store grows to
1,000 job runs: client wall and CPU per job, and the server's CPU per job.

    python benchmarks/bench_mlflow_scale.py [--runs 1000] [--block 100]

One real job first: the cluster tests' DES grid point (docs/scale.md, "On a SLURM cluster": its
``engine=des`` grid at one ``workload.prompt_len``) run by ``simllm`` with ``tracking=server``
against a throw-away server (benchmarks/_pgserver.py, the recipe of tests/runner/test_postgres.py).
Its job folder (summary.json, table.parquet, assumptions.md, config.yaml) is then logged
``--runs`` times, in one process, into a sweep's parent run the way the sweep callback opens it,
each time with a new ``job_uid`` and config hash, through the runner's own logging path:
``runner.job.track_job_dir`` (pending_sync.json marker, ``run_fields``: the flattened resolved
config as params, the summary as metrics, the tags; ``tracking.log_job``: create_run, log_batch,
artifacts, end). So each run carries what a job of that grid logs, and the figures are the
tracking calls alone: a job process's own start-up (``import mlflow``, the client) is not in them
(bench_startup.py, bench_launchers.py measure whole processes).

Printed per block of ``--block`` runs: the runs in the store at its end, client wall ms/job, client
CPU ms/job (this process) and server CPU ms/job (the MLflow server's and PostgreSQL's process
trees); then the resume's look-up of the finished runs (``tracking.finished_hashes``, what a
``resume=true`` sweep asks once) at 100 and at ``--runs`` runs. The JSON record (``--json``,
default benchmarks/results/mlflow_scale.json; ``python benchmarks/record.py --only mlflow_scale``
writes it and SUMMARY.md) holds the first and the last block: per-job client CPU-s and wall-s
(min/median over the block's jobs) and the server's CPU-s per job (the block's total / its jobs).
Nothing is asserted.
"""

import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._measure import Bench  # noqa: E402
from benchmarks._pgserver import mlflow_postgres_server  # noqa: E402
from tests.cluster import ledger as L  # noqa: E402

EXPERIMENT = "bench_mlflow_scale"


def grid_point() -> list[str]:
    """The SLURM grid's overrides (docs/scale.md) at its first ``workload.prompt_len``."""
    return L.grid_overrides(L.doc_commands("slurm")[1], 1)


def one_job(uri: str, job_dir: Path) -> None:
    """Run the grid point as a ``simllm`` job logging to ``uri`` (its own experiment)."""
    argv = [str(Path(sys.executable).parent / "simllm"), *grid_point(), "tracking=server",
            f"tracking.uri={uri}", f"tracking.experiment={EXPERIMENT}_job", f"hydra.run.dir={job_dir}"]
    r = subprocess.run(argv, capture_output=True, text=True, cwd=job_dir.parent)
    if r.returncode or not (job_dir / "summary.json").exists():
        raise SystemExit(f"the job failed (exit {r.returncode}): {r.stderr[-2000:]}")


def main() -> None:
    bench = Bench("mlflow_scale", __doc__, reps=1)
    bench.parser.add_argument("--runs", type=int, default=1000, help="job runs to log (default 1000)")
    bench.parser.add_argument("--block", type=int, default=100, help="runs per printed block (default 100)")
    a = bench.parse_args()
    import yaml
    from omegaconf import OmegaConf

    from runner import tracking
    from runner.job import track_job_dir

    work = Path(tempfile.mkdtemp(prefix="simllm-bench-mlflow-"))
    blocks, lookups = [], {}
    try:
        with mlflow_postgres_server() as server:
            uri = server.uri
            job = work / "job"
            one_job(uri, job)   # also the warm-up: the server's first run pays for its lazy start-up
            resolved = yaml.safe_load((job / "config.yaml").read_text())
            tcfg = OmegaConf.create({**resolved["tracking"], "uri": uri, "experiment": EXPERIMENT})
            summary_path = job / "summary.json"
            doc = json.loads(summary_path.read_text())
            # a sweep's parent run and environment, as runner/callbacks.py SweepTracking sets them
            exp = tracking.experiment_id(uri, EXPERIMENT)
            parent = tracking.start_parent(uri, exp, "sweep:bench", {"simllm.sweep_id": str(work),
                                                                     "simllm.role": "sweep"})
            import os

            os.environ.update({tracking.EXPERIMENT_ENV: exp, tracking.PARENT_ENV: parent,
                               tracking.SWEEP_ENV: str(work), tracking.PROBED_ENV: uri})
            doc.update(parent_run_id=parent, sweep_id=str(work))
            walls, cpus = [], []
            s0 = server.cpu_s()
            for i in range(a.runs):
                doc.update(job_uid=uuid.uuid4().hex, config_hash=f"{i:016x}")
                summary_path.write_text(json.dumps(doc))
                w0, c0 = time.perf_counter(), time.process_time()
                rid = track_job_dir(tcfg, job, cfg=resolved, fresh=True)
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
                if rid is None:
                    raise SystemExit(f"run {i + 1} was not logged: {(job / 'pending_sync.json').read_text()}")
                if (i + 1) % a.block == 0 or i + 1 == a.runs:
                    s1 = server.cpu_s()
                    k = len(walls)
                    blocks.append({"runs": i + 1, "jobs": k, "wall_s": walls, "cpu_s": cpus,
                                   "server_cpu_s": s1 - s0})
                    print(f"{i + 1:>6} runs: {1e3 * sum(walls) / k:7.1f} ms wall/job, {1e3 * sum(cpus) / k:7.1f} "
                          f"ms client CPU/job, {1e3 * (s1 - s0) / k:7.1f} ms server CPU/job", flush=True)
                    if i + 1 in (min(100, a.runs), a.runs):
                        s2, w2, c2 = server.cpu_s(), time.perf_counter(), time.process_time()
                        try:
                            found = len(tracking.finished_hashes(uri, EXPERIMENT))
                        except Exception as e:  # noqa: BLE001 - a figure too: printed as it failed
                            found = f"failed: {type(e).__name__}: {str(e)[-200:]}"
                        lookups[i + 1] = {"found": found, "wall_s": time.perf_counter() - w2,
                                          "cpu_s": time.process_time() - c2, "server_cpu_s": server.cpu_s() - s2,
                                          "page": tracking._page(uri)}
                    walls, cpus = [], []
                    s0 = server.cpu_s()
            tracking.end_run(uri, parent, "FINISHED")
            led = L.ledger(uri, EXPERIMENT, a.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nMLflow on PostgreSQL, {a.runs} job runs of the SLURM grid's DES point "
          f"({' '.join(grid_point())}) logged through runner.job.track_job_dir; ledger: "
          f"{led['FINISHED']} FINISHED, {led['FAILED']} FAILED, {led['running']} RUNNING, "
          f"{led['duplicated']} duplicated")
    print(f"{'runs in store':>14}{'wall ms/job':>13}{'(median)':>10}{'client CPU ms/job':>19}{'(median)':>10}"
          f"{'server CPU ms/job':>19}")
    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    for b in blocks:
        k = b["jobs"]
        print(f"{b['runs'] - k + 1:>6}-{b['runs']:<7}{1e3 * sum(b['wall_s']) / k:>13.1f}{1e3 * med(b['wall_s']):>10.1f}"
              f"{1e3 * sum(b['cpu_s']) / k:>19.1f}{1e3 * med(b['cpu_s']):>10.1f}{1e3 * b['server_cpu_s'] / k:>19.1f}")
    for n, lk in lookups.items():
        print(f"resume look-up at {n} runs ({lk['found']} finished hashes, pages of {lk['page']} runs): "
              f"{1e3 * lk['wall_s']:.0f} ms wall, "
              f"{1e3 * lk['cpu_s']:.0f} ms client CPU, {1e3 * lk['server_cpu_s']:.0f} ms server CPU")

    for b in (blocks[0], blocks[-1]) if len(blocks) > 1 else blocks[:1]:
        span = f"runs {b['runs'] - b['jobs'] + 1}-{b['runs']}"
        bench.record(f"log one job's run (client), {span}", b["cpu_s"], b["wall_s"], kind="client", n=None)
        bench.record(f"tracking server CPU per job, {span}", [b["server_cpu_s"] / b["jobs"]],
                     [sum(b["wall_s"]) / b["jobs"]], kind="server")
    for n, lk in lookups.items():
        bench.record(f"resume look-up (finished_hashes), {n} runs", [lk["cpu_s"]], [lk["wall_s"]],
                     kind="client", server_cpu_s=lk["server_cpu_s"])
    bench.info.update(runs=a.runs, block=a.block, grid_point=grid_point(),
                      blocks=[{"runs": b["runs"], "jobs": b["jobs"], "wall_s": sum(b["wall_s"]),
                               "client_cpu_s": sum(b["cpu_s"]), "server_cpu_s": b["server_cpu_s"]}
                              for b in blocks],
                      lookups=lookups, ledger=led)
    bench.finish()


if __name__ == "__main__":
    main()
