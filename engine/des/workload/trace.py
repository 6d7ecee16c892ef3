"""Read a request trace (CSV, JSON, JSON Lines, Parquet) into arrival times, lengths and hashes.

Known layouts are detected from their column names when the spec names no columns:
    Azure LLM inference 2023:  TIMESTAMP (datetime), ContextTokens, GeneratedTokens
    Vidur processed traces:    arrived_at (s), num_prefill_tokens, num_decode_tokens
    Vidur length-only stats:   num_prefill_tokens, num_decode_tokens
    Mooncake (FAST'25):        timestamp (ms), input_length, output_length, hash_ids
Arrival times are returned in seconds since the first row (rows are put in arrival order).
Every row is kept: a length cell that is not a whole number >= 1, or an arrival that is not a
finite time >= 0, is an error naming the column, the row and what it holds.
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
    #: (engine.des.clients.classes: e.g. "client == 3" on a ServeGen trace)
    columns: dict | None = None
    #: each row's place in the file (1-based, header not counted), in the order above (by arrival)
    rows: np.ndarray | None = None

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


def _refuse(df: pl.DataFrame, col: str, key: str, path: str, ok: np.ndarray, expected: str):
    """SpecError naming the column, the first row (1-based, header not counted) whose cell is not
    ``expected`` and what it holds, and how many rows are like it; nothing is dropped silently."""
    bad = np.flatnonzero(~ok)
    if len(bad):
        i = int(bad[0])
        more = f"; {len(bad) - 1} more row(s) like it" if len(bad) > 1 else ""
        raise SpecError(f"workload.trace.{key}", col, f"{expected} in every row of {path}: row {i + 1} holds "
                        f"{df[col][i]!r}{more}")


def _lengths(df: pl.DataFrame, col: str, key: str, path: str) -> np.ndarray:
    """A token-length column as int64. Every cell must be a whole number >= 1: an empty, negative,
    zero, fractional, non-finite or non-numeric cell is an error naming its row (``_refuse``)."""
    c = df[col]
    if not (c.dtype == pl.String or c.dtype.is_numeric() or c.dtype == pl.Null):
        raise SpecError(f"workload.trace.{key}", col, f"a numeric token-length column in {path} "
                        f"(it holds {c.dtype})")
    v = c.cast(pl.Float64, strict=False).to_numpy().astype(float)
    ok = np.isfinite(v) & (v == np.floor(v)) & (v >= 1) & (v < 2**62)
    _refuse(df, col, key, path, ok, "a whole number of tokens >= 1")
    return v.astype(np.int64)


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
    arrival = None
    if arr_c:
        col = df[arr_c]
        if unit == "datetime" or (unit == "auto" and col.dtype == pl.String):
            if col.dtype == pl.String:
                col = col.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False)
            arrival = col.dt.epoch("us").cast(pl.Float64).to_numpy() * 1e-6
            _refuse(df, arr_c, "arrival_column", spec.path, np.isfinite(arrival),
                    "a time such as 2023-11-16 18:15:46.6805900")
        else:
            scale = _UNIT_S.get(unit, 1.0)
            arrival = col.cast(pl.Float64, strict=False).to_numpy() * scale
            _refuse(df, arr_c, "arrival_column", spec.path, np.isfinite(arrival) & (arrival >= 0),
                    "a finite arrival time >= 0")
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
    if len(prompt) == 0:
        raise SpecError("workload.trace.path", spec.path, "a trace with at least one row of positive lengths")
    rows = np.arange(1, len(prompt) + 1)
    if arrival is not None:
        order = np.argsort(arrival, kind="stable")
        if not (order == np.arange(len(order))).all():
            arrival, prompt, output, rows = arrival[order], prompt[order], output[order], rows[order]
            hashes = [hashes[i] for i in order] if hashes is not None else None
            extra = {c: v[order] for c, v in extra.items()}
        arrival = arrival - arrival[0]
    return Trace(arrival, prompt.astype(np.int64), output.astype(np.int64), hashes, str(path), extra or None,
                 rows=rows)


__all__ = ["KNOWN_LAYOUTS", "Trace", "load_trace"]
