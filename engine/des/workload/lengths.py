"""Prompt and output lengths drawn from a ``LengthDist`` (engine.spec.workload) located at a mean."""

import numpy as np

from engine.spec.workload import LengthDist


def sample_lengths(dist: LengthDist, mean: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` integer lengths from ``dist`` located at ``mean`` (see LengthDist), clipped to [low, high]."""
    hi = dist.high if dist.high else np.iinfo(np.int64).max
    if dist.kind == "fixed":
        x = np.full(n, mean, dtype=np.float64)
    elif dist.kind == "uniform":
        top = dist.high if dist.high else max(2 * mean - dist.low, dist.low)
        x = rng.integers(dist.low, top, size=n, endpoint=True).astype(np.float64)
    elif dist.kind == "lognormal":
        mu = np.log(mean) - dist.sigma ** 2 / 2.0
        x = np.rint(rng.lognormal(mu, dist.sigma, size=n))
    elif dist.kind == "zipf":
        ranks = np.arange(1, dist.high - dist.low + 2, dtype=np.float64)
        p = ranks ** -dist.zipf_a
        x = dist.low - 1 + rng.choice(ranks, size=n, p=p / p.sum())
    else:  # empirical
        x = rng.choice(np.asarray(dist.values, dtype=np.float64), size=n)
    return np.clip(x, dist.low, hi).astype(np.int64)


__all__ = ["sample_lengths"]
