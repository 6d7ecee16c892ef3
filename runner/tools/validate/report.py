"""The error summary of predicted rows (median / max |error| per metric group, per framework
profile and per precision, coverage) and the report's text."""

import csv
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np

from runner.tools.validate.cases import GROUPS, Case


def _stats(errs) -> dict:
    e = np.array(errs, dtype=float)
    return {"n": int(e.size), "median_abs_error": float(np.median(e)) if e.size else float("nan"),
            "max_abs_error": float(e.max()) if e.size else float("nan")}


def summarize(cases: list[Case]) -> dict:
    """Median / max |error| per metric group (only rows with a prediction)."""
    ok = [c for c in cases if not c.skip and math.isfinite(c.error)]
    return {g: _stats([abs(c.error) for c in ok if c.metric == g]) for g in GROUPS}


def breakdown(cases: list[Case], attr: str) -> dict:
    """{value of ``attr`` (framework / precision): {metric group: stats}} over predicted rows."""
    ok = [c for c in cases if not c.skip and math.isfinite(c.error)]
    out: dict = {}
    for v in sorted({getattr(c, attr) for c in ok}):
        out[v] = {g: _stats([abs(c.error) for c in ok if getattr(c, attr) == v and c.metric == g])
                  for g in GROUPS}
        out[v] = {g: s for g, s in out[v].items() if s["n"]}
    return out


def coverage(cases: list[Case]) -> dict:
    """Predicted N of M rows, and the skipped ones counted by reason."""
    pred = sum(1 for c in cases if not c.skip and math.isfinite(c.predicted))
    nopred = sum(1 for c in cases if not c.skip and not math.isfinite(c.predicted))
    reasons = Counter(c.skip_kind for c in cases if c.skip)
    if nopred:
        reasons["no prediction (does not fit in memory / no rate meets the constraints)"] = nopred
    return {"rows": len(cases), "predicted": pred, "skipped": dict(reasons)}


def rows_table(cases: list[Case]):
    """The predicted rows as a polars table of display text (4 significant digits, signed %)."""
    import polars as pl

    done = [c for c in cases if not c.skip]
    unit = {True: "tok/s", False: "ms"}
    return pl.DataFrame({
        "id": [c.id for c in done], "metric": [c.metric for c in done], "engine": [c.engine for c in done],
        "measured": [f"{c.measured:.4g}" for c in done], "predicted": [f"{c.predicted:.4g}" for c in done],
        "error": [f"{c.error:+.1%}" for c in done],
        "how": [f"{unit[c.metric == 'throughput']} ({c.key}); {c.how}" for c in done]},
        schema={k: pl.String for k in ("id", "metric", "engine", "measured", "predicted", "error", "how")})


def table_text(cases: list[Case], summary: dict) -> str:
    """The report: the rows table (Markdown, ``runner.tools.cli.table_text``), the summary per
    metric group, per framework profile and per precision, the coverage and the skipped rows."""
    from runner.tools.cli import table_text as format_table

    lines = [format_table(rows_table(cases)), ""]
    for g, s in summary.items():
        if s["n"]:
            lines.append(f"{g:<10} n={s['n']:<3} median |error| {s['median_abs_error']:.1%}   max |error| "
                         f"{s['max_abs_error']:.1%}")
    for attr, title in (("framework", "per framework profile"), ("precision", "per precision")):
        lines.append("")
        lines.append(f"median |error| {title}:")
        for v, per in breakdown(cases, attr).items():
            lines.append(f"  {v:<10} " + "  ".join(f"{g} {s['median_abs_error']:.1%} (n={s['n']})"
                                                   for g, s in per.items()))
    cov = coverage(cases)
    lines.append("")
    lines.append(f"coverage: predicted {cov['predicted']} of {cov['rows']} rows" +
                 ("; skipped: " + ", ".join(f"{k} {v}" for k, v in cov["skipped"].items()) if cov["skipped"] else ""))
    skipped = [c for c in cases if c.skip]
    if skipped:
        lines.append("")
        lines.append(f"skipped ({len(skipped)}):")
        lines += [f"  {c.id:<9} {c.skip}" for c in skipped]
    return "\n".join(lines) + "\n"


def write_files(out: Path, csv_path: Path, sha: str, calibration: str, params, text: str, summary: dict,
                cases: list[Case], split) -> None:
    """The output folder: table.csv (every row, full precision), report.md (the text), summary.json."""
    with open(out / "table.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "metric", "engine", "measured", "predicted", "signed_error", "how", "skipped",
                    "compared_with", "framework", "precision"])
        for c in cases:
            w.writerow([c.id, c.metric, c.engine, c.measured, c.predicted, c.error, c.how, c.skip,
                        c.key, c.framework, c.precision])
    (out / "report.md").write_text(f"# Validation against {csv_path.name}\n\nsha256 `{sha}`, calibration "
                                   f"`{calibration}`" + (f", fitted {params}" if params else "")
                                   + "\n\n```\n" + text + "```\n")
    (out / "summary.json").write_text(json.dumps({
        "csv": str(csv_path), "sha256": sha, "summary": summary, "params": params,
        "calibration": calibration, "coverage": coverage(cases),
        "per_framework": breakdown(cases, "framework"), "per_precision": breakdown(cases, "precision"),
        "half_split": {k: v for k, v in (split or {}).items() if k != "text"} or None}, indent=2))
