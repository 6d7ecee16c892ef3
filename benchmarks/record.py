"""Re-measure the recorded speed figures and rewrite ``benchmarks/results/`` in one command.

    python benchmarks/record.py [--quick] [--only startup,des,pareto,memory] [--summary-only]
    python benchmarks/record.py --show pareto_roofline,memory     # print recorded sections

Runs each benchmark below as its own process (one after another, never two at once, so they do
not share the CPUs); each writes its JSON to ``benchmarks/results/NAME.json`` with the commit,
the machine (processor, CPUs, memory), the load average at its start and end, and every figure
(min/median CPU-s and wall-s, peak memory). Then ``benchmarks/results/SUMMARY.md`` is generated
from all the JSON files there: the speed figures the docs cite come from it, none typed by hand.

  startup          bench_startup.py: ``simllm --help``, one analytical run, a DES run of 1k
                   requests (whole processes) and the import-time top 10
  des              bench_des.py: simulate() on the Azure conversation trace, the default
                   deployment (vLLM V1 profile, measured kernels), 1k / 10k / 100k requests
  des_roofline     the same with the neutral profile priced by the roofline
                   (``framework=generic calibration.cost.backend=roofline``)
  pareto_roofline  bench_pareto.py: DeepSeek-V3 on 72 x GB200, every partition x batch x chunk,
                   and sweeps of 10^3 .. 10^6 points (first in a fresh process, and repeated)
  pareto_kernels   the same priced by measured kernels (``framework=trtllm``)
  memory           bench_memory.py: peak RSS of 10^6-point sweeps, each in a fresh process
  compare_blis     compare_blis.py: simllm's DES beside BLIS (built from $BLIS_SRC with a Go
                   toolchain; skipped, saying why, without one) on 1k / 10k Poisson and 10k Azure
                   requests, 3 interleaved rounds, and simllm with vllm_v1 + measured kernels
  compare_blis_100k  the same on 100k Poisson requests, one round (not in --quick)
  launchers        bench_launchers.py: one DES grid through joblib, SLURM (submitit) and Ray with
                   tracking on the PostgreSQL-backed MLflow server: wall, client and server CPU
                   per job (starts the clusters of tests/cluster/; a launcher that cannot start
                   here is listed as skipped)
  mlflow_scale     bench_mlflow_scale.py: a DES job's run logged 1,000 times through the runner's
                   own tracking path to that server: client wall and CPU, server CPU per job, at
                   100 and at 1,000 runs in the store

``--quick``: fewer repetitions, no 100k DES run and a smaller launcher grid. CPU-seconds are
the figure to compare across runs; wall time and CPU-s both grow with the machine's load, which
each record states. Nothing is asserted.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def jobs(quick: bool) -> dict:
    """name -> the benchmark's command line (its JSON goes to results/<name>.json)."""
    reps = "2" if quick else "5"
    sizes = "1000,10000" if quick else "1000,10000,100000"
    points = "1000,10000,100000" if quick else "1000,10000,100000,1000000"
    return {
        "startup": ["bench_startup.py", "--reps", reps],
        "des": ["bench_des.py", "--sizes", sizes, "--reps", "1" if quick else "3"],
        "des_roofline": ["bench_des.py", "--sizes", sizes, "--reps", "1" if quick else "3",
                         "framework=generic", "calibration.cost.backend=roofline"],
        "pareto_roofline": ["bench_pareto.py", "--reps", reps, "--loop-sample", "300", "--points", points,
                            "calibration.cost.backend=roofline"],
        "pareto_kernels": ["bench_pareto.py", "--reps", reps, "--loop-sample", "300", "--points", points,
                           "calibration.cost.backend=measured", "framework=trtllm"],
        "memory": ["bench_memory.py", "--reps", "1" if quick else "3"],
        **({} if quick else {
            "compare_blis": ["compare_blis.py", "--sizes", "1000,10000", "--azure", "10000", "--reps", "3",
                             "--vllm-v1"],
            "compare_blis_100k": ["compare_blis.py", "--sizes", "100000", "--azure", "0", "--reps", "1"]}),
        "launchers": ["bench_launchers.py", "--jobs", "12" if quick else "24"],
        "mlflow_scale": ["bench_mlflow_scale.py", "--runs", "1000"],
    }


def _fmt(v, nd=3):
    return "" if v is None else f"{v:.{nd}f}"


def scrub(path: Path) -> None:
    """Rewrite a record without this machine's paths: the checkout as ``.``, the Python
    environment as ``<env>``, the temporary folder as ``<tmp>`` (the figures are untouched)."""
    import tempfile

    text = path.read_text()
    for old, new in ((str(HERE.parent), "."), (sys.prefix, "<env>"), (tempfile.gettempdir(), "<tmp>")):
        text = text.replace(json.dumps(old)[1:-1], new)
    path.write_text(text)


def summary(names=None) -> str:
    """SUMMARY.md: one section per results/*.json (commit, time, machine, load, figures); only
    the records ``names`` (stems) when given, without the page heading."""
    out = [] if names else [
        "# Recorded speed figures", "",
        "Generated by `python benchmarks/record.py` from the JSON records beside this file; "
        "do not edit by hand. CPU-s = user + system CPU-seconds (of the call alone, or of the "
        "whole process for `process` rows); min and median over the repetitions. Load = the "
        "1-minute load average at the benchmark's start and end (the machine was shared when "
        "it is above 0).", ""]
    for p in sorted(RESULTS.glob("*.json")):
        if names and p.stem not in names:
            continue
        try:
            scrub(p)
            d = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if "rows" not in d:
            continue
        host = d.get("host") or {}
        la0, la1 = d.get("loadavg_start"), d.get("loadavg")
        load = f"{la0[0]:.2f} -> {la1[0]:.2f}" if la0 and la1 else (f"{la1[0]:.2f}" if la1 else "?")
        out += [f"## {p.stem}", "",
                f"`{' '.join(d.get('argv') or []) or '(defaults)'}` at commit {d.get('git_commit')}, "
                f"{d.get('time_utc')}; {host.get('cpu', d.get('machine'))}, {d.get('cpus')} CPUs, "
                f"{host.get('memory_gb', '?')} GB, Python {d.get('python')}; load {load}.", "",
                "| figure | kind | reps | CPU-s min | CPU-s median | wall-s min | peak MB | per item |",
                "|---|---|---|---|---|---|---|---|"]
        for r in d["rows"]:
            per = ""
            if r.get("n") and r["cpu_s"]["min"] > 0:
                per = f"{r['n'] / r['cpu_s']['min']:,.0f} {r.get('unit', 'items')}/CPU-s"
            out.append(f"| {r['label']} | {r['kind']} | {r['cpu_s']['n']} | {_fmt(r['cpu_s']['min'])} | "
                       f"{_fmt(r['cpu_s']['median'])} | {_fmt(r['wall_s']['min'])} | "
                       f"{_fmt(r.get('peak_mb'), 1)} | {per} |")
        notes = (d.get("info") or {}).get("notes")
        if notes:
            out += [""] + [f"- {n}" for n in notes]
        top = (d.get("info") or {}).get("import_top")
        if top:
            out += ["", "Import time by package (ms of the package's own modules, `-X importtime`, "
                    "min of 3):", "", "| run | " + " | ".join(f"#{i}" for i in range(1, 11)) + " |",
                    "|---|" + "---|" * 10]
            for label, rows in top.items():
                cells = [f"{r['package']} {r['ms']:.0f}" for r in rows[:11]]
                out.append(f"| {label} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, no 100k DES run")
    ap.add_argument("--only", default="", help="comma-separated benchmark names (default: all)")
    ap.add_argument("--summary-only", action="store_true", help="only regenerate SUMMARY.md")
    ap.add_argument("--show", default="", help="print the recorded sections of these records "
                    "(comma-separated names) and exit; nothing is measured or written")
    a = ap.parse_args(argv)
    if a.show:
        names = [n.strip() for n in a.show.split(",") if n.strip()]
        missing = [n for n in names if not (RESULTS / f"{n}.json").is_file()]
        if missing:
            ap.error(f"--show: no record {', '.join(missing)} in benchmarks/results; expected some of "
                     f"{', '.join(sorted(p.stem for p in RESULTS.glob('*.json')))}")
        print(summary(names).rstrip())
        return 0
    todo = jobs(a.quick)
    if a.only:
        names = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in todo]
        if unknown:
            ap.error(f"--only: unknown benchmark(s) {', '.join(unknown)}; expected some of {', '.join(todo)}")
        todo = {n: todo[n] for n in names}
    failed = []
    if not a.summary_only:
        RESULTS.mkdir(parents=True, exist_ok=True)
        for name, cmd in todo.items():
            t0 = time.perf_counter()
            print(f"== {name}: {' '.join(cmd)}", flush=True)
            rc = subprocess.call([sys.executable, str(HERE / cmd[0]), *cmd[1:],
                                  "--json", str(RESULTS / f"{name}.json")])
            print(f"== {name}: exit {rc}, {time.perf_counter() - t0:.0f} s wall", flush=True)
            if rc:
                failed.append(name)
    (RESULTS / "SUMMARY.md").write_text(summary() + "\n")
    print(f"summary written to {RESULTS / 'SUMMARY.md'}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
