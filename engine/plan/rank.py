"""From a searched candidate to the numbers users compare: per GPU, per dollar, per joule.

At the highest rate r meeting the SLOs (the unit fully loaded as far as the SLOs allow):
    req/s per GPU           r / devices of the unit
    tok/s per GPU           output tokens/s measured in the DES window / devices
    interactivity           1000 / p50 TPOT [tok/s per user]
    cost per 1M out tokens  price [USD/device-h] x devices / (3600 x tok/s) x 1e6
    energy per out token    P x devices / tok/s [J], P = TDP x (idle + (1 - idle) u) per device
                            (engine.analytical.energy.power_w) with u the DES utilisation (share
                            of time the replica runs passes): a busy device is counted at TDP, so
                            this is an upper estimate
    units for R req/s       ceil(R / r) (checked by a DES of that many units at R when a target
                            is given, one more unit per failure)
Ranking (``objective``): gpus -> highest req/s per GPU (fewest GPUs for R when R is given);
cost -> lowest cost per token (USD per h for R); energy -> lowest J per token.
"""

import math

import numpy as np

from engine.analytical import energy
from engine.analytical.pareto import frontier_mask


def figures(max_rps: float, devices: int, metrics: dict, price_per_hour, tdp_w, idle_fraction: float,
            target_rps: float = 0.0) -> dict:
    """The per-GPU / per-dollar / per-joule figures of one candidate at its max rate."""
    tok = float(metrics.get("throughput_tok_s") or float("nan"))
    tpot50 = float(metrics.get("tpot_ms_p50") or float("nan"))
    util = float(metrics.get("utilisation") or float("nan"))
    out = {
        "rps_per_gpu": max_rps / devices if devices else float("nan"),
        "tok_s": tok,
        "tok_s_per_gpu": tok / devices if devices else float("nan"),
        "interactivity_tok_s_per_user": 1000.0 / tpot50 if tpot50 > 0 else float("nan"),
        "usd_per_mtok": (price_per_hour * devices / (3600.0 * tok) * 1e6
                         if price_per_hour is not None and tok > 0 else float("nan")),
        "j_per_tok": float(energy.joules_per_token(
            energy.power_w(tdp_w, idle_fraction, np.asarray(util), np.asarray(1.0)), devices, 1.0, tok))
        if tdp_w and tok > 0 and math.isfinite(util) else float("nan"),
    }
    if target_rps > 0 and max_rps > 0:
        units = math.ceil(target_rps / max_rps - 1e-9)
        out.update(units_for_target=units, gpus_for_target=units * devices,
                   usd_per_hour_for_target=(units * devices * price_per_hour
                                            if price_per_hour is not None else float("nan")))
    return out


def sort_key(objective: str, target_rps: float):
    """Key for ``sorted`` over result rows (dicts): best first; infeasible rows last."""
    def key(r):
        if not r.get("max_rps"):
            return (1, 0.0)
        if objective == "cost":
            v = r.get("usd_per_hour_for_target") if target_rps else r.get("usd_per_mtok")
            return (0, v if v == v else math.inf)
        if objective == "energy":
            v = r.get("j_per_tok")
            return (0, v if v == v else math.inf)
        if target_rps:
            return (0, r.get("gpus_for_target", math.inf), -r["rps_per_gpu"])
        return (0, -r["rps_per_gpu"])
    return key


def pareto(rows: list[dict]) -> np.ndarray:
    """Mask of rows on the upper-right frontier of (tok/s per GPU, tok/s per user)."""
    x = np.array([r.get("tok_s_per_gpu", np.nan) for r in rows], dtype=float)
    y = np.array([r.get("interactivity_tok_s_per_user", np.nan) for r in rows], dtype=float)
    return frontier_mask(x, y) if len(rows) else np.zeros(0, dtype=bool)


def objective_value(objective: str, rps: float, devices: int, price, j_per_tok=None) -> float:
    """Higher-is-better figure of a rate for pruning: req/s per GPU (gpus), per USD-hour (cost),
    or req/s per GPU again for energy (no energy before a run)."""
    if objective == "cost" and price:
        return rps / (devices * price)
    return rps / devices
