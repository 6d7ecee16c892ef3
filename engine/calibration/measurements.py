"""Measured per-request results of real benchmarking clients -> one polars table + the workload.

Readers are registered by format name, one module each under ``engine/calibration/readers/``
(``readers.base.register``); ``read_measurement(path, fmt="auto")`` takes one by name or, with
``auto``, by the file's content (``detect_format``):

vllm       vLLM ``benchmark_serving.py --save-result --save-detailed`` / ``vllm bench serve`` JSON
           (``readers/vllm.py``);
genai_perf genai-perf's ``profile_export.json`` (``readers/genai_perf.py``);
guidellm   GuideLLM's ``benchmarks.json`` report (``readers/guidellm.py``);
csv        a plain per-request table (``readers/csv_table.py``).

The table: request_id, input_len, output_len, arrival_s (null when unknown), ttft_ms, tpot_ms,
e2e_ms (null when unknown). TPOT = (last token - first token) / (output - 1), as simllm defines it.
Where the file has each request's inter-token gaps (vllm ``itls``, genai-perf response times, a
CSV ``itl_ms`` column, a simulation with token times), ``Measurement.itl_p50_ms`` holds each
request's median gap (its regular decode step: robust to the few stalled steps), per table row.
A malformed file raises MeasurementError naming the file, the record and the field.
"""

import inspect
from pathlib import Path

import numpy as np
import polars as pl

from engine.calibration.readers import FORMATS, READERS, detect_format
from engine.calibration.readers.base import COLUMNS, Measurement, MeasurementError, median_gaps_ms, sha256_of
from engine.calibration.readers.csv_table import CSV_FIELD_LIMIT, read_csv
from engine.calibration.readers.genai_perf import read_genai_perf
from engine.calibration.readers.guidellm import read_guidellm
from engine.calibration.readers.vllm import read_vllm


def read_measurement(path, fmt: str = "auto", **kw) -> Measurement:
    """Read ``path`` in ``fmt`` (auto: from its content); ``kw`` go to the reader."""
    fmt = detect_format(path) if fmt == "auto" else fmt
    readers = {name: rd.read for name, rd in READERS.items()}
    if fmt not in readers:
        raise MeasurementError(path, None, "format", fmt, "auto or one of " + ", ".join(FORMATS))
    accepted = [k for k in inspect.signature(readers[fmt]).parameters if k != "path"]
    for k, v in kw.items():
        if k not in accepted:
            users = [f for f, r in readers.items() if k in inspect.signature(r).parameters]
            raise MeasurementError(path, None, k, v, f"no {k} for {fmt} data (only for "
                                   f"{' or '.join(users) or 'no format'}; {fmt} takes "
                                   f"{', '.join(accepted) or 'no options'})")
    m = readers[fmt](path, **kw)
    if len(m) == 0:
        raise MeasurementError(path, None, "requests", 0, f"at least one successful request "
                               f"({fmt} data with every request errored, or none recorded)")
    return m


def request_stream(m: Measurement, seed: int = 0):
    """(stream, order): the DES request stream of a measurement (its lengths, and its arrivals:
    recorded times, or the workload's process drawn with ``seed``), and the table rows in stream
    order (simulated request i is measured row order[i])."""
    from engine.des.workload import RequestStream, arrivals

    t = m.table
    n = t.height
    prompt = t["input_len"].to_numpy().astype(np.int64)
    output = t["output_len"].to_numpy().astype(np.int64)
    wl = m.workload
    users = 0
    kind = wl.get("arrival", "batch")
    if kind == "trace" and t["arrival_s"].null_count() == 0:
        arrival = t["arrival_s"].to_numpy().astype(np.float64)
    elif kind == "closed_loop":
        users = int(wl["concurrency"])
        arrival = arrivals("closed_loop", n, users=users)
    elif kind in ("poisson", "gamma", "trace") and wl.get("rate_rps"):
        # a trace without recorded times at a stated rate: replayed as Poisson
        cv = float(wl.get("arrival_cv", 1.0)) if kind == "gamma" else 1.0
        arrival = arrivals("gamma" if kind == "gamma" else "poisson", n, float(wl["rate_rps"]), cv,
                           rng=seed)
    else:
        arrival = arrivals("batch", n)
    order = np.arange(n)
    if users == 0:
        order = np.argsort(arrival, kind="stable")
        arrival, prompt, output = arrival[order], prompt[order], output[order]
    return RequestStream(arrival_s=arrival, prompt=prompt, output=output,
                         priority=np.ones(n, dtype=np.int8), users=users,
                         think_time_s=float(wl.get("think_time_s", 0.0)) if users else 0.0,
                         source=f"measurement {Path(m.path).name}"), order


def itl_histogram_cdf(state) -> tuple:
    """((log10 ms at the bin edges, CDF there), total weight) of a DES State's ITL histogram
    (the CDF rises linearly in log space inside a bin)."""
    from engine.des.state import ITL_BINS_PER_DECADE, ITL_LO

    state.flush_itl()
    h = state.itl_hist
    total = float(h.sum())
    if total <= 0:
        return None, 0.0
    nz = np.flatnonzero(h)
    lo, hi = nz[0], nz[-1] + 1
    edges = ITL_LO + np.arange(lo, hi + 1) / ITL_BINS_PER_DECADE + 3.0   # log10 s -> log10 ms
    cdf = np.concatenate([[0.0], np.cumsum(h[lo:hi]) / total])
    return (edges, cdf), total


def itl_quantiles_ms(state, qs) -> list:
    """Percentiles ``qs`` of a DES State's ITL histogram [ms], interpolated linearly in log
    space inside the bin where the CDF crosses (the State's own percentiles are bin centres, a
    1.2 % staircase that a finite-difference optimiser cannot follow)."""
    cdf, _ = itl_histogram_cdf(state)
    if cdf is None:
        return [float("nan")] * len(qs)
    edges, c = cdf
    return [float(10 ** np.interp(q / 100.0, c, edges)) for q in qs]


def from_simulation(sim, workload: dict, path: str = "<simulated>") -> Measurement:
    """A Measurement made from a DES SimResult (the round-trip test's 'measurement'): the
    completed requests, and the ITL distribution as the DES's histogram (``itl_cdf``); with the
    DES's token times (``engine.des.outputs.token_times``) also each request's median gap (``itl_p50_ms``)."""
    table = sim.result.table
    done = table.filter(pl.col("completion_s").is_not_nan() & pl.col("completion_s").is_not_null())
    t = pl.DataFrame({
        "request_id": done["request_id"], "input_len": done["prompt_len"],
        "output_len": done["output_len"], "arrival_s": done["arrival_s"],
        "ttft_ms": done["ttft_ms"], "tpot_ms": done["tpot_ms"], "e2e_ms": done["e2e_ms"]})
    cdf, total = itl_histogram_cdf(sim.state)
    per_request = median_gaps_ms(done["itl_ms"].to_list()) if "itl_ms" in done.columns else None
    return Measurement(t, dict(workload), None, path, "simulation", "", ["made from a simulation"],
                       itl_cdf=cdf, itl_count=total, itl_p50_ms=per_request)


__all__ = ["Measurement", "MeasurementError", "read_measurement", "read_vllm", "read_genai_perf",
           "read_guidellm", "read_csv", "detect_format", "request_stream", "from_simulation", "FORMATS",
           "median_gaps_ms", "COLUMNS", "CSV_FIELD_LIMIT", "sha256_of"]
