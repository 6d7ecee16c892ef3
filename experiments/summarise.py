"""Summarise an experiment's multirun directory: one line per job, and for Pareto jobs the
frontier's winning partitions (with an overlay plot of the frontiers).

    python experiments/summarise.py outputs/multirun/DATE/TIME [--keys k1,k2 ...]

Reads each job's ``config.yaml``, ``summary.json`` and ``table.parquet`` (what every job writes
before MLflow); prints, writes ``summary.md`` and, for Pareto jobs, ``frontiers.png`` into the
multirun directory.
"""

import argparse
import json
import sys
from pathlib import Path

import polars as pl
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_KEYS = ("ttft_ms_p50", "tpot_ms_p50", "throughput_tok_s_per_gpu",
                "interactivity_tok_s_per_user")


def _overrides(job: Path) -> str:
    f = job / ".hydra" / "overrides.yaml"
    if not f.exists():
        return job.name
    keep = [o for o in yaml.safe_load(f.read_text()) if not o.startswith(("tracking", "experiment"))]
    return " ".join(keep) or job.name


def _fmt(v):
    return f"{v:,.4g}" if isinstance(v, float) else str(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep_dir", type=Path)
    ap.add_argument("--keys", default="")
    a = ap.parse_args()
    jobs = sorted((p for p in a.sweep_dir.iterdir() if (p / "summary.json").exists()),
                  key=lambda p: int(p.name) if p.name.isdigit() else 0)
    keys = a.keys.split(",") if a.keys else None
    lines, fronts = [], []
    for job in jobs:
        s = json.loads((job / "summary.json").read_text())
        s = s.get("summary", s)
        label = _overrides(job)
        if "pareto_points" in s:
            t = pl.read_parquet(job / "table.parquet")
            f = t.filter(pl.col("on_frontier"))
            wins = f.group_by("partition").len().sort("len", descending=True)
            top = ", ".join(f"{r['partition']} ({r['len']})" for r in wins.head(4).iter_rows(named=True))
            lines.append(f"| {label} | {s['pareto_points']:,} | {f.height} | {top} | "
                         f"{s.get('max_interactivity_partition', '')}: "
                         f"{s.get('max_interactivity_tok_s_per_user', float('nan')):,.1f} tok/s/user | "
                         f"{s.get('max_throughput_partition', '')} @ B={s.get('max_throughput_batch', '')}: "
                         f"{s.get('max_throughput_tok_s_per_gpu', float('nan')):,.0f} tok/s/GPU |")
            fronts.append((label, f))
        else:
            ks = keys or [k for k in DEFAULT_KEYS if k in s]
            lines.append("| " + label + " | " + " | ".join(_fmt(s.get(k)) for k in ks) + " |")
    if fronts:
        head = ("| job | valid points | frontier points | frontier winners (points) | "
                "high-interactivity corner | high-throughput corner |\n|---|---|---|---|---|---|")
    else:
        ks = keys or [k for k in DEFAULT_KEYS]
        head = "| job | " + " | ".join(ks) + " |\n|---|" + "---|" * len(ks)
    text = head + "\n" + "\n".join(lines) + "\n"
    print(text)
    (a.sweep_dir / "summary.md").write_text(text)
    if fronts:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 5.5))
        x = next((c for c in ("decode_throughput_tok_s_per_gpu",) if c in fronts[0][1].columns))
        for label, f in fronts:
            f = f.sort(x)
            ax.plot(f[x], f["interactivity_tok_s_per_user"], marker=".", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("decode tokens/s per GPU")
        ax.set_ylabel("tokens/s per user (1 / TPOT)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(a.sweep_dir / "frontiers.png", dpi=120)
        print(f"wrote {a.sweep_dir / 'frontiers.png'}")


if __name__ == "__main__":
    main()
