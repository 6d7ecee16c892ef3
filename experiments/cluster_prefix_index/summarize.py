"""Table of experiments/cluster_prefix_index/run.sh: python summarize.py [OUT]."""
import json
import sys
from pathlib import Path

out = Path(sys.argv[1] if len(sys.argv) > 1 else "outputs/cluster_prefix_index")
print("| KV blocks / replica | prefix_index | prefix hit | evictions | TTFT p50 ms | TTFT p99 ms | SLO att. |")
print("|---|---|---|---|---|---|---|")
for d in sorted(out.iterdir()):
    f = d / "summary.json"
    if not f.exists():
        continue
    s = json.loads(f.read_text())
    s = s.get("summary", s)
    blocks, idx = d.name[1:].split("_", 1)
    print(f"| {s['kv_blocks']:,} | {idx} | {s['prefix_hit_rate']:.3f} | {s['prefix_evictions']:,} | "
          f"{s['ttft_ms_p50']:,.0f} | {s['ttft_ms_p99']:,.0f} | {s['slo_attainment']:.3f} |")
