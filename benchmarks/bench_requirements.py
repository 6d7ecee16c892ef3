"""The spec-requirements search against a brute-force grid: DES verdicts and runs, CPU-seconds.

    python benchmarks/bench_requirements.py
    python benchmarks/bench_requirements.py --rate 4 --precision 0.05

Llama-3.1-8B on one what-if H100 (the ``generic`` profile: roofline prices), the Azure
conversation trace at ``--rate`` req/s, plan SLOs (p99 TTFT <= 500 ms, p99 TPOT <= 50 ms),
200..400 requests per verdict. The frontier HBM capacity (a few values) x HBM bandwidth (a
geometric grid of ratio 1 + precision) by the staircase walk of engine.plan.requirements and by
the DES at every grid point; prints both frontiers (the same, with monotone verdicts), DES points
and runs of each, and CPU-seconds (the fair figure on a shared machine; the load average is
printed beside the wall time). Nothing is asserted here (tests/plan/test_requirements.py checks
the agreement).
"""

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=4.0)
    ap.add_argument("--precision", type=float, default=0.1)
    ap.add_argument("--capacities", default="22,28,40,80", help="HBM capacities [GB], comma-separated")
    ap.add_argument("--bw", default="0.9,1.6", help="HBM bandwidth range lo,hi [TB/s]")
    a = ap.parse_args()

    from omegaconf import OmegaConf

    from engine.des.config import deployment
    from engine.des.workload import build_stream
    from engine.plan import bound
    from engine.plan import requirements as R
    from engine.plan.spec import plan_spec
    from runner import experiments, schema
    from runner.compose import compose
    from runner.convert import specs_from_config

    schema.register()
    experiments.register()
    cfg = compose(["+plan=requirements", "engine=des", "workload=azure_conv", "model=llama_3_1_8b",
                   "framework=generic", "partition.tp=1", "hardware=h100_sxm", "plan.rule.requests=200",
                   "plan.rule.max_requests=400"], ROOT / "conf")
    plan = plan_spec(OmegaConf.to_container(cfg.plan, resolve=True))
    specs = deployment(specs_from_config(cfg))[0]
    st = build_stream(replace(specs.workload, num_requests=plan.rule.max_requests))
    L = bound.Lengths(st.prompt, st.output)
    x = R.list_axis("hbm_capacity", [float(v) * 1e9 for v in a.capacities.split(",")])
    lo, hi = (float(v) * 1e12 for v in a.bw.split(","))
    y = R.geometric_axis("hbm_bandwidth", lo, hi, a.precision)

    out = {}
    for name, des_only in (("search", False), ("grid", True)):
        o = R.Oracle(specs, plan.slo, plan.rule, a.rate, L, des_only=des_only)
        c0, t0 = time.process_time(), time.time()
        least = R.frontier(o, x, y)[1] if not des_only else R.grid_frontier(o, x, y)[0]
        out[name] = (least, o.des_points, o.des_runs, time.process_time() - c0, time.time() - t0)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"
    print(f"frontier hbm_capacity x hbm_bandwidth, {len(x.values)} x {len(y.values)} grid "
          f"(ratio {1 + a.precision:g}), {a.rate:g} req/s; load average {load}, {os.cpu_count()} cores")
    for name, (least, pts, runs, cpu, wall) in out.items():
        fr = ", ".join(f"{xv / 1e9:g} GB: " + ("-" if j is None else f"{y.values[j] / 1e12:.3g} TB/s")
                       for xv, j in zip(x.values, least))
        print(f"{name:6s}: {pts:3d} DES points, {runs:3d} DES runs, {cpu:6.1f} CPU-s, {wall:6.1f} s wall | {fr}")
    print("same frontier:", out["search"][0] == out["grid"][0])


if __name__ == "__main__":
    main()
