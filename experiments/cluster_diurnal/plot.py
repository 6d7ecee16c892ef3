"""Plot and tabulate the diurnal study (run.sh): SLO attainment and cost over the day, autoscaled
vs fixed pool, with runner.tools.plots.cluster_timeseries (the report's figure)."""
import json
import sys
from pathlib import Path

import polars as pl

from runner.tools.plots import cluster_timeseries

out = Path(sys.argv[1] if len(sys.argv) > 1 else "outputs/cluster_diurnal")
here = Path(__file__).parent
runs = {n: out / n for n in ("autoscaled", "fixed3") if (out / n / "timeseries.parquet").exists()}
series = {n: pl.read_parquet(p / "timeseries.parquet") for n, p in runs.items()}
labels = {"autoscaled": "autoscaled 1..4 replicas (queue target 10)", "fixed3": "fixed 3 replicas"}
print(cluster_timeseries(series, labels, here / "diurnal_day.png"))
keys = ("num_requests", "slo_attainment", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p99", "replica_hours",
        "cost_usd", "replicas_peak", "scale_events", "prefix_hit_rate", "prefix_hit_rate_hbm",
        "prefix_hit_rate_host", "utilisation", "saturation_time_s")
rows = []
for n, p in runs.items():
    s = json.loads((p / "summary.json").read_text())["summary"]
    rows.append({"pool": n, **{k: s.get(k) for k in keys}})
    series[n].write_parquet(here / f"timeseries_{n}.parquet")
(here / "summary.json").write_text(json.dumps(rows, indent=1))
for r in rows:
    print(r)
