"""Speed of the analytical engine: one evaluation, and a 10,000-point vectorised grid.

    python benchmarks/bench_analytical.py [--reps 20] [--track]

Prints CPU-s of each call alone and wall time (min/median of the repetitions), the peak memory a
call adds, this process's CPU-s and peak RSS, and writes benchmarks/results/bench_analytical.json;
nothing is asserted. (bench_memory.py measures a 10^6-point sweep in a fresh process.)
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._measure import Bench  # noqa: E402
from engine.analytical import run, sweep  # noqa: E402
from engine.spec import (CalibrationSpec, HardwareSpec, ModelSpec, PartitionSpec, Specs,  # noqa: E402
                         WorkloadSpec)


def specs():
    hw = HardwareSpec(name="h100_sxm", peak_flops_bf16=989.4e12, hbm_capacity_bytes=80e9,
                      hbm_bandwidth_bytes_s=3.35e12, scaleup_bandwidth_bytes_s=450e9,
                      scaleup_latency_s=2e-6, scaleout_bandwidth_bytes_s=50e9, devices_per_node=8)
    m = ModelSpec(name="llama_3_1_8b", num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8,
                  head_dim=128, ffn_size=14336, vocab_size=128256)
    return Specs(hw, m, PartitionSpec(tp=1), WorkloadSpec(prompt_len=512, output_len=128, batch_size=16),
                 CalibrationSpec(0.88, 0.85, 0.75, 2e9, 0.9))


def main():
    bench = Bench("bench_analytical", __doc__, reps=20)
    args = bench.parse_args()
    s = specs()
    bench.region("run(), one configuration", lambda: run(s), n=1, unit="runs", reps=max(args.reps, 10) * 10)
    axes = dict(batch_size=np.arange(1, 101), prompt_len=[128, 512, 2048, 8192, 32768],
                hbm_bandwidth_bytes_s=[2e12, 3.35e12, 4.8e12, 8e12],
                output_len=[128, 1024, 4096, 8192, 16384])
    n = 100 * 5 * 4 * 5
    bench.region(f"sweep(), {n:,}-point grid", lambda: sweep(s, **axes), n=n, unit="points")
    one, grid = (bench.rows[0]["cpu_s"]["median"], bench.rows[1]["cpu_s"]["median"])
    print(f"analytical run(), one configuration: {one * 1e3:.3f} CPU-ms (median of {bench.rows[0]['cpu_s']['n']})")
    print(f"analytical sweep(), {n:,}-point grid: {grid * 1e3:.1f} CPU-ms (median of {bench.rows[1]['cpu_s']['n']}) "
          f"= {grid / n * 1e6:.2f} CPU-us/point, {n / grid:,.0f} points per CPU-s")
    bench.finish()


if __name__ == "__main__":
    main()
