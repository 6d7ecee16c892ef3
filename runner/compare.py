"""``simllm-report --compare A B``: what changed in config (params) and in metrics between two runs,
two sweeps, or two git commits' runs of one experiment.

Each side is resolved by ``runs.resolve`` (run id, sweep parent id, sweep id, commit prefix with
``--experiment``, or experiment name). Two single runs are compared param by param and metric by
metric. Two sets of runs are matched config by config: first by config hash (same config, e.g.
another commit), then by the job's command-line overrides (same point of a grid whose base config
changed); params are compared per matched pair, and configs present on one side only are listed.
"""

import math
import sys
from pathlib import Path

import polars as pl

from runner import runs

#: Metrics that are identifiers rather than results.
_SKIP_METRICS = ()


def _fmt(v) -> str:
    if v is None:
        return "(absent)"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def param_changes(a: dict, b: dict) -> list[tuple[str, object, object]]:
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def metric_changes(a: dict, b: dict) -> list[tuple[str, object, object]]:
    out = []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if k in _SKIP_METRICS or (x is not None and y is not None and (x == y or (
                isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)))):
            continue
        out.append((k, x, y))
    return out


def _results(row: dict) -> dict:
    """Metrics plus the string results kept as summary.* tags (bound ...)."""
    tags = runs.tags(row)
    return {**runs.metrics(row), **{k[8:]: v for k, v in tags.items() if k.startswith("summary.")}}


def _metric_table(changes) -> list[str]:
    lines = ["| metric | A | B | change |", "|---|---:|---:|---:|"]
    for k, x, y in changes:
        rel = (f"{(y - x) / abs(x) * 100:+.2f} %" if isinstance(x, float) and isinstance(y, float)
               and x else "")
        lines.append(f"| {k} | {_fmt(x)} | {_fmt(y)} | {rel} |")
    return lines


def _param_table(changes) -> list[str]:
    lines = ["| param | A | B |", "|---|---|---|"]
    lines += [f"| {k} | {_fmt(x)} | {_fmt(y)} |" for k, x, y in changes]
    return lines


def _match(da: pl.DataFrame, db: pl.DataFrame):
    """Pairs of rows (a, b) matched by config hash, then by overrides; and the unmatched."""
    ra = list(da.iter_rows(named=True))
    rb = list(db.iter_rows(named=True))
    pairs = []
    for key in ("tags.simllm.config_hash", "tags.simllm.overrides"):
        index = {}
        for r in rb:
            if r.get(key) is not None:
                index.setdefault(r[key], r)
        left = []
        for r in ra:
            m = index.pop(r.get(key), None) if r.get(key) is not None else None
            if m is not None:
                pairs.append((r, m))
                rb.remove(m)
            else:
                left.append(r)
        ra = left
    return pairs, ra, rb


def _label(row: dict) -> str:
    return (row.get("tags.simllm.overrides") or row.get("tags.mlflow.runName") or "") + \
        f" (run {row['run_id'][:8]})"


def compare(uri: str, a: str, b: str, experiment: str | None = None) -> tuple[str, dict]:
    """Markdown describing the differences, and the raw changes ({'params': ..., 'metrics': ...}
    for two runs; {'pairs': [...], 'only_a': [...], 'only_b': [...]} for two sets)."""
    ka, da = runs.resolve(uri, a, experiment)
    kb, db = runs.resolve(uri, b, experiment)
    head = [f"# simllm compare", "", f"A = {ka} `{a}` ({da.height} run(s)); "
            f"B = {kb} `{b}` ({db.height} run(s)); store `{uri}`.", ""]
    if da.height == 1 and db.height == 1:
        x, y = da.row(0, named=True), db.row(0, named=True)
        pc = param_changes(runs.params(x), runs.params(y))
        mc = metric_changes(_results(x), _results(y))
        md = head + [f"## Config: {len(pc)} param(s) changed", ""] + (_param_table(pc) if pc else
                                                                     ["(none)"])
        md += ["", f"## Metrics: {len(mc)} changed", ""] + (_metric_table(mc) if mc else ["(none)"])
        for t, name in (("tags.simllm.git_commit", "code commit"), ("tags.simllm.version", "simllm")):
            if x.get(t) != y.get(t):
                md += ["", f"{name}: {x.get(t)} -> {y.get(t)}"]
        return "\n".join(md) + "\n", {"params": pc, "metrics": mc}
    pairs, only_a, only_b = _match(da, db)
    md = head + [f"{len(pairs)} config(s) in both, {len(only_a)} only in A, {len(only_b)} only in B.", ""]
    commits = {(x.get("tags.simllm.git_commit"), y.get("tags.simllm.git_commit")) for x, y in pairs}
    for ca, cb in sorted(commits, key=str):
        if ca != cb:
            md.append(f"code commit: {ca} -> {cb}")
    raw = {"pairs": [], "only_a": [r["run_id"] for r in only_a], "only_b": [r["run_id"] for r in only_b]}
    changed = 0
    for x, y in pairs:
        pc = param_changes(runs.params(x), runs.params(y))
        mc = metric_changes(_results(x), _results(y))
        raw["pairs"].append({"a": x["run_id"], "b": y["run_id"], "params": pc, "metrics": mc})
        if not (pc or mc):
            continue
        changed += 1
        md += ["", f"## {_label(x)} vs run {y['run_id'][:8]}", ""]
        if pc:
            md += _param_table(pc) + [""]
        md += _metric_table(mc) if mc else ["metrics unchanged"]
    if pairs and not changed:
        md += ["", "Every matched config has the same params and metrics."]
    for name, rows in (("Only in A", only_a), ("Only in B", only_b)):
        if rows:
            md += ["", f"## {name}", ""] + [f"- {_label(r)}" for r in rows]
    return "\n".join(md) + "\n", raw


def main(uri: str, a: str, b: str, experiment: str | None, out: Path | None) -> int:
    try:
        md, _ = compare(uri, a, b, experiment)
    except runs.SelectionError as e:
        print(f"simllm-report: {e}", file=sys.stderr)
        return 2
    print(md)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(md)
        print(f"written: {out / 'compare.md'}")
    return 0
