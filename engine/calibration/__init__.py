"""Calibration: measurement import, two-stage fitting.

The step-time noise (jump diffusion) it fits lives in ``engine.des.noise`` (it is the DES's hook;
the calibration package uses the DES, never the reverse). ``make_noise`` is re-exported here.
``measurements``: per-request results of real benchmark clients -> one polars table + workload;
``fit``: stage 1 (efficiencies, overhead -> p50s) and stage 2 (jitter, jumps -> p99/p99.9).
"""

from engine.des.noise import make_noise

__all__ = ["make_noise"]
