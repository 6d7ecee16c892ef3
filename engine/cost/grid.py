"""Piecewise-linear interpolation of log latency on a log-spaced grid, with physical extrapolation.

A measured table is a grid of latencies t over shape axes x_1..x_d (tokens, n, k, batch, length ...).
Kernel time is close to a power law in each axis between two measured points, so we interpolate
linearly in (log x, log t): between grid points x_j <= x < x_{j+1}

    log t(x) = (1 - w) log t(x_j) + w log t(x_{j+1}),   w = (log x - log x_j) / (log x_{j+1} - log x_j)

and multilinearly (2^d corners) over d axes. The interpolant passes exactly through every grid
point. Outside the grid:

* below the smallest measured x the time is clamped to the edge value (a kernel never gets
  faster than its smallest measured launch: the launch floor);
* above the largest measured x_max the time scales as a power law with the axis' physical
  exponent p: t(x) = t(x_max) (x / x_max)^p, i.e. log t = log t(x_max) + p (log x - log x_max).
  p = 1 for quantities the work is proportional to (GEMM m, n, k; batch; decode context; bytes
  of a collective), p = 2 for the prompt length of causal prefill attention (pairs ~ isl^2 / 2).

Units: the caller chooses (seconds in engine.cost); axes are positive numbers.
"""

import numpy as np


def fill_missing(logv: np.ndarray, log_axes: tuple, slopes: tuple, rounds: int = 2) -> np.ndarray:
    """Fill NaN grid points (shapes a benchmark skipped, e.g. out of memory) from measured ones.

    Along each axis in turn, a NaN at x_i takes the nearest measured value x_j on the same line:
    log t_i = log t_j + p (log x_i - log x_j) when x_i > x_j (the axis' physical exponent p), and
    log t_i = log t_j when x_i < x_j (clamped: the launch floor). Repeated ``rounds`` times so a
    point missing on all its lines of one axis can be reached through another axis. Measured
    points are never changed.
    """
    v = np.array(logv, dtype=np.float64)
    for _ in range(rounds):
        if not np.isnan(v).any():
            break
        for ax, (xs, p) in enumerate(zip(log_axes, slopes)):
            moved = np.moveaxis(v, ax, -1)
            flat = moved.reshape(-1, moved.shape[-1])
            for row in flat:
                bad = np.isnan(row)
                if not bad.any() or bad.all():
                    continue
                good = np.flatnonzero(~bad)
                for i in np.flatnonzero(bad):
                    j = good[np.argmin(np.abs(good - i))]
                    row[i] = row[j] + (p * (xs[i] - xs[j]) if xs[i] > xs[j] else 0.0)
            v = np.moveaxis(flat.reshape(moved.shape), -1, ax)
    return v


def padded_min(logv: np.ndarray, slopes: tuple) -> np.ndarray:
    """Make the table non-decreasing along every size axis (slope > 0): t(x) = min over x' >= x of t(x').

    Why: a smaller problem can always be run as a larger one, padded (fewer tokens, a smaller
    batch, a shorter context, fewer bytes), so its time is at most the larger one's. Measured
    points that break this are timing noise; they are lowered to the padded time. Axes with
    slope 0 (e.g. GPU count) are left alone.
    """
    v = np.array(logv)
    for ax, p in enumerate(slopes):
        if p > 0:
            v = np.flip(np.minimum.accumulate(np.flip(v, axis=ax), axis=ax), axis=ax)
    return v


def interp(log_axes: tuple, logv: np.ndarray, log_q: tuple, slopes: tuple) -> np.ndarray:
    """Multilinear interpolation of ``logv`` (no NaN) at log query points ``log_q`` (broadcast).

    Returns log t. See the module docstring for the clamping / power-law extrapolation rule.
    """
    qs = np.broadcast_arrays(*[np.asarray(q, dtype=np.float64) for q in log_q])
    shape = qs[0].shape
    idx, wts = [], []
    extra = np.zeros(shape)
    for xs, q, p in zip(log_axes, qs, slopes):
        if len(xs) == 1:
            idx.append(np.zeros(shape, dtype=np.intp))
            wts.append(np.zeros(shape))
            extra = extra + p * np.maximum(q - xs[0], 0.0)
            continue
        qc = np.clip(q, xs[0], xs[-1])
        extra = extra + p * (q - qc).clip(min=0.0)
        i = np.clip(np.searchsorted(xs, qc, side="right") - 1, 0, len(xs) - 2)
        idx.append(i)
        wts.append((qc - xs[i]) / (xs[i + 1] - xs[i]))
    out = np.zeros(shape)
    d = len(log_axes)
    for corner in range(1 << d):
        w = np.ones(shape)
        ii = []
        for a in range(d):
            hi = (corner >> a) & 1
            if len(log_axes[a]) == 1 and hi:
                w = w * 0.0
                ii.append(idx[a])
                continue
            w = w * (wts[a] if hi else 1.0 - wts[a])
            ii.append(idx[a] + hi)
        out = out + w * logv[tuple(ii)]
    return out + extra
