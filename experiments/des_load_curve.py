"""TTFT against arrival rate, up to the capacity the analytical engine predicts (engine=des).

    python experiments/des_load_curve.py [--requests 3000] [--out outputs/des_load_curve]

Llama-3.1-8B on one H100 SXM, Poisson arrivals of 512-token prompts generating 128 tokens.
Capacity (analytical): the best static-batch throughput over batch sizes 1..max_num_seqs that fit
in memory, in requests/s = max_B [B / (TTFT(B) + 127 TPOT(B))]. The DES (vLLM scheduler) is run at
fractions of that rate; queueing theory says TTFT stays near its batch-1 value at low load and
grows without bound as the rate approaches capacity. Writes <out>.png, <out>.md and <out>.json; the study
experiments/des_load_curve.md is rendered from them by `simllm-study run des_load_curve`.
"""

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.analytical import sweep  # noqa: E402
from engine.des import DesSpec, simulate  # noqa: E402
from engine.spec import WorkloadSpec  # noqa: E402
from runner.compose import compose_specs  # noqa: E402

FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--out", default=str(ROOT / "outputs" / "des_load_curve"))
    args = ap.parse_args()
    base = compose_specs(["framework=generic"], experiments=False)   # as recorded
    des = DesSpec(outputs=dict(progress="off")).resolve(base.framework)   # scheduler limits from the profile
    S, N = 512, 128
    grid = sweep(replace(base, workload=WorkloadSpec(prompt_len=S, output_len=N)),
                 batch_size=np.arange(1, des.scheduling.max_num_seqs + 1))
    grid = grid.filter(grid["fits_in_memory"])
    best = grid.sort("throughput_tok_s", descending=True).row(0, named=True)
    cap_rps = best["throughput_tok_s"] / N
    print(f"analytical capacity: {cap_rps:.2f} req/s (static batch {int(best['batch_size'])}, "
          f"{best['throughput_tok_s']:,.0f} tok/s); batch-1 TTFT {grid.row(0, named=True)['ttft_ms']:.2f} ms")
    rows = []
    for f in FRACTIONS:
        wl = WorkloadSpec(prompt_len=S, output_len=N, num_requests=args.requests, arrival="poisson",
                          rate_rps=f * cap_rps, seed=1)
        s = simulate(replace(base, workload=wl), des).result.summary
        rows.append((f, f * cap_rps, s["ttft_ms_p50"], s["ttft_ms_p99"], s["tpot_ms_p50"],
                     s["throughput_tok_s"], s["batch_size_mean"]))
        print(f"rate {f:4.2f} x cap = {f * cap_rps:6.2f} req/s: TTFT p50 {s['ttft_ms_p50']:9.1f} ms, "
              f"p99 {s['ttft_ms_p99']:9.1f} ms, TPOT p50 {s['tpot_ms_p50']:6.2f} ms, "
              f"{s['throughput_tok_s']:8,.0f} tok/s, batch {s['batch_size_mean']:.1f}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = np.array(rows)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(r[:, 1], r[:, 2], "o-", label="TTFT p50")
    ax.plot(r[:, 1], r[:, 3], "s-", label="TTFT p99")
    ax.axvline(cap_rps, color="k", ls="--", lw=1, label=f"analytical capacity {cap_rps:.1f} req/s")
    ax.set_yscale("log")
    ax.set_xlabel("arrival rate [req/s] (Poisson)")
    ax.set_ylabel("TTFT [ms]")
    ax.set_title("Llama-3.1-8B, 1x H100 SXM, 512 in / 128 out, vLLM scheduler (simllm DES)",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out + ".png", dpi=120)
    lines = ["| rate / capacity | req/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | tok/s | mean batch |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {a:.2f} | {b:.2f} | {c:.1f} | {d:.1f} | {e:.2f} | {g:,.0f} | {h:.1f} |"
              for a, b, c, d, e, g, h in rows]
    Path(args.out + ".md").write_text(
        f"# TTFT vs arrival rate (engine=des)\n\n`python experiments/des_load_curve.py "
        f"--requests {args.requests}`\n\nAnalytical capacity {cap_rps:.2f} req/s (best static batch "
        f"{int(best['batch_size'])}).\n\n" + "\n".join(lines) + "\n\n![](des_load_curve.png)\n")
    keys = ("rate_over_capacity", "rate_rps", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50",
            "throughput_tok_s", "batch_size_mean")
    Path(args.out + ".json").write_text(json.dumps(
        {"capacity_rps": cap_rps, "capacity_batch": int(best["batch_size"]), "requests": args.requests,
         "rows": [dict(zip(keys, map(float, r))) for r in rows]}, indent=1) + "\n")
    print(f"wrote {args.out}.png, {args.out}.md and {args.out}.json")


if __name__ == "__main__":
    main()
