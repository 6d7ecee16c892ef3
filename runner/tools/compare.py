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

from engine.result import METRICS, unit_of
from runner.tools import runs
from runner.tools.cli import text_table


def _fmt(v) -> str:
    if v is None:
        return "(absent)"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def param_changes(a: dict, b: dict) -> list[tuple[str, object, object]]:
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


#: Relative changes below this are rounding (the order of float operations), listed apart.
ROUNDING = 1e-12


def _norm(v):
    """MLflow stores +-inf as +-max float on some stores: read both as inf."""
    if isinstance(v, float) and abs(v) >= sys.float_info.max:
        return math.copysign(math.inf, v)
    return v


def metric_changes(a: dict, b: dict) -> list[tuple[str, object, object]]:
    out = []
    for k in sorted(set(a) | set(b)):
        x, y = _norm(a.get(k)), _norm(b.get(k))
        if (x is not None and y is not None and (x == y or (
                isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)))):
            continue
        out.append((k, x, y))
    return out


def _results(row: dict) -> dict:
    """Metrics plus the string results kept as summary.* tags (bound ...)."""
    tags = runs.tags(row)
    return {**{k[8:]: _number(v) for k, v in tags.items() if k.startswith("summary.")},
            **runs.metrics(row)}


def _number(text: str):
    """A summary tag as a float when it is one ('inf' of a non-finite metric), else the text."""
    try:
        return float(text) if text.lower() not in ("true", "false") else text
    except ValueError:
        return text


def _kind(x, y) -> str:
    """'only_a', 'only_b', 'rounding' or 'changed'."""
    if y is None:
        return "only_a"
    if x is None:
        return "only_b"
    if isinstance(x, float) and isinstance(y, float) and math.isfinite(x) and math.isfinite(y) \
            and abs(y - x) <= ROUNDING * max(abs(x), abs(y)):
        return "rounding"
    return "changed"


def _metric_section(mc) -> list[str]:
    """Real changes as a table; one-sided metrics and rounding-level changes as one line each."""
    by = {k: [c for c in mc if _kind(c[1], c[2]) == k] for k in ("changed", "only_a", "only_b", "rounding")}
    md = _metric_table(by["changed"]) + [""] if by["changed"] else []
    for kind, text in (("only_b", "only in B"), ("only_a", "only in A")):
        if by[kind]:
            md += [f"{len(by[kind])} metric(s) {text}: " + ", ".join(c[0] for c in by[kind]), ""]
    if by["rounding"]:
        md += [f"{len(by['rounding'])} metric(s) differ at rounding level only (relative change "
               f"< {ROUNDING:g}): " + ", ".join(c[0] for c in by["rounding"]), ""]
    return md


def _metric_table(changes) -> list[str]:
    """The headline metrics (engine.result.METRICS order) first, then the rest by name; each with
    its unit (the registry's, or the one its name states)."""
    order = {m.name: i for i, m in enumerate(METRICS)}
    rows = sorted(changes, key=lambda c: (order.get(c[0], len(order)), c[0]))
    return [text_table({"metric": [k for k, _, _ in rows], "unit": [unit_of(k) for k, _, _ in rows],
                        "A": [_fmt(x) for _, x, _ in rows], "B": [_fmt(y) for _, _, y in rows],
                        "change": [f"{(y - x) / abs(x) * 100:+.2f} %" if isinstance(x, float)
                                   and isinstance(y, float) and x else "" for _, x, y in rows]})]


def _param_table(changes) -> list[str]:
    return [text_table({"param": [k for k, _, _ in changes], "A": [_fmt(x) for _, x, _ in changes],
                        "B": [_fmt(y) for _, _, y in changes]})]


#: Overrides that do not change a result (ignored when matching runs by their overrides).
_NEUTRAL = ("print_table", "resume", "tracking", "hydra")


def _overrides_key(row: dict):
    words = (row.get("tags.simllm.overrides") or "").split()
    kept = sorted(w for w in words if not w.lstrip("+~").startswith(_NEUTRAL))
    return " ".join(kept) if row.get("tags.simllm.overrides") is not None else None


def _match(da: pl.DataFrame, db: pl.DataFrame):
    """Pairs of rows (a, b) matched by config hash, then by the result-relevant overrides, then by
    the params both sides have (a schema field added later does not break the match)."""
    ra = list(da.iter_rows(named=True))
    rb = list(db.iter_rows(named=True))
    common = set.intersection(*(set(runs.params(r)) for r in ra + rb)) if ra and rb else set()
    keys = (lambda r: r.get("tags.simllm.config_hash"), _overrides_key,
            lambda r: tuple(sorted((k, v) for k, v in runs.params(r).items() if k in common)) or None)
    pairs = []
    for key in keys:
        index = {}
        for r in rb:
            if key(r) is not None:
                index.setdefault(key(r), r)
        left = []
        for r in ra:
            m = index.pop(key(r), None) if key(r) is not None else None
            if m is not None:
                pairs.append((r, m))
                rb.remove(m)
            else:
                left.append(r)
        ra = left
    return pairs, ra, rb


def _label(row: dict) -> str:
    over = " ".join(w for w in (row.get("tags.simllm.overrides") or "").split()
                    if not w.startswith(("experiment=",) + _NEUTRAL))
    return (over or row.get("tags.mlflow.runName") or "") + f" ({row['run_id'][:8]})"


def _param_section(pc) -> list[str]:
    """Changed values as a table; params present on one side only as one paragraph each."""
    changed = [c for c in pc if c[1] is not None and c[2] is not None]
    md = _param_table(changed) + [""] if changed else []
    for side, idx, other in (("only in B (new fields?)", 2, 1), ("only in A", 1, 2)):
        only = [c for c in pc if c[other] is None]
        if only:
            shown = ", ".join(f"`{c[0]}={c[idx]}`" for c in only[:30])
            more = f" and {len(only) - 30} more" if len(only) > 30 else ""
            md += [f"{len(only)} param(s) {side}: {shown}{more}", ""]
    return md


def compare(uri: str, a: str, b: str, experiment: str | None = None) -> tuple[str, dict]:
    """Markdown describing the differences, and the raw changes ({'params': ..., 'metrics': ...}
    for two runs; {'pairs': [...], 'only_a': [...], 'only_b': [...]} for two sets)."""
    ka, da = runs.resolve(uri, a, experiment)
    kb, db = runs.resolve(uri, b, experiment)
    head = ["# simllm compare", "", f"A = {ka} `{a}` ({da.height} run(s)); "
            f"B = {kb} `{b}` ({db.height} run(s)); store `{uri}`.", ""]
    if da.height == 1 and db.height == 1:
        x, y = da.row(0, named=True), db.row(0, named=True)
        pc = param_changes(runs.params(x), runs.params(y))
        mc = metric_changes(_results(x), _results(y))
        md = head + [f"## Config: {len(pc)} param(s) changed", ""] + (_param_section(pc) or ["(none)"])
        md += ["", f"## Metrics: {len(mc)} changed", ""] + (_metric_section(mc) or ["(none)"])
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
    for x, y in pairs:
        raw["pairs"].append({"a": x["run_id"], "b": y["run_id"],
                             "params": param_changes(runs.params(x), runs.params(y)),
                             "metrics": metric_changes(_results(x), _results(y))})
    if pairs:
        common = set.intersection(*(set(p["params"]) for p in raw["pairs"]))
        if common:
            md += ["", f"## Config changes in every matched config ({len(common)})", ""]
            md += _param_section(sorted(common))
        rows, aside = [], {"only_a": set(), "only_b": set(), "rounding": 0}
        for (x, _), p in zip(pairs, raw["pairs"]):
            own = [c for c in p["params"] if c not in common]
            if own:
                rows.append((_label(x), "params: " + "; ".join(
                    f"{k}: {_fmt(u)} -> {_fmt(v)}" for k, u, v in own), "", "", ""))
            for k, u, v in p["metrics"]:
                kind = _kind(u, v)
                if kind == "changed":
                    rows.append((_label(x), k, _fmt(u), _fmt(v), f"{(v - u) / abs(u) * 100:+.3g} %"
                                 if isinstance(u, float) and isinstance(v, float) and u else ""))
                elif kind == "rounding":
                    aside["rounding"] += 1
                else:
                    aside[kind].add(k)
        for kind, text in (("only_b", "only in B"), ("only_a", "only in A")):
            if aside[kind]:
                md += ["", f"Metric(s) {text}: " + ", ".join(sorted(aside[kind]))]
        if aside["rounding"]:
            md += ["", f"{aside['rounding']} metric value(s) differ at rounding level only "
                   f"(relative change < {ROUNDING:g})."]
        if rows:
            head = ("config (A)", "metric", "A", "B", "change")
            md += ["", "## Changes per config", "",
                   text_table({h: [r[i] for r in rows] for i, h in enumerate(head)})]
        elif not common:
            md += ["", "Every matched config has the same params and metrics."]
        else:
            md += ["", "Metrics unchanged in every matched config."]
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
