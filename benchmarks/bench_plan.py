"""Speed of a whole capacity search (simllm-plan): wall time, CPU-seconds, peak memory, DES runs.

    python benchmarks/bench_plan.py                              # the 8B study (experiment=capacity)
    python benchmarks/bench_plan.py --experiment capacity_l70b
    python benchmarks/bench_plan.py plan.prune=false             # every candidate searched
    python benchmarks/bench_plan.py --study experiments/capacity_l8b   # also write the study page

Runs ``simllm-plan experiment=NAME`` as a child process (its launched Hydra multiruns and joblib
workers included) with tracking to a temporary SQLite store, and prints: wall time, CPU-seconds
of the whole process tree (RUSAGE_CHILDREN: user + system of every waited-for descendant), the
peak resident memory of the largest process, the DES runs the search needed and the brute-force
grid of the same resolution. CPU-seconds are the fair figure on a shared machine (wall time
includes waiting for other sessions' processes); nothing is asserted (the target is under
3 minutes for the 8B search on 2 cores).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--experiment", default="capacity")
    ap.add_argument("--study", help="write the report also as this path stem (e.g. experiments/capacity_l8b)")
    ap.add_argument("overrides", nargs="*", help="more simllm-plan overrides")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # the plan's folder is kept (outputs/ is git-ignored): its plan.json rewrites the report
        # with `simllm-plan --from-json`; the MLflow store is a throw-away one
        out = ROOT / "outputs" / "plan" / f"bench-{a.experiment}-{time.strftime('%Y%m%d-%H%M%S')}"
        cmd = [sys.executable, "-m", "runner.tools.plan", f"experiment={a.experiment}", *a.overrides,
               f"tracking.uri=sqlite:///{tmp}/mlflow.db", "--out", str(out), "--quiet"]
        if a.study:
            cmd += ["--study", a.study]
        t0 = time.time()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.time() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode:
            print(p.stdout[-3000:], p.stderr[-3000:], sep="\n")
            sys.exit(p.returncode)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        doc = json.loads((out / "plan.json").read_text())
        print(p.stdout.strip().splitlines()[-1])
        print(f"\nsimllm-plan experiment={a.experiment} {' '.join(a.overrides)}")
        print(f"  wall {wall:.1f} s, CPU {cpu:.1f} s (process tree), peak RSS {r1.ru_maxrss / 1024:.0f} MB, "
              f"{os.cpu_count()} cores, load average before/after: {os.getloadavg()[0]:.1f}")
        print(f"  candidates {doc['candidates']}, searched {doc['searched']}, DES runs {doc['des_runs']} "
              f"(brute force at the same resolution: {doc['brute_force_runs']}); CPU-s inside the "
              f"candidate jobs {doc['job_cpu_s']:.1f}")
        top = next((r for r in doc["rows"] if r.get("max_rps")), None)
        if top:
            c = top["candidate"]
            print(f"  best: {c['hardware']} {c['layout']} {c['mode']}: {top['max_rps']:.3g} req/s "
                  f"({top['rps_per_gpu']:.3g} req/s per GPU)")


if __name__ == "__main__":
    main()
