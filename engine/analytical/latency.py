"""Roofline latency: time of a phase = max(FLOPs / effective compute, bytes / effective bandwidth).

Williams, Waterman & Patterson, "Roofline: an insightful visual performance model" (CACM 2009).
Seconds; vectorised over numpy arrays.
"""

import numpy as np


def mean_of_max_affine(a0, a1, b0, b1, x0, x1):
    """Mean over x uniform on [x0, x1] of max(a0 + a1 x, b0 + b1 x), exactly.

    Used for TPOT: a decode step's compute time and memory time are each affine in the context
    length x (attention FLOPs and KV bytes grow linearly), so the step time is the max of two
    lines. Split [x0, x1] at the crossing x* = (b0 - a0) / (a1 - b1) (clipped into the interval);
    on each piece one line dominates and the mean of a line over a segment is its value at the
    segment's midpoint, so
        mean = [(x* - x0) f((x0 + x*)/2) + (x1 - x*) f((x* + x1)/2)] / (x1 - x0),
    with f = max of the two lines; f(x0) when x1 == x0.
    """
    a0, a1, b0, b1, x0, x1 = np.broadcast_arrays(*(np.asarray(v, dtype=float)
                                                    for v in (a0, a1, b0, b1, x0, x1)))

    def f(x):
        return np.maximum(a0 + a1 * x, b0 + b1 * x)

    slope = a1 - b1
    with np.errstate(divide="ignore", invalid="ignore"):
        xs = np.where(slope != 0, (b0 - a0) / np.where(slope != 0, slope, 1.0), x0)
    xs = np.clip(xs, x0, x1)
    width = x1 - x0
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = ((xs - x0) * f((x0 + xs) / 2) + (x1 - xs) * f((xs + x1) / 2)) / width
    return np.where(width > 0, mean, f(x0))


def batch_star(weight_time_s, mem_time_per_seq_s, compute_time_per_seq_s):
    """B*: the decode batch at which a step turns compute-bound [sequences].

    A decode step of B sequences costs compute B*x and memory w + B*y (w: streaming the weights,
    y: each sequence's KV and activation bytes). They meet at B* = w / (x - y); if x <= y the step
    never turns compute-bound (B* = inf). Below B* more batch is nearly free; above it TPOT grows
    linearly with B.
    """
    gap = compute_time_per_seq_s - mem_time_per_seq_s
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gap > 0, weight_time_s / np.where(gap > 0, gap, 1.0), np.inf)


def sum_max_affine(a0, a1, b0, b1, n):
    """sum_{i=0}^{n-1} max(a0 + a1 i, b0 + b1 i), exactly [same unit as a0].

    Chunked prefill: chunk i's attention compute and KV traffic both grow linearly with the
    context already cached (i x C), so each chunk's time is the max of two lines in i. The lines
    cross once at x = (b0 - a0) / (a1 - b1); on each side one line wins and the sum of a line over
    i = lo..hi-1 is (hi - lo) x0 + x1 (hi - lo)(lo + hi - 1)/2.
    """
    a0, a1, b0, b1, n = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a0, a1, b0, b1, n)))
    d0, d1 = a0 - b0, a1 - b1
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(d1 != 0, -d0 / np.where(d1 != 0, d1, 1.0), 0.0)
    s_pos = np.clip(np.ceil(x), 0, n)        # d1 > 0: line a wins for i >= s_pos
    s_neg = np.clip(np.floor(x) + 1, 0, n)   # d1 < 0: line a wins for i < s_neg

    def seg(x0, x1, lo, hi):
        return (hi - lo) * x0 + x1 * (hi - lo) * (lo + hi - 1) / 2.0

    zero = np.zeros_like(n)
    pos = seg(b0, b1, zero, s_pos) + seg(a0, a1, s_pos, n)
    neg = seg(a0, a1, zero, s_neg) + seg(b0, b1, s_neg, n)
    flat = np.where(d0 >= 0, seg(a0, a1, zero, n), seg(b0, b1, zero, n))
    return np.where(d1 > 0, pos, np.where(d1 < 0, neg, flat))
