"""Read a request trace (CSV, JSON, JSON Lines, Parquet) into arrival times, lengths and hashes.

Known layouts are detected from their column names when the spec names no columns:
    Azure LLM inference 2023:  TIMESTAMP (datetime), ContextTokens, GeneratedTokens
    Vidur processed traces:    arrived_at (s), num_prefill_tokens, num_decode_tokens
    Vidur length-only stats:   num_prefill_tokens, num_decode_tokens
    Mooncake (FAST'25):        timestamp (ms), input_length, output_length, hash_ids
Arrival times are returned in seconds since the first row.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from engine.errors import SpecError
from engine.spec.workload import TraceSpec

#: (arrival, prompt, output, hashes, time unit) of the known layouts, tried in order.
KNOWN_LAYOUTS = (
    ("TIMESTAMP", "ContextTokens", "GeneratedTokens", "", "datetime"),
    ("timestamp", "input_length", "output_length", "hash_ids", "ms"),
    ("arrived_at", "num_prefill_tokens", "num_decode_tokens", "", "s"),
    ("", "num_prefill_tokens", "num_decode_tokens", "", "s"),
    ("", "input_length", "output_length", "hash_ids", "ms"),
)

_UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


@dataclass
class Trace:
    """Rows of a trace: arrival_s (None when the trace has no times), lengths, optional hashes."""

    arrival_s: np.ndarray | None
    prompt: np.ndarray
    output: np.ndarray
    hashes: list | None
    path: str
    #: the trace's other numeric columns (name -> float64 per row), for request-class filters
    #: (engine.des.classes: e.g. "client == 3" on a ServeGen trace)
    columns: dict | None = None

    def __len__(self) -> int:
        return len(self.prompt)


def _read(path: Path, fmt: str) -> pl.DataFrame:
    fmt = fmt if fmt != "auto" else path.suffix.lower().lstrip(".")
    if fmt == "csv":
        return pl.read_csv(path)
    if fmt in ("jsonl", "ndjson"):
        return pl.read_ndjson(path)
    if fmt == "json":
        try:
            return pl.read_json(path)
        except Exception:  # noqa: BLE001 - a .json file may hold JSON Lines
            return pl.read_ndjson(path)
    if fmt in ("parquet", "pq"):
        return pl.read_parquet(path)
    raise SpecError("workload.trace.format", fmt, "csv, json, jsonl or parquet (or a file with that suffix)")


def _columns(df: pl.DataFrame, spec: TraceSpec):
    """(arrival, prompt, output, hashes, unit) column names for this frame."""
    cols = set(df.columns)
    if spec.prompt_column or spec.output_column:
        layout = (spec.arrival_column, spec.prompt_column, spec.output_column, spec.hash_column,
                  spec.time_unit)
    else:
        for layout in KNOWN_LAYOUTS:
            if all(c in cols for c in layout[:4] if c):
                break
        else:
            raise SpecError("workload.trace.prompt_column", "", f"column names for {spec.path} "
                            f"(columns: {', '.join(df.columns)}; no known layout matched)")
        if spec.time_unit != "auto":
            layout = layout[:4] + (spec.time_unit,)
        if spec.hash_column:
            layout = layout[:3] + (spec.hash_column,) + layout[4:]
    for key, c in zip(("arrival_column", "prompt_column", "output_column", "hash_column"), layout[:4]):
        if c and c not in cols:
            raise SpecError(f"workload.trace.{key}", c, f"a column of {spec.path} ({', '.join(df.columns)})")
    return layout


def _lengths(df: pl.DataFrame, col: str, key: str, path: str) -> np.ndarray:
    """A token-length column as int64; cells that are not whole numbers become -1 (dropped with
    the other non-positive rows); a column that is not numeric at all is an error naming it."""
    c = df[col]
    if c.dtype == pl.String or c.dtype.is_float():
        c = c.cast(pl.Float64, strict=False)
    elif not c.dtype.is_integer():
        raise SpecError(f"workload.trace.{key}", col, f"a numeric token-length column in {path} "
                        f"(it holds {c.dtype})")
    v = c.to_numpy().astype(float)
    ok = np.isfinite(v) & (v == np.floor(v)) & (np.abs(v) < 2**62)
    return np.where(ok, v, -1).astype(np.int64)


def load_trace(spec: TraceSpec) -> Trace:
    """Read ``spec.path`` into a :class:`Trace` (lengths as int64, arrivals in s from the first row)."""
    path = Path(spec.path)
    if not path.is_file():
        raise SpecError("workload.trace.path", spec.path, "an existing trace file")
    try:
        df = _read(path, spec.format)
    except SpecError:
        raise
    except Exception as e:  # noqa: BLE001 - polars/arrow raise many kinds on truncated or binary files
        raise SpecError("workload.trace.path", spec.path,
                        f"a readable {spec.format if spec.format != 'auto' else path.suffix} trace "
                        f"({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})") from None
    arr_c, pr_c, out_c, hash_c, unit = _columns(df, spec)
    prompt = _lengths(df, pr_c, "prompt_column", spec.path)
    output = _lengths(df, out_c, "output_column", spec.path)
    keep = (prompt > 0) & (output > 0)
    arrival = None
    if arr_c:
        col = df[arr_c]
        if unit == "datetime" or (unit == "auto" and col.dtype == pl.String):
            if col.dtype == pl.String:
                col = col.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False)
            arrival = col.dt.epoch("us").cast(pl.Float64).to_numpy() * 1e-6
        else:
            scale = _UNIT_S.get(unit, 1.0)
            arrival = col.cast(pl.Float64, strict=False).to_numpy() * scale
        keep &= np.isfinite(arrival)
    hashes = None
    if hash_c:
        try:
            hashes = [np.asarray(h if h is not None else [], dtype=np.int64) for h in df[hash_c].to_list()]
        except (TypeError, ValueError, OverflowError):
            raise SpecError(f"workload.trace.hash_column", hash_c,
                            f"a column of integer lists (prefix block hashes) in {spec.path}") from None
    used = {arr_c, pr_c, out_c, hash_c}
    extra = {c: df[c].cast(pl.Float64, strict=False).to_numpy() for c in df.columns
             if c not in used and (df[c].dtype.is_integer() or df[c].dtype.is_float())}
    if not keep.all():
        idx = np.flatnonzero(keep)
        prompt, output = prompt[idx], output[idx]
        arrival = arrival[idx] if arrival is not None else None
        hashes = [hashes[i] for i in idx] if hashes is not None else None
        extra = {c: v[idx] for c, v in extra.items()}
    if len(prompt) == 0:
        raise SpecError("workload.trace.path", spec.path, "a trace with at least one row of positive lengths")
    if arrival is not None:
        order = np.argsort(arrival, kind="stable")
        if not (order == np.arange(len(order))).all():
            arrival, prompt, output = arrival[order], prompt[order], output[order]
            hashes = [hashes[i] for i in order] if hashes is not None else None
            extra = {c: v[order] for c, v in extra.items()}
        arrival = arrival - arrival[0]
    return Trace(arrival, prompt.astype(np.int64), output.astype(np.int64), hashes, str(path), extra or None)


# ------------------------------------------------------------ inference-perf workload import
def _ip_lengths(dist: dict | None, default: int, n: int, rng, key: str) -> np.ndarray:
    """Token lengths of an inference-perf distribution {min, max, mean, std_dev}: normal draws
    (mean, std_dev) rounded and clipped to [min, max] (inference-perf's synthetic generator draws
    a normal and clips it); a missing distribution: ``default`` for every request."""
    if not dist:
        if not default or default < 1:
            raise SpecError(key, default, "a positive token length (or a distribution)")
        return np.full(n, int(default), np.int64)
    try:
        lo, hi = int(dist.get("min", 1)), int(dist["max"])
        mean, sd = float(dist["mean"]), float(dist.get("std_dev", 0.0))
    except (KeyError, TypeError, ValueError):
        raise SpecError(key, dist, "a mapping with max, mean (and min, std_dev)") from None
    if not 1 <= lo <= mean <= hi:
        raise SpecError(key, dist, "1 <= min <= mean <= max")
    return np.clip(np.rint(rng.normal(mean, sd, n)), lo, hi).astype(np.int64)


def inference_perf_requests(cfg: dict, seed: int = 0, block_tokens: int = 512) -> pl.DataFrame:
    """The request stream an inference-perf config describes, as a trace in the Mooncake layout
    this module reads (timestamp ms, input_length, output_length, hash_ids). Column mapping:

        load.type          constant: arrivals every 1/rate s in each stage; poisson: exponential
                           gaps of mean 1/rate (the project's arrivals generator)
        load.stages[i]     rate (req/s) x duration (s) -> that many requests, the stages back to
                           back from t = 0 (concurrent stages: not an open-loop rate; rejected)
        data.type          random | synthetic: input_distribution -> input_length,
                           output_distribution -> output_length; shared_prefix: request k goes to
                           group k mod num_groups; input_length = system_prompt_len +
                           question (question_distribution or question_len); output from
                           output_distribution or output_len
        hash_ids           shared_prefix only: the group's system-prompt blocks
                           (floor(system_prompt_len / block_tokens) ids, shared within the
                           group) followed by ids unique to the request for its remaining full
                           blocks; other data types: empty lists (no shared prefix)
        load.base_seed     the seed (else ``seed``)

    Everything else in the file (api, server, metrics, report) does not describe the workload and
    is ignored."""
    from engine.des.workload import arrivals

    load, data = cfg.get("load") or {}, cfg.get("data") or {}
    kind = load.get("type", "constant")
    if kind not in ("constant", "poisson"):
        raise SpecError("load.type", kind, "constant or poisson (an open-loop rate)")
    stages = load.get("stages") or []
    if not stages:
        raise SpecError("load.stages", stages, "a list of {rate, duration} stages")
    rng = np.random.default_rng(int(load.get("base_seed", seed)))
    times = []
    t0 = 0.0
    for i, s in enumerate(stages):
        try:
            rate, dur = float(s["rate"]), float(s["duration"])
        except (KeyError, TypeError, ValueError):
            raise SpecError(f"load.stages[{i}]", s, "rate (req/s) and duration (s)") from None
        if rate <= 0 or dur <= 0:
            raise SpecError(f"load.stages[{i}]", s, "rate > 0 and duration > 0")
        n = int(round(rate * dur))
        if kind == "constant":
            a = np.arange(n) / rate
        else:
            a = arrivals("poisson", n + 1, rate, rng=rng)[1:]
            a = a[a < dur]
        times.append(t0 + a)
        t0 += dur
    arr = np.concatenate(times)
    n = len(arr)
    dtype = data.get("type", "random")
    hashes = None
    if dtype in ("random", "synthetic"):
        inp = _ip_lengths(data.get("input_distribution"), 0, n, rng, "data.input_distribution")
        out = _ip_lengths(data.get("output_distribution"), 0, n, rng, "data.output_distribution")
    elif dtype == "shared_prefix":
        sp = data.get("shared_prefix") or {}
        try:
            groups, sys_len = int(sp["num_groups"]), int(sp["system_prompt_len"])
        except (KeyError, TypeError, ValueError):
            raise SpecError("data.shared_prefix", sp, "num_groups and system_prompt_len") from None
        q = _ip_lengths(sp.get("question_distribution"), sp.get("question_len", 0), n, rng,
                        "data.shared_prefix.question_len")
        out = _ip_lengths(sp.get("output_distribution"), sp.get("output_len", 0), n, rng,
                          "data.shared_prefix.output_len")
        inp = sys_len + q
        g = np.arange(n) % groups
        nsys = sys_len // block_tokens
        hashes = []
        for k in range(n):
            nb = int(inp[k]) // block_tokens
            h = [int(g[k]) * nsys + b for b in range(min(nsys, nb))]
            base = groups * nsys + k * (nb + 1)
            hashes.append(h + [base + b for b in range(nsys, nb)])
    else:
        raise SpecError("data.type", dtype, "random, synthetic or shared_prefix (the types that fix "
                        "lengths without a dataset)")
    # the Mooncake layout needs its hash_ids column: empty lists when no prefix is shared
    cols = {"timestamp": arr * 1e3, "input_length": inp, "output_length": out,
            "hash_ids": hashes if hashes is not None else [[] for _ in range(n)]}
    return pl.DataFrame(cols, schema_overrides={"hash_ids": pl.List(pl.Int64)})


# ------------------------------------------------------------------ ServeGen workload import
_SERVEGEN_KINDS = {"weibull": "weibull", "gamma": "gamma"}


def _servegen_pdf(text, where: str) -> tuple[np.ndarray, np.ndarray]:
    """A ServeGen length pdf cell ("{224: 0.0003, 225: ...}", token length -> probability) as
    (lengths, probabilities normalised to 1)."""
    import ast
    try:
        d = ast.literal_eval(text) if isinstance(text, str) else text
        v = np.array([int(k) for k in d], dtype=np.int64)
        p = np.array([float(x) for x in d.values()], dtype=np.float64)
    except (ValueError, SyntaxError, TypeError, AttributeError):
        raise SpecError(where, str(text)[:60], "a mapping {token length: probability}") from None
    if not v.size or (p < 0).any() or p.sum() <= 0:
        raise SpecError(where, str(text)[:60], "a non-empty mapping with probabilities >= 0")
    return v, p / p.sum()


def _shape_cv(kind: str, shape: float) -> float:
    """Coefficient of variation of gamma (1/sqrt(shape)) or Weibull (shape k:
    sqrt(G(1 + 2/k) / G(1 + 1/k)^2 - 1)) gaps."""
    if kind == "gamma":
        return 1.0 / np.sqrt(shape)
    if kind == "weibull":
        from scipy.special import gammaln
        return float(np.sqrt(np.expm1(gammaln(1 + 2 / shape) - 2 * gammaln(1 + 1 / shape))))
    return 1.0


def servegen_requests(directory, *, start_s: float = 0.0, duration_s: float = 3600.0,
                      rate: float = 0.0, rate_scale: float = 1.0, seed: int = 0) -> pl.DataFrame:
    """A request trace (arrived_at s, num_prefill_tokens, num_decode_tokens, client) from a
    ServeGen client-pool directory (github.com/alibaba/ServeGen data/<category>/<model>/: the
    per-client files ``chunk-<id>-trace.csv`` and ``chunk-<id>-dataset.json`` that its ClientPool
    loads). Column mapping:

        chunk-<id>-trace.csv   rows "timestamp,rate,cv,pattern,shape,scale" (no header): client
                               <id> sends ``rate`` req/s in the window [timestamp, next timestamp)
                               (the last window runs to the end of the span); pattern Gamma |
                               Weibull with the fitted ``shape`` is the gap law. As ServeGen's
                               construct.generate_workload: n = ceil(rate x window) gaps are
                               drawn (here by the project's arrivals generator,
                               engine.des.workload.arrivals, at the coefficient of variation the
                               shape implies: gamma 1/sqrt(shape), Weibull
                               sqrt(G(1 + 2/k) / G(1 + 1/k)^2 - 1)), rescaled to sum to the
                               window, and the arrivals before its end kept: the window's count
                               is the recorded rate's, its burstiness the fitted shape's (the
                               ``cv`` column, an empirical figure, and ``scale`` are not used);
                               an empty pattern: the client is silent
        chunk-<id>-dataset.json {timestamp: {"input_tokens": "{len: p, ...}", "output_tokens":
                               ...}}: each request of a trace window draws its prompt
                               (input_tokens) and output (output_tokens) length from the dataset
                               window with the largest timestamp <= the trace window's (as
                               ClientPool does); other fields (reason_ratio, multimodal
                               image/audio/video tokens) are not read; a dataset without
                               input_tokens/output_tokens (multimodal pools: text_tokens) is an error
        start_s, duration_s    the span [start, start + duration) of the pool's day, re-based to 0
        rate                   > 0: every window's client rates scaled so they sum to ``rate``
                               req/s (ServeGen's get_constant_rate_fn); else x ``rate_scale``
                               (get_scaled_rate_fn)
        client                 the chunk id (a column for analysis; the DES reads times and lengths)
    Draws from ``seed`` (one numpy Generator, clients in id order; not ServeGen's RandomState
    draws, so the same statistics, not the same requests). Prefix hashes: none (ServeGen does not
    record prompt content)."""
    import json
    import re

    from engine.des.workload import arrivals

    d = Path(directory)
    if not d.is_dir():
        raise SpecError("servegen directory", str(directory), "a ServeGen data/<category>/<model> directory")
    ids = sorted(int(m.group(1)) for f in d.iterdir() if (m := re.fullmatch(r"chunk-(\d+)-trace\.csv", f.name)))
    if not ids:
        raise SpecError("servegen directory", str(directory), "chunk-<id>-trace.csv files (a ServeGen client pool)")
    if not duration_s > 0:
        raise SpecError("--duration", duration_s, "a span > 0 s")
    end = start_s + duration_s
    windows = []      # (client, t0, t1, rate, cv, kind, dataset window)
    for cid in ids:
        tpath = d / f"chunk-{cid}-trace.csv"
        rows = []
        for k, line in enumerate(tpath.read_text().splitlines()):
            if not line.strip():
                continue
            parts = line.strip().split(",")
            try:
                ts, r, pat = int(float(parts[0])), float(parts[1]), parts[3].strip()
                shape = float(parts[4]) if pat else 0.0
            except (ValueError, IndexError):
                raise SpecError(f"{tpath.name}:{k + 1}", line[:60], "timestamp,rate,cv,pattern,arg1,arg2") from None
            if pat and pat.lower() not in _SERVEGEN_KINDS:
                raise SpecError(f"{tpath.name}:{k + 1}", pat, "Gamma or Weibull (ServeGen's ArrivalPat)")
            if pat and not shape > 0:
                raise SpecError(f"{tpath.name}:{k + 1}", shape, f"a {pat} shape > 0")
            rows.append((ts, r, _shape_cv(pat.lower(), shape) if pat else 1.0, pat.lower()))
        rows.sort()
        for j, (ts, r, cv, pat) in enumerate(rows):
            t1 = rows[j + 1][0] if j + 1 < len(rows) else end
            lo, hi = max(ts, start_s), min(t1, end)
            if hi > lo and pat and r > 0:
                windows.append([cid, lo, hi, r, cv, _SERVEGEN_KINDS[pat], ts])
    if rate > 0:          # per window start: the client rates sum to ``rate``
        tot: dict = {}
        for w in windows:
            tot[w[1]] = tot.get(w[1], 0.0) + w[3]
        for w in windows:
            w[3] *= rate / tot[w[1]]
    elif rate_scale != 1.0:
        if not rate_scale > 0:
            raise SpecError("--rate-scale", rate_scale, "a factor > 0")
        for w in windows:
            w[3] *= rate_scale
    rng = np.random.default_rng(seed)
    cols = {"arrived_at": [], "num_prefill_tokens": [], "num_decode_tokens": [], "client": []}
    data, data_id = {}, None
    for cid, lo, hi, r, cv, kind, ts in windows:       # clients in id order, windows in time order
        if cid != data_id:                             # one client's dataset in memory at a time
            dpath = d / f"chunk-{cid}-dataset.json"
            if not dpath.exists():
                raise SpecError("servegen directory", str(dpath.name), f"the dataset of client {cid} "
                                "next to its trace (ServeGen's ClientPool needs both)")
            data = {int(k): v for k, v in json.loads(dpath.read_text()).items()}
            dts, data_id, pdfs = sorted(data), cid, {}
        k = int(np.searchsorted(dts, ts, side="right")) - 1
        if k < 0:
            continue                   # no length distribution yet (ClientPool: no dataset window)
        W = hi - lo
        # ServeGen: ceil(rate x W) gaps rescaled to sum to W, the arrivals before W kept
        n = int(np.ceil(r * W))
        t = arrivals(kind, n + 1, r, cv, rng=rng)[1:]
        t = t * (W / t[-1]) if n and t[-1] > 0 else t
        t = t[t < W]
        if not t.size:
            continue
        if dts[k] not in pdfs:
            win = data[dts[k]]
            where = f"chunk-{cid}-dataset.json[{dts[k]}]"
            if "input_tokens" not in win or "output_tokens" not in win:
                raise SpecError(where, sorted(win), "input_tokens and output_tokens length pdfs "
                                "(language / reason pools; multimodal pools are not supported)")
            pdfs[dts[k]] = (_servegen_pdf(win["input_tokens"], where + ".input_tokens"),
                            _servegen_pdf(win["output_tokens"], where + ".output_tokens"))
        (iv, ip), (ov, op) = pdfs[dts[k]]
        cols["arrived_at"].append(lo - start_s + t)
        cols["num_prefill_tokens"].append(rng.choice(iv, size=t.size, p=ip))
        cols["num_decode_tokens"].append(rng.choice(ov, size=t.size, p=op))
        cols["client"].append(np.full(t.size, cid, np.int64))
    if not cols["arrived_at"]:
        raise SpecError("servegen span", f"[{start_s}, {end})", "a span in which some client sends requests")
    df = pl.DataFrame({k: np.concatenate(v) for k, v in cols.items()})
    # lengths of 0 (a pdf's bin 0) are not requests the DES can serve
    df = df.with_columns(pl.col("num_prefill_tokens").clip(1), pl.col("num_decode_tokens").clip(1))
    return df.sort("arrived_at", maintain_order=True)

