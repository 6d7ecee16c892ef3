"""Prediction intervals on a job's headline metrics (``uncertainty`` config group): the job's
regime (load kind, load band from its own summary, framework profile, precision, kernel
backend) looked up in the error model
of ``engine.uncertainty``, ``*_lo`` / ``*_hi`` added to the summary, one assumption per metric
naming the regime and its row count. A job priced by the transfer backend (a chip with no measured
kernel tables) has each interval widened by the transfer curves' leave-one-chip-out error
(``engine.uncertainty.loco``): half-width sqrt(q_regime^2 + q_loco^2) on the log scale. Nothing
here runs when ``uncertainty.enabled`` is false."""

import functools

from engine.uncertainty import HEADLINE, ErrorModel, regime_of
from engine.uncertainty.regimes import FIELDS, load_band, precision_class, queue_share


def load_kind(engine: str, arrival: str = "", server: bool = False) -> str:
    """The load kind of a job: analytical -> static; DES: every request at t=0 (arrival batch)
    -> offline, closed_loop -> closed, MLPerf server search -> server, else (Poisson, trace,
    gamma ...) -> open."""
    if engine != "des":
        return "static"
    if server:
        return "server"
    return {"batch": "offline", "closed_loop": "closed"}.get(arrival, "open")


def base_regime(specs, engine: str, server: bool = False, summary: dict | None = None) -> dict:
    """The regime fields of a job but the metric: load kind, load band, profile, precision,
    backend. The band comes from the job's own ``summary`` (``engine.uncertainty.regimes.load_band``:
    none for a static job; unknown without a summary, e.g. before the run, which pools)."""
    from engine.analytical.kernels import backend

    be = backend(specs)
    if be == "auto":   # resolved with the chip: measured where it has tables, else transfer
        from engine.cost import resolve
        be = resolve("auto", specs.framework.kernel_tables, specs.hardware)
    m = specs.model
    load = load_kind(engine, getattr(specs.workload, "arrival", ""), server)
    return {"load": load, "band": load_band(load, summary),
            "framework": specs.framework.name,
            "precision": precision_class(str(getattr(m, "weight_dtype", "")), str(getattr(m, "activation_dtype", ""))),
            "backend": be}


@functools.lru_cache(maxsize=None)
def model_for(table: str | None) -> ErrorModel:
    """The error model of ``table`` (None or '': the shipped one), read once per process."""
    return ErrorModel.load(table or None)


@functools.lru_cache(maxsize=None)
def loco_for(table: str | None):
    """The transfer LOCO table of ``table`` (None or '': the shipped one), read once per process."""
    from engine.uncertainty.loco import LocoTable
    return LocoTable.load(table or None)


def transfer_widening(specs, base: dict, level: float, loco_table: str | None = None):
    """The LOCO quantile (engine.uncertainty.loco.LocoQuantile) that widens a job's intervals:
    the pooled GEMM + attention group of the job's kernel-table framework at ``level``, when the
    job's backend is transfer; None for every other backend (nothing is read). Raises SpecError
    naming uncertainty.loco_table when the table is missing, malformed or cannot give one."""
    if base["backend"] != "transfer":
        return None
    from engine.errors import SpecError

    try:
        lt = loco_for(loco_table)
        lq = lt.quantile(specs.framework.kernel_tables, level)
    except (FileNotFoundError, ValueError) as e:
        raise SpecError("uncertainty.loco_table", loco_table, str(e)) from None
    if lq is None:
        raise SpecError("uncertainty.loco_table", loco_table,
                        f"a quantile at level {level} (the table's stored levels reach {lt.levels[-1]}, "
                        "or its points are too few for the level); lower uncertainty.level")
    return lq


def _widened_note(iv0, iv, lq, path: str | None) -> str:
    """The assumption's tail for a widened interval: the formula with its numbers, the unwidened
    factors, and the LOCO points the quantile rests on."""
    return (f"; widened by the transfer backend's leave-one-chip-out (LOCO) error from x{iv0.lo_factor:.3f} to "
            f"x{iv0.hi_factor:.3f}: half-width sqrt({iv0.q:.3f}^2 + {lq.q:.3f}^2) = {iv.q:.3f} (log scale), "
            f"q_loco = the {lq.level:.1%} LOCO quantile of |ln(transfer / measured)| over {lq.n:,} "
            f"{lq.framework} {lq.group} kernel points of {len(lq.chips)} held-out chips "
            f"({', '.join(lq.chips)}; {path or 'engine/uncertainty/data/transfer_loco.json'})")


def band_note(band: str, summary: dict):
    """The assumption (engine.result.Assumption) saying where a DES job's load band came from:
    its queue share with the numbers, or why it has none (None for a static job)."""
    from engine.result import Assumption

    if band == "none":
        return None
    if band == "unknown":
        return Assumption("interval load band", "unknown", "the summary has no queueing_ms_mean / ttft_ms_mean: "
                          "the intervals pool over the load bands (regime metric|load|stat and coarser)")
    return Assumption("interval load band", band,
                      f"queue share = queueing_ms_mean / ttft_ms_mean = {summary['queueing_ms_mean']:.4g} / "
                      f"{summary['ttft_ms_mean']:.4g} ms = {queue_share(summary):.3f} (light < 0.6 <= moderate "
                      "< 0.7 <= heavy; engine.uncertainty.regimes.load_band)")


def annotate(summary: dict, specs, engine: str, level: float, table: str | None = None,
             loco_table: str | None = None) -> list:
    """Add ``<key>_lo`` / ``<key>_hi`` for each headline key of ``summary`` with a finite value;
    return the assumptions (engine.result.Assumption) naming each interval's regime and rows, for
    a DES job its load band's queue share (``band_note``), and for a transfer-priced job the LOCO widening (``transfer_widening``; engine.uncertainty.loco)."""
    import math

    from engine.result import Assumption

    em = model_for(table)
    base = base_regime(specs, engine, summary=summary)
    lq = transfer_widening(specs, base, level, loco_table)
    if lq is not None:
        from engine.uncertainty.loco import widen
    bn = band_note(base["band"], summary)
    notes, seen = ([bn] if bn is not None else []), {}
    for key in HEADLINE:
        v = summary.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            continue
        iv = em.interval(regime_of(key, **base), level)
        if iv is None:
            notes.append(Assumption(f"interval {key}", "none",
                                    f"fewer rows than a {level:.0%} interval needs in every regime of {base}"))
            continue
        iv0 = iv
        if lq is not None:
            iv = widen(iv, lq.q)
        summary[f"{key}_lo"], summary[f"{key}_hi"] = iv.bounds(float(v))
        seen.setdefault(iv.regime, []).append(key)
        pooled = iv.regime.count("|") + 1 < len(FIELDS)
        notes.append(Assumption(f"interval {key}", f"{level:.0%}: x{iv.lo_factor:.3f} to x{iv.hi_factor:.3f}",
                                f"split-conformal on ln(predicted/measured) of {iv.n} validation rows, regime "
                                f"'{iv.regime}'" + (f" (pooled: the finer regimes of {', '.join(f'{k}={v}' for k, v in base.items())} "
                                f"have fewer than {em.min_rows} rows or too few for the level)" if pooled else "")
                                + (_widened_note(iv0, iv, lq, loco_table) if lq is not None else "")))
    summary["uncertainty_level"] = level
    return notes
