"""Report figures (matplotlib, Agg backend): roofline, latency vs a swept parameter or load,
TTFT/TPOT CDFs, Pareto frontier, operator time shares, a metric's trend over commits/dates. Each function takes plain data, writes one PNG and returns its
path, or returns None when the data for that figure is absent.
"""

from pathlib import Path

import numpy as np
import polars as pl

#: Per-config series beyond this many share one legend entry per colour (legend would overflow).
_MAX_LEGEND = 12
#: Height (fraction of requests) over which the CDF plot spreads the runs' interval bars below
#: the p50 and p99 levels, so that bars of several runs do not cover each other.
_DODGE = 0.12


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 110, "font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
                         "legend.fontsize": 8, "axes.titlesize": 10})
    return plt


def _colors(n: int):
    plt = _plt()
    cmap = plt.get_cmap("tab10" if n <= 10 else "viridis")
    return [cmap(i if n <= 10 else i / max(n - 1, 1)) for i in range(n)]


def _log_if_wide(ax, axis: str, values) -> None:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0])
    if v.size and v.max() / v.min() > 20:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
        a = ax.xaxis if axis == "x" else ax.yaxis
        if v.max() / v.min() < 1e3:  # short range: label 1-2-5 of each decade
            a.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        a.set_major_formatter(FuncFormatter(lambda val, _: f"{val:g}"))  # 10, 100 not 10^1
        a.set_minor_formatter(NullFormatter())  # minor labels collide on a short decade


def _spans(ax, axis: str, at, lo, hi, color, gid: str, **style):
    """Intervals as capped bars: ``axis`` x -> horizontal bars from lo[i] to hi[i] at height
    at[i], y -> vertical ones at abscissa at[i]. Drawn as an errorbar about the midpoint with no
    marker (a prediction interval carries the model's bias, so it need not contain the point);
    the bars' LineCollection gets ``gid`` (tests and readers find it by that)."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    xy, err = ((mid, at), "xerr") if axis == "x" else ((at, mid), "yerr")
    eb = ax.errorbar(*xy, fmt="none", ecolor=color, capsize=3, elinewidth=1.4, zorder=2.5,
                     **{err: half}, **style)
    for lc in eb.lines[2]:
        lc.set_gid(gid)
    return eb


def _interval_label(level: float | None, what: str) -> str:
    """Legend text of an interval: '80% prediction interval of WHAT' (level unknown: no %)."""
    return (f"{level:.0%} " if level else "") + f"prediction interval of {what}"


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path)
    _plt().close(fig)
    return path


def _phase_points(t: pl.DataFrame, phase: str):
    """(intensity FLOP/B, attained FLOP/s per device) of a phase for each row of an analytical
    table: FLOPs / (tp*pp*sp) / (max(compute, memory) + comm)."""
    need = [f"{phase}_flops", f"{phase}_intensity_flop_per_byte", f"{phase}_compute_ms",
            f"{phase}_memory_ms", f"{phase}_comm_ms", "tp", "pp", "sp"]
    if not all(c in t.columns for c in need):
        return None
    time_s = (np.maximum(t[f"{phase}_compute_ms"].to_numpy(), t[f"{phase}_memory_ms"].to_numpy())
              + t[f"{phase}_comm_ms"].to_numpy()) / 1e3
    dev = (t["tp"] * t["pp"] * t["sp"]).to_numpy()
    return t[f"{phase}_intensity_flop_per_byte"].to_numpy(), t[f"{phase}_flops"].to_numpy() / dev / time_s


def roofline(tables: dict[str, pl.DataFrame], labels: dict[str, str], path: Path) -> Path | None:
    """Attained FLOP/s vs arithmetic intensity, log-log; one roof (min(peak, BW x I)) and ridge per
    distinct chip, prefill (o) and decode (s) points per config, coloured per config."""
    plt = _plt()
    runs = [r for r in tables if _phase_points(tables[r], "prefill") is not None
            and {"peak_flops_s", "hbm_bandwidth_bytes_s"} <= set(tables[r].columns)]
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 5))
    colors = dict(zip(runs, _colors(len(runs))))
    roofs = {}
    xs = []
    for i, r in enumerate(runs):
        t = tables[r]
        size = 40 + 160 * (len(runs) - 1 - i) / max(len(runs) - 1, 1)  # stacked points show as rings
        for peak, bw in zip(t["peak_flops_s"].to_list(), t["hbm_bandwidth_bytes_s"].to_list()):
            roofs.setdefault((peak, bw), r)
        for phase, marker in (("prefill", "o"), ("decode", "s")):
            pts = _phase_points(t, phase)
            if pts is not None:
                ax.scatter(pts[0], pts[1], marker=marker, s=size, color=colors[r], edgecolor="black",
                           linewidth=0.5, zorder=3)
                xs.extend(pts[0].tolist())
    lo, hi = min(xs + [p / b for p, b in roofs]) / 4, max(xs + [p / b for p, b in roofs]) * 4
    grid = np.geomspace(lo, hi, 200)
    for (peak, bw), r in roofs.items():
        c = colors[r] if len(roofs) == len(runs) else "0.35"
        ax.plot(grid, np.minimum(peak, bw * grid), color=c, lw=1.1, alpha=0.8, zorder=2)
        ax.plot([peak / bw], [peak], marker="^", color=c, ms=5, zorder=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of HBM traffic)")
    ax.set_ylabel("attained compute per device (FLOP/s)")
    ax.set_title("Roofline: prefill (o) and decode (s) of each config; lines = chip roofs, ^ = ridge")
    handles = [plt.Line2D([], [], marker="o", ls="", color="0.5", mec="black", label="prefill"),
               plt.Line2D([], [], marker="s", ls="", color="0.5", mec="black", label="decode"),
               plt.Line2D([], [], marker="^", ls="-", color="0.35", label="roof / ridge")]
    if len(runs) <= _MAX_LEGEND:
        handles += [plt.Line2D([], [], color=colors[r], lw=3, label=labels.get(r, r[:8])) for r in runs]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.set_size_inches(7.5 + (2.8 if len(runs) <= _MAX_LEGEND else 0.8), 5)
    return _save(fig, path)


def latency_vs(x: dict[str, float], series: dict[str, str], ttft: dict[str, tuple], tpot: dict[str, tuple],
               xlabel: str, path: Path, title: str, bands: dict | None = None) -> Path | None:
    """TTFT and TPOT (p50 solid, p99 dashed when it differs) vs a numeric swept parameter or load.

    x: run -> x value; series: run -> series label (the other swept parameters);
    ttft/tpot: run -> (p50 ms, p99 ms or None); bands: {"ttft"|"tpot": run -> (lo, hi) ms} of the
    p50's prediction interval (uncertainty.enabled), drawn shaded where every run of a series has one."""
    plt = _plt()
    runs = [r for r in x if r in ttft and ttft[r][0] is not None]
    if len(runs) < 2:
        return None
    names = sorted({series[r] for r in runs})
    colors = dict(zip(names, _colors(len(names))))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, data, what in ((axes[0], ttft, "TTFT"), (axes[1], tpot, "TPOT")):
        for i, s in enumerate(names):
            ms = max(9 - 2.5 * i, 3) if len(names) <= 4 else 5  # coinciding series stay visible
            rs = sorted((r for r in runs if series[r] == s and data.get(r, (None,))[0] is not None),
                        key=lambda r: x[r])
            xs = [x[r] for r in rs]
            ax.plot(xs, [data[r][0] for r in rs], "o-", color=colors[s], ms=ms, lw=max(2.5 - 0.6 * i, 1), label=f"{s} p50" if len(names) > 1 else "p50")
            band = (bands or {}).get(what.lower(), {})
            if rs and all(band.get(r, (None, None))[0] is not None for r in rs):
                ax.fill_between(xs, [band[r][0] for r in rs], [band[r][1] for r in rs], color=colors[s],
                                alpha=0.18, lw=0, label=f"{s} p50 interval" if len(names) > 1 else "p50 interval")
            p99 = [data[r][1] for r in rs]
            if any(p is not None and p != data[r][0] for p, r in zip(p99, rs)):
                ax.plot(xs, p99, "v--", color=colors[s], ms=ms, label=f"{s} p99" if len(names) > 1 else "p99")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{what} (ms)")
        ax.set_title(f"{what} vs {xlabel.split(' (')[0]}")
        _log_if_wide(ax, "x", [x[r] for r in runs])
        _log_if_wide(ax, "y", [v for r in runs for v in data.get(r, (None, None)) if v is not None])
    handles, lbls = axes[0].get_legend_handles_labels()
    if len(lbls) <= 2 * _MAX_LEGEND:
        fig.legend(handles, lbls, loc="lower center", ncol=min(len(lbls), 4), frameon=False)
        fig.suptitle(title)
        fig.tight_layout(rect=(0, 0.06 * (1 + (len(lbls) - 1) // 4), 1, 1))
        fig.savefig(path)
        plt.close(fig)
        return path
    fig.suptitle(title)
    return _save(fig, path)


def cdfs(samples: dict[str, dict[str, np.ndarray]], labels: dict[str, str], path: Path,
         intervals: dict | None = None, level: float | None = None) -> Path | None:
    """Empirical CDFs of per-request TTFT and TPOT (ms), one curve per run, overlaid.

    samples: run -> {'ttft': ms array, 'tpot': ms array}; intervals: run -> {'ttft'|'tpot':
    [(quantile, lo ms, hi ms), ...]}, the prediction intervals of the run's p50 and p99
    (uncertainty.enabled, at ``level``), drawn as horizontal bars at those heights in the run's
    colour, the i-th run's lowered by i x ``_DODGE`` / number of runs (at most 0.02) so that
    runs' bars stay apart. The rest of the curve gets no band: the error model is fitted on
    centre and tail statistics (engine.uncertainty.regimes), not on every quantile."""
    plt = _plt()
    runs = [r for r in samples if any(len(v) for v in samples[r].values())]
    if not runs:
        return None
    colors = dict(zip(runs, _colors(len(runs))))
    dodge = {r: -i * min(0.02, _DODGE / len(runs)) for i, r in enumerate(runs)}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    barred = False
    for ax, what in zip(axes, ("ttft", "tpot")):
        allv = []
        for r in runs:
            v = np.sort(np.asarray(samples[r].get(what, []), dtype=float))
            v = v[np.isfinite(v)]
            if v.size == 0:
                continue
            allv.extend([v[0], v[-1]])
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", color=colors[r],
                    label=labels.get(r, r[:8]))
            bars = (intervals or {}).get(r, {}).get(what) or []
            if bars:
                q, lo, hi = zip(*bars)
                _spans(ax, "x", np.add(q, dodge[r]), lo, hi, colors[r], gid="interval-x")
                allv.extend(lo + hi)
                barred = True
        ax.set_xlabel(f"{what.upper()} (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{what.upper()} CDF")
        _log_if_wide(ax, "x", allv)
    handles, lbls = axes[0].get_legend_handles_labels()
    if barred:
        handles.append(plt.Line2D([], [], color="0.3", marker="|", ms=8, mew=1.4, lw=1.4))
        lbls.append(_interval_label(level, "p50 and p99 (bars at 0.5 and 0.99" +
                                    (", one row per run)" if len(runs) > 1 else ")")))
    if lbls and len(lbls) <= _MAX_LEGEND:
        fig.legend(handles, lbls, loc="lower center", ncol=min(len(lbls), 3), frameon=False)
        fig.tight_layout(rect=(0, 0.07 * (1 + (len(lbls) - 1) // 3), 1, 1))
        fig.savefig(path)
        plt.close(fig)
        return path
    return _save(fig, path)


def pareto_front(x, y) -> list[int]:
    """Indices of the points not dominated when both x and y are to be maximised, by x."""
    pts = sorted(((xi, yi, i) for i, (xi, yi) in enumerate(zip(x, y))
                  if xi is not None and yi is not None and np.isfinite(xi) and np.isfinite(yi)),
                 key=lambda p: (-p[0], -p[1]))
    front, best = [], -np.inf
    for xi, yi, i in pts:
        if yi > best:
            front.append(i)
            best = yi
    return sorted(front, key=lambda i: x[i])


def _label_points(ax, items, fontsize=7.5) -> None:
    """Annotate points, trying four placements per label and taking the first whose box (in
    display pixels, estimated from the text length) overlaps no label placed before."""
    ax.get_xlim(), ax.get_ylim()  # settle autoscaling so transData is final
    fig = ax.figure
    px = fig.dpi / 72.0
    placed = []
    for x, y, text in items:
        X, Y = ax.transData.transform((x, y))
        w, h = 0.6 * fontsize * len(text) * px, 1.3 * fontsize * px
        for dx, dy, ha, va in ((6, 4, "left", "bottom"), (6, -4, "left", "top"),
                               (-6, -4, "right", "top"), (-6, 4, "right", "bottom")):
            x0 = X + dx * px - (w if ha == "right" else 0)
            y0 = Y + dy * px - (h if va == "top" else 0)
            box = (x0, y0, x0 + w, y0 + h)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                       for b in placed):
                break
        placed.append(box)
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), ha=ha, va=va,
                    fontsize=fontsize)


def _reaches(front: list[int], xs, ys, corner: tuple) -> bool:
    """Whether the point ``corner`` (a dominated point's optimistic interval corner: x hi, y hi)
    is dominated by no frontier point, i.e. its interval reaches the frontier."""
    return not any(xs[j] >= corner[0] and ys[j] >= corner[1] for j in front)


def pareto(points: list[tuple], path: Path,
           ylabel: str = "throughput (tokens/s per GPU)", level: float | None = None) -> Path | None:
    """Throughput per GPU vs tokens/s per user; the frontier joined, each frontier point labelled
    with its partition, the highest-throughput frontier point starred. When several configs each
    bring a grid of points, each gets its own frontier and only its best point is labelled.

    points: (tok/s/user, tok/s/GPU, partition label, config label[, x interval, y interval]) - one
    per run, or one per row of a run's grid table (the analytical engine's Pareto sweep). An
    interval is (lo, hi) or None (uncertainty off, grid rows): drawn as bars in that axis; the
    frontier runs through the point predictions, and a dominated point whose optimistic corner
    (x hi, y hi) no frontier point dominates is ringed: within its intervals it may be on the
    frontier."""
    plt = _plt()
    pts = [p for p in points if p[0] is not None and p[1] is not None
           and np.isfinite(p[0]) and np.isfinite(p[1])]
    if not pts:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    groups = list(dict.fromkeys(p[3] for p in pts))  # configs, in the report's row order
    members = {g: [i for i, p in enumerate(pts) if p[3] == g] for g in groups}
    per_config = len(groups) > 1 and all(len(m) > 1 for m in members.values())
    colors = dict(zip(groups, _colors(len(groups)))) if 1 < len(groups) <= _MAX_LEGEND else {}
    for g in groups:
        gi = members[g]
        ax.scatter([xs[i] for i in gi], [ys[i] for i in gi], s=14 if per_config else 22,
                   color=colors.get(g, "0.6"), alpha=0.35 if per_config else 0.8, zorder=2,
                   label=None if per_config or not colors else g)
    if not colors:
        ax.collections[0].set_label("configs" if len(pts) <= len(groups) else "grid points")
    ivs = [(p[4] if len(p) > 4 else None, p[5] if len(p) > 5 else None) for p in pts]
    for axis, k in (("x", 0), ("y", 1)):
        for g in groups:
            gi = [i for i in members[g] if ivs[i][k] is not None]
            if gi:
                at = [(ys if axis == "x" else xs)[i] for i in gi]
                _spans(ax, axis, at, [ivs[i][k][0] for i in gi], [ivs[i][k][1] for i in gi],
                       colors.get(g, "0.45"), gid=f"interval-{axis}", alpha=0.8)
    labelled, fronts = [], []
    if per_config:  # grid tables of several configs: one frontier per config, its best labelled
        for g in groups:
            gi = members[g]
            f = [gi[j] for j in pareto_front([xs[i] for i in gi], [ys[i] for i in gi])]
            ax.plot([xs[i] for i in f], [ys[i] for i in f], "o-", ms=4, lw=1.6,
                    color=colors.get(g, "tab:red"), zorder=3, label=f"{g} frontier")
            labelled.append(max(f, key=lambda i: ys[i]))
            fronts.append((gi, f))
        win = max(labelled, key=lambda i: ys[i])
    else:
        front = pareto_front(xs, ys)
        ax.plot([xs[i] for i in front], [ys[i] for i in front], "o-", color="tab:red", ms=6,
                label="Pareto frontier", zorder=3)
        labelled = front
        fronts.append((range(len(pts)), front))
        win = max(front, key=lambda i: ys[i])
    ringed = [i for gi, f in fronts for i in gi if i not in f and any(ivs[i]) and _reaches(
        f, xs, ys, tuple(iv[1] if iv else v for iv, v in zip(ivs[i], (xs[i], ys[i]))))]
    if any(a or b for a, b in ivs):
        ax.plot([], [], color="0.45", marker="|", ms=8, mew=1.4, lw=1.4,
                label=_interval_label(level, "each run (bars)"))
    if ringed:
        ax.scatter([xs[i] for i in ringed], [ys[i] for i in ringed], s=110, facecolor="none",
                   edgecolor="tab:red", linewidth=1.2, zorder=3, gid="reaches-front",
                   label="dominated, but its interval reaches the frontier")
    best = pts[win][3]
    ax.scatter([xs[win]], [ys[win]], marker="*", s=260, color="gold", edgecolor="black", zorder=4,
               label=f"best tok/s/GPU: {pts[win][2]}" + (f" ({best})" if best and len(groups) > 1 else ""))
    ax.set_xlabel("interactivity (tokens/s per user)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"Pareto frontier: {ylabel.split(' (')[0]} per GPU vs interactivity")
    _log_if_wide(ax, "x", xs)
    _log_if_wide(ax, "y", ys)
    ax.margins(x=0.16, y=0.1)
    _label_points(ax, [(xs[i], ys[i], pts[i][2]) for i in labelled])
    handles, lbls = ax.get_legend_handles_labels()
    ncol = 2 if len(lbls) > 4 else 1
    fig.legend(handles, lbls, loc="lower center", ncol=ncol, frameon=False)
    fig.tight_layout(rect=(0, 0.05 + 0.04 * -(-len(lbls) // ncol), 1, 1))
    fig.savefig(path)
    plt.close(fig)
    return path


#: Operator classes of a pass (engine.analytical.step.StepModel.breakdown), in stacking order.
OP_CLASSES = ("dense", "attention", "experts", "comm", "overhead")


def op_shares(shares: dict[str, dict[str, dict[str, float]]], labels: dict[str, str],
              path: Path) -> Path | None:
    """Stacked horizontal bars of each run's share of pass time per operator class, one panel per
    phase present (``shares[run][phase][class]``, phase prefill or decode). None when no run has
    shares."""
    phases = [ph for ph in ("prefill", "decode") if any(ph in s for s in shares.values())]
    if not phases:
        return None
    plt = _plt()
    runs = list(shares)
    fig, axes = plt.subplots(1, len(phases), figsize=(5.2 * len(phases), 0.45 * len(runs) + 1.6),
                             squeeze=False, sharey=True)
    colors = dict(zip(OP_CLASSES, _colors(len(OP_CLASSES))))
    y = np.arange(len(runs))
    for ax, ph in zip(axes[0], phases):
        left = np.zeros(len(runs))
        for cls in OP_CLASSES:
            v = np.array([shares[r].get(ph, {}).get(cls, 0.0) or 0.0 for r in runs])
            ax.barh(y, v, left=left, color=colors[cls], label=cls)
            left += v
        ax.set_xlim(0, 1)
        ax.set_title(f"{ph} pass")
        ax.set_xlabel("share of pass time")
        ax.set_yticks(y, [labels.get(r, r) for r in runs])
        ax.grid(axis="y", visible=False)
    axes[0][-1].legend(loc="lower right", fontsize=7)
    return _save(fig, path)


def cluster_timeseries(series: dict[str, pl.DataFrame], labels: dict[str, str], path: Path) -> Path | None:
    """DES cluster time series (engine.des.outputs.timeseries_s; ``timeseries.parquet``), one column of
    panels per quantity over time, one line per run: arrival rate, waiting queue, replicas
    (active; dotted: billed, i.e. with provisioning and draining), SLO attainment of the requests
    arriving in each window, cumulative cost (or replica-hours without a price). Returns None
    without series."""
    series = {k: v for k, v in series.items() if v is not None and v.height}
    if not series:
        return None
    plt = _plt()
    cost = all("cost_usd" in t.columns for t in series.values())
    panels = [("arrivals_per_s", "arrivals (req/s)"), ("waiting", "waiting requests"),
              ("replicas_active", "replicas"), ("slo_attainment", "SLO attainment"),
              ("cost_usd" if cost else "replica_hours", "cost (USD)" if cost else "replica-hours")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 1.9 * len(panels)), sharex=True)
    hours = max(float(t["t_s"].max()) for t in series.values()) > 4 * 3600
    scale, unit = (3600.0, "h") if hours else (1.0, "s")
    for (rid, t), c in zip(series.items(), _colors(len(series))):
        x = t["t_s"].to_numpy() / scale
        for ax, (col, label) in zip(axes, panels):
            y = t[col].to_numpy().astype(float)
            if col == "slo_attainment" and len(y) > 30:   # 5-minute-ish rolling mean: readable
                k = max(1, len(y) // 150)
                y = pl.Series(y).rolling_mean(k, min_samples=1).to_numpy()
            ax.plot(x, y, color=c, lw=1.0, label=labels.get(rid, rid) if col == "arrivals_per_s" else None)
            if col == "replicas_active":
                ax.plot(x, t["replicas_billed"].to_numpy(), color=c, lw=0.8, ls=":")
            ax.set_ylabel(label)
    axes[0].legend(loc="upper left")
    axes[-1].set_xlabel(f"time ({unit})")
    return _save(fig, path)


def trend(series: dict[str, list[tuple]], metric: str, unit: str, by: str, path: Path) -> Path | None:
    """A metric over time for fixed configs: series label (the config's name: what differs
    between the configs, ``report.config_labels``) -> [(x, value, point label)], x the run's start time (``by`` = date) or the commit's position in time
    (``by`` = commit; point labels are the short commits). One line per config."""
    plt = _plt()
    pts = {k: v for k, v in series.items() if v}
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    colors = dict(zip(pts, _colors(len(pts))))
    for k, v in pts.items():
        xs = [p[0] for p in v]
        ax.plot(xs, [p[1] for p in v], "o-", color=colors[k], label=k if len(pts) <= _MAX_LEGEND else None)
        if by == "commit" and len(pts) == 1:
            for x, y, lab in v:
                ax.annotate(lab, (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    if by == "commit":
        order = sorted({(p[0], p[2]) for v in pts.values() for p in v})
        ax.set_xticks([o[0] for o in order])
        ax.set_xticklabels([o[1] for o in order], rotation=45, ha="right", fontsize=7)
        ax.set_xlabel("git commit (in order of its first run)")
    else:
        fig.autofmt_xdate()
        ax.set_xlabel("run start (UTC)")
    ax.set_ylabel(f"{metric} ({unit})" if unit else metric)
    ax.set_title(f"{metric} over {'commits' if by == 'commit' else 'time'}, per config")
    if len(pts) <= _MAX_LEGEND:
        ax.legend(title="config", frameon=False, loc="best")
    return _save(fig, path)
