"""Calibration: step-time noise (jump diffusion), measurement import, two-stage fitting.

``noise``: the DES step-time hook built from ``CalibrationSpec.noise``;
``measurements``: per-request results of real benchmark clients -> one polars table + workload;
``fit``: stage 1 (efficiencies, overhead -> p50s) and stage 2 (jitter, jumps -> p99/p99.9).
"""

from engine.calibration.noise import make_noise

__all__ = ["make_noise"]
