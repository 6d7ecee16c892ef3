"""Print the counterfactual report of a run with the engine.des.counterfactual setting (regret.parquet; engine/des/cluster/counterfactual.py)."""
import json
import sys
from pathlib import Path

import polars as pl

d = Path(sys.argv[1] if len(sys.argv) > 1 else "outputs/cluster_cf")
s = json.loads((d / "summary.json").read_text())["summary"]
t = pl.read_parquet(d / "regret.parquet")
print({k: round(v, 1) if isinstance(v, float) else v for k, v in s.items() if k.startswith("cf_")})
print(f"priority inversions in the baseline (FCFS): {s['priority_inversions']}; "
      f"SLO attainment class 0 {s['class0_slo_attainment']:.3f}, class 1 {s['class1_slo_attainment']:.3f}")
reg = t.filter("regressed")
print(f"{reg.height} requests regressed (E2E regret > max(1 ms, 5 %)); the 15 worst:")
with pl.Config(tbl_rows=15, tbl_cols=12, tbl_width_chars=160):
    print(reg.head(15).select("request_id", "priority", "prompt_len", "output_len", "arrival_s",
                              "ttft_ms_base", "ttft_ms_alt", "e2e_ms_base", "e2e_ms_alt", "regret_e2e_ms"))
