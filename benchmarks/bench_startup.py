"""Start-up cost of the ``simllm`` process: import-time top contributors and the CPU-s of whole
processes that do little work.

    python benchmarks/bench_startup.py [--reps 5] [--checkout DIR] [--track]

Figures (each a fresh ``simllm`` process, N repetitions, min/median of its CPU-s = user + system
of that process alone, wall time and peak RSS):
  help         ``simllm --help``
  analytical   one analytical run, tracking off (``simllm tracking=none``)
  des 1k       the DES with 1,000 Poisson requests, tracking off
               (``simllm engine=des workload=poisson_chat workload.num_requests=1000 tracking=none``)
and the ten most expensive packages to import (``python -X importtime``: the summed own time of
every module of a top-level package such as hydra, numpy or mlflow) for each of the three.
``--checkout DIR`` measures another checkout of simllm (e.g. an older commit exported with
``git archive``) through PYTHONPATH with this environment's packages: the before/after figure.
Targets: help and analytical < 1 CPU-s, des 1k < 0.8 CPU-s.
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._measure import ROOT, Bench, import_time_top  # noqa: E402

TARGETS = {"help": 1.0, "analytical": 1.0, "des 1k": 0.8}


def main():
    bench = Bench("bench_startup", __doc__)
    bench.parser.add_argument("--checkout", default=None,
                              help="measure this simllm checkout instead of the installed one")
    bench.parser.add_argument("--top", type=int, default=10, help="import-time rows shown")
    args = bench.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="simllm-startup-"))
    env = dict(os.environ)
    if args.checkout:
        env["PYTHONPATH"] = str(Path(args.checkout).resolve())
    exe = str(Path(sys.executable).parent / "simllm")
    code = "import sys; from runner.app import main; sys.argv[0] = 'simllm'; main()"
    py = [sys.executable, "-c", code]
    runs = {
        "help": ["--help"],
        "analytical": ["tracking=none", f"hydra.run.dir={tmp}/a"],
        "des 1k": ["engine=des", "workload=poisson_chat", "workload.num_requests=1000", "tracking=none",
                   f"hydra.run.dir={tmp}/d"],
    }
    try:
        for label, argv in runs.items():
            bench.cli(label, [exe, *argv], cwd=tmp, env=env, target_cpu_s=TARGETS[label])
        bench.info["import_top"] = {}
        for label in ("help", "analytical", "des 1k"):
            top = import_time_top(py[1:] + runs[label], top=args.top, cwd=tmp, env=env)
            bench.info["import_top"][label] = top
            print(f"\nimport time by package, top {args.top} ({label}; ms of the package's own "
                  "modules, -X importtime, min of 3 runs):")
            for r in top:
                print(f"  {r['ms']:8.1f} ms  {r['modules']:4d} modules  {r['package']}")
        print()
        doc = bench.finish()
        for r in doc["rows"]:
            t = r.get("target_cpu_s")
            if t:
                print(f"{r['label']:<11} {r['cpu_s']['min']:.2f} CPU-s (min of {r['cpu_s']['n']}) "
                      f"target < {t}: {'met' if r['cpu_s']['min'] < t else 'NOT met'}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
