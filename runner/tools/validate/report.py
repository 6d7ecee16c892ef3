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
    """n, median and max |error|, mean |error| (MAPE) and the signed median (the bias) of signed
    errors predicted / measured - 1."""
    e = np.array(errs, dtype=float)
    a = np.abs(e)
    nan = float("nan")
    return {"n": int(e.size), "median_abs_error": float(np.median(a)) if e.size else nan,
            "max_abs_error": float(a.max()) if e.size else nan,
            "mape": float(a.mean()) if e.size else nan,
            "signed_median": float(np.median(e)) if e.size else nan}


def summarize(cases: list[Case]) -> dict:
    """Median / max |error|, MAPE and signed median per metric group (rows with a prediction)."""
    ok = [c for c in cases if not c.skip and math.isfinite(c.error)]
    return {g: _stats([c.error for c in ok if c.metric == g]) for g in GROUPS}


#: Concurrency bands of the closed-loop rows (clients per replica): (label, low, high).
BANDS = (("1", 1, 1), ("2-16", 2, 16), ("17-128", 17, 128), ("129+", 129, 10 ** 9))


def load_band(c: Case) -> str:
    """The concurrency band of a closed-loop row ('' for other rows)."""
    n = c.workload.get("concurrency") if c.workload.get("arrival") == "closed_loop" else None
    return next((b for b, lo, hi in BANDS if n and lo <= n <= hi), "")


def breakdown(cases: list[Case], attr: str) -> dict:
    """{value of ``attr`` (framework / precision / a function of the case): {metric group:
    stats}} over predicted rows."""
    key = attr if callable(attr) else (lambda c: getattr(c, attr))
    ok = [c for c in cases if not c.skip and math.isfinite(c.error)]
    out: dict = {}
    order = [b for b, _, _ in BANDS]
    for v in sorted({key(c) for c in ok}, key=lambda v: (order.index(v) if v in order else -1, v)):
        out[v] = {g: _stats([c.error for c in ok if key(c) == v and c.metric == g]) for g in GROUPS}
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
                         f"{s['max_abs_error']:.1%}   MAPE {s['mape']:.1%}   signed median "
                         f"{s['signed_median']:+.1%}")
    for attr, title in (("framework", "per framework profile"), ("precision", "per precision"),
                        (load_band, "per concurrency band (closed loop; clients per replica)")):
        per_v = {v: per for v, per in breakdown(cases, attr).items() if v}
        if not per_v:
            continue
        lines.append("")
        lines.append(f"median |error| / MAPE / signed median {title}:")
        for v, per in per_v.items():
            lines.append(f"  {v:<10} " + "  ".join(
                f"{g} {s['median_abs_error']:.1%} / {s['mape']:.1%} / {s['signed_median']:+.1%} (n={s['n']})"
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


def ttft_parts_text(cases: list[Case], runner, params=None) -> str:
    """The mean TTFT of each predicted DES TTFT row taken apart along the request's path
    (engine.des.ttft_parts: path = API server + client round trip out, queue of which ahead,
    prefill iterations, first token back), beside the measured mean. The parts are means over the
    same requests as the predicted mean, so path + queue + prefill + first_token = predicted [ms]."""
    from engine.des.ttft_parts import PARTS
    from runner.tools.cli import table_text as format_table

    rows = []
    for c in cases:
        if c.skip or c.metric != "ttft" or c.engine != "des" or not math.isfinite(c.predicted):
            continue
        s = runner.summary(c, params)
        if f"ttft_{PARTS[0]}_ms_mean" not in s:
            continue
        rows.append({"id": c.id, "clients": c.workload.get("concurrency", ""), "measured": c.measured,
                     "predicted": c.predicted,
                     **{p: s.get(f"ttft_{p}_ms_mean", float("nan")) for p in PARTS},
                     "error": f"{c.error:+.1%}"})
    if not rows:
        return ""
    import polars as pl

    df = pl.DataFrame([{k: f"{v:.4g}" if isinstance(v, float) else str(v) for k, v in r.items()} for r in rows])
    return ("\nTTFT along the request's path (mean ms; path = API server + client trip out, "
            "queue includes ahead, prefill = admission to the engine's first token, first_token = "
            "trip back; path + queue + prefill + first_token = predicted):\n" + format_table(df) + "\n")


def write_files(out: Path, csv_path: Path, sha: str, calibration: str, params, text: str, summary: dict,
                cases: list[Case], split) -> None:
    """The output folder: table.csv (every row, full precision), report.md (the text), summary.json."""
    with open(out / "table.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "metric", "engine", "measured", "predicted", "signed_error", "how", "skipped",
                    "compared_with", "framework", "precision", "band"])
        for c in cases:
            w.writerow([c.id, c.metric, c.engine, c.measured, c.predicted, c.error, c.how, c.skip,
                        c.key, c.framework, c.precision, c.band])
    (out / "report.md").write_text(f"# Validation against {csv_path.name}\n\nsha256 `{sha}`, calibration "
                                   f"`{calibration}`" + (f", fitted {params}" if params else "")
                                   + "\n\n```\n" + text + "```\n")
    (out / "summary.json").write_text(json.dumps({
        "csv": str(csv_path), "sha256": sha, "summary": summary, "params": params,
        "calibration": calibration, "coverage": coverage(cases),
        "per_framework": breakdown(cases, "framework"), "per_precision": breakdown(cases, "precision"),
        "per_concurrency_band": {k: v for k, v in breakdown(cases, load_band).items() if k},
        "half_split": {k: v for k, v in (split or {}).items() if k != "text"} or None}, indent=2))
