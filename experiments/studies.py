"""The studies of ``experiments/``: which experiments each runs, the figures it records and the
Markdown it renders (``simllm-study``, runner/tools/study.py). Every number in a study's generated
block and in its ``NAME.figures.json`` comes from the jobs' ``summary.json`` / ``table.parquet``.

A figure key names the experiment, the swept point and the metric, e.g.
``chunk_star_l70b8/tp8/S=2048/ttft_at_chunk_star_ms``.
"""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

from runner.tools.study import Job, Study

# --------------------------------------------------------------------------- helpers


def _f(v, nd=None):
    """A number for a table: thousands separators, about 3-4 significant digits."""
    if v is None or isinstance(v, str):
        return "-" if v is None else v
    if isinstance(v, int):
        return f"{v:,}"
    v = float(v)
    if not math.isfinite(v):
        return "n/a"
    if nd is not None:
        return f"{v:,.{nd}f}"
    a = abs(v)
    return f"{v:,.0f}" if a >= 100 else f"{v:,.1f}" if a >= 10 else f"{v:,.2f}"


def _table(head: list, rows: list) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _label(job: Job, drop=()) -> str:
    return " ".join(f"{k.split('.')[-1]}={v}" for k, v in job.overrides.items() if k not in drop)


def _kb(v: str) -> str:
    """A swept value as it appears in a key (spaces removed)."""
    return str(v).replace(" ", "")


# --------------------------------------------------------------------------- chunk_star


def _prompt(j: Job) -> int:
    return int(j.overrides.get("workload.prompt_len", 0))


def _cstar(j: Job):
    c = j.get("chunk_star")
    if c is None or (isinstance(c, float) and not math.isfinite(c)):
        return None
    return "single" if c >= _prompt(j) else int(c)


def chunk_figures(jobs: dict) -> dict:
    out = {}
    for exp, js in jobs.items():
        for j in js:
            k = f"{exp}/{j.overrides.get('partition', 'default')}/S={_prompt(j)}"
            out[k + "/chunk_star"] = _cstar(j)
            out[k + "/ttft_at_chunk_star_ms"] = j.get("ttft_at_chunk_star_ms")
            out[k + "/ttft_single_pass_ms"] = j.get("ttft_ms_p50")
    return out


def chunk_render(jobs: dict, figs: dict, out_dir: Path) -> str:
    text = []
    for exp, js in jobs.items():
        prompts = sorted({_prompt(j) for j in js})
        parts = list(dict.fromkeys(j.overrides.get("partition", "default") for j in js))
        rows = []
        for p in parts:
            cells = []
            for S in prompts:
                k = f"{exp}/{p}/S={S}"
                c = figs.get(k + "/chunk_star")
                if c == "single":
                    cells.append(f"single / {_f(figs.get(k + '/ttft_single_pass_ms'))}")
                else:
                    cells.append(f"{c} / {_f(figs.get(k + '/ttft_at_chunk_star_ms'))} "
                                 f"({_f(figs.get(k + '/ttft_single_pass_ms'))})")
            rows.append([p] + cells)
        text.append(f"**`{exp}`**: C* / TTFT at C* in ms (single-pass TTFT)\n\n"
                    + _table(["partition"] + [f"{S // 1024}k" for S in prompts], rows))
    return "\n".join(text)


# --------------------------------------------------------------------------- disagg


def disagg_figures(jobs: dict) -> dict:
    out = {}
    for exp, js in jobs.items():
        for j in js:
            S = _prompt(j)
            base = f"{exp}/S={S}"
            for m in ("colocated_ttft_ms", "colocated_tpot_ms", "colocated_throughput_tok_s_per_gpu"):
                out[f"{base}/{m}"] = j.get(m)
            tp = j.overrides.get("engine.analytical.disagg.prefill_tp", "")
            sp = j.overrides.get("engine.analytical.disagg.prefill_sp", "1")
            k = f"{base}/prefill_tp{tp}_sp{sp}"
            fits = j.get("disagg_prefill_fits")
            for m in ("disagg_ttft_ms", "disagg_tpot_ms", "disagg_throughput_tok_s_per_gpu",
                      "disagg_handoff_ms"):
                out[f"{k}/{m}"] = j.get(m) if fits is not False else "does not fit"
    return out


def disagg_render(jobs: dict, figs: dict, out_dir: Path) -> str:
    text = []
    for exp, js in jobs.items():
        prompts = sorted({_prompt(j) for j in js})
        pf = list(dict.fromkeys((j.overrides.get("engine.analytical.disagg.prefill_tp", ""),
                                 j.overrides.get("engine.analytical.disagg.prefill_sp", "1")) for j in js))
        head = ["prompt", "co-located TTFT ms / TPOT ms / tok/s/GPU"] + \
               [f"prefill TP{tp} x SP{sp}: TTFT / TPOT / tok/s/GPU" for tp, sp in pf]
        rows = []
        for S in prompts:
            b = f"{exp}/S={S}"
            row = [f"{S // 1024}k", f"{_f(figs.get(b + '/colocated_ttft_ms'))} / "
                   f"{_f(figs.get(b + '/colocated_tpot_ms'))} / "
                   f"{_f(figs.get(b + '/colocated_throughput_tok_s_per_gpu'))}"]
            for tp, sp in pf:
                k = f"{b}/prefill_tp{tp}_sp{sp}"
                t = figs.get(k + "/disagg_ttft_ms")
                row.append("does not fit" if t == "does not fit" else
                           f"{_f(t)} / {_f(figs.get(k + '/disagg_tpot_ms'))} / "
                           f"{_f(figs.get(k + '/disagg_throughput_tok_s_per_gpu'))}")
            rows.append(row)
        text.append(f"**`{exp}`** (TTFT of the batch's prompts, ms; TPOT ms; decode-replica "
                    f"plus prefill-replica devices in tok/s/GPU)\n\n" + _table(head, rows))
    return "\n".join(text)


# --------------------------------------------------------------------------- Pareto studies


def _winners(j: Job, n=3) -> str:
    t = j.table
    if "on_frontier" not in t.columns or t.height == 0:
        return "-"
    import polars as pl

    f = t.filter(pl.col("on_frontier"))
    w = f.group_by("partition").len().sort(["len", "partition"], descending=[True, False])
    return ", ".join(f"{r['partition']} ({r['len']})" for r in w.head(n).iter_rows(named=True))


def pareto_figures(jobs: dict) -> dict:
    out = {}
    for exp, js in jobs.items():
        for j in js:
            k = f"{exp}/{_kb(_label(j)) or 'base'}"
            out[k + "/frontier_winners"] = _winners(j)
            out[k + "/frontier_points"] = j.get("pareto_frontier_points")
            out[k + "/max_interactivity_tok_s_per_user"] = j.get("max_interactivity_tok_s_per_user")
            out[k + "/max_interactivity_partition"] = j.get("max_interactivity_partition")
            out[k + "/max_throughput_tok_s_per_gpu"] = j.get("max_throughput_tok_s_per_gpu")
            out[k + "/max_throughput_partition"] = (f"{j.get('max_throughput_partition')} "
                                                    f"B={j.get('max_throughput_batch')}")
    return out


def _frontier_plot(exp: str, js: list, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import polars as pl

    fig, ax = plt.subplots(figsize=(7.5, 5))
    for j in js:
        f = j.table.filter(pl.col("on_frontier")).sort("decode_throughput_tok_s_per_gpu")
        if f.height:
            ax.plot(f["decode_throughput_tok_s_per_gpu"], f["interactivity_tok_s_per_user"],
                    marker=".", label=_label(j) or "base")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("decode tokens/s per GPU")
    ax.set_ylabel("tokens/s per user (1 / TPOT)")
    ax.set_title(exp, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def pareto_render(jobs: dict, figs: dict, out_dir: Path) -> str:
    text = []
    for exp, js in jobs.items():
        rows = []
        for j in js:
            k = f"{exp}/{_kb(_label(j)) or 'base'}"
            rows.append([_label(j) or "base", figs.get(k + "/frontier_winners"),
                         _f(figs.get(k + "/frontier_points")),
                         f"{_f(figs.get(k + '/max_interactivity_tok_s_per_user'))} "
                         f"({figs.get(k + '/max_interactivity_partition')})",
                         f"{_f(figs.get(k + '/max_throughput_tok_s_per_gpu'))} "
                         f"({figs.get(k + '/max_throughput_partition')})"])
        png = f"{exp}.png"
        _frontier_plot(exp, js, out_dir / png)
        text.append(f"**`{exp}`**\n\n" + _table(
            ["point", "frontier winners (points)", "frontier points", "best tok/s/user (partition)",
             "best decode tok/s/GPU (partition, batch)"], rows) + f"\n![{exp} frontiers]({png})\n")
    return "\n".join(text)


# --------------------------------------------------------------------------- DES load curve


def des_runner(run_dir: Path, code_root: Path) -> dict:
    """Runs ``experiments/des_load_curve.py`` of ``code_root`` (analytical capacity, then the DES
    at fractions of it) and reads back the table it writes: one pseudo-job per rate."""
    out = run_dir / "des_load_curve"
    if code_root is not None:             # None: read back a finished run (render --from)
        cmd = [sys.executable, str(code_root / "experiments" / "des_load_curve.py"),
               "--requests", "3000", "--out", str(out)]
        p = subprocess.run(cmd, cwd=code_root, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(code_root)})
        if p.returncode != 0:
            raise RuntimeError("des_load_curve.py failed:\n" + p.stderr[-3000:])
    md = Path(str(out) + ".md").read_text()
    cap = float(re.search(r"capacity ([\d.]+) req/s", md).group(1))
    best = re.search(r"best static batch (\d+)", md).group(1)
    jobs = []
    for line in md.splitlines():
        m = re.match(r"\| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d,]+) \| ([\d.]+) \|",
                     line)
        if m:
            v = [float(x.replace(",", "")) for x in m.groups()]
            jobs.append(Job("des_load_curve", {"rate_over_capacity": f"{v[0]:.2f}"},
                            dict(rate_rps=v[1], ttft_ms_p50=v[2], ttft_ms_p99=v[3], tpot_ms_p50=v[4],
                                 throughput_tok_s=v[5], batch_size_mean=v[6], capacity_rps=cap,
                                 capacity_batch=int(best)), out.parent))
    if not jobs:
        raise RuntimeError(f"des_load_curve.py wrote no table rows in {out}.md")
    return {"des_load_curve": jobs}


def des_figures(jobs: dict) -> dict:
    js = jobs["des_load_curve"]
    out = {"capacity_rps": js[0].get("capacity_rps"), "capacity_batch": js[0].get("capacity_batch")}
    for j in js:
        k = f"rate={j.overrides['rate_over_capacity']}xcap"
        for m in ("ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "throughput_tok_s", "batch_size_mean"):
            out[f"{k}/{m}"] = j.get(m)
    return out


def des_render(jobs: dict, figs: dict, out_dir: Path) -> str:
    js = jobs["des_load_curve"]
    src = js[0].path / "des_load_curve.png"
    if src.exists():
        (out_dir / "des_load_curve.png").write_bytes(src.read_bytes())
    rows = []
    for j in js:
        k = f"rate={j.overrides['rate_over_capacity']}xcap"
        rows.append([j.overrides["rate_over_capacity"], _f(j.get("rate_rps"), 2),
                     _f(figs[f"{k}/ttft_ms_p50"], 1), _f(figs[f"{k}/ttft_ms_p99"], 1),
                     _f(figs[f"{k}/tpot_ms_p50"], 2), _f(figs[f"{k}/throughput_tok_s"], 0),
                     _f(figs[f"{k}/batch_size_mean"], 1)])
    return (f"Analytical capacity {_f(figs['capacity_rps'], 2)} req/s (best static batch "
            f"{figs['capacity_batch']}).\n\n"
            + _table(["rate / capacity", "req/s", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms",
                      "tok/s", "mean batch"], rows) + "\n![](des_load_curve.png)\n")


# --------------------------------------------------------------------------- the registry

STUDIES = [
    Study("chunk_star", ("chunk_star_l70b8", "chunk_star_moe72"), chunk_figures, chunk_render),
    Study("des_load_curve", ("des_load_curve",), des_figures, des_render, runner=des_runner,
          tolerance=0.05),
    Study("disagg", ("disagg_l70b8", "disagg_moe72"), disagg_figures, disagg_render),
    Study("pareto_hbm", ("pareto_hbm_l70b8", "pareto_hbm_moe72"), pareto_figures, pareto_render),
    Study("pareto_link", ("pareto_link_l70b8", "pareto_link_moe72"), pareto_figures, pareto_render),
    Study("pareto_overhead", ("pareto_overhead_l70b8", "pareto_overhead_moe72"), pareto_figures,
          pareto_render),
]
