"""vLLM's ``benchmarks/benchmark_serving.py --save-result --save-detailed`` (also ``vllm bench
serve``): one JSON object with per-request lists ``input_lens``, ``output_lens``, ``ttfts`` [s],
``itls`` [list of s per request], ``errors`` ('' = success), optional ``start_times`` [s]; the
traffic as ``request_rate`` (a number or "inf"), ``burstiness`` (gamma shape: arrival cv =
1/sqrt(burstiness)) and ``max_concurrency``."""

import math

import numpy as np
import polars as pl

from engine.calibration.readers.base import (Measurement, MeasurementError, _get, _load_json, _num, _table,
                                             median_gaps_ms, register, sha256_of)


@register("vllm", detect=lambda doc: "ttfts" in doc or "input_lens" in doc,
          describe="a vLLM --save-result JSON (ttfts)")
def read_vllm(path) -> Measurement:
    doc = _load_json(path)
    for key in ("input_lens", "output_lens", "ttfts", "itls"):
        v = _get(path, None, doc, key, "a per-request list (run benchmark_serving with --save-result "
                                        "--save-detailed)")
        if not isinstance(v, list):
            raise MeasurementError(path, None, key, type(v).__name__, "a list")
    n = len(doc["input_lens"])
    for key in ("output_lens", "ttfts", "itls"):
        if len(doc[key]) != n:
            raise MeasurementError(path, None, key, f"{len(doc[key])} entries",
                                   f"{n} entries, one per request like input_lens")
    errors = doc.get("errors") or [""] * n
    starts = doc.get("start_times")
    for key, v in (("errors", errors), ("start_times", starts)):
        if v is not None and (not isinstance(v, list) or len(v) != n):
            raise MeasurementError(path, None, key, f"{len(v)} entries" if isinstance(v, list) else
                                   type(v).__name__, f"a list of {n} entries, one per request like input_lens")
    rows, itls = [], []
    for i in range(n):
        if errors[i]:
            continue
        inp = _num(path, i, "input_lens", doc["input_lens"][i], integer=True, positive=True)
        out = _num(path, i, "output_lens", doc["output_lens"][i], integer=True, positive=True)
        ttft = _num(path, i, "ttfts", doc["ttfts"][i], positive=True)
        gaps = doc["itls"][i]
        if not isinstance(gaps, list):
            raise MeasurementError(path, i, "itls", gaps, "a list of inter-token gaps [s]")
        g = np.array([_num(path, i, "itls", x) for x in gaps], dtype=np.float64)
        tpot = float(g.sum() / (out - 1) * 1e3) if out > 1 and g.size else float("nan")
        arr = _num(path, i, "start_times", starts[i]) if starts else None
        e2e = (ttft + g.sum()) * 1e3
        rows.append((i, inp, out, arr, ttft * 1e3, tpot, e2e))
        itls.append(g * 1e3)
    table = _table(rows)
    if starts and table.height:
        table = table.with_columns(pl.col("arrival_s") - pl.col("arrival_s").min())
    rate = doc.get("request_rate", "inf")
    burst = doc.get("burstiness", 1.0) or 1.0
    conc = doc.get("max_concurrency")
    wl = {"num_requests": table.height}
    notes = []
    if isinstance(rate, str) and rate.strip().lower() == "inf" or rate is None or \
            (isinstance(rate, (int, float)) and math.isinf(rate)):
        if conc:
            wl.update(arrival="closed_loop", concurrency=int(conc))
            notes.append("request_rate inf with max_concurrency: a closed loop of that many users")
        else:
            wl.update(arrival="batch")
            notes.append("request_rate inf: every request sent at t = 0")
    else:
        r = _num(path, None, "request_rate", rate, positive=True)
        b = _num(path, None, "burstiness", burst, positive=True)
        wl.update(arrival="poisson" if b == 1.0 else "gamma", rate_rps=r, arrival_cv=1.0 / math.sqrt(b))
        if conc:
            notes.append(f"max_concurrency={conc} also capped the open loop; not re-simulated")
    if starts and wl["arrival"] != "closed_loop":
        wl["arrival"] = "trace"
    elif starts:
        # a closed loop stays one: its arrivals depend on the service times, so replaying the
        # recorded send times as an open trace would queue (or idle) the re-simulated requests
        # as soon as a fit tries slower (or faster) parameters than the measured ones
        notes.append("closed loop replayed as a closed loop (recorded send times not used)")
        obs = doc.get("simllm_observe")
        think = ((obs or {}).get("workload") or {}).get("think_time_s") if isinstance(obs, dict) else None
        if isinstance(think, (int, float)) and think > 0:   # simllm-observe: wall s / time scale
            wl["think_time_s"] = float(think) / float(obs.get("time_scale") or 1.0)
    return Measurement(table, wl, np.concatenate(itls) if itls else None, str(path), "vllm",
                       sha256_of(path), notes, itl_p50_ms=median_gaps_ms(itls))
