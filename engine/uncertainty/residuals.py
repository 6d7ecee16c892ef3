"""The per-row residuals an error model was fitted on (``intervals.residuals.csv`` beside the
table: id, the regime fields, log_ratio = ln(predicted / measured)), read back for refits and
coverage checks. A file written before the load band (no ``band`` column) still reads: its rows
get ``regimes.complete``'s band (none for static rows, unknown for the others)."""

import csv
from pathlib import Path

from engine.uncertainty.conformal import SHIPPED
from engine.uncertainty.regimes import FIELDS, complete


def residuals_path(table: Path = SHIPPED) -> Path:
    """intervals.json -> intervals.residuals.csv (same folder)."""
    table = Path(table)
    return table.with_name(table.stem + ".residuals.csv")


def read(path: Path | None = None) -> tuple[list[str], list[dict], list[float]]:
    """(ids, regimes, residuals) of a residuals CSV (default: the shipped one)."""
    p = Path(path) if path else residuals_path()
    ids, regs, res = [], [], []
    with open(p, newline="") as f:
        for row in csv.DictReader(f):
            ids.append(row["id"])
            regs.append(complete({k: row[k] for k in FIELDS if row.get(k) not in (None, "")}))
            res.append(float(row["log_ratio"]))
    return ids, regs, res
