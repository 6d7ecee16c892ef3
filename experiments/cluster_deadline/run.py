"""End-to-end deadlines (engine.des.cluster.deadline_s, per request class) on an overloaded replica.

    python experiments/cluster_deadline/run.py [--requests 6000] [--rates 8,12,16]

One Llama-3.1-8B replica on H100 SXM (the default config), Poisson arrivals, two request classes
of one stream: chat (70 %: lognormal prompts around 256 tokens, 128-token outputs, priority 0,
SLO TTFT 1 s / TPOT 100 ms) and long (30 %: prompts around 4,096, outputs around 512, priority 1,
SLO TTFT 10 s / TPOT 100 ms). Per rate: no deadline; a 30 s deadline on the long class only;
a 30 s deadline on both. Prints a Markdown table (per-class SLO attainment, goodput, cancelled,
TTFT p99) from the simulations; nothing is tuned."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.des import DesSpec, simulate  # noqa: E402
from tests.conftest import compose_specs  # noqa: E402

CHAT = {"name": "chat", "share": 0.7, "prompt_len": 256, "output_len": 128, "priority": 0,
        "prompt_dist": {"kind": "lognormal", "sigma": 0.6}, "slo_ttft_ms": 1000, "slo_tpot_ms": 100}
LONG = {"name": "long", "share": 0.3, "prompt_len": 4096, "output_len": 512, "priority": 1,
        "prompt_dist": {"kind": "lognormal", "sigma": 0.4}, "output_dist": {"kind": "lognormal", "sigma": 0.6},
        "slo_ttft_ms": 10000, "slo_tpot_ms": 100}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--rates", default="8,12,16")
    a = ap.parse_args()
    print("| req/s | deadline | chat SLO att. | chat goodput req/s | chat TTFT p99 ms | long SLO att. | "
          "long cancelled | chat cancelled | cancelled running |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rate in (float(r) for r in a.rates.split(",")):
        specs = compose_specs("engine=des", "framework=generic", "workload=poisson_chat", f"workload.rate_rps={rate}",
                              f"workload.num_requests={a.requests}")
        base = DesSpec(clients=dict(classes=(CHAT, LONG)))
        for label, des in (("none", base),
                           ("long 30 s", base.with_(clients=dict(classes=(CHAT, LONG | {"deadline_s": 30.0})))),
                           ("all 30 s", base.with_(cluster=dict(deadline_s=30.0)))):
            s = simulate(specs, des).result.summary
            print(f"| {rate:g} | {label} | {s['class_chat_slo_attainment']:.3f} | {s['class_chat_goodput_rps']:.2f} | "
                  f"{s['class_chat_ttft_ms_p99']:,.0f} | {s['class_long_slo_attainment']:.3f} | "
                  f"{s['class_long_cancelled']} | {s['class_chat_cancelled']} | {s.get('cancelled_running', 0)} |",
                  flush=True)


if __name__ == "__main__":
    main()
