"""Speed of the vectorised Pareto sweep vs a plain Python loop over the same points.

    python benchmarks/bench_pareto.py [--model deepseek_v3] [--hardware gb200_nvl72] [--devices 72]

Enumerates every (PP, TP, EP, SP) x batch x prefill-chunk point for the device count, evaluates
all valid points in one numpy pass (``engine.analytical.pareto.sweep``), and prints points/s.
The plain loop calls the same engine (``evaluate`` with scalars) once per point on a random
sample of the points and extrapolates to all of them; the sample's results are checked equal to
the vectorised ones. Wall-clock figures, median of repeats; nothing is asserted.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hydra import compose, initialize_config_dir  # noqa: E402

from engine.analytical import pareto  # noqa: E402
from engine.analytical.pipeline import evaluate  # noqa: E402
from runner import experiments, schema  # noqa: E402
from runner.convert import specs_from_config  # noqa: E402

BATCHES = list(range(1, 129))                      # every batch size 1..128
CHUNKS = [0, 256, 512, 1024, 2048, 4096, 8192]


def specs_for(model, hardware, prompt, output, extra=()):
    schema.register()
    experiments.register()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            f"model={model}", f"hardware={hardware}", "partition=tp1", "tracking=none",
            f"workload.prompt_len={prompt}", f"workload.output_len={output}", *extra])
    return specs_from_config(cfg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="deepseek_v3")
    ap.add_argument("--hardware", default="gb200_nvl72")
    ap.add_argument("--devices", type=int, default=72)
    ap.add_argument("--prompt", type=int, default=8192)
    ap.add_argument("--output", type=int, default=1024)
    ap.add_argument("--loop-sample", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. calibration.kernels=measured framework=trtllm")
    a = ap.parse_args()
    s = specs_for(a.model, a.hardware, a.prompt, a.output, a.overrides)
    axes, dropped = pareto.grid(s, a.devices, BATCHES, CHUNKS, max_sp=a.devices)
    n = axes["tp"].size
    total = n + sum(dropped.values())
    print(f"{a.model} on {a.devices} x {a.hardware}, prompt {a.prompt}, output {a.output}, "
          f"kernels {s.calibration.kernels} ({s.framework.kernel_tables})")
    print(f"grid: {total:,} points = partitions x {len(BATCHES)} batches x {len(CHUNKS)} chunks; "
          f"{n:,} valid partitions' points evaluated; dropped: {dropped}")

    pareto.sweep(s, a.devices, BATCHES, CHUNKS, max_sp=a.devices)  # warm-up
    times = []
    for _ in range(a.repeat):
        t = time.perf_counter()
        table, front, dr = pareto.sweep(s, a.devices, BATCHES, CHUNKS, max_sp=a.devices)
        times.append(time.perf_counter() - t)
    vec = statistics.median(times)
    print(f"vectorised sweep (enumerate + evaluate + frontier + polars table): {vec * 1e3:.1f} ms "
          f"for {n:,} points = {n / vec:,.0f} points/s; {table.height:,} fit, "
          f"{front.height} on the frontier")
    t = time.perf_counter()
    res = evaluate(s, lean=True, **axes)
    ev = time.perf_counter() - t
    print(f"  of which the numpy evaluation alone: {ev * 1e3:.1f} ms ({n / ev:,.0f} points/s)")

    rng = np.random.default_rng(0)
    idx = rng.choice(n, size=min(a.loop_sample, n), replace=False)
    t = time.perf_counter()
    loop = [evaluate(s, lean=True, **{k: float(v[i]) for k, v in axes.items()})["tpot_ms"] for i in idx]
    lp = time.perf_counter() - t
    per = lp / idx.size
    vec_tpot = np.broadcast_to(res["tpot_ms"], (n,))[idx]
    same = np.allclose(np.asarray(loop, dtype=float), vec_tpot, rtol=1e-12, equal_nan=True)
    print(f"plain Python loop (evaluate per point, {idx.size:,}-point sample): {per * 1e3:.3f} ms/point "
          f"-> {per * n:.1f} s for all {n:,} points ({1 / per:,.0f} points/s); "
          f"vectorised is {per * n / vec:,.0f}x faster; sample results identical: {same}")
    best = front.sort("throughput_tok_s_per_gpu").tail(3)
    print("frontier, highest-throughput end:")
    print(best.select("partition", "batch_size", "prefill_chunk", "throughput_tok_s_per_gpu",
                      "interactivity_tok_s_per_user"))


if __name__ == "__main__":
    main()
