"""``simllm-report``: an MLflow experiment or sweep -> a report directory (Markdown + PNG, optionally
a self-contained HTML page), logged as the artifacts of a report run.

    simllm-report jalapeno_sensitivity              # experiment name (latest run per config)
    simllm-report SWEEP_PARENT_RUN_ID               # or --sweep multirun/2026-11-29/10-08-27
    simllm-report --compare A B                     # runs, sweeps or git commits (runner.tools.compare)
    simllm-report --trend ttft_ms_p50 [EXPERIMENT] [--config-hash H] [--by commit|date]
                                                    # a metric across commits / dates per config hash

Run ids may be shortened to a unique prefix (4+ hex digits) wherever one is given.

The sensitivity table has one row per config: the swept parameters (the params that differ between
the runs), TTFT and TPOT (p50; p99 too where any run's p99 differs, i.e. a DES ran), throughput and
the binding bottleneck (tag ``summary.bound``). ``sensitivity.csv`` holds the same at full precision.
"""

import argparse
import base64
import html
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from engine.result import report_metrics
from runner import tracking
from runner.tools import plots, runs
from runner.tools.cli import Steps, add_quiet, guard

#: Param keys never shown as swept (free text that changes with the option chosen).
_TEXT_KEYS = ("description", "source", "provenance")
#: Swept params that are a load axis (p50/p99 vs load); first match wins.
_LOAD_KEYS = ("rate_rps", "arrival_rate", "request_rate", "qps", "concurrency", "max_concurrency",
              "num_users", "batch_size")
#: Units of load axes, by the key's last part.
_LOAD_UNITS = {"rate_rps": "requests/s", "arrival_rate": "requests/s", "request_rate": "requests/s",
               "qps": "requests/s", "concurrency": "users", "max_concurrency": "users",
               "num_users": "users", "batch_size": "sequences"}
#: (column, metric) and (column, tag) of the sensitivity table after the swept params: the
#: registry's report metrics (engine.result.METRICS); text results are ``summary.*`` tags.
_METRICS = tuple((m.label, m.name) for m in report_metrics() if not m.text)
_TAGS = tuple((m.label, f"summary.{m.name}") for m in report_metrics() if m.text)


def swept_params(df: pl.DataFrame) -> list[str]:
    """Param keys whose value differs between the runs. Where an option's ``name`` differs (e.g.
    hardware=h100_sxm,h200), its other fields are shown only if they also vary within one name."""
    cols = [c for c in df.columns if c.startswith("params.") and not c.endswith(_TEXT_KEYS)]
    varying = [c for c in cols if df[c].n_unique() > 1]
    keep = []
    for c in varying:
        group = c[7:].rsplit(".", 1)[0] if "." in c[7:] else None
        name_col = f"params.{group}.name"
        if group and c != name_col and name_col in varying:
            if df.group_by(name_col).agg(pl.col(c).n_unique()).get_column(c).max() <= 1:
                continue
        keep.append(c[7:])
    return sorted(keep, key=lambda k: (_override_pos(df, k), k))


def _override_pos(df: pl.DataFrame, key: str) -> int:
    """Position of ``key`` in the runs' command-line overrides (the sweep's own order), else last."""
    col = "tags.simllm.overrides"
    first = df[col].drop_nulls().to_list()[:1] if col in df.columns else []
    words = [w.split("=", 1)[0].lstrip("+~") for w in (first[0].split() if first else [])]
    return words.index(key) if key in words else len(words)


def _short(keys: list[str]) -> dict[str, str]:
    """'hardware.peak_bf16' -> 'peak_bf16' unless two keys share the last part."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last)}


def _numeric(key: str, value):
    """A param value as a float for sorting and plotting (unit strings via pint), else None."""
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    from runner.schema import UNITS
    from runner.units import to_si

    if key in UNITS:
        try:
            return to_si(key, value, UNITS[key], allow_zero=True)
        except Exception:  # noqa: BLE001
            return None
    return None


def _sort(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    if not keys:
        return df
    order = sorted(range(df.height), key=lambda i: [
        (0, _numeric(k, v), "") if _numeric(k, v) is not None else (1, 0.0, str(v))
        for k in keys for v in [df[f"params.{k}"][i]]])
    return df[order]


def _metric(df: pl.DataFrame, name: str) -> list:
    col = f"metrics.{name}"
    if col not in df.columns:
        return [None] * df.height
    return [None if v is None or v != v else v for v in df[col].to_list()]


def sensitivity_table(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """One row per run (= per config): swept params, latencies, throughputs, bound, run id.
    Metric and tag columns that no run has are left out."""
    short = _short(keys)
    cols = {short[k]: df[f"params.{k}"].to_list() for k in keys}
    for label, m in _METRICS:
        vals = _metric(df, m)
        if m.endswith("_p99"):
            p50 = _metric(df, m.replace("_p99", "_p50"))
            if all(a == b for a, b in zip(vals, p50)):
                continue  # analytical: p99 = p50, the lower bound
        if any(v is not None for v in vals):  # columns no run has are left out
            cols[label] = pl.Series(label, vals, dtype=pl.Float64)
    for label, tag in _TAGS:
        if f"tags.{tag}" in df.columns and df[f"tags.{tag}"].drop_nulls().len():
            cols[label] = df[f"tags.{tag}"].to_list()
    if "tags.simllm.engine" in df.columns and df["tags.simllm.engine"].n_unique() > 1:
        cols["engine"] = df["tags.simllm.engine"].to_list()
    cols["run_id"] = df["run_id"].to_list()
    return pl.DataFrame(cols)


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    return str(v)


def markdown_table(t: pl.DataFrame) -> str:
    """The sensitivity table as Markdown: numbers as ``_fmt`` shows them, run ids shortened."""
    from runner.tools.cli import text_table

    return text_table({c: [str(v)[:8] if c == "run_id" else _fmt(v) for v in t[c].to_list()]
                       for c in t.columns})


def _labels(df: pl.DataFrame, keys: list[str]) -> dict[str, str]:
    short = _short(keys)
    out = {}
    for r in df.iter_rows(named=True):
        lab = " ".join(f"{short[k]}={r[f'params.{k}']}" for k in keys)
        out[r["run_id"]] = lab or r.get("tags.mlflow.runName") or r["run_id"][:8]
    return out


def config_labels(df: pl.DataFrame) -> dict[str, str]:
    """Config hash -> a name for its config: the params that differ between the configs of ``df``
    (``swept_params`` over one run per hash: "hardware=h200 tp=2"), else the run's hardware,
    model and partition ("h100_sxm llama_3_1_8b tp1"). Two configs that the logged params cannot
    tell apart get their hash's first 6 characters too."""
    hcol = "tags.simllm.config_hash"
    if hcol not in df.columns:
        return {}
    one = df.filter(pl.col(hcol).is_not_null()).unique(subset=[hcol], keep="first", maintain_order=True)
    keys = swept_params(one) if one.height > 1 else []
    short = {k: k[:-5] if k.endswith(".name") else v for k, v in _short(keys).items()}   # hardware=h200
    out = {}
    for r in one.iter_rows(named=True):
        lab = " ".join(f"{short[k]}={r.get(f'params.{k}')}" for k in keys)
        if not lab:
            lab = " ".join(str(r[c]) for c in ("params.hardware.name", "params.model.name")
                           if r.get(c) is not None)
            lab = (lab + " " + _partition(r)).strip() if r.get("params.partition.tp") else lab
        out[r[hcol]] = lab or r[hcol][:10]
    taken = list(out.values())
    return {h: (lab if taken.count(lab) == 1 else f"{lab} ({h[:6]})") for h, lab in out.items()}


def _partition(row: dict) -> str:
    p = {k: row.get(f"params.partition.{k}") for k in ("tp", "pp", "ep", "sp", "dp")}
    s = " ".join(f"{k}{v}" for k, v in p.items() if v not in (None, "1"))
    return s or f"tp{p['tp'] or 1}"


def _interval(row: dict, key: str) -> tuple[float, float] | None:
    """(lo, hi) of a run's metric ``key``: its ``<key>_lo`` / ``<key>_hi`` metrics
    (uncertainty.enabled, runner.intervals); None when the run has none."""
    lo, hi = row.get(f"metrics.{key}_lo"), row.get(f"metrics.{key}_hi")
    return None if lo is None or hi is None or lo != lo or hi != hi else (lo, hi)


def _interactivity_interval(row: dict) -> tuple[float, float] | None:
    """(lo, hi) tok/s per user. Both engines define interactivity as 1000 / TPOT p50 (ms), so the
    TPOT p50's interval maps onto it exactly: [1000 / tpot hi, 1000 / tpot lo]; None when the run
    has no TPOT interval or its interactivity is not 1000 / its TPOT p50."""
    iv, tpot = _interval(row, "tpot_ms_p50"), row.get("metrics.tpot_ms_p50")
    x = row.get("metrics.interactivity_tok_s_per_user")
    if iv is None or not tpot or x is None or not np.isclose(x, 1e3 / tpot, rtol=1e-6):
        return None
    return 1e3 / iv[1], 1e3 / iv[0]


def _level(rows: dict) -> float | None:
    """The runs' common interval level (metric ``uncertainty_level``), else None."""
    levels = {v for r in rows.values()
              if (v := r.get("metrics.uncertainty_level")) is not None and v == v}
    return levels.pop() if len(levels) == 1 else None


def _grid_label(row: dict) -> str:
    """'PP1-TP4-EP1-SP1' + batch 64 -> 'TP4 b64' (parts equal to 1 left out)."""
    part = row.get("partition") or "-".join(f"{k.upper()}{int(row[k])}" for k in ("pp", "tp", "ep", "sp")
                                             if row.get(k) is not None)
    kept = [w for w in str(part).split("-") if not w.endswith(("P1",)) or w.startswith("TP")]
    b = row.get("batch_size")
    return " ".join(kept) + (f" b{int(b)}" if b is not None and b == b else "")


def _pareto_points(rows: dict, tables: dict, labels: dict) -> tuple[list[tuple], str]:
    """One point per run from its metrics (with its intervals, ``plots.pareto``), or one per row
    of a run's grid table (Pareto sweep; no intervals); and which throughput: a grid uses the one
    its run's frontier used (``engine.analytical.pareto.throughput``: decode or e2e)."""
    pts, kinds = [], set()
    for rid, r in rows.items():
        t = tables.get(rid)
        decode = r.get("params.engine.analytical.pareto.throughput") == "decode"
        y = "decode_throughput_tok_s_per_gpu" if decode else "throughput_tok_s_per_gpu"
        if t is not None and t.height > 1 and {"interactivity_tok_s_per_user", y} <= set(t.columns):
            kinds.add("decode" if decode else "e2e")
            pts += [(g["interactivity_tok_s_per_user"], g[y], _grid_label(g), labels[rid])
                    for g in t.iter_rows(named=True)]
        else:
            kinds.add("e2e")
            pts.append((r.get("metrics.interactivity_tok_s_per_user"),
                        r.get("metrics.throughput_tok_s_per_gpu"), _partition(r), labels[rid],
                        _interactivity_interval(r), _interval(r, "throughput_tok_s_per_gpu")))
    return pts, ("decode " if kinds == {"decode"} else "")


def load_tables(uri: str, df: pl.DataFrame, tmp: Path) -> dict[str, pl.DataFrame]:
    """Each run's ``table.parquet`` (or ``table.csv``, engine.des.outputs.output_format=csv) artifact
    (runs without one are left out)."""
    out = {}
    for rid in df["run_id"].to_list():
        p = runs.artifact(uri, rid, "table.parquet", tmp / rid)
        if p is not None:
            out[rid] = pl.read_parquet(p)
            continue
        p = runs.artifact(uri, rid, "table.csv", tmp / rid)
        if p is not None:
            out[rid] = pl.read_csv(p)
    return out


def per_request(t: pl.DataFrame) -> dict[str, np.ndarray] | None:
    """Per-request TTFT/TPOT in ms from a DES table: columns ``ttft_ms``/``tpot_ms``, or
    ``ttft_s``/``tpot_s``, or bare ``ttft``/``tpot`` (seconds, the engine's SI unit)."""
    out = {}
    for what in ("ttft", "tpot"):
        for col, scale in ((f"{what}_ms", 1.0), (f"{what}_s", 1e3), (what, 1e3)):
            if col in t.columns:
                out[what] = t[col].cast(pl.Float64).drop_nulls().to_numpy() * scale
                break
    return out or None


def _load_axis(keys: list[str]) -> str | None:
    for cand in _LOAD_KEYS:
        for k in keys:
            if k.rsplit(".", 1)[-1] == cand:
                return k
    return None


def build(uri: str, df: pl.DataFrame, out: Path, title: str, selection: str,
          html_page: bool = False) -> Path:
    """Write report.md (+ report.html), sensitivity.csv and the PNGs into ``out``; returns report.md."""
    import runner
    from runner.job import git_commit

    out.mkdir(parents=True, exist_ok=True)
    keys = swept_params(df)
    df = _sort(df, keys)
    table = sensitivity_table(df, keys)
    table.write_csv(out / "sensitivity.csv")
    labels = _labels(df, keys)
    rows = {r["run_id"]: r for r in df.iter_rows(named=True)}
    with tempfile.TemporaryDirectory() as tmp:
        tables = load_tables(uri, df, Path(tmp))
    engines = {rid: rows[rid].get("tags.simllm.engine") for rid in rows}
    sections = [("Sensitivity table", (
        f"One row per config; swept: {', '.join(keys) or 'nothing (one config)'}. TTFT/TPOT of the "
        "analytical engine are lower bounds (p50 = p99); p99 columns appear where a run's p99 "
        "differs (DES). `bound` is the binding bottleneck; full precision in `sensitivity.csv`."),
        markdown_table(table), None)]

    fig = plots.roofline(tables, labels, out / "roofline.png")
    sections.append(("Roofline", "Attained FLOP/s per device vs arithmetic intensity (FLOPs / HBM "
                     "bytes) of each config's prefill and decode phase, under its chip's roof "
                     "min(peak, bandwidth x intensity); the ridge is peak / bandwidth."
                     if fig else "No run has the analytical phase breakdown in its table.parquet.",
                     None, fig))

    load = _load_axis(keys)
    xkey = load or max((k for k in keys if all(_numeric(k, rows[r][f"params.{k}"]) is not None
                                               for r in rows)),
                       key=lambda k: df[f"params.{k}"].n_unique(), default=None)
    fig = None
    if xkey:
        others = [k for k in keys if k != xkey]
        short = _short(keys)
        series = {r: " ".join(f"{short[k]}={rows[r][f'params.{k}']}" for k in others) or "all"
                  for r in rows}
        xs = {r: _numeric(xkey, rows[r][f"params.{xkey}"]) for r in rows}
        lat = {w: {r: (rows[r].get(f"metrics.{w}_ms_p50"), rows[r].get(f"metrics.{w}_ms_p99"))
                   for r in rows} for w in ("ttft", "tpot")}
        from runner.schema import UNITS
        unit = UNITS.get(xkey, "")
        if not unit:
            unit = _LOAD_UNITS.get(xkey.rsplit(".", 1)[-1], "")
        else:  # plot in the unit the config's YAML uses (TB/s, TFLOPS ...), not SI
            one = _numeric(xkey, f"1 {unit}")
            xs = {r: v / one for r, v in xs.items()}
        xlabel = f"{short[xkey]}" + (f" ({unit})" if unit else "")
        name = "load.png" if load else "sensitivity.png"
        bands = {w: {r: iv for r in rows if (iv := _interval(rows[r], f"{w}_ms_p50"))}
                 for w in ("ttft", "tpot")}
        fig = plots.latency_vs(xs, series, lat["ttft"], lat["tpot"], xlabel, out / name,
                               "p50 / p99 vs load" if load else f"Sensitivity to {short[xkey]}", bands)
    sections.append(("p50 / p99 vs load" if load else "Latency vs swept parameter",
                     (f"TTFT and TPOT vs `{xkey}` (p50 solid, p99 dashed where it differs; shaded: "
                      "the p50's prediction interval where the runs have one)."
                      if fig else "Needs a numeric swept parameter with two or more values and "
                      "runs with TTFT/TPOT metrics."),
                     None, fig))

    samples = {}
    for rid, t in tables.items():
        if engines.get(rid) != "analytical":
            s = per_request(t)
            if s:
                samples[rid] = s
    bars = {r: {w: [(q, *iv) for q, stat in ((0.5, "p50"), (0.99, "p99"))
                    if (iv := _interval(rows[r], f"{w}_ms_{stat}"))] for w in ("ttft", "tpot")}
            for r in samples}
    level = _level(rows)
    fig = plots.cdfs(samples, labels, out / "cdf.png", bars, level)
    sections.append(("TTFT and TPOT distributions", (
        "Empirical CDFs over requests, one curve per run" + (
            "; bars at 0.5 and 0.99 (one row per run, stacked just below): the prediction "
            "intervals of the run's p50 and p99 (the error model is fitted on centre and tail "
            "statistics, so the rest of the curve has no band; an interval carries the model's "
            "bias, so it need not contain the point)."
            if any(any(b.values()) for b in bars.values()) else ".") if fig else
        "No per-request tables among these runs (the analytical engine has none; a DES run's "
        "table.parquet has one row per request)."), None, fig))

    shares = {r: {ph: {c: rows[r].get(f"metrics.{ph}_share_{c}") for c in plots.OP_CLASSES}
                  for ph in ("prefill", "decode")
                  if any(rows[r].get(f"metrics.{ph}_share_{c}") is not None for c in plots.OP_CLASSES)}
              for r in rows}
    fig = plots.op_shares({r: v for r, v in shares.items() if v}, labels, out / "op_shares.png")
    sections.append(("Where a pass spends its time", (
        "Share of a pass's time per operator class (dense matmuls + LM head + element-wise, "
        "attention, routed experts, exposed communication, framework overheads): the analytical "
        "engine's prefill pass and mid-context decode step, the DES's decode step at its mean "
        "batch (summary `prefill_share_*`, `decode_share_*`)." if fig else
        "No run has operator shares (runs before they were reported)."), None, fig))

    with tempfile.TemporaryDirectory() as tmp:     # DES cluster runs: timeseries.parquet
        ts = {}
        for rid in rows:
            p = runs.artifact(uri, rid, "timeseries.parquet", Path(tmp) / rid)
            if p is not None:
                ts[rid] = pl.read_parquet(p)
    fig = plots.cluster_timeseries(ts, labels, out / "cluster_timeseries.png") if ts else None
    if fig:
        sections.append(("Cluster over time", "Per window of engine.des.outputs.timeseries_s: arrivals, "
                         "waiting requests, replicas (dotted: billed, with provisioning and "
                         "draining), SLO attainment of the requests arriving in the window, "
                         "cumulative cost.", None, fig))

    pts, kind = _pareto_points(rows, tables, labels)
    fig = plots.pareto(pts, out / "pareto.png", ylabel=f"{kind}throughput (tokens/s per GPU)",
                       level=level)
    sections.append(("Pareto frontier", "Throughput per GPU vs tokens/s per user; frontier points "
                     "carry their partition, the star marks the highest throughput per GPU." + (
                         " Bars: each run's prediction intervals (throughput per GPU; tok/s per "
                         "user = 1000 / TPOT p50, from the TPOT p50's); the frontier joins the point "
                         "predictions, and a ringed point is dominated but its interval reaches "
                         "the frontier." if any(p[4] or p[5] for p in pts if len(p) > 4) else "")
                     if fig else "No run has both throughput metrics.", None, fig))

    head = (f"{df.height} configs from `{uri}` ({selection}); simllm {runner.__version__} at "
            f"commit {git_commit()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.")
    md = [f"# simllm report: {title}", "", head, ""]
    for name, text, tbl, img in sections:
        md += [f"## {name}", "", text, ""]
        if tbl:
            md += [tbl, ""]
        if img:
            md += [f"![{name}]({img.name})", ""]
    (out / "report.md").write_text("\n".join(md))
    if html_page:
        _html(out / "report.html", title, head, sections, table)
    return out / "report.md"


def _html(path: Path, title: str, head: str, sections, table: pl.DataFrame) -> None:
    """One self-contained page: the table as HTML, the PNGs embedded as base64 data URIs."""
    esc = html.escape
    body = [f"<h1>simllm report: {esc(title)}</h1>", f"<p>{esc(head)}</p>"]
    for name, text, tbl, img in sections:
        body += [f"<h2>{esc(name)}</h2>", f"<p>{esc(text)}</p>"]
        if tbl:
            body.append("<table><tr>" + "".join(f"<th>{esc(c)}</th>" for c in table.columns)
                        + "</tr>" + "".join(
                            "<tr>" + "".join(f"<td>{esc(_fmt(v) if c != 'run_id' else str(v)[:8])}</td>"
                                             for c, v in zip(table.columns, r)) + "</tr>"
                            for r in table.iter_rows()) + "</table>")
        if img:
            data = base64.b64encode(img.read_bytes()).decode()
            body.append(f'<img alt="{esc(name)}" src="data:image/png;base64,{data}">')
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:"
             "collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}img{max-width:100%}")
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
                    f"<style>{style}</style></head><body>{''.join(body)}</body></html>")


def log_report(uri: str, df: pl.DataFrame, out: Path, title: str, parent: str | None) -> str:
    """Log the report directory as the artifacts of a new run (tag simllm.role=report)."""
    c = tracking.client(uri)
    tags = {runs.ROLE_TAG: "report", "simllm.report_of": title[:5000],
            "simllm.report_runs": ",".join(df["run_id"].to_list())[:5000]}
    if parent:
        tags["mlflow.parentRunId"] = parent
    run = c.create_run(df["experiment_id"][0], run_name=f"report:{title}"[:250], tags=tags)
    c.log_artifacts(run.info.run_id, str(out))
    c.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def _args(argv):
    p = argparse.ArgumentParser(prog="simllm-report", description=__doc__.split("\n\n")[0])
    p.add_argument("target", nargs="?", help="experiment name, sweep parent run id, sweep id, or a "
                   "job run id")
    p.add_argument("--experiment", help="MLflow experiment name or id")
    p.add_argument("--sweep", help="sweep parent run id or (the end of) the sweep directory")
    p.add_argument("--commit", help="only runs of this git commit (prefix)")
    p.add_argument("--runs", nargs="+", metavar="RUN_ID", help="exactly these runs")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two runs, sweeps or "
                   "git commits (with --experiment)")
    p.add_argument("--trend", metavar="METRIC", help="a metric (e.g. ttft_ms_p50) across commits or "
                   "dates for each config hash of the selection (target = experiment; all by default)")
    p.add_argument("--config-hash", help="--trend: only this config hash (a prefix is enough)")
    p.add_argument("--by", choices=("commit", "date"), default="commit",
                   help="--trend: x axis, one point per git commit (its latest run) or per run")
    p.add_argument("--uri", default=None, help=f"tracking URI (default $MLFLOW_TRACKING_URI or "
                   f"{tracking.DEFAULT_URI})")
    p.add_argument("-o", "--out", type=Path, help="report directory (default outputs/reports/...)")
    p.add_argument("--html", action="store_true", help="also write a self-contained report.html")
    p.add_argument("--no-log", action="store_true", help="do not log the report to MLflow")
    add_quiet(p)
    return p.parse_args(argv)


@guard("simllm-report")
def main(argv=None) -> int:
    a = _args(argv)
    uri = a.uri or tracking.default_uri()
    t0 = time.perf_counter()
    names = ["reading the runs", "building the report"] + ([] if a.no_log else ["logging to MLflow"])
    with Steps(names, "simllm-report", a.quiet) as steps:
        steps.step("reading the runs")
        return _main(a, uri, t0, steps)


def _main(a, uri, t0, steps) -> int:
    try:
        if a.compare:
            from runner.tools import compare
            return compare.main(uri, a.compare[0], a.compare[1], a.experiment, a.out)
        if a.trend:
            return trend_main(uri, a)
        parent = None
        if a.runs:
            df, title = runs.runs_by_id(uri, a.runs), f"{len(a.runs)} runs"
        elif a.sweep or a.experiment or a.commit:
            df = runs.select(uri, experiment=a.experiment, sweep=a.sweep, commit=a.commit)
            title = a.sweep or a.experiment or a.commit
        elif a.target:
            kind, df = runs.resolve(uri, a.target, a.experiment)
            title = a.target
            parent = a.target if kind == "sweep" and len(a.target) == 32 else None
        else:
            print("simllm-report: give an experiment, --sweep, --runs or --compare A B", file=sys.stderr)
            return 2
    except runs.SelectionError as e:
        print(f"simllm-report: error: {e}", file=sys.stderr)
        return 2
    if parent is None and a.sweep and len(a.sweep) == 32:
        parent = a.sweep
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in title)[-60:]
    out = a.out or Path("outputs/reports") / f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}"
    selection = ", ".join(f"{k} {v}" for k, v in (("experiment", a.experiment), ("sweep", a.sweep),
                                                    ("commit", a.commit), ("target", a.target)) if v)
    steps.step("building the report")
    md = build(uri, df, out, title, selection or "runs", a.html)
    print(md.read_text().split("## Roofline")[0].rstrip())
    print(f"\nreport: {md}" + (f" and {out / 'report.html'}" if a.html else "")
          + f"  ({time.perf_counter() - t0:.1f} s)")
    if not a.no_log:
        steps.step("logging to MLflow")
        try:
            rid = log_report(uri, df, out, title, parent)
            print(f"logged as MLflow run {rid}")
        except Exception as e:  # noqa: BLE001 - the report files are already written
            print(f"simllm-report: warning: could not log the report to MLflow ({e})", file=sys.stderr)
    return 0


def trend_table(df: pl.DataFrame, metric: str, by: str = "commit",
                config_hash: str | None = None) -> pl.DataFrame:
    """One row per (config hash, commit) (``by`` = commit: the commit's latest run) or per run
    (``by`` = date): config_hash, commit, start_time, run_id, value, change vs the previous row of
    the same config in %. Runs without the metric or the hash are left out."""
    col, hcol, ccol = f"metrics.{metric}", "tags.simllm.config_hash", "tags.simllm.git_commit"
    if col not in df.columns:
        near = sorted(c[8:] for c in df.columns if c.startswith("metrics.") and metric.split("_")[0] in c)
        raise runs.SelectionError(f"no run of the selection has metric {metric!r}"
                                  + (f" (similar: {', '.join(near[:8])})" if near else ""))
    if hcol not in df.columns:
        raise runs.SelectionError("the runs carry no config hash tag (simllm.config_hash)")
    t = df.select(pl.col(hcol).alias("config_hash"),
                  (pl.col(ccol) if ccol in df.columns else pl.lit(None, pl.String)).alias("commit"),
                  "start_time", "run_id", pl.col(col).alias("value"))
    t = t.filter(pl.col("value").is_not_null() & pl.col("value").is_not_nan() & pl.col("config_hash").is_not_null())
    if config_hash:
        t = t.filter(pl.col("config_hash").str.starts_with(config_hash))
        if t.is_empty():
            raise runs.SelectionError(f"no run with config hash {config_hash!r} has {metric}")
    t = t.with_columns(pl.col("commit").fill_null("unknown")).sort("start_time")
    if by == "commit":
        t = t.group_by(["config_hash", "commit"], maintain_order=True).last()
    t = t.sort(["config_hash", "start_time"])
    prev = pl.col("value").shift(1).over("config_hash")
    return t.with_columns(((pl.col("value") / prev - 1) * 100).alias("change_pct"))


def trend_main(uri: str, a) -> int:
    """``--trend METRIC``: the table (printed, trend.md/trend.csv) and trend.png."""
    from engine.result import unit_of

    try:
        exp = a.experiment or a.target
        df = runs.select(uri, experiment=exp, commit=a.commit, dedupe=False)
        t = trend_table(df, a.trend, a.by, a.config_hash)
    except runs.SelectionError as e:
        print(f"simllm-report: error: {e}", file=sys.stderr)
        return 2
    if t.is_empty():
        print(f"simllm-report: no run of the selection has a value of {a.trend}", file=sys.stderr)
        return 2
    out = a.out or Path("outputs/reports") / f"trend-{a.trend}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    unit = unit_of(a.trend)
    series = {}
    if a.by == "commit":      # x: the commit's rank by its first run, shared by all configs
        first = t.group_by("commit").agg(pl.col("start_time").min()).sort("start_time")["commit"].to_list()
        pos = {c: i for i, c in enumerate(first)}
    names = config_labels(df)      # the legend names configs (what differs), not their hashes
    for r in t.iter_rows(named=True):
        x = pos[r["commit"]] if a.by == "commit" else r["start_time"]
        series.setdefault(names.get(r["config_hash"], r["config_hash"][:10]), []).append(
            (x, r["value"], r["commit"][:10]))
    png = plots.trend(series, a.trend, unit, a.by, out / "trend.png")
    t.write_csv(out / "trend.csv")
    head = ["config", "config hash", "commit", "run start (UTC)", "run",
            f"{a.trend} ({unit})" if unit else a.trend, "change %"]
    rows = [[names.get(r["config_hash"], ""), r["config_hash"][:10], r["commit"][:10], str(r["start_time"])[:19], r["run_id"][:8],
             _fmt(r["value"]), "" if r["change_pct"] is None else f"{r['change_pct']:+.2f}"]
            for r in t.iter_rows(named=True)]
    lines = [f"# Trend of {a.trend}", "",
             f"Selection: {exp or 'all experiments'}; one point per "
             + ("git commit (its latest run)" if a.by == "commit" else "run") + " of each config hash.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if png:
        lines += ["", f"![trend]({png.name})"]
    (out / "trend.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:len(rows) + 6]))
    print(f"\ntrend: {out / 'trend.md'}")
    return 0


def cli() -> None:
    sys.exit(main())
