"""The studies of ``experiments/``: which experiments each runs, the figures it records and the
Markdown it renders (``simllm-study``, runner/tools/study.py). Every number in a study's generated
block and in its ``NAME.figures.json`` comes from the jobs' ``summary.json`` / ``table.parquet``.

A figure key names the experiment, the swept point and the metric, e.g.
``chunk_star_l70b8/tp8/S=2048/ttft_at_chunk_star_ms``.
"""

import json
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

    fig, ax = plt.subplots(figsize=(10, 5))
    colors = plt.get_cmap("tab20").colors
    for i, j in enumerate(js):
        f = j.table.filter(pl.col("on_frontier")).sort("decode_throughput_tok_s_per_gpu")
        if f.height:
            ax.plot(f["decode_throughput_tok_s_per_gpu"], f["interactivity_tok_s_per_user"],
                    marker=".", color=colors[i % len(colors)], ls=("-", "--", ":")[i // len(colors) % 3],
                    label=_label(j) or "base")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("decode tokens/s per GPU")
    ax.set_ylabel("tokens/s per user (1 / TPOT)")
    ax.set_title(exp, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
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
    js = Path(str(out) + ".json")
    if js.exists():                       # the script's machine-readable rows
        doc = json.loads(js.read_text())
        return {"des_load_curve": [
            Job("des_load_curve", {"rate_over_capacity": f"{r['rate_over_capacity']:.2f}"},
                {**{k: v for k, v in r.items() if k != "rate_over_capacity"},
                 "capacity_rps": doc["capacity_rps"], "capacity_batch": doc["capacity_batch"]},
                out.parent) for r in doc["rows"]]}
    md = Path(str(out) + ".md").read_text()   # older commits (--at) wrote the table only
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


# --------------------------------------------------------------------------- llm_perf's case studies
# The seed's figures (../shared/seeds/003_7b7e4f4fb18ae01e.txt, "案例研究亮点": GPT-1.8T MoE @ FP4 on
# GB200 NVL72) are quoted here as the reference each study is compared with; ours come from the runs.

SEED_CHUNK = {2048: (2048, 1, 3.8, 5.4), 4096: (2048, 2, 7.5, 5.6), 8192: (2048, 4, 15.1, 5.9),
              16384: (2048, 8, 31.1, 6.3), 32768: (2048, 16, 66.5, 7.0)}   # S: C*, n_chunks, TTFT* ms, x single
SEED_HBM = {"8TB/s": "PP8-TP8-EP1 dominates (34 frontier points)",
            "16TB/s": "TP starts to fall; more diverse winners",
            "32TB/s": "PP8-TP4 variants hold 17 frontier points",
            "99TB/s": "PP6-8 TP1 (ideal, infinite bandwidth): TP collectives pure overhead"}


def _specs_of(j: Job):
    from omegaconf import OmegaConf

    from runner.convert import specs_from_config

    return specs_from_config(OmegaConf.load(j.path / "config.yaml"))


def _cal(j: Job) -> str:
    return j.overrides.get("calibration", "ideal")


def _matmul_floor_ms(j: Job, chunk: int, n_chunks: int) -> float:
    """Lower bound of a pipelined prefill of n_chunks chunks of ``chunk`` tokens on pp stages of tp
    devices: (pp + n - 1) stage times of one chunk's body matmuls at 100 % of the peak,
    t_stage = 2 P_matmul C / (pp tp peak) (P_matmul: weights a token multiplies, routed experts top-k)."""
    from engine.analytical.params import param_counts

    s = _specs_of(j)
    p = s.partition
    flops = 2 * param_counts(s.model).per_token_matmul * chunk
    t_stage = flops / (p.pp * p.tp * s.hardware.peak_flops(s.model.math_dtype))
    return (p.pp + n_chunks - 1) * t_stage * 1e3


def lp_chunk_figures(jobs: dict) -> dict:
    out = {}
    for j in jobs["llmperf_chunk_star"]:
        S = _prompt(j)
        k = f"{_cal(j)}/S={S}"
        c = j.get("chunk_star")
        c = S if c is None or not math.isfinite(c) else int(min(c, S))
        out[k + "/chunk_star"] = c
        out[k + "/n_chunks"] = math.ceil(S / c)
        out[k + "/ttft_at_chunk_star_ms"] = j.get("ttft_at_chunk_star_ms")
        out[k + "/ttft_single_pass_ms"] = j.get("ttft_ms_p50")
        out[k + "/single_over_chunked"] = j.get("ttft_ms_p50") / j.get("ttft_at_chunk_star_ms")
        c_seed, n_seed, _, _ = SEED_CHUNK.get(S, (2048, math.ceil(S / 2048), 0, 0))
        out[k + "/seed_schedule_matmul_floor_ms"] = _matmul_floor_ms(j, c_seed, n_seed)
    for j in jobs.get("llmperf_chunk_curve", []):
        C = int(j.overrides["engine.analytical.prefill_chunk"])
        out[f"curve/S={_prompt(j)}/C={C}/ttft_ms"] = j.get("ttft_ms_p50")
    return out


def _chunk_curve(jobs: list, figs: dict, out_dir: Path) -> str:
    """TTFT(C) per prompt (the U behind C*): a table and ``llmperf_chunk_curve.png``."""
    if not jobs:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prompts = sorted({_prompt(j) for j in jobs})
    chunks = sorted({int(j.overrides["engine.analytical.prefill_chunk"]) for j in jobs})
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for S in prompts:
        cs = [c for c in chunks if f"curve/S={S}/C={c}/ttft_ms" in figs]
        ax.plot(cs, [figs[f"curve/S={S}/C={c}/ttft_ms"] for c in cs], "o-", label=f"prompt {S // 1024}k")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("prefill chunk C [tokens] (C >= prompt: single pass)")
    ax.set_ylabel("TTFT [ms]")
    ax.set_title("GPT-1.8T MoE FP4, PP8 x TP8, gb200_nvl72_llmperf, calibration ideal", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "llmperf_chunk_curve.png", dpi=100)
    plt.close(fig)
    rows = [[str(c)] + [_f(figs.get(f"curve/S={S}/C={c}/ttft_ms")) for S in prompts] for c in chunks]
    return ("\n**TTFT(C) in ms, calibration `ideal`** (`llmperf_chunk_curve`: the U behind C*)\n\n"
            + _table(["C"] + [f"{S // 1024}k" for S in prompts], rows)
            + "\n![TTFT against chunk size](llmperf_chunk_curve.png)\n")


def lp_chunk_render(jobs: dict, figs: dict, out_dir: Path) -> str:
    cals = list(dict.fromkeys(_cal(j) for j in jobs["llmperf_chunk_star"]))
    prompts = sorted({_prompt(j) for j in jobs["llmperf_chunk_star"]})
    text = []
    for cal in cals:
        rows = []
        for S in prompts:
            k = f"{cal}/S={S}"
            sc = SEED_CHUNK.get(S)
            rows.append([f"{S // 1024}k",
                         f"{sc[0]} / {sc[1]} / {sc[2]} ms / {sc[3]}x" if sc else "-",
                         f"{figs[k + '/chunk_star']} / {figs[k + '/n_chunks']} / "
                         f"{_f(figs[k + '/ttft_at_chunk_star_ms'])} ms / {figs[k + '/single_over_chunked']:.2f}x",
                         f"{_f(figs[k + '/ttft_single_pass_ms'])} ms",
                         f"{_f(figs[k + '/seed_schedule_matmul_floor_ms'])} ms"])
        text.append(f"**calibration `{cal}`** (C* / n_chunks / TTFT* / single pass over TTFT*)\n\n" + _table(
            ["prompt", "seed (llm_perf)", "ours", "our single pass",
             "floor of the seed's schedule (matmuls at 100 % FP4 peak, 8 sequential stages)"], rows))
    return "\n".join(text) + _chunk_curve(jobs.get("llmperf_chunk_curve", []), figs, out_dir)


def _seed_point(j: Job, part="PP8-TP8-EP1-SP1"):
    import polars as pl

    t = j.table.filter(pl.col("partition") == part)
    if t.height == 0:
        return None, None, 0
    return (float(t["decode_throughput_tok_s_per_gpu"].max()), float(t["interactivity_tok_s_per_user"].max()),
            int(t["on_frontier"].sum()))


def lp_pareto_figures(jobs: dict) -> dict:
    out = pareto_figures(jobs)
    for exp, js in jobs.items():
        for j in js:
            k = f"{exp}/{_kb(_label(j)) or 'base'}"
            thr, inter, pts = _seed_point(j)
            out[k + "/seed_winner_PP8-TP8-EP1/best_tok_s_per_gpu"] = thr
            out[k + "/seed_winner_PP8-TP8-EP1/best_tok_s_per_user"] = inter
            out[k + "/seed_winner_PP8-TP8-EP1/frontier_points"] = pts
    return out


def lp_pareto_render(jobs: dict, figs: dict, out_dir: Path, seed: dict | None = None) -> str:
    text = []
    for exp, js in jobs.items():
        rows = []
        for j in js:
            k = f"{exp}/{_kb(_label(j)) or 'base'}"
            sk = k + "/seed_winner_PP8-TP8-EP1"
            row = [_label(j) or "base"]
            if seed is not None:
                row.append(seed.get(j.overrides.get("hardware.hbm_bandwidth", ""), "-"))
            row += [figs.get(k + "/frontier_winners"), _f(figs.get(k + "/frontier_points")),
                    f"{_f(figs.get(k + '/max_interactivity_tok_s_per_user'))} "
                    f"({figs.get(k + '/max_interactivity_partition')})",
                    f"{_f(figs.get(k + '/max_throughput_tok_s_per_gpu'))} "
                    f"({figs.get(k + '/max_throughput_partition')})",
                    f"{_f(figs.get(sk + '/best_tok_s_per_user'))} / {_f(figs.get(sk + '/best_tok_s_per_gpu'))} "
                    f"/ {figs.get(sk + '/frontier_points')}"]
            rows.append(row)
        png = f"{exp}.png"
        _frontier_plot(exp, js, out_dir / png)
        head = ["point"] + (["seed (llm_perf)"] if seed is not None else []) + [
            "our frontier winners (points)", "frontier points", "best tok/s/user (partition)",
            "best decode tok/s/GPU (partition, batch)",
            "seed's PP8-TP8-EP1 here: best tok/s/user / best tok/s/GPU / frontier points"]
        text.append(f"**`{exp}`**\n\n" + _table(head, rows) + f"\n![{exp} frontiers]({png})\n")
    return "\n".join(text)


def lp_disagg_figures(jobs: dict) -> dict:
    out, by = {}, {}
    for j in jobs["llmperf_disagg"]:
        S, pp = _prompt(j), int(j.overrides["engine.analytical.disagg.prefill_pp"])
        bw = _kb(j.overrides["engine.analytical.disagg.link_bandwidth"])
        by[(bw, S, pp)] = j
    for (bw, S, pp), j in sorted(by.items()):
        k = f"link={bw}/S={S}"
        out[f"S={S}/colocated_ttft_ms"] = j.get("colocated_ttft_ms")
        out[f"S={S}/colocated_tpot_ms"] = j.get("colocated_tpot_ms")
        out[f"S={S}/disagg_tpot_ms"] = j.get("disagg_tpot_ms")
        out[f"{k}/prefill_pp{pp}/disagg_ttft_ms"] = j.get("disagg_ttft_ms")
        m = by.get((bw, S, 8))
        if pp != 8 and m is not None:
            # what a mismatched prefill partition saves on the prefill, and what its hand-off costs
            # beyond the matched one's (fewer sending links, the decode side's re-layout)
            out[f"{k}/prefill_pp{pp}/prefill_saving_ms"] = m.get("disagg_prefill_ttft_ms") - j.get("disagg_prefill_ttft_ms")
            out[f"{k}/prefill_pp{pp}/extra_handoff_ms"] = j.get("disagg_exposed_handoff_ms") - m.get("disagg_exposed_handoff_ms")
            out[f"{k}/prefill_pp{pp}/worth_it"] = bool(j.get("disagg_ttft_ms") < m.get("disagg_ttft_ms"))
    return out


def lp_disagg_render(jobs: dict, figs: dict, out_dir: Path) -> str:
    js = jobs["llmperf_disagg"]
    prompts = sorted({_prompt(j) for j in js})
    bws = list(dict.fromkeys(_kb(j.overrides["engine.analytical.disagg.link_bandwidth"]) for j in js))
    pps = sorted({int(j.overrides["engine.analytical.disagg.prefill_pp"]) for j in js} - {8})
    text = [_table(["prompt", "co-located TTFT / TPOT ms", "disaggregated TPOT ms (decode undisturbed)"],
                   [[f"{S // 1024}k", f"{_f(figs[f'S={S}/colocated_ttft_ms'])} / {_f(figs[f'S={S}/colocated_tpot_ms'])}",
                     _f(figs[f"S={S}/disagg_tpot_ms"])] for S in prompts])]
    for bw in bws:
        rows = []
        for S in prompts:
            k = f"link={bw}/S={S}"
            row = [f"{S // 1024}k", _f(figs.get(f"{k}/prefill_pp8/disagg_ttft_ms"))]
            for pp in pps:
                p = f"{k}/prefill_pp{pp}"
                row.append(f"{_f(figs.get(p + '/disagg_ttft_ms'))} (saves {_f(figs.get(p + '/prefill_saving_ms'))}, "
                           f"hand-off +{_f(figs.get(p + '/extra_handoff_ms'))}: "
                           f"{'worth it' if figs.get(p + '/worth_it') else 'not worth it'})")
            rows.append(row)
        text.append(f"**KV link {bw}**: disaggregated TTFT ms, prefill on TP8 x PP p (matched p = 8)\n\n"
                    + _table(["prompt", "matched PP8"] + [f"mismatched PP{pp}" for pp in pps], rows))
    return "\n".join(text)


STUDIES += [
    Study("llmperf_chunk_star", ("llmperf_chunk_star", "llmperf_chunk_curve"), lp_chunk_figures,
          lp_chunk_render),
    Study("llmperf_pareto_hbm", ("llmperf_pareto_hbm",), lp_pareto_figures,
          lambda jobs, figs, out: lp_pareto_render(jobs, figs, out, seed=SEED_HBM)),
    Study("llmperf_pareto_link", ("llmperf_pareto_link",), lp_pareto_figures, lp_pareto_render),
    Study("llmperf_pareto_overhead", ("llmperf_pareto_overhead",), lp_pareto_figures, lp_pareto_render),
    Study("llmperf_disagg", ("llmperf_disagg",), lp_disagg_figures, lp_disagg_render),
]
