"""Speed and memory of the vectorised Pareto sweep vs a plain Python loop over the same points.

    python benchmarks/bench_pareto.py [--model deepseek_v3] [--hardware gb200_nvl72] [--devices 72]
                                      [--reps 5] [--track]

Enumerates every (PP, TP, EP, SP) x batch x prefill-chunk point for the device count, evaluates
all valid points with numpy (``engine.analytical.pareto.sweep``, ``POINTS_PER_PASS`` points per
pass), and prints points/s. The plain loop calls the same engine (``evaluate`` with scalars) once
per point on a random sample of the points and extrapolates to all of them; the sample's results
are checked equal to the vectorised ones. Figures: CPU-s of each call alone and wall time (min and
median of --reps), peak resident memory the call added, this process's CPU-s and peak RSS; a JSON
beside the table (benchmarks/results/bench_pareto.json). Nothing is asserted.
"""

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._measure import Bench  # noqa: E402
from engine.analytical import pareto  # noqa: E402
from engine.analytical.pipeline import evaluate  # noqa: E402
from runner.compose import compose_specs  # noqa: E402

BATCHES = list(range(1, 129))                      # every batch size 1..128
CHUNKS = [0, 256, 512, 1024, 2048, 4096, 8192]


def specs_for(model, hardware, prompt, output, extra=()):
    return compose_specs([f"model={model}", f"hardware={hardware}", "partition=tp1", "tracking=none",
                          f"workload.prompt_len={prompt}", f"workload.output_len={output}", *extra])


def main():
    bench = Bench("bench_pareto", __doc__)
    ap = bench.parser
    ap.add_argument("--model", default="deepseek_v3")
    ap.add_argument("--hardware", default="gb200_nvl72")
    ap.add_argument("--devices", type=int, default=72)
    ap.add_argument("--prompt", type=int, default=8192)
    ap.add_argument("--output", type=int, default=1024)
    ap.add_argument("--loop-sample", type=int, default=2000)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. calibration.cost.backend=measured framework=trtllm")
    a = bench.parse_args()
    s = specs_for(a.model, a.hardware, a.prompt, a.output, a.overrides)
    axes, dropped = pareto.grid(s, a.devices, BATCHES, CHUNKS, max_sp=a.devices)
    n = axes["tp"].size
    total = n + sum(dropped.values())
    print(f"{a.model} on {a.devices} x {a.hardware}, prompt {a.prompt}, output {a.output}, "
          f"kernels {s.calibration.kernels} ({s.framework.kernel_tables})")
    print(f"grid: {total:,} points = partitions x {len(BATCHES)} batches x {len(CHUNKS)} chunks; "
          f"{n:,} valid partitions' points evaluated; dropped: {dropped}")
    bench.info.update(model=a.model, hardware=a.hardware, devices=a.devices, grid_points=total,
                      valid_points=n, points_per_pass=pareto.POINTS_PER_PASS)

    table, front, _ = bench.region("vectorised sweep (enumerate+evaluate+frontier)",
                                   lambda: pareto.sweep(s, a.devices, BATCHES, CHUNKS, max_sp=a.devices),
                                   n=n, unit="points")
    vec = bench.rows[-1]["cpu_s"]["min"]
    print(f"vectorised sweep (enumerate + evaluate + frontier + polars table): {vec * 1e3:.1f} CPU-ms "
          f"for {n:,} points = {n / vec:,.0f} points per CPU-s; {table.height:,} fit, "
          f"{front.height} on the frontier")
    frame, _ = bench.region("numpy evaluation alone (evaluate_fitting)",
                            lambda: pareto.evaluate_fitting(s, axes, ["tpot_ms"]), n=n, unit="points")
    ev = bench.rows[-1]["cpu_s"]["min"]
    print(f"  of which the numpy evaluation alone: {ev * 1e3:.1f} CPU-ms ({n / ev:,.0f} points per CPU-s)")

    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(n, size=min(a.loop_sample, n), replace=False))
    loop = bench.region(f"plain Python loop, {idx.size:,}-point sample",
                        lambda: [evaluate(s, lean=True, **{k: float(v[i]) for k, v in axes.items()})["tpot_ms"]
                                 for i in idx], n=int(idx.size), unit="points", reps=1, warmup=0)
    per = bench.rows[-1]["cpu_s"]["min"] / idx.size
    # the vectorised TPOT of the sampled points (every point, fitting or not), chunk by chunk
    vec_tpot = np.concatenate([np.broadcast_to(evaluate(s, lean=True, **{k: v[c] for k, v in axes.items()})
                                               ["tpot_ms"], c.shape)
                               for c in np.array_split(idx, max(1, idx.size // 512))])
    same = np.allclose(np.asarray(loop, dtype=float), vec_tpot, rtol=1e-12, equal_nan=True)
    bench.info["loop_sample_identical"] = bool(same)
    print(f"plain Python loop (evaluate per point, {idx.size:,}-point sample): {per * 1e3:.3f} CPU-ms/point "
          f"-> {per * n:.1f} CPU-s for all {n:,} points ({1 / per:,.0f} points per CPU-s); "
          f"vectorised is {per * n / vec:,.0f}x cheaper; sample results identical: {same}")
    best = front.sort("throughput_tok_s_per_gpu").tail(3)
    print("frontier, highest-throughput end:")
    print(best.select("partition", "batch_size", "prefill_chunk", "throughput_tok_s_per_gpu",
                      "interactivity_tok_s_per_user"))
    bench.finish()


if __name__ == "__main__":
    main()
