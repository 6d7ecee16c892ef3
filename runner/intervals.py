"""Prediction intervals on a job's headline metrics (``uncertainty`` config group): the job's
regime (load kind, framework profile, precision, kernel backend) looked up in the error model
of ``engine.uncertainty``, ``*_lo`` / ``*_hi`` added to the summary, one assumption per metric
naming the regime and its row count. Nothing here runs when ``uncertainty.enabled`` is false."""

import functools

from engine.uncertainty import HEADLINE, ErrorModel, regime_of
from engine.uncertainty.regimes import FIELDS, precision_class


def load_kind(engine: str, arrival: str = "", server: bool = False) -> str:
    """The load kind of a job: analytical -> static; DES: every request at t=0 (arrival batch)
    -> offline, closed_loop -> closed, MLPerf server search -> server, else (Poisson, trace,
    gamma ...) -> open."""
    if engine != "des":
        return "static"
    if server:
        return "server"
    return {"batch": "offline", "closed_loop": "closed"}.get(arrival, "open")


def base_regime(specs, engine: str, server: bool = False) -> dict:
    """The regime fields of a job but the metric: load kind, profile, precision, backend."""
    from engine.analytical.kernels import backend

    be = backend(specs)
    if be == "auto":   # resolved with the chip: measured where it has tables, else transfer
        from engine.cost import resolve
        be = resolve("auto", specs.framework.kernel_tables, specs.hardware)
    m = specs.model
    return {"load": load_kind(engine, getattr(specs.workload, "arrival", ""), server),
            "framework": specs.framework.name,
            "precision": precision_class(str(getattr(m, "weight_dtype", "")), str(getattr(m, "activation_dtype", ""))),
            "backend": be}


@functools.lru_cache(maxsize=None)
def model_for(table: str | None) -> ErrorModel:
    """The error model of ``table`` (None or '': the shipped one), read once per process."""
    return ErrorModel.load(table or None)


def annotate(summary: dict, specs, engine: str, level: float, table: str | None = None) -> list:
    """Add ``<key>_lo`` / ``<key>_hi`` for each headline key of ``summary`` with a finite value;
    return the assumptions (engine.result.Assumption) naming each interval's regime and rows."""
    import math

    from engine.result import Assumption

    em = model_for(table)
    base = base_regime(specs, engine)
    notes, seen = [], {}
    for key in HEADLINE:
        v = summary.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            continue
        iv = em.interval(regime_of(key, **base), level)
        if iv is None:
            notes.append(Assumption(f"interval {key}", "none",
                                    f"fewer rows than a {level:.0%} interval needs in every regime of {base}"))
            continue
        summary[f"{key}_lo"], summary[f"{key}_hi"] = iv.bounds(float(v))
        seen.setdefault(iv.regime, []).append(key)
        pooled = iv.regime.count("|") + 1 < len(FIELDS)
        notes.append(Assumption(f"interval {key}", f"{level:.0%}: x{iv.lo_factor:.3f} to x{iv.hi_factor:.3f}",
                                f"split-conformal on ln(predicted/measured) of {iv.n} validation rows, regime "
                                f"'{iv.regime}'" + (f" (pooled: the finer regimes of {', '.join(f'{k}={v}' for k, v in base.items())} "
                                f"have fewer than {em.min_rows} rows or too few for the level)" if pooled else "")))
    summary["uncertainty_level"] = level
    return notes
