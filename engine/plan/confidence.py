"""Plans by probability: the rate at which the SLO is met with probability >= p given the
model's measured error.

The step model's error is what moves capacity: if every iteration of the real server takes
f x the predicted time, the rate it sustains under the same SLO is what the DES finds with step
times x f. The error model (engine.uncertainty) gives, for the job's regime, an interval
[lo, hi] x predicted of the measured TPOT (the per-step time seen by a request) at level p:
P(measured <= hi x predicted) >= p. So searching the rate with every step time x hi (the
interval's pessimistic side) gives a rate met with probability >= p, to the extent that the
TPOT error of the validation rows stands for the step-time error (one-sided use of a two-sided
interval: conservative, its upper tail alone has probability <= 1 - p).

The slowdown is applied through the DES's existing clock-throttle hook of
``calibration.noise`` (``engine.des.noise``: once throttle_after_s of busy time is seen, every
step takes 1 / throttle_factor longer): throttle_after_s = 1 ns, throttle_factor = 1 / f. Every
step but a run's first (which starts at busy time 0) is slowed; in a plan's measurement of
thousands of steps the one left out is immaterial.
"""

from dataclasses import replace

#: Busy time [s] after which the slowdown applies: 1 ns, i.e. from the second step on.
_FROM_START_S = 1e-9


def slowed(specs, factor: float):
    """``specs`` with every DES step time x ``factor`` (>= 1; dimensionless), via calibration.noise's
    throttle (module docstring). Jitter and jumps of the calibration stay as they are."""
    if not factor >= 1.0:
        raise ValueError(f"step-time factor {factor}: expected >= 1")
    cal = specs.calibration
    noise = replace(cal.noise, throttle_after_s=_FROM_START_S, throttle_factor=1.0 / factor)
    return replace(specs, calibration=replace(cal, noise=noise))
