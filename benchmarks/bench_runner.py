"""Per-job overhead of the runner on a 1,000-job grid of trivial analytical jobs, MLflow included.

    python benchmarks/bench_runner.py [--jobs-basic 40]

Three ways to evaluate the same grid (hardware.hbm_bandwidth x partition.tp x workload.batch_size):
  1. `simllm -m hydra/sweeper=simllm ...`      the batched sweeper, 1,000 jobs, 1,000 MLflow runs
  2. `simllm -m ...` (Hydra's basic sweeper)   a --jobs-basic subset (it costs ~0.5 s a job)
  3. engine.analytical.sweep(...)              the same 1,000 points in one vectorised call
Each path logs into its own fresh SQLite store (created before timing: a one-time cost, printed).
Prints figures; asserts nothing.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BW = ["2TB/s", "3TB/s", "4TB/s", "5TB/s", "6TB/s"]
TP = [1, 2]


def simllm(args, cwd):
    exe = Path(sys.executable).parent / "simllm"
    t = time.perf_counter()
    p = subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"simllm failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return time.perf_counter() - t


def fresh_store(tmp: Path, name: str) -> str:
    from runner import tracking

    uri = f"sqlite:///{tmp / name / 'mlflow.db'}"
    t = time.perf_counter()
    tracking.experiment_id(uri, "bench")
    print(f"  (store {name}: created and migrated in {time.perf_counter() - t:.1f} s, not counted)")
    return uri


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs-basic", type=int, default=40, help="jobs timed on the basic sweeper")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="simllm-bench-"))
    batches = ",".join(str(b) for b in range(1, 101))
    grid = [f"hardware.hbm_bandwidth={','.join(BW)}", f"partition.tp={','.join(map(str, TP))}",
            f"workload.batch_size={batches}", "print_table=false", "tracking.experiment=bench"]
    n = len(BW) * len(TP) * 100
    try:
        uri = fresh_store(tmp, "fast")
        wall = simllm(["-m", "hydra/sweeper=simllm", "hydra.sweeper.progress_every=0", *grid,
                       f"tracking.uri={uri}", f"hydra.sweep.dir={tmp}/fast"], cwd=tmp)
        print(f"batched sweeper: {n} jobs with MLflow in {wall:.1f} s = {wall / n * 1e3:.0f} ms/job "
              "(process start-up and imports included)")

        uri = fresh_store(tmp, "basic")
        k = max(2, args.jobs_basic // 2)
        sub = [f"hardware.hbm_bandwidth={BW[0]},{BW[1]}",
               f"workload.batch_size={','.join(str(b) for b in range(1, k + 1))}",
               "print_table=false", "tracking.experiment=bench"]
        wall_b = simllm(["-m", *sub, f"tracking.uri={uri}", f"hydra.sweep.dir={tmp}/basic"], cwd=tmp)
        print(f"basic sweeper:   {2 * k} jobs with MLflow in {wall_b:.1f} s = "
              f"{wall_b / (2 * k) * 1e3:.0f} ms/job (-> ~{wall_b / (2 * k) * n / 60:.1f} min for {n})")

        from benchmarks.bench_analytical import specs
        from engine.analytical import sweep
        import numpy as np

        s = specs()
        axes = dict(hbm_bandwidth_bytes_s=np.array([2e12, 3e12, 4e12, 5e12, 6e12]), tp=np.array(TP),
                    batch_size=np.arange(1, 101))
        sweep(s, **axes)
        t = time.perf_counter()
        for _ in range(20):
            df = sweep(s, **axes)
        vec = (time.perf_counter() - t) / 20
        print(f"vectorised:      {df.height} points in one call: {vec * 1e3:.1f} ms "
              f"= {df.height / vec:,.0f} points/s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
