"""Peak memory of big vectorised sweeps, each in a fresh process (so the peak is the sweep's).

    python benchmarks/bench_memory.py [--reps 3] [--points 1000000] [--checkout DIR]

Figures (peak RSS of the whole child process, CPU-s of that process and of the sweep call alone):
  grid sweep      ``engine.analytical.sweep`` of a --points grid (batch 1..100 x prompt_len x HBM
                  bandwidth), Llama-3.1-8B on an H100: every metric column, as a user calls it
                  (above ``engine.analytical.sweep_stream_mb`` of result it streams to parquet parts
                  in a temporary folder by default; the LazyFrame is read back to count the rows)
  grid, in memory the same grid with ``stream_mb=0``: one DataFrame (its output frame is most of
                  the peak; printed)
  grid, streamed  the same grid with ``out=DIR``: each chunk written as a parquet part, the
                  process holds one chunk (the parts are read back to count the rows)
  grid, 6 columns the same grid with ``columns=`` (TTFT, TPOT, throughput): the narrow result
  pareto sweep    ``engine.analytical.pareto.sweep`` of about --points points: DeepSeek-V3 on
                  72 x GB200 (the bench_pareto.py grid) with batches 1..N widened to reach it
A child run with ``--checkout DIR`` imports another simllm checkout (PYTHONPATH): before/after.
Target: a 10^6-point sweep's working set <= 300 MB.
"""

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
# a child measuring another checkout imports simllm (and its benchmarks' specs) from there
sys.path.insert(0, os.environ.get("SIMLLM_CHECKOUT") or str(HERE.parent.parent))


def child(kind: str, points: int) -> None:
    """Run one sweep in this (fresh) process; print a JSON line with its figures."""
    import time

    import numpy as np

    from _measure import peak_rss_mb, rss_mb   # this script's folder (any checkout)

    if kind.startswith("grid"):
        import tempfile

        from benchmarks.bench_analytical import specs
        from engine.analytical import sweep

        s = specs()
        k = max(1, round((points / 100) ** 0.5))
        axes = dict(batch_size=np.arange(1, 101), prompt_len=np.linspace(128, 32768, k).round(),
                    hbm_bandwidth_bytes_s=np.linspace(2e12, 8e12, k))
        opts = {"grid_narrow": dict(columns=["ttft_ms", "tpot_ms", "throughput_tok_s"]),
                "grid_memory": dict(stream_mb=0)}.get(kind, {})
        tmp = tempfile.TemporaryDirectory()
        if kind == "grid_out":
            opts["out"] = os.path.join(tmp.name, "grid")
        tempfile.tempdir = tmp.name      # where a default-streamed sweep puts its parts
        base = rss_mb()
        c0 = time.process_time()
        df = sweep(s, **axes, **opts)
        cpu = time.process_time() - c0
        import polars as pl

        if isinstance(df, pl.LazyFrame):
            size = sum(f.stat().st_size for f in Path(tmp.name).rglob("*.parquet"))
            out = {"points": df.select(pl.len()).collect().item(), "columns": len(df.collect_schema()),
                   "output_mb": 0.0, "parquet_mb": size / 1e6, "streamed": True}
        else:
            out = {"points": df.height, "columns": df.width, "output_mb": df.estimated_size() / 1e6,
                   "streamed": False}
    else:
        from benchmarks.bench_pareto import CHUNKS, specs_for
        from engine.analytical import pareto

        s = specs_for("deepseek_v3", "gb200_nvl72", 8192, 1024)
        per_batch = 437_248 / 128     # valid points per batch size of the 72-device grid
        batches = list(range(1, max(2, round(points / per_batch)) + 1))
        base = rss_mb()
        c0 = time.process_time()
        table, front, dropped = pareto.sweep(s, 72, batches, CHUNKS, max_sp=72)
        cpu = time.process_time() - c0
        out = {"points": table.height + sum(dropped.values()) - sum(v for k, v in dropped.items()
                                                                    if k != "does not fit in memory"),
               "fit": table.height, "frontier": front.height, "output_mb": table.estimated_size() / 1e6}
    out.update(sweep_cpu_s=cpu, rss_before_mb=base, peak_rss_mb=peak_rss_mb())
    print("RESULT " + json.dumps(out))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    from _measure import Bench, run_child

    bench = Bench("bench_memory", __doc__, reps=3)
    bench.parser.add_argument("--points", type=int, default=1_000_000)
    bench.parser.add_argument("--checkout", default=None, help="measure this simllm checkout (PYTHONPATH)")
    args = bench.parse_args()
    env = dict(os.environ)
    if args.checkout:
        env["PYTHONPATH"] = env["SIMLLM_CHECKOUT"] = str(Path(args.checkout).resolve())
    for kind in ("grid", "grid_memory", "grid_out", "grid_narrow", "pareto"):
        runs = []
        for _ in range(bench.reps):
            r = run_child([sys.executable, str(HERE), "--child", kind, str(args.points)], env=env)
            doc = json.loads(next(line for line in r["stdout"].splitlines() if line.startswith("RESULT "))[7:])
            runs.append((r, doc))
        doc = runs[-1][1]
        label = {"grid": "grid sweep (default)", "grid_memory": "grid sweep in memory (stream_mb=0)",
                 "grid_out": "grid sweep to parquet parts (out=)",
                 "grid_narrow": "grid sweep, 3 metric columns", "pareto": "pareto sweep"}[kind]
        row = bench.record(f"{label}, {doc['points']:,} points (process)", [r["cpu_s"] for r, _ in runs],
                           [r["wall_s"] for r, _ in runs], max(r["peak_mb"] for r, _ in runs),
                           n=doc["points"], unit="points", kind="process", **doc)
        print(f"{label}: {doc['points']:,} points, peak RSS {row['peak_mb']:.0f} MB (output frame "
              f"{doc['output_mb']:.0f} MB, process before the sweep {doc['rss_before_mb']:.0f} MB), "
              f"sweep call {min(d['sweep_cpu_s'] for _, d in runs):.2f} CPU-s", flush=True)
    bench.finish()


if __name__ == "__main__":
    main()
