"""A plain CSV table: ``request_id, input_len, output_len, ttft_ms, tpot_ms`` and optionally
``arrival_s`` (or ``start_time_s``), ``e2e_ms``, ``itl_ms`` (a ';'-separated list); a file ending in
``.csv`` is this format."""

import csv
from pathlib import Path

import numpy as np
import polars as pl

from engine.calibration.readers.base import (Measurement, MeasurementError, _num, _table, median_gaps_ms,
                                             register, sha256_of)

#: Largest CSV cell [characters]: an ``itl_ms`` list of a long output (32k tokens) runs past the
#: csv module's 128 KiB default.
CSV_FIELD_LIMIT = 64 << 20


@register("csv", suffix=".csv", describe="a CSV")
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
    with open(path, newline="", encoding="utf-8-sig") as f:
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

