"""Pareto sweep: every valid (PP, TP, EP, SP) x batch x prefill chunk for a device count, evaluated
as numpy arrays (in passes of ``POINTS_PER_PASS`` points), and the upper-right frontier of (throughput per GPU, interactivity).

Partitions: tp, pp, sp, ep each a divisor of the device count D or a power of two <= D, with a
replica of tp x pp x sp <= D devices; dp = floor(D / (tp pp sp)) replicas, the remaining
D - dp tp pp sp devices idle (per-GPU throughput counts the devices in use); ep only for MoE
models, with ep | tp x sp (``pareto.ep_layout = extra``: ep multiplies the devices, see ``partitions``). Invalid points are dropped with a count per reason (``parallel.invalid_reasons``,
then "does not fit in memory"). A point is on the frontier when no other point has both higher
throughput per GPU and higher interactivity (tokens/s per user = 1 / TPOT): sort by throughput
descending and keep each point whose interactivity beats every point before it.
"""

import itertools

import numpy as np
import polars as pl

from engine.analytical import parallel, step
from engine.analytical.pipeline import evaluate
from engine.spec import Specs


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(devices: int) -> list[int]:
    """Sizes tried for each parallel dimension: divisors of ``devices`` and powers of two <= it."""
    return sorted(set(divisors(devices)) | {2 ** k for k in range(devices.bit_length()) if 2 ** k <= devices})


def partitions(specs: Specs, devices: int, max_tp=0, max_pp=0, max_sp=1):
    """Candidate (tp, pp, ep, sp) arrays of replicas of at most ``devices`` (before validity).

    ``engine.analytical.pareto.ep_layout = extra`` (llm_perf's enumeration): ep multiplies the
    devices, tp x pp x sp x ep <= D, and each layout is returned as the equivalent shared one
    (ep' = tp ep, sp' = sp ep for ep > 1; ``PartitionSpec``), so validity and evaluation are the
    shared layout's; ``label`` recovers the EP factor."""
    ds = candidates(devices)
    lim = lambda v, cap: [d for d in ds if not cap or d <= cap]  # noqa: E731
    eps = ds if specs.model.is_moe else [1]
    if specs.analytical.pareto.ep_layout == "extra":
        rows = [(tp, pp, tp * ep if ep > 1 else 1, sp * ep)
                for tp, pp, sp, ep in itertools.product(lim(ds, max_tp), lim(ds, max_pp),
                                                        lim(ds, max_sp), eps)
                if tp * pp * sp * ep <= devices]
    else:
        rows = [(tp, pp, ep, sp) for tp, pp, sp, ep in itertools.product(lim(ds, max_tp), lim(ds, max_pp),
                                                                         lim(ds, max_sp), eps)
                if tp * pp * sp <= devices]
    return np.array(rows, dtype=float).reshape(-1, 4).T


def label(specs: Specs):
    """A polars expression naming each row's partition PP{pp}-TP{tp}-EP{ep}-SP{sp}; with
    ep_layout = extra the EP device factor g = ep'/tp (1 when ep' = 1) and SP = sp'/g, marked
    ``EP{g}x`` (``PartitionSpec.label``)."""
    i = lambda c: pl.col(c).cast(pl.Int64)  # noqa: E731
    if specs.analytical.pareto.ep_layout != "extra":
        return pl.format("PP{}-TP{}-EP{}-SP{}", i("pp"), i("tp"), i("ep"), i("sp"))
    g = pl.when(pl.col("ep") > 1).then(pl.col("ep") / pl.col("tp")).otherwise(1.0)
    return (pl.when(g > 1)
            .then(pl.format("PP{}-TP{}-EP{}x-SP{}", i("pp"), i("tp"), g.cast(pl.Int64),
                            (pl.col("sp") / g).cast(pl.Int64)))
            .otherwise(pl.format("PP{}-TP{}-EP1-SP{}", i("pp"), i("tp"), i("sp"))))


def grid_parts(specs: Specs, devices: int, max_tp=0, max_pp=0, max_sp=1, n_other: int = 1):
    """The valid partitions of ``grid``: (dict of tp, pp, ep, sp, dp arrays, one value per
    partition; dropped: reason -> invalid partitions x ``n_other`` points each)."""
    tp, pp, ep, sp = partitions(specs, devices, max_tp, max_pp, max_sp)
    reasons = parallel.invalid_reasons(specs, tp, pp, ep, sp)
    bad = np.zeros(tp.shape, dtype=bool)
    dropped = {}
    for why, mask in reasons.items():
        new = mask & ~bad
        if new.any():
            dropped[why] = int(new.sum()) * n_other
        bad |= mask
    tp, pp, ep, sp = tp[~bad], pp[~bad], ep[~bad], sp[~bad]
    return dict(tp=tp, pp=pp, ep=ep, sp=sp, dp=np.floor(devices / (tp * pp * sp))), dropped


def _points(parts: dict, b, c, lo: int, hi: int):
    """Grid points lo..hi (partition-major, then batch, then chunk) as flat axis arrays, and the
    partition index of each point."""
    i = np.arange(lo, hi)
    p, r = np.divmod(i, b.size * c.size)
    axes = {k: v[p] for k, v in parts.items()}
    axes["batch_size"] = b[r // c.size]
    axes["prefill_chunk"] = c[r % c.size]
    return axes, p


def grid(specs: Specs, devices: int, batches, chunks, max_tp=0, max_pp=0, max_sp=1):
    """Flat arrays of every (partition, batch, chunk) point and the drop counts of invalid ones.

    Returns (axes: dict of arrays, dropped: dict reason -> count)."""
    b = np.asarray(batches, dtype=float)
    c = np.asarray(chunks, dtype=float)
    parts, dropped = grid_parts(specs, devices, max_tp, max_pp, max_sp, b.size * c.size)
    axes, _ = _points(parts, b, c, 0, parts["tp"].size * b.size * c.size)
    return axes, dropped


#: Finite points above which ``frontier_mask`` drops the surely dominated ones before sorting.
_PRUNE_ABOVE = 4096


def _maybe_on_frontier(x, y, buckets: int = 4096):
    """False for points that cannot be on the frontier, in O(n) (finite x, y): x is cut into
    ``buckets`` equal ranges; a point whose y is at most the largest y of a higher range has a
    point with strictly larger x (a higher range is larger x, bucketing being monotone) and at
    least its y before it in ``frontier_mask``'s order, so it is not kept there. Dropping such
    points changes no survivor's fate: the highest-range point of greatest y above a dropped one
    survives and precedes whatever the dropped one preceded. So ``frontier_mask`` sorts only the
    few survivors instead of every point."""
    lo, hi = x.min(), x.max()
    with np.errstate(all="ignore"):
        scale = buckets / (hi - lo)
    if not (np.isfinite(scale) and scale > 0):
        return np.ones(x.shape, dtype=bool)
    bk = np.minimum(((x - lo) * scale).astype(np.intp), buckets - 1)
    top = np.full(buckets + 1, -np.inf)
    np.maximum.at(top, bk, y)
    above = np.maximum.accumulate(top[::-1])[::-1]     # above[i]: the largest y in ranges >= i
    return y > above[bk + 1]


def frontier_mask(x, y):
    """True where (x, y) is on the upper-right frontier (no point has both larger x and y)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    idx = np.flatnonzero(ok)
    if idx.size > _PRUNE_ABOVE:
        idx = idx[_maybe_on_frontier(x[idx], y[idx])]
    order = idx[np.lexsort((-y[idx], -x[idx]))]      # x descending, ties by y descending
    ys = y[order]
    best_before = np.concatenate([[-np.inf], np.maximum.accumulate(ys)[:-1]])
    keep = np.zeros(x.shape, dtype=bool)
    keep[order[ys > best_before]] = True
    return keep


#: Points per numpy pass of a big sweep. ``evaluate`` holds ~1.1 KB of arrays a point while it
#: runs; evaluating the grid a chunk at a time bounds that working set (~70 MB) whatever the grid
#: size. Each point's metrics are elementwise functions of its own axes, so chunking changes no
#: number (tests/engine/test_sweep_chunks.py checks chunked == one pass).
POINTS_PER_PASS = 16_384


def _series(name: str, v: np.ndarray) -> pl.Series:
    """A polars column of ``v``; a numpy string column of a few distinct labels (``compute`` /
    ``memory`` / ``comm``) is built from their codes (one comparison per label, then a gather),
    ~3x cheaper than polars' element-by-element conversion of numpy strings; same column."""
    if v.dtype.kind != "U":
        return pl.Series(name, v)
    codes = np.zeros(v.shape, dtype=np.uint32)
    left = np.ones(v.shape, dtype=bool)
    labels: list = []
    while left.any():
        if len(labels) == 8:
            return pl.Series(name, v)
        c = v[int(np.argmax(left))]
        hit = v == c
        codes[hit] = len(labels)
        labels.append(str(c))
        left &= ~hit
    return pl.Series(name, labels, dtype=pl.String).gather(codes)


def evaluate_fitting(specs: Specs, axes: dict, columns, points_per_pass: int = POINTS_PER_PASS):
    """``evaluate(specs, lean=True, **axes)`` over flat point arrays, ``points_per_pass`` points at
    a time, keeping ``columns`` of the points that fit in memory.

    Returns (a polars frame of ``columns`` over the fitting points in grid order, built from one
    frame per pass without copying them together; the number of points that do not fit).
    """
    n = int(np.asarray(axes["tp"]).size)
    need = frozenset(columns)
    step = max(1, int(points_per_pass))
    frames = []
    unfit = 0
    for lo in range(0, n, step):
        part = {k: np.asarray(v)[lo:lo + step] for k, v in axes.items()}
        m = part["tp"].size
        res = evaluate(specs, lean=True, need=need, **part)
        fits = np.broadcast_to(res["fits_in_memory"], (m,))
        unfit += m - int(np.count_nonzero(fits))
        frames.append(pl.DataFrame([_series(k, np.broadcast_to(np.asarray(res[k]), (m,))[fits])
                                    for k in columns]))
        del res
    return (frames[0] if len(frames) == 1 else pl.concat(frames, rechunk=False)), unfit


def _labels(specs: Specs, parts: dict) -> list:
    """``label``'s text for each partition of ``parts`` (plain Python, one per partition)."""
    out = []
    extra = specs.analytical.pareto.ep_layout == "extra"
    for tp, pp, ep, sp in zip(*(parts[k].tolist() for k in ("tp", "pp", "ep", "sp"))):
        g = ep / tp if ep > 1 else 1.0
        if extra and g > 1:
            out.append(f"PP{int(pp)}-TP{int(tp)}-EP{int(g)}x-SP{int(sp / g)}")
        elif extra:
            out.append(f"PP{int(pp)}-TP{int(tp)}-EP1-SP{int(sp)}")
        else:
            out.append(f"PP{int(pp)}-TP{int(tp)}-EP{int(ep)}-SP{int(sp)}")
    return out


def sweep(specs: Specs, devices: int, batches, chunks=(0,), max_tp=0, max_pp=0, max_sp=1,
          x_metric="throughput_tok_s_per_gpu", y_metric="interactivity_tok_s_per_user",
          points_per_pass: int = POINTS_PER_PASS):
    """Evaluate every valid point; returns (table, frontier, dropped).

    table: one row per valid point that fits (partition, batch, chunk and the metrics);
    frontier: its upper-right (x_metric, y_metric) frontier, sorted by x, with a ``partition``
    label per point; dropped: reason -> number of points left out. The points are evaluated
    ``points_per_pass`` at a time, each pass's axes cut from the partitions, batches and chunks
    (the full grid is never built): memory stays bounded, results do not change. The step
    model's constants (and, under kernel pricing, the kernel tables) are built once over the
    distinct partitions and gathered per pass (``StepModel.take``); the partition labels are
    written once per partition and gathered."""
    b = np.asarray(batches, dtype=float)
    c = np.asarray(chunks, dtype=float)
    parts, dropped = grid_parts(specs, devices, max_tp, max_pp, max_sp, b.size * c.size)
    n = parts["tp"].size * b.size * c.size
    if n == 0:
        empty = pl.DataFrame()
        return empty, empty, dropped
    # each point sets its own partition; the specs' own partition only fixes the model checks
    keep_cols = ["tp", "pp", "ep", "sp", "dp", "batch_size", "prefill_chunk", "ttft_ms", "tpot_ms",
                 "throughput_tok_s_per_gpu", "decode_throughput_tok_s_per_gpu",
                 "interactivity_tok_s_per_user", "weights_gb", "kv_cache_gb", "decode_bound"]
    sm_all = step.build(specs, parts["tp"], parts["pp"], parts["ep"], parts["sp"])
    need = frozenset(keep_cols)
    step_n = max(1, int(points_per_pass))
    frames, which = [], []
    unfit = 0
    for lo in range(0, n, step_n):
        axes, p = _points(parts, b, c, lo, min(lo + step_n, n))
        m = p.size
        res = evaluate(specs, lean=True, need=need, sm=sm_all.take(p), **axes)
        fits = np.broadcast_to(res["fits_in_memory"], (m,))
        unfit += m - int(np.count_nonzero(fits))
        frames.append(pl.DataFrame([_series(k, np.broadcast_to(np.asarray(res[k]), (m,))[fits])
                                    for k in keep_cols]))
        which.append(p[fits].astype(np.uint32))
        del res
    table = frames[0] if len(frames) == 1 else pl.concat(frames, rechunk=False)
    if unfit:
        dropped["does not fit in memory"] = unfit
    table = table.with_columns(pl.Series("partition", _labels(specs, parts), dtype=pl.String)
                               .gather(np.concatenate(which)))
    on = frontier_mask(table[x_metric].to_numpy(), table[y_metric].to_numpy())
    table = table.with_columns(pl.Series("on_frontier", on))
    frontier = table[np.flatnonzero(on)].sort(x_metric)
    return table, frontier, dropped
