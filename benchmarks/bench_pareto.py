"""Speed and memory of the vectorised Pareto sweep vs a plain Python loop over the same points.

    python benchmarks/bench_pareto.py [--model deepseek_v3] [--hardware gb200_nvl72] [--devices 72]
                                      [--reps 5] [--points 1000,10000,100000,1000000] [--track]

Enumerates every (PP, TP, EP, SP) x batch x prefill-chunk point for the device count, evaluates
all valid points with numpy (``engine.analytical.pareto.sweep``, ``POINTS_PER_PASS`` points per
pass), and prints points/s. The plain loop calls the same engine (``evaluate`` with scalars) once
per point on a random sample of the points and extrapolates to all of them; the sample's results
are checked equal to the vectorised ones. Figures: CPU-s of each call alone and wall time (min and
median of --reps), peak resident memory the call added, this process's CPU-s and peak RSS; a JSON
beside the table (benchmarks/results/bench_pareto.json). Nothing is asserted.

``--points N,...``: also the whole sweep (``pareto.sweep``) at about each N points, the batches
1..k (all chunks) with k chosen to reach N (below one batch's points: chunk 0 only); each size
twice: the first sweep of a fresh process (``--cold``: its kernel tables built, in a child
process) and the repeated sweep (min of --reps, tables built). The points counted are the valid
points evaluated (fitting or not), as in the rows above.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._measure import Bench, run_child  # noqa: E402
from engine.analytical import pareto  # noqa: E402
from engine.analytical.pipeline import evaluate  # noqa: E402
from runner.compose import compose_specs  # noqa: E402

BATCHES = list(range(1, 129))                      # every batch size 1..128
CHUNKS = [0, 256, 512, 1024, 2048, 4096, 8192]


def specs_for(model, hardware, prompt, output, extra=()):
    return compose_specs([f"model={model}", f"hardware={hardware}", "partition=tp1", "tracking=none",
                          f"workload.prompt_len={prompt}", f"workload.output_len={output}", *extra])


def sizes(s, devices: int, points: int):
    """(batches, chunks) of a sweep of about ``points`` valid points on ``devices``."""
    axes, _ = pareto.grid(s, devices, [1], CHUNKS, max_sp=devices)
    per_batch = axes["tp"].size
    if points < per_batch:
        return list(range(1, max(1, round(points / (per_batch / len(CHUNKS)))) + 1)), [0]
    return list(range(1, max(1, round(points / per_batch)) + 1)), CHUNKS


def by_size(bench, a, s):
    """The sweep at each --points size: the first sweep in a fresh process, then repeated."""
    for want in (int(float(x)) for x in a.points.split(",")):
        batches, chunks = sizes(s, a.devices, want)
        axes, _ = pareto.grid(s, a.devices, batches, chunks, max_sp=a.devices)
        n = int(axes["tp"].size)
        del axes
        cmd = [sys.executable, __file__, "--child", str(want), "--model", a.model, "--hardware", a.hardware,
               "--devices", str(a.devices), "--prompt", str(a.prompt), "--output", str(a.output), *a.overrides]
        cold, walls = [], []
        for _ in range(max(1, min(bench.reps, 3))):
            r = run_child(cmd)
            line = next(x for x in r["stdout"].splitlines() if x.startswith("RESULT "))
            cold.append(json.loads(line[7:])["cpu_s"])
            walls.append(r["wall_s"])
        bench.record(f"first sweep in a process, {n:,} points", cold, walls, n=n, unit="points",
                     batches=len(batches), chunks=list(chunks))
        bench.region(f"sweep, {n:,} points", lambda: pareto.sweep(s, a.devices, batches, chunks,
                                                                  max_sp=a.devices),
                     n=n, unit="points", batches=len(batches), chunks=list(chunks))
        hot = bench.rows[-1]["cpu_s"]["min"]
        print(f"{n:>9,} points ({len(batches)} batches x {len(chunks)} chunks): first sweep "
              f"{min(cold):.3f} CPU-s ({n / min(cold):,.0f} points per CPU-s), repeated {hot:.3f} CPU-s "
              f"({n / hot:,.0f} points per CPU-s)", flush=True)


def main():
    bench = Bench("bench_pareto", __doc__)
    ap = bench.parser
    ap.add_argument("--model", default="deepseek_v3")
    ap.add_argument("--hardware", default="gb200_nvl72")
    ap.add_argument("--devices", type=int, default=72)
    ap.add_argument("--prompt", type=int, default=8192)
    ap.add_argument("--output", type=int, default=1024)
    ap.add_argument("--loop-sample", type=int, default=2000)
    ap.add_argument("--points", default="", help="also sweeps of about these many points (comma-separated)")
    ap.add_argument("--no-grid", action="store_true", help="only the --points sizes")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. calibration.cost.backend=measured framework=trtllm")
    a = bench.parse_args()
    s = specs_for(a.model, a.hardware, a.prompt, a.output, a.overrides)
    if a.child:      # one cold sweep in this fresh process: print its CPU-s
        batches, chunks = sizes(s, a.devices, int(a.child))
        c0 = time.process_time()
        table, _, dropped = pareto.sweep(s, a.devices, batches, chunks, max_sp=a.devices)
        print("RESULT " + json.dumps({"cpu_s": time.process_time() - c0, "fit": table.height}))
        return
    if a.points:
        by_size(bench, a, s)
    if a.no_grid:
        bench.finish()
        return
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
