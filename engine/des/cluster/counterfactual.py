"""Counterfactual re-run: the same arrivals under another policy, per-request regret.

``DesSpec.counterfactual`` = "key=value[,key=value...]" (engine.des settings under their keys
below engine.des, e.g. "scheduling.queue_policy=priority" or
"cluster.router=least_outstanding,cluster.signal_delay_s=5"). The run is simulated as
configured (the baseline) and again with those settings changed, on the identical request stream
(same arrivals, lengths, priorities, hashes; the engine seed unchanged). Per request:
    regret_e2e_ms  = E2E under the counterfactual - E2E under the baseline
    regret_ttft_ms = the same for TTFT
positive = the request got slower under the counterfactual policy. A request counts as
regressed when its E2E regret exceeds max(1 ms, 5 % of its baseline E2E). Requests that finish in
one run only (rejected, shed, cancelled in the other) get NaN regret and are counted apart.
"""


import numpy as np
import polars as pl
import yaml

from engine.errors import SpecError


def parse(text: str) -> dict:
    """'a=1,b=x' -> {'a': 1, 'b': 'x'} (values read as YAML scalars)."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise SpecError("engine.des.counterfactual", text, "key=value pairs separated by commas")
        k, v = part.split("=", 1)
        out[k.strip()] = yaml.safe_load(v)
    return out


def alternative(des, text: str):
    """``des`` with the counterfactual's settings (and no further counterfactual)."""
    from dataclasses import fields

    from engine.spec.des import SUBSPECS

    top = {f.name for f in fields(des)} - set(SUBSPECS) - {"framework", "counterfactual"}
    subs, kw = {}, {}
    for k, v in parse(text).items():
        sub, _, name = k.rpartition(".")
        if sub in SUBSPECS and name in {f.name for f in fields(SUBSPECS[sub])}:
            subs.setdefault(sub, {})[name] = v
        elif not sub and name in top:
            kw[name] = v
        else:
            raise SpecError("engine.des.counterfactual", text,
                            f"engine.des settings ('scheduling.queue_policy=priority'); '{k}' is not one")
    return des.with_(counterfactual="", **subs, **kw)


def regret_table(base: pl.DataFrame, alt: pl.DataFrame) -> pl.DataFrame:
    """One row per request: baseline and counterfactual TTFT/E2E and the regrets, worst first."""
    t = pl.DataFrame({
        "request_id": base["request_id"], "priority": base["priority"],
        "prompt_len": base["prompt_len"], "output_len": base["output_len"],
        "arrival_s": base["arrival_s"],
        "ttft_ms_base": base["ttft_ms"], "ttft_ms_alt": alt["ttft_ms"],
        "e2e_ms_base": base["e2e_ms"], "e2e_ms_alt": alt["e2e_ms"],
    })
    t = t.with_columns((pl.col("e2e_ms_alt") - pl.col("e2e_ms_base")).alias("regret_e2e_ms"),
                       (pl.col("ttft_ms_alt") - pl.col("ttft_ms_base")).alias("regret_ttft_ms"))
    r = t["regret_e2e_ms"].to_numpy()
    base = t["e2e_ms_base"].to_numpy()
    with np.errstate(invalid="ignore"):
        reg = np.isfinite(r) & (r > np.maximum(1.0, 0.05 * base))
    t = t.with_columns(pl.Series("regressed", reg))
    return t.sort("regret_e2e_ms", descending=True, nulls_last=True)


def summary(t: pl.DataFrame) -> dict:
    r = t["regret_e2e_ms"].to_numpy()
    ok = np.isfinite(r)
    reg = t["regressed"].to_numpy() & ok
    out = {"cf_regressed": int(reg.sum()), "cf_improved": int((ok & (r < -np.maximum(1.0, 0.05 * t["e2e_ms_base"].to_numpy()))).sum()),
           "cf_unmatched": int((~ok).sum()),
           "cf_regret_e2e_ms_mean": float(r[ok].mean()) if ok.any() else float("nan"),
           "cf_regret_e2e_ms_max": float(r[ok].max()) if ok.any() else float("nan"),
           "cf_regret_e2e_ms_p99": float(np.percentile(r[ok], 99)) if ok.any() else float("nan")}
    pri = t["priority"].to_numpy()
    for c in np.unique(pri):
        m = ok & (pri == c)
        out[f"cf_class{c}_regret_e2e_ms_mean"] = float(r[m].mean()) if m.any() else float("nan")
        out[f"cf_class{c}_regressed"] = int((reg & (pri == c)).sum())
    return out


__all__ = ["parse", "alternative", "regret_table", "summary"]
