"""Step-time noise for the discrete-event engine: log-normal jitter plus Poisson jumps (a
Merton-style jump diffusion over busy time), and an optional power/TDP throttle.

For each iteration of deterministic time x [s] (``NoiseSpec`` holds the parameters):

    y = x * exp(sigma Z),  Z ~ N(0, 1)                  jitter: median x, mean x exp(sigma^2/2)
    N ~ Poisson(lambda * y s(t))                        jumps per second of busy time
    x' = y * s(t) + sum_{k=1..N} J_k                    J_k: fixed J | Exp(mean J) |
                                                        LogNormal(ln J - s_J^2/2, s_J), mean J
    s(t) = 1 / throttle_factor once the hook has seen throttle_after_s of busy time, else 1

so over a busy time T the expected number of jumps is lambda * T * exp(sigma^2/2), and the mean
added stall per second of busy time is lambda * J. The throttle is a step in clock speed after a
time constant of sustained load: the hook sees only busy time (not idle gaps), so it models a
deployment kept loaded (no cooling); its clock is shared by all replicas of one simulation.

Deterministic per seed: one numpy Generator, consumed in the DES's (deterministic) call order.
Seeds come from ``engine.des.seed``; the request stream has its own seed.
"""

from typing import Callable

import numpy as np

from engine.spec.calibration import NoiseSpec

Noise = Callable[[np.ndarray], np.ndarray]


def jump_sizes(spec: NoiseSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` stall durations [s] from the configured jump distribution (mean ``jump_mean_s``)."""
    j = spec.jump_mean_s
    if spec.jump_dist == "fixed":
        return np.full(n, j)
    if spec.jump_dist == "exponential":
        return rng.exponential(j, size=n)
    s = spec.jump_sigma
    return rng.lognormal(np.log(j) - s * s / 2.0, s, size=n)


class JumpDiffusion:
    """The noise callable: array of step times [s] -> perturbed step times [s] (same shape).

    Counters (``busy_s``, ``jumps``, ``stall_s``, ``steps``) are kept for tests and reports.
    """

    def __init__(self, spec: NoiseSpec, seed: int):
        self.spec = spec
        self.rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x6A756D70]))
        self.busy_s = 0.0
        self.steps = 0
        self.jumps = 0
        self.stall_s = 0.0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        sp, rng = self.spec, self.rng
        x = np.asarray(x, dtype=np.float64)
        y = x * np.exp(sp.jitter_sigma * rng.standard_normal(x.shape)) if sp.jitter_sigma > 0 else x.copy()
        if sp.throttle_after_s > 0 and sp.throttle_factor < 1:
            # steps that start after the throttle point run at throttle_factor of the clock
            start = self.busy_s + np.concatenate(([0.0], np.cumsum(y)[:-1]))
            y = np.where(start >= sp.throttle_after_s, y / sp.throttle_factor, y)
        self.busy_s += float(y.sum())
        self.steps += y.size
        if sp.jump_rate_per_s > 0 and sp.jump_mean_s > 0:
            n = rng.poisson(sp.jump_rate_per_s * y)
            total = int(n.sum())
            if total:
                sizes = jump_sizes(sp, total, rng)
                owner = np.repeat(np.arange(y.size), n.reshape(-1))
                add = np.bincount(owner, weights=sizes, minlength=y.size).reshape(y.shape)
                y = y + add
                self.jumps += total
                self.stall_s += float(sizes.sum())
        return y


def make_noise(spec: NoiseSpec, seed: int) -> JumpDiffusion | None:
    """The DES noise hook for ``spec`` seeded with ``seed``; None when all noise is off (so the
    simulation is bit-for-bit the noiseless one)."""
    return JumpDiffusion(spec, seed) if spec.enabled else None


__all__ = ["JumpDiffusion", "make_noise", "jump_sizes", "Noise"]
