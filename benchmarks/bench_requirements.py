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

``--peaks 300,400,600,989``: the 3-axis frontier HBM capacity x BF16 peak [TFLOPS] x HBM bandwidth
(engine.plan.requirements.frontier3) against the DES at every (capacity, peak, bandwidth) point.
``--width W``: the searches read W verdicts per wave (engine.plan.requirements.monotone_search, as
the launcher path does; in this process), printed beside the one-at-a-time search.
``--launcher N``: the same frontier through simllm-plan itself, in process and with
``hydra/launcher=joblib hydra.launcher.n_jobs=N``: both answers, DES points, waves, wall and CPU
(children included).
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
    ap.add_argument("--peaks", default="", help="BF16 peaks [TFLOPS], comma-separated: a 3-axis frontier")
    ap.add_argument("--width", type=int, default=0, help="also the batched search, this many verdicts per wave")
    ap.add_argument("--launcher", type=int, default=0, help="also simllm-plan in process vs joblib with N jobs")
    a = ap.parse_args()
    if a.launcher:
        return launcher(a)

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

    z = R.list_axis("peak_bf16", [float(v) * 1e12 for v in a.peaks.split(",")]) if a.peaks else None
    out = {}
    ways = [("search", False, 1)] + ([(f"waves of {a.width}", False, a.width)] if a.width > 1 else []) + [("grid", True, 0)]
    for name, des_only, width in ways:
        o = R.Oracle(specs, plan.slo, plan.rule, a.rate, L, des_only=des_only)
        c0, t0 = time.process_time(), time.time()
        waves = ""
        if z is None:
            if des_only:
                least = R.grid_frontier(o, x, y)[0]
            elif width == 1:
                least = R.frontier(o, x, y)[1]
            else:
                _, least, w = R.frontier_waves(o, x, y, width=width)
                waves = f", {w} waves"
            least = dict(zip([(i,) for i in range(len(x.values))], least))
        elif des_only:
            least = R.grid_frontier3(o, x, z, y)[0]
        else:
            f = R.frontier3(o, x, z, y, width=width)
            least, waves = f["least"], f", {f['waves']} waves"
        out[name] = (least, o.des_points, o.des_runs, time.process_time() - c0, time.time() - t0, waves)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"
    shape = f"{len(x.values)} x {len(z.values)} x {len(y.values)}" if z else f"{len(x.values)} x {len(y.values)}"
    print(f"frontier hbm_capacity x {'peak_bf16 x ' if z else ''}hbm_bandwidth, {shape} grid "
          f"(ratio {1 + a.precision:g}), {a.rate:g} req/s; load average {load}, {os.cpu_count()} cores")
    for name, (least, pts, runs, cpu, wall, waves) in out.items():
        fr = ", ".join("/".join(f"{ax.values[i] / s:g}" for ax, i, s in zip((x, z), c, (1e9, 1e12))) + ": "
                       + ("-" if j is None else f"{y.values[j] / 1e12:.3g}") for c, j in sorted(least.items()))
        print(f"{name:12s}: {pts:3d} DES points, {runs:3d} DES runs{waves}, {cpu:6.1f} CPU-s, {wall:6.1f} s wall | "
              f"{'GB/TFLOPS' if z else 'GB'}: least TB/s | {fr}")
    print("same frontier:", all(v[0] == out["grid"][0] for v in out.values()))


def launcher(a) -> None:
    """simllm-plan requirements on the frontier, in process and through joblib (``--launcher``)."""
    import json
    import resource
    import subprocess
    import tempfile

    axes = [f"plan.requirements.rate_rps={a.rate}", f"plan.requirements.precision={a.precision}",
            "plan.requirements.axes.hbm_bandwidth={lo:%s TB/s,hi:%s TB/s}" % tuple(a.bw.split(",")),
            "+plan.requirements.axes.hbm_capacity={values:[%s]}" % ",".join(f"{v} GB" for v in a.capacities.split(",")),
            "~plan.requirements.axes.peak_bf16", "plan.requirements.frontier=[hbm_capacity,hbm_bandwidth]",
            f"plan.requirements.frontier_points={len(a.capacities.split(','))}",
            "plan.requirements.elasticity.fields=[hbm_bandwidth]", "plan.requirements.elasticity.des=false"]
    if a.peaks:
        axes[4:6] = ["plan.requirements.axes.peak_bf16={values:[%s]}" % ",".join(f"{v} TFLOPS" for v in a.peaks.split(",")),
                     "plan.requirements.frontier=[hbm_capacity,peak_bf16,hbm_bandwidth]"]
    base = ["+plan=requirements", "engine=des", "workload=azure_conv", "model=llama_3_1_8b", "framework=generic",
            "partition.tp=1", "hardware=h100_sxm", "plan.rule.requests=200", "plan.rule.max_requests=400",
            "tracking.enabled=false"] + axes
    docs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (("in-process", []), (f"joblib x{a.launcher}", ["hydra/launcher=joblib",
                                                                         f"hydra.launcher.n_jobs={a.launcher}"])):
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.time()
            subprocess.run([sys.executable, "-m", "runner.tools.plan", *base, *extra, "--out", f"{tmp}/{len(docs)}",
                            "--quiet"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            d = json.loads(Path(f"{tmp}/{len(docs)}/requirements.json").read_text())
            docs[name] = (d, time.time() - t0, ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"
    print(f"simllm-plan requirements, in process vs joblib; load average {load}, {os.cpu_count()} cores")
    answers = set()
    for name, (d, wall, cpu) in docs.items():
        fr = [p["y"] for p in d["frontier3"]["points"]] if "frontier3" in d else d["frontier"]["y_least"]
        least = [ax["least"] for ax in d["axes"]]
        answers.add(json.dumps([least, fr]))
        v = d["verification"]
        print(f"{name:12s}: least {least}, frontier {fr}; {d['des_points_search']} DES points, "
              f"{v.get('waves', d['des_points_search'])} waves; {wall:.1f} s wall, {cpu:.1f} CPU-s (processes)")
    print("same answers:", len(answers) == 1)


if __name__ == "__main__":
    main()
