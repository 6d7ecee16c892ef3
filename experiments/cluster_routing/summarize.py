"""Table of the routing study (run.sh): hit rate, TTFT p50/p99, SLO attainment per router x delay."""
import json
import sys
from pathlib import Path

out = Path(sys.argv[1] if len(sys.argv) > 1 else "outputs/cluster_routing")
print("| router | signal delay | prefix hit rate | TTFT p50 ms | TTFT p99 ms | E2E p99 ms | SLO attainment |")
print("|---|---|---|---|---|---|---|")
for router in ("weighted", "least_outstanding"):
    for d in (0, 1, 5):
        s = json.loads((out / f"{router}_d{d}" / "summary.json").read_text())["summary"]
        print(f"| {router} | {d} s | {s['prefix_hit_rate']:.3f} | {s['ttft_ms_p50']:.0f} | "
              f"{s['ttft_ms_p99']:.0f} | {s['e2e_ms_p99']:.0f} | {s['slo_attainment']:.3f} |")
