"""Start-up cost of the ``simllm`` process: import-time top contributors and the CPU-s of whole
processes that do little work.

    python benchmarks/bench_startup.py [--reps 5] [--checkout DIR] [--track]

Figures (each a fresh ``simllm`` process, N repetitions, min/median of its CPU-s = user + system
of that process alone, wall time and peak RSS):
  help         ``simllm --help``
  analytical   one analytical run, tracking off (``simllm tracking=none``)
  des 1k       the DES with 1,000 Poisson requests, tracking off
               (``simllm engine=des workload=poisson_chat workload.num_requests=1000 tracking=none``)
  analytical, tracked
               one analytical run logged to MLflow on SQLite (a store in the temporary folder,
               created by the warm-up: its schema migrations are not measured)
  help / analytical, no compose cache
               the same with ``SIMLLM_COMPOSE_CACHE=0`` (runner.compose_cache off: what a process
               pays whose config-group selection was not composed before, less writing the file)
  floor: imports of a run
               a process that only imports the third-party packages every run above loads, as
               the run loads them (``import hydra, omegaconf, numpy, polars``, collector off then
               frozen, one OpenBLAS thread, the compiled dataclass methods and regular
               expressions read back as runner.compiled has them, Hydra's schema stored by name
               as runner.hydra_import has it): what simllm's own start-up cannot go below
  floor: imports of a tracked run
               the same, then ``import mlflow`` and MLflow's SQLAlchemy tracking store
               (``mlflow.store.tracking.sqlalchemy_store``, which a SQLite URI opens), with the
               environment runner.tracking sets for MLflow
the parts of the tracked run on MLflow's side (benchmarks/_tracking_parts.py, a fresh process
per repetition on the tracked figure's store and job directory: ``import mlflow`` with the cyclic
collector off as the runner has it, and on; the store set-up; the experiment look-up; logging
the run as a job does, batched, and with a call per value; ``--no-parts`` skips them),
and the ten most expensive packages to import (``python -X importtime``: the summed own time of
every module of a top-level package such as hydra, numpy or mlflow) for each of the three
(``--no-imports`` skips them).
Each figure's first process is an unmeasured warm-up (it fills the compose cache and the
persistent caches of engine.persist, kept in a temporary ``SIMLLM_CACHE_DIR`` for this run only).
The code measured is this script's own checkout, put first on PYTHONPATH (the ``simllm``
console script of an editable install would import the checkout it was installed from);
``--checkout DIR`` measures another checkout of simllm (e.g. an older commit exported with
``git archive``) the same way, with this environment's packages: the before/after figure.
``--baseline DIR`` measures another checkout interleaved with this one (each repetition runs
both, in alternating order, so both see the same load): rows ``<figure>, baseline`` for the four
figures with targets, before the rows of this checkout's other figures.
Bytecode: the processes run as an installed package does, with compiled modules cached: the
warm-up writes them to a temporary ``PYTHONPYCACHEPREFIX`` (an environment that sets
``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module of the checkout in every
process, ~0.04-0.08 CPU-s here); ``--compile-each-time`` keeps the environment's setting.
Targets (the start-up issue's): help <= 0.3 CPU-s, analytical <= 0.4, des 1k <= 0.5, analytical
tracked <= 0.8.
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._measure import ROOT, Bench, import_time_top, installed_env  # noqa: E402

TARGETS = {"help": 0.3, "analytical": 0.4, "des 1k": 0.5, "analytical, tracked": 0.8}

#: The floors: processes importing only the third-party packages a run loads, as the run loads
#: them (runner.app, runner.heap.loading: the cyclic collector off, each block then frozen; one
#: OpenBLAS thread; runner.compiled and runner.hydra_import installed first; MLflow with the
#: environment runner.tracking sets, telemetry off).
_FLOOR = ("import gc, os; gc.disable(); os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')\n"
          "try:\n    from runner import compiled, hydra_import\nexcept ImportError:\n    pass  # an older checkout\n"
          "else:\n    compiled.install(); hydra_import.install()\n"
          "import hydra, omegaconf, numpy, polars; gc.freeze()")
FLOORS = {"floor: imports of a run": _FLOOR,
          "floor: imports of a tracked run": _FLOOR + "; import runner.tracking; import mlflow; "
          "gc.freeze(); import mlflow.store.tracking.sqlalchemy_store; gc.freeze()"}


def interleaved(bench, runs: dict, exe: str, sides: list, tmp: Path) -> None:
    """The figures with targets, each repetition running every side (label suffix, env) once,
    in alternating order, after one unmeasured warm-up per side: rows ``<figure><suffix>``."""
    from benchmarks._measure import run_child

    for label in TARGETS:
        for _, env in sides:
            run_child([exe, *runs[label]], cwd=tmp, env=env)
        done = {suffix: [] for suffix, _ in sides}
        for rep in range(bench.reps):
            for suffix, env in (sides if rep % 2 == 0 else sides[::-1]):
                done[suffix].append(run_child([exe, *runs[label]], cwd=tmp, env=env))
        for suffix, _ in sides:
            rs = done[suffix]
            bench.record(label + suffix, [r["cpu_s"] for r in rs], [r["wall_s"] for r in rs],
                         max(r["peak_mb"] for r in rs), kind="process",
                         cmd=" ".join(map(str, [exe, *runs[label]])),
                         **({} if suffix else {"target_cpu_s": TARGETS[label]}))


PARTS = ("import mlflow", "store set-up", "experiment look-up", "log, batched", "log, a call per value")


def tracking_parts(bench, checkout: Path, tracked_argv: list, tmp: Path, env: dict) -> None:
    """Rows ``tracked run: <part>`` (CPU-s and wall-s of each part, min/median over fresh
    processes; the first unmeasured) from benchmarks/_tracking_parts.py, run on the store and job
    directory of the tracked figure; and ``import mlflow, collector on``."""
    import json

    from benchmarks._measure import run_child

    uri = next(a.split("=", 1)[1] for a in tracked_argv if a.startswith("tracking.uri="))
    job_dir = next(a.split("=", 1)[1] for a in tracked_argv if a.startswith("hydra.run.dir="))
    script = str(checkout / "benchmarks" / "_tracking_parts.py")
    if not Path(script).exists():        # an older checkout: this checkout's script, its runner
        script = str(Path(__file__).resolve().parent / "_tracking_parts.py")
    for extra, parts in (([], PARTS), (["--collector-on"], PARTS[:1])):
        done = []
        for rep in range(bench.reps + 1):
            r = run_child([sys.executable, script, uri, job_dir, *extra], cwd=tmp, env=env)
            if rep:
                done.append(json.loads(r["stdout"].strip().splitlines()[-1]))
        for part in parts:
            label = f"tracked run: {part}" + (", collector on" if extra else "")
            bench.record(label, [d[part]["cpu_s"] for d in done], [d[part]["wall_s"] for d in done],
                         **({} if extra else {k: done[-1][k] for k in ("params", "metrics", "tags")}
                            if part.startswith("log") else {}))


def main():
    bench = Bench("bench_startup", __doc__)
    bench.parser.add_argument("--checkout", default=None,
                              help="measure this simllm checkout instead of the installed one")
    bench.parser.add_argument("--top", type=int, default=10, help="import-time rows shown")
    bench.parser.add_argument("--baseline", default=None,
                              help="another simllm checkout measured interleaved with this one")
    bench.parser.add_argument("--no-imports", action="store_true", help="skip the import-time tables")
    bench.parser.add_argument("--no-parts", action="store_true", help="skip the tracked run's parts")
    bench.parser.add_argument("--compile-each-time", action="store_true",
                              help="keep the environment's PYTHONDONTWRITEBYTECODE (no cached bytecode)")
    args = bench.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="simllm-startup-"))
    env = dict(os.environ, SIMLLM_CACHE_DIR=str(tmp / "cache"))
    checkout = Path(args.checkout).resolve() if args.checkout else ROOT
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), *filter(None, [os.environ.get("PYTHONPATH")])])
    if not args.compile_each_time:
        env = installed_env(env, tmp / "pycache")
    base_env = None
    if args.baseline:    # its own caches; the same interpreter, packages and bytecode setting
        base = Path(args.baseline).resolve()
        base_env = dict(env, SIMLLM_CACHE_DIR=str(tmp / "cache-baseline"), PYTHONPATH=os.pathsep.join(
            [str(base), *filter(None, [os.environ.get("PYTHONPATH")])]))
        bench.info["baseline"] = str(base)
    bench.info["notes"] = [
        "code measured: " + ("this checkout" if checkout == ROOT else f"the checkout {checkout}"),
        "bytecode: " + ("as the environment sets it (PYTHONDONTWRITEBYTECODE="
                        f"{os.environ.get('PYTHONDONTWRITEBYTECODE', 'unset')})" if args.compile_each_time
                        else "cached, as an installed package runs (written by each figure's warm-up)")]
    exe = str(Path(sys.executable).parent / "simllm")
    code = "import sys; from runner.app import main; sys.argv[0] = 'simllm'; main()"
    py = [sys.executable, "-c", code]
    runs = {
        "help": ["--help"],
        "analytical": ["tracking=none", f"hydra.run.dir={tmp}/a"],
        "des 1k": ["engine=des", "workload=poisson_chat", "workload.num_requests=1000", "tracking=none",
                   f"hydra.run.dir={tmp}/d"],
        "analytical, tracked": [f"tracking.uri=sqlite:///{tmp}/mlflow.db", f"hydra.run.dir={tmp}/t"],
    }
    try:
        if base_env is None:
            for label, argv in runs.items():
                bench.cli(label, [exe, *argv], cwd=tmp, env=env, target_cpu_s=TARGETS[label])
        else:
            interleaved(bench, runs, exe, [("", env), (", baseline", base_env)], tmp)
        for label, code in FLOORS.items():
            bench.cli(label, [sys.executable, "-c", code], cwd=tmp, env=env)
        for label in ("help", "analytical"):
            bench.cli(f"{label}, no compose cache", [exe, *runs[label]], cwd=tmp,
                      env=dict(env, SIMLLM_COMPOSE_CACHE="0"))
        if not args.no_parts:
            tracking_parts(bench, checkout, runs["analytical, tracked"], tmp, env)
        bench.info["import_top"] = {}
        for label in () if args.no_imports else ("help", "analytical", "des 1k"):
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
                      f"target <= {t}: {'met' if r['cpu_s']['min'] <= t else 'NOT met'}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
