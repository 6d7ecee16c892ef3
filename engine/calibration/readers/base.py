"""What every measurement reader shares: the ``Measurement`` it returns, ``MeasurementError``
(naming the file, the record and the field), the checked-number helpers, and the registry that
``read_measurement`` picks a reader from by name or by the file's content.

A reader is a function ``read(path, **options) -> Measurement`` registered under its format name:

    @register("vllm", detect=lambda doc: "ttfts" in doc or "input_lens" in doc,
              describe="a vLLM --save-result JSON (ttfts)")
    def read_vllm(path) -> Measurement: ...

``detect`` answers for a JSON file's top-level object; ``suffix`` claims a file extension
(".csv") before any JSON is parsed. Its keyword options (``inspect.signature``) are the options
``read_measurement`` accepts for that format. Adding a reader is one module in this package plus
its import in ``readers/__init__.py``.
"""

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import polars as pl

from engine.errors import SpecError

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


def _load_json(path):
    p = Path(path)
    if not p.is_file():
        raise MeasurementError(path, None, "path", str(path), "an existing file")
    try:
        return json.loads(p.read_text(encoding="utf-8-sig"))
    except (ValueError, UnicodeDecodeError) as e:
        raise MeasurementError(path, None, "(file)", type(e).__name__, f"valid JSON ({e})") from None


@dataclass(frozen=True)
class Reader:
    """A registered reader: its format name, function, and how a file of its format is recognised."""

    name: str
    read: Callable
    detect: Callable | None = None     # JSON top-level object -> is it this format?
    suffix: str = ""                   # a file extension that means this format (".csv")
    describe: str = ""                 # what such a file is, for the "unknown format" message


#: Readers by format name, in registration order (readers/__init__.py imports them).
READERS: dict[str, Reader] = {}


def register(name: str, *, detect: Callable | None = None, suffix: str = "", describe: str = ""):
    """Decorator: register ``read(path, **options) -> Measurement`` as format ``name``."""

    def wrap(read):
        READERS[name] = Reader(name, read, detect, suffix.lower(), describe or name)
        return read

    return wrap


def detect_format(path) -> str:
    """The format of ``path`` from the registry: a claimed suffix first, else the first reader
    whose ``detect`` accepts the JSON document."""
    p = Path(path)
    for rd in READERS.values():
        if rd.suffix and p.suffix.lower() == rd.suffix:
            return rd.name
    doc = _load_json(path)
    if isinstance(doc, dict):
        for rd in READERS.values():
            if rd.detect is not None and rd.detect(doc):
                return rd.name
    what = [rd.describe for rd in READERS.values()]
    raise MeasurementError(path, None, "(format)", p.name, ", ".join(what[:-1]) + " or " + what[-1])
