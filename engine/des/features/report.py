"""What the features add to a run's results: summary figures (energy, speculation, the lower-bound
check), per-request table columns (energy, prefill_lb_ms, per-token times and gaps) and the
assumptions.md lines, from the objects ``engine.des.features.build`` made (``feats``).
"""

import numpy as np
import polars as pl

from engine.des.features.bounds import decode_lb_s, lower_bound_model, prefill_lb_s
from engine.des.metrics import series
from engine.result import Assumption


def lower_bounds(specs, st) -> tuple:
    """(the lower-bound step model, each request's prefill lower bound [s]): built once for the
    summary and the table (``engine.des.features.bounds``)."""
    sm = lower_bound_model(specs)
    return sm, prefill_lb_s(sm, specs, st.prompt)


def summary(specs, feats: dict, st, table: pl.DataFrame, s: dict, span_s: float, devices: int,
            bounds: tuple) -> dict:
    """Summary figures of the attached features and the lower-bound check (``bounds``: from
    ``lower_bounds``)."""
    out = {}
    if feats["powers"]:
        from engine.des.features import power
        out.update(power.summary(feats["powers"], st, span_s, devices))
    sp = feats["spec"]
    if sp is not None:
        from engine.analytical import specdec
        out.update(spec_tokens_per_step=st.spec_tokens / st.spec_steps if st.spec_steps else float("nan"),
                   spec_expected_tokens=float(specdec.expected_tokens(sp.alpha, sp.gamma)),
                   spec_steps=st.spec_steps)
    done = np.isfinite(table["ttft_ms"].to_numpy()) & np.isfinite(st.completion)
    if done.any():
        lb = bounds[1][done] * 1e3
        out["prefill_lb_ms"] = float(lb.mean())
        out["prefill_lb_ratio"] = float(np.mean(table["ttft_ms"].to_numpy()[done]) / lb.mean())
        svc = table["ttft_ms"].to_numpy()[done] - table["queueing_ms"].to_numpy()[done]
        out["prefill_service_lb_ratio"] = float(np.nanmean(svc) / lb.mean())
        tp = table["tpot_ms"].to_numpy()[done]
        tp = tp[np.isfinite(tp)]
        if tp.size:
            b = float(s.get("batch_size_mean") or 1.0)
            dlb = decode_lb_s(bounds[0], specs, b, float(np.mean(st.prompt[done])), float(np.mean(st.output[done]))) * 1e3
            out["decode_lb_ms"] = dlb
            out["decode_lb_ratio"] = float(tp.mean() / dlb)
    return out


def table_columns(specs, des, feats: dict, st, table: pl.DataFrame, bounds: tuple,
                  rtt_half_s: float = 0.0) -> pl.DataFrame:
    """The per-request table with the features' columns: energy_prefill_j, energy_decode_j,
    energy_j (with a power model), prefill_lb_ms, and with ``token_times`` the timestamps of each
    token (s, as first_token_s) and the gaps between them (ms)."""
    cols = [series("prefill_lb_ms", bounds[1] * 1e3)]
    if feats["powers"]:
        cols += [series("energy_prefill_j", st.energy_prefill_j),
                 series("energy_decode_j", st.energy_decode_j),
                 series("energy_j", st.energy_prefill_j + st.energy_decode_j)]
    if st.token_times is not None:
        times = [(np.concatenate(tt) + rtt_half_s) if tt else np.zeros(0) for tt in st.token_times]
        cols += [pl.Series("token_times_s", [t.tolist() for t in times], dtype=pl.List(pl.Float64)),
                 pl.Series("itl_ms", [(np.diff(t) * 1e3).tolist() for t in times], dtype=pl.List(pl.Float64))]
    return table.with_columns(cols)


def assumptions(specs, des, feats: dict) -> list:
    """assumptions.md lines of the features."""
    out = []
    sp = feats["spec"]
    if sp is not None:
        sd = specs.analytical.spec_decode
        out.append(Assumption("speculative decoding", f"{sd.method}, gamma={sd.gamma}, acceptance={sd.acceptance}",
                              f"{sp.label}; tokens per step drawn per sequence (min(Geometric(1 - "
                              f"alpha), gamma + 1)), seed engine.des.seed={des.seed}; KV grows by the "
                              "accepted tokens (+ gamma lookahead slots held during a step); decodes "
                              "beside prompt chunks speculate too (their verify tokens beyond the "
                              "token budget) when the KV pool has the lookahead blocks"))
    if feats["powers"]:
        pw = des.power
        out.append(Assumption("power", f"P = TDP x ({specs.analytical.idle_power_fraction} + "
                              f"({pw.peak_power_ratio:g} - {specs.analytical.idle_power_fraction}) x busy "
                              "fraction) per device",
                              "busy = the iteration's roofline time (engine.des.features.power); an iteration's "
                              "energy shared by its tokens (prefill chunk tokens, one per decoding "
                              "sequence)"))
        if pw.throttle:
            out.append(Assumption("TDP throttle", f"sustained ({pw.throttle_time_constant_s:g} s average) power capped "
                                  f"at {specs.hardware.tdp_w:g} W, clock >= {pw.throttle_min_clock:g}",
                                  "the busy part of an iteration stretches so its power equals TDP while "
                                  "the average exceeds TDP (engine.des.features.power)"))
    else:
        out.append(Assumption("power", "not modelled", "hardware.tdp not given: no energy figures"))
    out.append(Assumption("SRAM", f"{specs.hardware.sram_bytes / 1e6:g} MB on chip: unused",
                          "weights, KV and activations are all streamed from HBM (no on-chip "
                          "residency or fusion credit)"))
    out.append(Assumption("lower bounds", "prefill_lb_ms, decode_lb_ms at spec-sheet peaks",
                          "the seed's sanity check: DES prefill ~1.2-1.5x its lower bound, decode near "
                          "the bandwidth bound (prefill_lb_ratio, decode_lb_ratio)"))
    return out


__all__ = ["lower_bounds", "summary", "table_columns", "assumptions"]
