"""The discrete-event engine's optional per-step features, attached to the replicas of a
simulation and read back into its summary and table: speculative decoding
(engine.des.speculation), device power and energy with the TDP throttle (engine.des.power),
per-token timestamps, and the seed's sanity check of the simulated latencies against their
lower bounds.

Lower bounds (the SimLLM seed's first check: DES prefill 1.2-1.5x its theoretical lower bound,
decode near the bandwidth bound): the same ``StepModel`` at the spec sheet's peaks (compute and
memory-bandwidth efficiency 1), roofline (no kernel tables), no host overheads:
    prefill_lb_ms  per request: its prompt alone in one pass (engine.analytical.prefill.single_pass)
    decode_lb_ms   one decode step at the simulated mean batch and mean mid-decode context
                   (engine.analytical.decode.tpot): the weights + KV bytes over peak HBM bandwidth
                   when memory-bound
    prefill_lb_ratio = mean TTFT / mean prefill_lb_ms (queueing included, as the seed's check);
    prefill_service_lb_ratio = mean (TTFT - queueing) / mean prefill_lb_ms (from first admission);
    decode_lb_ratio = mean TPOT / decode_lb_ms
over completed requests. With speculative decoding a
TPOT below the one-token bound (ratio < 1) is the speculation's gain.
"""

from dataclasses import replace

import numpy as np
import polars as pl

from engine.result import Assumption


def attach(specs, des, sm, noise, reps, st) -> dict:
    """Attach the enabled features to the replicas; returns the shared objects (for summary)."""
    out = {"spec": None, "powers": []}
    if specs.analytical.spec_decode.method != "none":
        from engine.des.speculation import Speculation
        out["spec"] = Speculation(specs, sm, noise, des.seed)
    tdp = specs.hardware.tdp_w
    if tdp is not None:
        from engine.des.power import Power, roof_functions
        one, run, line = roof_functions(sm)
        for r in reps:
            r.power = Power(des, tdp, specs.analytical.idle_power_fraction,
                            specs.partition.devices_per_replica)
            r.roof_one, r.roof_run, r.roof_line = one, run, line
            out["powers"].append(r.power)
    for r in reps:
        r.specdec = out["spec"]
    if des.token_times:
        st.token_times = [[] for _ in range(st.n)]
    return out


def kv_blocks(specs, des, cap) -> int:
    """KV blocks of a replica (``cap``: engine.des.kv.kv_capacity) with a speculative
    draft's weights and KV beside the target's (engine.analytical.specdec.draft_memory): the room
    less the draft weights x usable fraction, over target + draft KV bytes per token."""
    if specs.analytical.spec_decode.method == "none" or cap.tokens <= 0:
        return cap.blocks
    from engine.analytical import specdec
    p = specs.partition
    w_d, kvd = specdec.draft_memory(specs, p.tp, p.ep, p.sp)
    w_d, kvd = float(w_d), float(kvd)
    if not (w_d or kvd):
        return cap.blocks
    room = cap.kv_capacity_gb * 1e9
    per_token = room / cap.tokens                 # the target's KV bytes per token per device
    tokens = max(room - w_d * specs.kv_usable_fraction, 0.0) / (per_token + kvd)
    return int(tokens // des.block_size)


def lower_bound_model(specs):
    """The StepModel of the lower bounds (module docstring): spec-sheet peaks, roofline, no
    overheads."""
    from engine.analytical import step
    p = specs.partition
    sm = step.build(specs, p.tp, p.pp, p.ep, p.sp, compute_efficiency=1.0, memory_bandwidth_efficiency=1.0)
    sm = replace(sm._as_floats(), kern=None, step_overhead_s=0.0, per_token_overhead_s=0.0,
                 frontend_s_per_token=0.0)
    return sm


def prefill_lb_s(specs, prompts: np.ndarray) -> np.ndarray:
    """Per-request prefill lower bound [s]: the prompt alone, one pass, at the peaks."""
    from engine.analytical import prefill
    sm = lower_bound_model(specs)
    S = np.asarray(prompts, dtype=float)
    return np.asarray(prefill.single_pass(sm, specs.model, 1.0, S, float(specs.partition.pp), 1, 0.0)["ttft_s"]
                      * np.ones_like(S))


def decode_lb_s(specs, batch: float, S: float, N: float) -> float:
    """Decode-step lower bound [s] at batch ``batch``, prompt S, output N (mean context)."""
    from engine.analytical import decode
    sm = lower_bound_model(specs)
    pp = float(specs.partition.pp)
    return float(decode.tpot(sm, specs.model, max(batch, 1.0), S, max(N, 2.0), pp,
                             specs.analytical.pp_microbatches)["tpot_s"])


def summary(specs, feats: dict, st, table: pl.DataFrame, s: dict, span_s: float, devices: int) -> dict:
    """Summary figures of the attached features and the lower-bound check."""
    out = {}
    if feats["powers"]:
        from engine.des import power
        out.update(power.summary(feats["powers"], st, span_s, devices))
    sp = feats["spec"]
    if sp is not None:
        from engine.analytical import specdec
        out.update(spec_tokens_per_step=st.spec_tokens / st.spec_steps if st.spec_steps else float("nan"),
                   spec_expected_tokens=float(specdec.expected_tokens(sp.alpha, sp.gamma)),
                   spec_steps=st.spec_steps)
    done = np.isfinite(table["ttft_ms"].to_numpy()) & np.isfinite(st.completion)
    if done.any():
        lb = prefill_lb_s(specs, st.prompt[done]) * 1e3
        out["prefill_lb_ms"] = float(lb.mean())
        out["prefill_lb_ratio"] = float(np.mean(table["ttft_ms"].to_numpy()[done]) / lb.mean())
        svc = table["ttft_ms"].to_numpy()[done] - table["queueing_ms"].to_numpy()[done]
        out["prefill_service_lb_ratio"] = float(np.nanmean(svc) / lb.mean())
        tp = table["tpot_ms"].to_numpy()[done]
        tp = tp[np.isfinite(tp)]
        if tp.size:
            b = float(s.get("batch_size_mean") or 1.0)
            dlb = decode_lb_s(specs, b, float(np.mean(st.prompt[done])), float(np.mean(st.output[done]))) * 1e3
            out["decode_lb_ms"] = dlb
            out["decode_lb_ratio"] = float(tp.mean() / dlb)
    return out


def table_columns(specs, des, feats: dict, st, table: pl.DataFrame, rtt_half_s: float = 0.0) -> pl.DataFrame:
    """The per-request table with the features' columns: energy_prefill_j, energy_decode_j,
    energy_j (with a power model), prefill_lb_ms, and with ``token_times`` the timestamps of each
    token (s, as first_token_s) and the gaps between them (ms)."""
    cols = [pl.Series("prefill_lb_ms", prefill_lb_s(specs, st.prompt) * 1e3)]
    if feats["powers"]:
        cols += [pl.Series("energy_prefill_j", st.energy_prefill_j),
                 pl.Series("energy_decode_j", st.energy_decode_j),
                 pl.Series("energy_j", st.energy_prefill_j + st.energy_decode_j)]
    if st.token_times is not None:
        times = [(np.concatenate(tt) + rtt_half_s) if tt else np.zeros(0) for tt in st.token_times]
        cols += [pl.Series("token_times_s", [t.tolist() for t in times], dtype=pl.List(pl.Float64)),
                 pl.Series("itl_ms", [(np.diff(t) * 1e3).tolist() for t in times], dtype=pl.List(pl.Float64))]
    return table.with_columns(cols)


def csv_table(table: pl.DataFrame) -> pl.DataFrame:
    """The table as CSV can hold it: list columns (token times, ITLs) joined with ';'."""
    lists = [c for c, t in table.schema.items() if isinstance(t, pl.List)]
    if not lists:
        return table
    return table.with_columns([pl.col(c).cast(pl.List(pl.Utf8)).list.join(";") for c in lists])


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
        pw = des
        out.append(Assumption("power", f"P = TDP x ({specs.analytical.idle_power_fraction} + "
                              f"({pw.peak_power_ratio:g} - {specs.analytical.idle_power_fraction}) x busy "
                              "fraction) per device",
                              "busy = the iteration's roofline time (engine.des.power); an iteration's "
                              "energy shared by its tokens (prefill chunk tokens, one per decoding "
                              "sequence)"))
        if pw.throttle:
            out.append(Assumption("TDP throttle", f"sustained ({pw.throttle_time_constant_s:g} s average) power capped "
                                  f"at {specs.hardware.tdp_w:g} W, clock >= {pw.throttle_min_clock:g}",
                                  "the busy part of an iteration stretches so its power equals TDP while "
                                  "the average exceeds TDP (engine.des.power)"))
    else:
        out.append(Assumption("power", "not modelled", "hardware.tdp not given: no energy figures"))
    out.append(Assumption("SRAM", f"{specs.hardware.sram_bytes / 1e6:g} MB on chip: unused",
                          "weights, KV and activations are all streamed from HBM (no on-chip "
                          "residency or fusion credit)"))
    out.append(Assumption("lower bounds", "prefill_lb_ms, decode_lb_ms at spec-sheet peaks",
                          "the seed's sanity check: DES prefill ~1.2-1.5x its lower bound, decode near "
                          "the bandwidth bound (prefill_lb_ratio, decode_lb_ratio)"))
    return out


__all__ = ["attach", "summary", "table_columns", "csv_table", "assumptions"]
