"""Measured per-request results of real benchmarking clients -> one polars table + the workload.

Readers (``read_measurement(path, fmt="auto")`` picks one by content):

vllm       ``benchmarks/benchmark_serving.py --save-result --save-detailed`` (also ``vllm bench
           serve``): one JSON object with per-request lists ``input_lens``, ``output_lens``,
           ``ttfts`` [s], ``itls`` [list of s per request], ``errors`` ('' = success), optional
           ``start_times`` [s]; the traffic as ``request_rate`` (a number or "inf"), ``burstiness``
           (gamma shape: arrival cv = 1/sqrt(burstiness)) and ``max_concurrency``.
genai_perf Perf Analyzer's ``profile_export.json`` as written by genai-perf: ``experiments[]``, each
           with ``experiment.mode`` (concurrency | request_rate) and ``.value``, and ``requests[]``
           with ``timestamp`` [ns], ``response_timestamps`` [ns] and ``request_inputs.payload``.
           The file has no token counts: every streamed response is taken as one output token,
           and the prompt length comes from ``input_len`` (the run's --synthetic-input-tokens-mean)
           or, failing that, 4 characters per token of the payload's prompt text (stated in notes).
guidellm   GuideLLM's report (``benchmarks.json``): ``benchmarks[]``, each with
           ``requests.successful[]`` holding ``prompt_tokens``, ``output_tokens`` (v0.8+:
           ``input_metrics``/``output_metrics.text_tokens``) and the times
           ``start_time``/``first_token_time``/``last_token_time`` [s] (v0.2-0.3), or
           ``info.timings.request_start``/``first_token_iteration``/``last_token_iteration``
           (v0.4+); the strategy (``args.strategy.type_``: synchronous, concurrent with ``streams``,
           throughput, constant/poisson with ``rate``) gives the workload.
csv        a plain table: ``request_id, input_len, output_len, ttft_ms, tpot_ms`` and optionally
           ``arrival_s`` (or ``start_time_s``), ``e2e_ms``, ``itl_ms`` (a ';'-separated list).

The table: request_id, input_len, output_len, arrival_s (null when unknown), ttft_ms, tpot_ms,
e2e_ms (null when unknown). TPOT = (last token - first token) / (output - 1), as simllm defines it.
Where the file has each request's inter-token gaps (vllm ``itls``, genai-perf response times, a
CSV ``itl_ms`` column, a simulation with token times), ``Measurement.itl_p50_ms`` holds each
request's median gap (its regular decode step: robust to the few stalled steps), per table row.
A malformed file raises MeasurementError naming the file, the record and the field.
"""

import csv
import hashlib
import inspect
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from engine.errors import SpecError

FORMATS = ("vllm", "genai_perf", "guidellm", "csv")
COLUMNS = ("request_id", "input_len", "output_len", "arrival_s", "ttft_ms", "tpot_ms", "e2e_ms")


class MeasurementError(SpecError):
    """A measurement file that cannot be read: says which file, which record and which field."""

    def __init__(self, path, record, field_name: str, value, expected: str):
        self.path, self.record = str(path), record
        where = f"{path}: record {record}: field '{field_name}'" if record is not None else \
            f"{path}: field '{field_name}'"
        if isinstance(value, str) and len(value) > 80:   # a 100 kB cell stays a one-line message
            value = f"{value[:40]}... ({len(value)} characters)"
        super().__init__(where, value, expected)


@dataclass
class Measurement:
    """One measured run: per-request table, the workload to re-simulate it, every ITL [ms].

    workload: ``arrival`` (trace | poisson | gamma | batch | closed_loop), ``rate_rps``,
    ``arrival_cv``, ``concurrency`` (closed loop users), ``num_requests``.
    """

    table: pl.DataFrame
    workload: dict
    itl_ms: np.ndarray | None
    path: str
    format: str
    sha256: str
    notes: list = field(default_factory=list)
    itl_cdf: tuple | None = None         # (log10 ms at bin edges, CDF there) when ITLs are binned
    itl_count: float = 0.0                # ITLs behind itl_cdf
    #: per table row: the median of that request's inter-token gaps [ms] (NaN where the request
    #: has none), or None when the file has no per-request gaps (see ``median_gaps_ms``)
    itl_p50_ms: np.ndarray | None = None

    def __len__(self) -> int:
        return self.table.height

    def quantile(self, metric: str, q: float) -> float:
        """Percentile ``q`` (0-100) of ``ttft_ms`` | ``tpot_ms`` | ``itl_ms`` over requests (ITL:
        over every gap)."""
        if metric == "itl_ms":
            if self.itl_ms is None and self.itl_cdf is not None:
                edges, cdf = self.itl_cdf
                return float(10 ** np.interp(q / 100.0, cdf, edges))
            v = self.itl_ms if self.itl_ms is not None else np.array([])
        else:
            v = self.table[metric].drop_nulls().to_numpy()
        v = v[np.isfinite(v)]
        return float(np.percentile(v, q)) if v.size else float("nan")


def sha256_of(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _num(path, rec, name, v, *, positive=False, integer=False, allow_zero=True):
    """A finite number (int when ``integer``) or MeasurementError naming path/record/field."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if ok and integer and float(v) != int(v):
        ok = False
    if ok and (v < 0 or (v == 0 and (positive or not allow_zero))):
        ok = False
    if not ok:
        kind = "an integer" if integer else "a finite number"
        raise MeasurementError(path, rec, name, v, f"{kind} {'> 0' if positive else '>= 0'}")
    return int(v) if integer else float(v)


def _get(path, rec, obj, key, expected="present"):
    if not isinstance(obj, dict) or key not in obj:
        raise MeasurementError(path, rec, key, None, expected)
    return obj[key]


def _table(rows: list[dict]) -> pl.DataFrame:
    schema = {"request_id": pl.Int64, "input_len": pl.Int64, "output_len": pl.Int64,
              "arrival_s": pl.Float64, "ttft_ms": pl.Float64, "tpot_ms": pl.Float64, "e2e_ms": pl.Float64}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def median_gaps_ms(gaps: list) -> np.ndarray | None:
    """Per request, the median of its inter-token gaps [ms] (NaN for a request without gaps), or
    None when no request has any (the file carries no per-request gaps)."""
    if not gaps or not any(len(g) for g in gaps):
        return None
    return np.array([float(np.median(g)) if len(g) else np.nan for g in gaps], dtype=np.float64)


def _tpot(first, last, out):
    return (last - first) / (out - 1) * 1e3 if out > 1 else float("nan")


# ------------------------------------------------------------------------------------ vLLM
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


# ------------------------------------------------------------------------------ genai-perf
def _payload_chars(payload) -> int:
    """Characters of the prompt text in a genai-perf request payload (OpenAI chat/completions)."""
    try:
        p = json.loads(payload) if isinstance(payload, str) else payload
    except ValueError:
        return len(payload)
    if isinstance(p, dict):
        if "messages" in p:
            return sum(len(str(m.get("content", ""))) for m in p["messages"] if isinstance(m, dict))
        if "prompt" in p:
            return len(str(p["prompt"]))
        if "text_input" in p:
            return len(str(p["text_input"]))
    return len(json.dumps(p))


def read_genai_perf(path, input_len: int | None = None, experiment: int = 0) -> Measurement:
    doc = _load_json(path)
    exps = _get(path, None, doc, "experiments", "a list of experiments (genai-perf profile_export.json)")
    if not isinstance(exps, list) or not exps:
        raise MeasurementError(path, None, "experiments", exps, "a non-empty list")
    if input_len is not None:
        input_len = _num(path, None, "input_len", input_len, integer=True, positive=True)
    if not isinstance(experiment, int) or not 0 <= experiment < len(exps):
        raise MeasurementError(path, None, "experiments", f"{len(exps)} experiments",
                               f"an experiment number {experiment}")
    exp = exps[experiment]
    mode = _get(path, None, _get(path, None, exp, "experiment"), "mode")
    value = _get(path, None, exp["experiment"], "value")
    reqs = _get(path, None, exp, "requests")
    if not isinstance(reqs, list):
        raise MeasurementError(path, None, "requests", type(reqs).__name__, "a list of requests")
    rows, itls, notes = [], [], []
    t0 = None
    for i, r in enumerate(reqs):
        ts = _num(path, i, "timestamp", _get(path, i, r, "timestamp"))
        rts = _get(path, i, r, "response_timestamps")
        if not isinstance(rts, list) or not rts:
            raise MeasurementError(path, i, "response_timestamps", rts, "a non-empty list of ns")
        t = np.array([_num(path, i, "response_timestamps", x) for x in rts], dtype=np.float64)
        if np.any(np.diff(t) < 0) or t[0] < ts:
            raise MeasurementError(path, i, "response_timestamps", rts[:3],
                                   "non-decreasing times after the request timestamp")
        out = len(t)
        if input_len is not None:
            inp = int(input_len)
        else:
            payload = (r.get("request_inputs") or {}).get("payload", "")
            inp = max(1, round(_payload_chars(payload) / 4))
        t0 = ts if t0 is None else min(t0, ts)
        rows.append((i, inp, out, ts, (t[0] - ts) * 1e-6, _tpot(t[0] * 1e-9, t[-1] * 1e-9, out),
                     (t[-1] - ts) * 1e-6))
        itls.append(np.diff(t) * 1e-6)
    rows = [(a, b, c, (d - t0) * 1e-9, e, f, g) for a, b, c, d, e, f, g in rows]
    notes.append("output tokens = streamed responses (one token per response)")
    if input_len is None:
        notes.append("input tokens ~ prompt characters / 4 (no token counts in profile_export.json)")
    wl = {"num_requests": len(rows)}
    if mode == "concurrency":
        wl.update(arrival="closed_loop", concurrency=_num(path, None, "experiment.value", value,
                                                            integer=True, positive=True))
    elif mode == "request_rate":
        wl.update(arrival="poisson", rate_rps=_num(path, None, "experiment.value", value, positive=True))
    else:
        raise MeasurementError(path, None, "experiment.mode", mode, "concurrency or request_rate")
    return Measurement(_table(rows), wl, np.concatenate(itls) if itls else None, str(path),
                       "genai_perf", sha256_of(path), notes, itl_p50_ms=median_gaps_ms(itls))


# -------------------------------------------------------------------------------- GuideLLM
def _guidellm_times(path, i, r):
    """(start, first, last) [s] of one GuideLLM request, v0.2-0.3 or v0.4+ layout."""
    timings = (r.get("info") or {}).get("timings") if isinstance(r.get("info"), dict) else None
    if "first_token_time" in r or "start_time" in r:
        keys = ("start_time", "first_token_time", "last_token_time")
        vals = [r.get(k) for k in keys]
    elif timings is not None:
        keys = ("info.timings.request_start", "info.timings.first_token_iteration",
                "info.timings.last_token_iteration")
        vals = [timings.get(k.rsplit(".", 1)[1]) for k in keys]
    else:
        raise MeasurementError(path, i, "first_token_time", None,
                               "start_time/first_token_time/last_token_time or info.timings")
    return [_num(path, i, k, v) for k, v in zip(keys, vals)]


def _guidellm_tokens(path, i, r, key, metrics):
    """Token count ``key`` of one GuideLLM request: top level (v0.2-0.7) or
    ``input_metrics``/``output_metrics.text_tokens`` (v0.8+)."""
    if key in r or not isinstance(r.get(metrics), dict):
        return _get(path, i, r, key)
    return _get(path, i, r[metrics], "text_tokens", f"{key} or {metrics}.text_tokens")


def read_guidellm(path, benchmark: int = 0) -> Measurement:
    doc = _load_json(path)
    benches = _get(path, None, doc, "benchmarks", "a list of benchmarks (GuideLLM report)")
    if not isinstance(benches, list) or not isinstance(benchmark, int) or not 0 <= benchmark < len(benches):
        raise MeasurementError(path, None, "benchmarks", f"{len(benches) if isinstance(benches, list) else benches}",
                               f"a list holding benchmark number {benchmark}")
    b = benches[benchmark]
    reqs = _get(path, None, _get(path, None, b, "requests"), "successful")
    if not isinstance(reqs, list):
        raise MeasurementError(path, None, "requests.successful", type(reqs).__name__, "a list of requests")
    rows = []
    for i, r in enumerate(reqs):
        inp = _num(path, i, "prompt_tokens", _guidellm_tokens(path, i, r, "prompt_tokens", "input_metrics"),
                   integer=True, positive=True)
        out = _num(path, i, "output_tokens", _guidellm_tokens(path, i, r, "output_tokens", "output_metrics"),
                   integer=True, positive=True)
        start, first, last = _guidellm_times(path, i, r)
        if not start <= first <= last:
            raise MeasurementError(path, i, "first_token_time", first,
                                   f"start ({start}) <= first token <= last token ({last})")
        rows.append((i, inp, out, start, (first - start) * 1e3, _tpot(first, last, out), (last - start) * 1e3))
    t0 = min((r[3] for r in rows), default=0.0)
    rows = [(a, bb, c, d - t0, e, f, g) for a, bb, c, d, e, f, g in rows]
    strat = None
    for holder in ("args", "config", "scheduler"):
        h = b.get(holder)
        if isinstance(h, dict) and isinstance(h.get("strategy"), dict):
            strat = h["strategy"]
            break
    strat = strat or {}
    kind = strat.get("type_", "") if isinstance(strat, dict) else ""
    wl: dict = {"num_requests": len(rows)}
    notes = []
    if kind == "synchronous":
        wl.update(arrival="closed_loop", concurrency=1)
    elif kind == "concurrent":
        wl.update(arrival="closed_loop", concurrency=_num(path, None, "strategy.streams",
                                                          strat.get("streams"), integer=True, positive=True))
    elif kind == "throughput":
        wl.update(arrival="batch")
    else:
        wl.update(arrival="trace")
        if kind in ("constant", "poisson"):
            wl["rate_rps"] = _num(path, None, "strategy.rate", strat.get("rate"), positive=True)
        notes.append(f"strategy {kind or 'not recorded'}: request start times replayed as arrivals")
    return Measurement(_table(rows), wl, None, str(path), "guidellm", sha256_of(path), notes)


# ------------------------------------------------------------------------------------- CSV
#: Largest CSV cell [characters]: an ``itl_ms`` list of a long output (32k tokens) runs past the
#: csv module's 128 KiB default.
CSV_FIELD_LIMIT = 64 << 20


def read_csv(path, workload: dict | None = None) -> Measurement:
    if not Path(path).is_file():
        raise MeasurementError(path, None, "path", str(path), "an existing file")
    limit = csv.field_size_limit(CSV_FIELD_LIMIT)
    try:
        return _read_csv(path, workload)
    except UnicodeDecodeError as e:
        raise MeasurementError(path, None, "(file)", f"byte {e.object[e.start:e.start + 1]!r} at offset "
                               f"{e.start}", "UTF-8 text (save the CSV as UTF-8)") from None
    except csv.Error as e:
        raise MeasurementError(path, None, "(file)", str(e), "a well-formed CSV table") from None
    finally:
        csv.field_size_limit(limit)


def _read_csv(path, workload: dict | None) -> Measurement:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        for c in ("input_len", "output_len", "ttft_ms", "tpot_ms"):
            if c not in cols:
                raise MeasurementError(path, None, c, None, f"a column (header has {', '.join(cols)})")
        arr_col = "arrival_s" if "arrival_s" in cols else ("start_time_s" if "start_time_s" in cols else None)
        rows, itls = [], []
        for i, rec in enumerate(reader):
            line = i + 2

            def num(name, **kw):
                raw = rec.get(name)
                try:
                    v = float(raw)
                except (TypeError, ValueError):
                    raise MeasurementError(path, f"{line} (line)", name, raw, "a number") from None
                return _num(path, f"{line} (line)", name, v, **kw)

            rid = int(num("request_id", integer=True)) if "request_id" in cols else i
            out = num("output_len", integer=True, positive=True)
            tpot = num("tpot_ms") if out > 1 else float("nan")
            e2e = num("e2e_ms") if "e2e_ms" in cols and rec.get("e2e_ms") not in ("", None) else None
            arr = num(arr_col) if arr_col else None
            rows.append((rid, num("input_len", integer=True, positive=True), out, arr,
                         num("ttft_ms", positive=True), tpot, e2e))
            if "itl_ms" in cols and rec.get("itl_ms"):
                try:
                    itls.append(np.array([float(x) for x in rec["itl_ms"].split(";")], dtype=np.float64))
                except ValueError:
                    raise MeasurementError(path, f"{line} (line)", "itl_ms", rec["itl_ms"],
                                           "';'-separated numbers [ms]") from None
            elif "itl_ms" in cols:
                itls.append(np.zeros(0))      # keeps itls row-aligned with the table
    table = _table(rows)
    if arr_col and table.height:
        table = table.with_columns(pl.col("arrival_s") - pl.col("arrival_s").min())
    wl = {"num_requests": table.height, **(workload or {})}
    wl.setdefault("arrival", "trace" if arr_col else "batch")
    notes = [] if arr_col or workload else ["no arrival column and no workload given: all at t = 0"]
    return Measurement(table, wl, np.concatenate(itls) if itls else None, str(path), "csv",
                       sha256_of(path), notes, itl_p50_ms=median_gaps_ms(itls))


# ---------------------------------------------------------------------------------- common
def _load_json(path):
    p = Path(path)
    if not p.is_file():
        raise MeasurementError(path, None, "path", str(path), "an existing file")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise MeasurementError(path, None, "(file)", type(e).__name__, f"valid JSON ({e})") from None


def detect_format(path) -> str:
    """vllm | genai_perf | guidellm | csv from the file's content."""
    p = Path(path)
    if p.suffix.lower() == ".csv":
        return "csv"
    doc = _load_json(path)
    if isinstance(doc, dict):
        if "ttfts" in doc or "input_lens" in doc:
            return "vllm"
        if "experiments" in doc:
            return "genai_perf"
        if "benchmarks" in doc:
            return "guidellm"
    raise MeasurementError(path, None, "(format)", p.name,
                           "a vLLM --save-result JSON (ttfts), a genai-perf profile_export.json "
                           "(experiments), a GuideLLM report (benchmarks) or a CSV")


def read_measurement(path, fmt: str = "auto", **kw) -> Measurement:
    """Read ``path`` in ``fmt`` (auto: from its content); ``kw`` go to the reader."""
    fmt = detect_format(path) if fmt == "auto" else fmt
    readers = {"vllm": read_vllm, "genai_perf": read_genai_perf, "guidellm": read_guidellm,
               "csv": read_csv}
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
    DES's token times (``engine.des.token_times``) also each request's median gap (``itl_p50_ms``)."""
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
           "median_gaps_ms"]
