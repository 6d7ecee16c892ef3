"""Speed of the analytical engine: one evaluation, and a 10,000-point vectorised grid.

    python benchmarks/bench_analytical.py

Prints wall-clock figures (median of repeats); nothing is asserted.
"""

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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


def timeit(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    s = specs()
    run(s)  # warm-up (imports, first numpy calls)
    one = timeit(lambda: run(s), 200)
    axes = dict(batch_size=np.arange(1, 101), prompt_len=[128, 512, 2048, 8192, 32768],
                hbm_bandwidth_bytes_s=[2e12, 3.35e12, 4.8e12, 8e12],
                output_len=[128, 1024, 4096, 8192, 16384])
    n = 100 * 5 * 4 * 5
    sweep(s, **axes)
    grid = timeit(lambda: sweep(s, **axes), 20)
    print(f"analytical run(), one configuration: {one * 1e3:.3f} ms (median of 200)")
    print(f"analytical sweep(), {n:,}-point grid: {grid * 1e3:.1f} ms (median of 20) "
          f"= {grid / n * 1e6:.2f} us/point, {n / grid:,.0f} points/s")


if __name__ == "__main__":
    main()
