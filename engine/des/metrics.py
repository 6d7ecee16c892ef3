"""Per-request table and summary metrics of a simulation (names shared with the analytical engine).

TTFT = first token - arrival; TPOT = (completion - first token) / (output - 1) per request (a
benchmark client's own definition with DesSpec.clients.tpot_definition: ``tpot_ms``);
E2E = completion - arrival; queueing = first admission - arrival; ITL = every gap between two
consecutive tokens of a request (a weighted histogram, not per-token rows). Percentiles are over
completed requests (ITL: over tokens). Throughput counts output tokens over the makespan (first
arrival to last completion); goodput counts requests meeting both SLOs over the makespan.

Which statistic each summary metric reports: ``<metric>_p50/_p90/_p99/_p99_9`` are percentiles over
requests (``numpy.percentile``, linear interpolation) and ``<metric>_mean`` the arithmetic mean over
the same requests, for ttft_ms, tpot_ms, e2e_ms and queueing_ms; itl_ms_* are percentiles over
tokens (no mean); throughput_* are totals over the window (output tokens / seconds), i.e. a mean
rate. Benchmark tools report both forms (vLLM ``benchmark_serving``: mean, median, p99 of TTFT,
TPOT, ITL, E2E); compare a published mean with ``_mean`` and a median with ``_p50``.

Measurement window (``State.window``, from DesSpec.clients.warmup_s / exclude_drain): when set, the
latency statistics cover the completed requests that arrived at or after its start (and, with
exclude_drain, completed by its end, the last arrival); throughput, request throughput and goodput
count completions inside the window over its length. Without a window every request counts.
"""

import math

import numpy as np
import polars as pl

from engine.des.state import State

PCTS = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99_9", 99.9))

try:   # polars' typed constructor of a numpy column (the one its public path ends in)
    from polars.datatypes.constructor import numpy_type_to_constructor as _numpy_constructor
except ImportError:  # pragma: no cover - another polars layout: the public path
    _numpy_constructor = None


def series(name: str, a: np.ndarray) -> pl.Series:
    """``pl.Series(name, a)`` of a plain 1-D numpy column (integer, float or bool), NaN kept as
    NaN. Polars' public constructor asks ``numpy.ma`` whether each array is masked, which imports
    numpy.ma on a process's first table (about 0.01 CPU-s, more than building the whole table of
    10,000 requests); a plain array is never masked, so it goes to the typed constructor that path
    ends in (the same column, same dtype). Anything else, or a polars whose private constructor
    is missing or is called differently (pyproject allows polars 1.x-2.x): the public path."""
    if (_numpy_constructor is None or a.ndim != 1 or a.dtype.kind not in "iufb"
            or not a.dtype.isnative):
        return pl.Series(name, a, nan_to_null=False)
    a = np.ascontiguousarray(a)
    try:    # floats: the flag is nan_to_null (False); integers and bools: strict (True)
        return pl.Series._from_pyseries(_numpy_constructor(a, a.dtype.type)(name, a, a.dtype.kind != "f"))
    except (TypeError, AttributeError, ValueError):   # another polars: its private layout changed
        return pl.Series(name, a, nan_to_null=False)


def frame(columns: dict) -> pl.DataFrame:
    """A DataFrame of plain numpy columns (``series``), in the order given."""
    return pl.DataFrame([series(k, v) for k, v in columns.items()])


def request_table(st: State) -> pl.DataFrame:
    """One row per request (times in s since the first arrival, latencies in ms)."""
    first, done, arr = st.first_token, st.completion, st.arrival
    out = st.output
    tpot = tpot_ms(st)
    return frame({
        "request_id": np.arange(st.n, dtype=np.int64),
        "arrival_s": arr,
        "prompt_len": st.prompt,
        "output_len": out,
        "priority": st.priority.astype(np.int32),
        "replica": st.replica,
        "scheduled_s": st.scheduled,
        "first_token_s": first,
        "completion_s": done,
        "ttft_ms": (first - arr) * 1e3,
        "tpot_ms": tpot,
        "e2e_ms": (done - arr) * 1e3,
        "queueing_ms": (st.scheduled - arr) * 1e3,
        "preemptions": st.preemptions,
        "recomputed_tokens": st.recomputed,
        "cached_tokens": st.cached_tokens,
        "rejected": st.rejected,
    }) if st.window is None else _with_window(st)


def tpot_ms(st: State) -> np.ndarray:
    """Per-request TPOT [ms] as the benchmark client defines it (``st.tpot_definition``, set from
    DesSpec.clients.tpot_definition by engine.des.workload.clients.apply_clients; absent = decode):

    decode: (completion - first token) / (output - 1), NaN for one-token outputs -- vLLM bench
        serve and SGLang bench_serving's TPOT, AIPerf's inter_token_latency, inference-perf's
        time_per_output_token, GuideLLM's inter_token_latency_ms (the event loop's completion is
        the last token's time);
    per_output_token: (completion - arrival) / output, the first token's wait included -- GuideLLM's
        time_per_output_token_ms ((last token - request start) / output tokens,
        guidellm/schemas/request_stats.py) and inference-perf's normalized_time_per_output_token.
    """
    first, done, arr, out = st.first_token, st.completion, st.arrival, st.output
    with np.errstate(invalid="ignore", divide="ignore"):
        if getattr(st, "tpot_definition", "decode") == "per_output_token":
            return np.where(out > 0, (done - arr) / out, np.nan) * 1e3
        return np.where(out > 1, (done - first) / (out - 1), np.nan) * 1e3


def _measured(st: State) -> np.ndarray:
    """Completed requests inside the measurement window (all completed ones without a window)."""
    done = np.isfinite(st.completion)
    if st.window is None:
        return done
    start, end, drain = st.window
    m = done & (st.arrival >= start)
    return m & (st.completion <= end) if drain else m


def _with_window(st: State) -> pl.DataFrame:
    w, st.window = st.window, None
    try:
        t = request_table(st)
    finally:
        st.window = w
    return t.with_columns(series("measured", _measured(st)))


def percentiles(v: np.ndarray, qs) -> list:
    """``[float(numpy.percentile(v, q)) for q in qs]`` of finite values ``v`` (NaN when empty),
    from one sort and numpy's own arithmetic of its default ``linear`` method (Hyndman & Fan's
    7th): the virtual index i = (n - 1) q / 100 between the order statistics a = x[floor i] and
    b = x[floor i + 1], g = i - floor i, and the value a + (b - a) g, or b - (b - a)(1 - g) when
    g >= 0.5 (numpy's ``_lerp``); i >= n - 1 gives the largest. numpy.percentile itself calls
    numpy.unique, which imports numpy.ma on a process's first call (about 0.01 CPU-s)."""
    n = len(v)
    if not n:
        return [float("nan")] * len(qs)
    x = np.sort(v).tolist()
    out = []
    for q in qs:
        i = (n - 1) * (q / 100)
        if i >= n - 1:
            out.append(x[-1])
            continue
        lo = math.floor(i)
        g = i - lo
        a, b = x[lo], x[lo + 1]
        d = b - a
        out.append(b - d * (1 - g) if g >= 0.5 else a + d * g)
    return out


def _pcts(name: str, v: np.ndarray, out: dict) -> None:
    v = v[np.isfinite(v)]
    for (label, _), p in zip(PCTS, percentiles(v, [q for _, q in PCTS])):
        out[f"{name}_{label}"] = p
    out[f"{name}_mean"] = float(v.mean()) if v.size else float("nan")


def summarize(st: State, table: pl.DataFrame, *, devices: int, slo_ttft_ms: float,
              slo_tpot_ms: float) -> dict:
    """The flat summary: latency percentiles, throughput, goodput (see module docstring)."""
    s: dict = {}
    done = _measured(st)
    ttft = table["ttft_ms"].to_numpy()
    tpot = table["tpot_ms"].to_numpy()
    e2e = table["e2e_ms"].to_numpy()
    _pcts("ttft_ms", np.where(done, ttft, np.nan), s)
    _pcts("tpot_ms", np.where(done, tpot, np.nan), s)
    _pcts("e2e_ms", np.where(done, e2e, np.nan), s)
    _pcts("queueing_ms", np.where(done, table["queueing_ms"].to_numpy(), np.nan), s)
    for (label, _), v in zip(PCTS, st.itl_percentiles_ms([q for _, q in PCTS])):
        s[f"itl_ms_{label}"] = v
    if getattr(st, "tpot_definition", "decode") != "decode":
        # the client's TPOT includes the first token; its ITL is the decode TPOT, per request then
        # the mean (GuideLLM inter_token_latency_ms: (last - first) / (output - 1))
        first, comp, out = st.first_token, st.completion, st.output
        with np.errstate(invalid="ignore", divide="ignore"):
            dec = np.where(done & (out > 1), (comp - first) / (out - 1), np.nan) * 1e3
        dec = dec[np.isfinite(dec)]
        s["itl_ms_mean"] = float(dec.mean()) if dec.size else float("nan")
    n_done = int(done.sum())
    t0 = float(np.nanmin(st.arrival)) if st.n else 0.0
    t1 = float(np.nanmax(st.completion)) if n_done else t0
    if st.window is not None:
        # completions inside [window start, window end or last completion]
        t0 = st.window[0]
        t1 = min(st.window[1], t1)
        with np.errstate(invalid="ignore"):
            done = np.isfinite(st.completion) & (st.completion >= t0) & (st.completion <= t1)
    span = t1 - t0
    out_tokens = int(st.output[done].sum())
    thr = out_tokens / span if span > 0 else float("nan")
    ok = done & (ttft <= slo_ttft_ms) & ((st.output <= 1) | (tpot <= slo_tpot_ms))
    s.update(
        throughput_tok_s=thr,
        throughput_tok_s_per_gpu=thr / devices,
        input_throughput_tok_s=float(st.prompt[done].sum()) / span if span > 0 else float("nan"),
        request_throughput_rps=int(done.sum()) / span if span > 0 else float("nan"),
        goodput_rps=float(ok.sum()) / span if span > 0 else float("nan"),
        slo_attainment=float(ok.sum()) / st.n if st.n else float("nan"),
        interactivity_tok_s_per_user=1e3 / s["tpot_ms_p50"] if s["tpot_ms_p50"] > 0 else float("nan"),
        num_requests=st.n,
        num_completed=int(np.isfinite(st.completion).sum()),
        num_measured=n_done,
        num_rejected=int(st.rejected.sum()),
        preemptions_total=int(st.preemptions.sum()),
        preempted_requests=int((st.preemptions > 0).sum()),
        makespan_s=span,
        output_tokens=out_tokens,
        tokens_emitted=int(st.tokens_out),
        prefill_tokens=int(st.prefill_tokens),
        recompute_tokens=int(st.recompute_tokens),
        prefix_hit_rate=st.hit_tokens / st.lookup_tokens if st.lookup_tokens else 0.0,
    )
    return s


# ------------------------------------------------ cluster features (DesSpec.cluster_features)
def class_slos(des, c: int) -> tuple[float, float]:
    """(TTFT, TPOT) SLO [ms] of priority class ``c``: class_slo_*_ms[c], else slo_*_ms."""
    t = des.class_slo_ttft_ms[c] if c < len(des.class_slo_ttft_ms) else des.slo_ttft_ms
    p = des.class_slo_tpot_ms[c] if c < len(des.class_slo_tpot_ms) else des.slo_tpot_ms
    return float(t), float(p)


def slo_limits(st: State, des) -> tuple[np.ndarray, np.ndarray]:
    """Per request (TTFT, TPOT) SLO [ms]: its request class's own (DesSpec.clients.classes: slo_*_ms > 0),
    else its priority class's (class_slos)."""
    pri = st.priority.astype(np.int64)
    lim_t = np.empty(st.n)
    lim_p = np.empty(st.n)
    for c in np.unique(pri):
        lim_t[pri == c], lim_p[pri == c] = class_slos(des, int(c))
    klass = getattr(st, "klass", None)
    if klass is not None:
        for i, c in enumerate(des.clients.classes):
            if c.slo_ttft_ms:
                lim_t[klass == i] = c.slo_ttft_ms
            if c.slo_tpot_ms:
                lim_p[klass == i] = c.slo_tpot_ms
    return lim_t, lim_p


def slo_ok(st: State, table: pl.DataFrame, des) -> np.ndarray:
    """Per request: completed and within its class's TTFT and TPOT SLOs (a rejected, shed or
    cancelled request never is)."""
    ttft = table["ttft_ms"].to_numpy()
    tpot = table["tpot_ms"].to_numpy()
    lim_t, lim_p = slo_limits(st, des)
    with np.errstate(invalid="ignore"):
        return (np.isfinite(st.completion) & (ttft <= lim_t)
                & ((st.output <= 1) | (tpot <= lim_p)))


def class_groups(st: State, des) -> list[tuple[str, np.ndarray]]:
    """(metric prefix, member mask) per class: the declared request classes (``class_<name>`` or
    ``class<i>`` when unnamed) when DesSpec.clients.classes is set, else the priority classes (``class<c>``)."""
    klass = getattr(st, "klass", None)
    if klass is not None:
        return [(f"class_{c.name}" if c.name else f"class{i}", klass == i) for i, c in enumerate(des.clients.classes)]
    pri = st.priority.astype(np.int64)
    return [(f"class{c}", pri == c) for c in np.unique(pri)]


def jain_index(x) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 = equal shares, 1/n = one takes all."""
    x = np.asarray([v for v in x if np.isfinite(v)], dtype=np.float64)
    if not x.size or not (x ** 2).sum():
        return float("nan")
    return float(x.sum() ** 2 / (x.size * (x ** 2).sum()))


def priority_inversions(st: State) -> int:
    """Admissions of a lower-priority request (larger class number) while a higher-priority one
    was waiting at the same replica: for each low request L admitted at s_L, the high requests H
    there with arrival < s_L and first admission > s_L (or never) = #H{arrival < s_L} -
    #H{admitted <= s_L} (admission follows arrival). Summed over L (pairs), over class pairs
    (c_hi < c_lo), over replicas."""
    pri, rep = st.priority.astype(np.int64), st.replica
    total = 0
    sched = st.scheduled
    for r in np.unique(rep[rep >= 0]):
        on = rep == r
        classes = np.unique(pri[on])
        for i, hi in enumerate(classes):
            h = on & (pri == hi)
            arr_h = np.sort(st.arrival[h])
            sch_h = np.sort(np.where(np.isfinite(sched[h]), sched[h], np.inf))
            for lo in classes[i + 1:]:
                s_l = sched[on & (pri == lo)]
                s_l = s_l[np.isfinite(s_l)]
                total += int((np.searchsorted(arr_h, s_l, side="left")
                              - np.searchsorted(sch_h, s_l, side="right")).clip(0).sum())
    return total


def class_summary(st: State, table: pl.DataFrame, des, ok: np.ndarray) -> dict:
    """Per class (``class_groups``: declared request classes, else priority classes): TTFT/TPOT/E2E
    p50/p99, goodput_rps, slo_attainment, requests, cancelled (queue expiry and deadline aborts)
    and rejected (too long, shed); ``fairness_jain`` over the classes' SLO attainment;
    ``priority_inversions``."""
    out: dict = {}
    done = _measured(st)
    t0 = float(np.nanmin(st.arrival)) if st.n else 0.0
    t1 = float(np.nanmax(st.completion)) if done.any() else t0
    span = t1 - t0
    att = []
    for key, m in class_groups(st, des):
        for col in ("ttft_ms", "tpot_ms", "e2e_ms"):
            v = table[col].to_numpy()[m & done]
            v = v[np.isfinite(v)]
            for label, p in zip(("p50", "p99"), percentiles(v, (50.0, 99.0))):
                out[f"{key}_{col}_{label}"] = p
        k = int(m.sum())
        a = float(ok[m].sum()) / k if k else float("nan")
        att.append(a)
        out[f"{key}_requests"] = k
        out[f"{key}_slo_attainment"] = a
        out[f"{key}_goodput_rps"] = float(ok[m].sum()) / span if span > 0 else float("nan")
        out[f"{key}_cancelled"] = int(st.cancelled[m].sum())
        out[f"{key}_rejected"] = int(st.rejected[m].sum())
    out["fairness_jain"] = jain_index(att)
    out["slo_attainment_classes"] = float(ok.sum()) / st.n if st.n else float("nan")
    out["priority_inversions"] = priority_inversions(st)
    return out


def saturation_time(ts: pl.DataFrame) -> float:
    """When the queues start to grow without bound, from the time series (NaN if they do not):
    the waiting queue at the last window with arrivals exceeds 10 x the active replicas and the
    queue over the windows after its last (near-)empty one (waiting <= active replicas) grows
    (least-squares slope > 0); the answer is the end of that last near-empty window."""
    arr = ts["arrivals_per_s"].to_numpy()
    live = np.flatnonzero(arr > 0)
    if not live.size:
        return float("nan")
    last = int(live[-1])
    q = ts["waiting"].to_numpy()[:last + 1].astype(float)
    act = np.maximum(ts["replicas_active"].to_numpy()[:last + 1], 1)
    t = ts["t_s"].to_numpy()[:last + 1]
    if q[-1] <= 10 * act[-1]:
        return float("nan")
    calm = np.flatnonzero(q <= act)
    k = int(calm[-1]) if calm.size else 0
    if last - k < 2 or np.polyfit(t[k:], q[k:], 1)[0] <= 0:
        return float("nan")
    return float(t[k])


def csv_table(table: pl.DataFrame) -> pl.DataFrame:
    """The table as CSV can hold it: list columns (token times, ITLs) joined with ';'."""
    lists = [c for c, t in table.schema.items() if isinstance(t, pl.List)]
    if not lists:
        return table
    return table.with_columns([pl.col(c).cast(pl.List(pl.Utf8)).list.join(";") for c in lists])
