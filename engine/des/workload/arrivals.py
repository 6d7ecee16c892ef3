"""Arrival processes: open loop (batch, poisson, gamma, weibull: renewal processes of a rate and a
coefficient of variation), closed loop, and a linear ramp of the rate. A leaf: numpy and scipy only,
so the trace importers and the sessions draw from it without importing the stream builder.
"""

import numpy as np

from engine.errors import SpecError
from engine.spec.workload import WorkloadSpec


def arrivals(kind: str, n: int, rate: float = 0.0, cv: float = 1.0, users: int = 0,
             rng: np.random.Generator | int = 0) -> np.ndarray:
    """Arrival times [s] of ``n`` requests: the one arrivals generator of the project (the
    WorkloadSpec streams, measurement replays and ``simllm-validate``'s dataset rows all call it,
    so a process means the same draws everywhere).

    kind ``batch``: all at 0. ``closed_loop``: the first ``min(users, n)`` at 0, the rest NaN (the
    DES sets each when that user's previous request completes). ``poisson``: exponential gaps of
    mean 1/rate. ``gamma``: gamma gaps of shape 1/cv^2 and scale 1/(rate shape), so the mean gap is
    1/rate and the gaps' coefficient of variation is cv (cv > 1 is burstier than Poisson).
    ``weibull`` (engine.des.clients.arrival_dist): Weibull gaps of shape k with cv^2 = G(1 + 2/k) /
    G(1 + 1/k)^2 - 1 (``weibull_shape``) and scale 1/(rate G(1 + 1/k)): mean 1/rate. Open-loop
    streams start at 0 (the first gap is dropped). ``rng``: a Generator (consumed: n draws) or an
    integer seed for ``np.random.default_rng``.
    """
    if kind == "batch":
        return np.zeros(n)
    if kind == "closed_loop":
        arr = np.full(n, np.nan)
        arr[:min(users, n)] = 0.0
        return arr
    if kind not in ("poisson", "gamma", "weibull"):
        raise SpecError("workload.arrival", kind, "batch, closed_loop, poisson or gamma")
    if not rate > 0:
        raise SpecError("workload.rate_rps", rate, f"a positive rate for {kind} arrivals")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if kind == "poisson":
        gaps = rng.exponential(1.0 / rate, size=n)
    elif kind == "weibull":
        k = weibull_shape(cv)
        from scipy.special import gamma as G
        gaps = rng.weibull(k, size=n) / (rate * G(1.0 + 1.0 / k))
    else:
        shape = 1.0 / cv ** 2
        gaps = rng.gamma(shape, 1.0 / (rate * shape), size=n)
    if n:
        gaps[0] = 0.0
    return np.cumsum(gaps)


def weibull_shape(cv: float) -> float:
    """Weibull shape k whose gaps have coefficient of variation ``cv``: the root of
    G(1 + 2/k) / G(1 + 1/k)^2 - 1 = cv^2 (k = 1 at cv = 1: exponential), by Brent's method on
    log k in [log 0.05, log 50] (cv from about 0.03 to 1e4)."""
    from scipy.optimize import brentq
    from scipy.special import gammaln

    def f(lk):
        k = np.exp(lk)
        return np.exp(gammaln(1 + 2 / k) - 2 * gammaln(1 + 1 / k)) - 1 - cv * cv
    return float(np.exp(brentq(f, np.log(0.05), np.log(50.0), xtol=1e-12)))


def synthetic_arrivals(spec: WorkloadSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    """Open-loop arrival times [s] of a WorkloadSpec (batch, poisson or gamma): ``arrivals``."""
    return arrivals(spec.arrival, n, spec.rate_rps, spec.arrival_cv, rng=rng)


def ramp_arrivals(arrival_s: np.ndarray, ramp_s: float) -> np.ndarray:
    """Open-loop arrivals under a linear ramp of the rate from 0 to R over ``ramp_s`` seconds.

    With rate r(t) = R t / W for t < W and R after, the expected arrivals by t are
    Lambda(t) = R t^2 / (2 W) (t < W), R (t - W / 2) (t >= W). A stream drawn at the constant
    rate R has Lambda_R(a) = R a, so the time change a -> Lambda^-1(R a) gives the ramped stream:
    t = sqrt(2 W a) for a < W / 2, t = a + W / 2 otherwise (continuous at a = W / 2, t = W).
    Times are measured from the first arrival (vLLM ``benchmark_serving --ramp-up-strategy
    linear`` ramps the request rate the same way).
    """
    a = np.asarray(arrival_s, dtype=np.float64)
    if ramp_s <= 0 or not a.size:
        return a
    t0 = a[0]
    x = a - t0
    return t0 + np.where(x < ramp_s / 2, np.sqrt(2.0 * ramp_s * np.maximum(x, 0.0)), x + ramp_s / 2)


__all__ = ["arrivals", "weibull_shape", "synthetic_arrivals", "ramp_arrivals"]
