"""Job-directory files: written first, atomically, before any tracking call."""

import json
import math
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # polars comes with engine.result: imported where a result is handled
    from engine.result import RunResult


SUMMARY = "summary.json"
TABLE = "table.parquet"
TABLE_CSV = "table.csv"
ASSUMPTIONS = "assumptions.md"
CONFIG = "config.yaml"
ERROR = "error.txt"


def _atomic_write(path: Path, write) -> None:
    """Write via a temp file in the same directory, then rename: never a half-written file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def write_result(job_dir: Path, result: "RunResult", resolved_yaml: str, meta: dict) -> list[Path]:
    """Write summary.json, table.parquet (table.csv when the result asks for csv:
    engine.des.outputs.output_format), assumptions.md and config.yaml into ``job_dir``."""
    job_dir.mkdir(parents=True, exist_ok=True)
    summary = {k: _jsonable(v) for k, v in result.summary.items()}
    doc = {"summary": summary, **meta}
    csv = getattr(result, "table_format", "parquet") == "csv"
    paths = [job_dir / SUMMARY, job_dir / (TABLE_CSV if csv else TABLE), job_dir / ASSUMPTIONS, job_dir / CONFIG]
    if csv:     # one row per request like the SimLLM seed's results/q512.csv; list columns ';'-joined
        from engine.des.metrics import csv_table
        _atomic_write(paths[1], lambda p: csv_table(result.table).write_csv(p))
    else:
        _atomic_write(paths[1], lambda p: result.table.write_parquet(p))
    _atomic_write(paths[2], lambda p: Path(p).write_text(result.assumptions_markdown()))
    _atomic_write(paths[3], lambda p: Path(p).write_text(resolved_yaml))
    # summary.json last: its presence marks a complete job directory.
    _atomic_write(paths[0], lambda p: Path(p).write_text(json.dumps(doc, indent=2, sort_keys=True)))
    return paths


def write_error(job_dir: Path, text: str) -> Path:
    job_dir.mkdir(parents=True, exist_ok=True)
    path = job_dir / ERROR
    _atomic_write(path, lambda p: Path(p).write_text(text))
    return path


def write_json(path: Path, doc: dict) -> Path:
    """Write ``doc`` as JSON atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, lambda p: Path(p).write_text(json.dumps(doc, indent=2, sort_keys=True,
                                                                default=str)))
    return path
