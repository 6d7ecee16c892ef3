"""Shared measuring helper of the benchmark scripts: CPU-seconds, wall time, peak memory, N
repetitions (min/median), a small JSON next to the printed table, and ``--track`` to MLflow.

On a shared machine wall time depends on the neighbours; CPU-seconds of this process (user +
system, ``time.process_time``) are the comparable figure, so every benchmark prints both.

Typical use in a benchmark script::

    from benchmarks._measure import Bench

    def main():
        bench = Bench("bench_x", __doc__)            # adds --reps/--json/--track/--track-uri
        ap = bench.parser; ap.add_argument("--size", type=int, default=1000)
        args = bench.parse_args()
        s = bench.region("sweep 10k", lambda: sweep(...), n=10_000, unit="points")
        bench.cli("simllm --help", ["simllm", "--help"])    # a whole child process
        bench.finish()                                # prints the table, writes JSON, --track

``region`` times a call N times in this process (``--reps``; one unmeasured warm-up unless
``warmup=0``) and records min/median of CPU-s and wall-s, and the peak resident memory the first
call added over the resident set before it (Linux: the kernel's peak counter, reset with
/proc/self/clear_refs; elsewhere tracemalloc's peak of Python and numpy allocations).
``cli`` runs a command N times as a child process and records its CPU-s (user + system of that
child alone, from ``os.wait4`` in a small launcher), wall-s and peak RSS: the cost of a whole process, imports and
start-up included. ``finish`` adds this process's own totals (CPU-s since start, peak RSS).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"


# ---------------------------------------------------------------------------------------- memory
def _status_kb(field: str, path: str = "/proc/self/status") -> int | None:
    """A ``Vm*`` field of /proc/self/status (or a field of another /proc file such as
    /proc/meminfo) in KiB (None off Linux)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_mb() -> float | None:
    """Current resident set of this process in MB (10^6 bytes)."""
    kb = _status_kb("VmRSS")
    return None if kb is None else kb * 1024 / 1e6


def peak_rss_mb() -> float:
    """Peak resident set of this process since it started (or since the last ``reset_peak``), MB."""
    kb = _status_kb("VmHWM")
    if kb is None:  # macOS reports bytes, Linux KiB
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return r / 1e6 if sys.platform == "darwin" else r * 1024 / 1e6
    return kb * 1024 / 1e6


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS counter of this process to the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def process_cpu_s() -> float:
    """CPU-seconds (user + system) this process has used since it started."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ------------------------------------------------------------------------------------- measuring
def _stats(values: Sequence[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "n": len(values)}


def measure(fn: Callable[[], object], reps: int = 5, warmup: int = 1) -> tuple[dict, object]:
    """Run ``fn`` ``warmup`` + ``reps`` times; returns (stats, the last return value).

    stats: ``cpu_s`` and ``wall_s`` ({min, median, max, n}) of the measured repetitions, and
    ``peak_mb``: how far the first call (the warm-up if any) raised the resident set above what
    it was before (MB; Linux's peak counter, reset first; elsewhere tracemalloc's peak of Python
    and numpy allocations). Later calls reuse memory the allocator kept, so only the first call's
    rise is the call's own working set.
    """
    use_proc = reset_peak()
    if not use_proc:
        import tracemalloc
    first = True

    def call():
        nonlocal first, peak
        if not first:
            return fn()
        first = False
        if use_proc:
            base = rss_mb()
            reset_peak()
        else:
            tracemalloc.start()
        try:
            return fn()
        finally:
            if use_proc:
                peak = max(0.0, peak_rss_mb() - base)
            else:
                peak = tracemalloc.get_traced_memory()[1] / 1e6
                tracemalloc.stop()

    peak = 0.0
    out = None
    for _ in range(warmup):
        out = call()
    cpu, wall = [], []
    for _ in range(max(1, reps)):
        out = None
        c0, w0 = time.process_time(), time.perf_counter()
        out = call()
        w1, c1 = time.perf_counter(), time.process_time()
        cpu.append(c1 - c0)
        wall.append(w1 - w0)
    return {"cpu_s": _stats(cpu), "wall_s": _stats(wall), "peak_mb": peak,
            "peak_method": "rss rise, first call" if use_proc else "tracemalloc, first call"}, out


#: A tiny launcher: fork + exec the command and write the rusage of exactly that process as JSON.
#: Measuring through it (not by waiting on our own child) keeps this process's resident set out of
#: the child's peak RSS: Linux carries the peak of the address space a process was exec'ed from
#: over to the new program, and a child spawned straight from a 500 MB benchmark would inherit it.
_LAUNCHER = (
    "import json, os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "_, status, ru = os.wait4(pid, 0)\n"
    "json.dump({'cpu_s': ru.ru_utime + ru.ru_stime, 'maxrss': ru.ru_maxrss,\n"
    "           'rc': os.waitstatus_to_exitcode(status)}, open(sys.argv[1], 'w'))\n"
    "sys.exit(0)\n")


def run_child(cmd: Sequence[str], cwd=None, env=None, check: bool = True) -> dict:
    """Run ``cmd`` once as a child process: its CPU-s (user + system of that process and the
    children it waited for), wall-s, peak RSS (MB), exit status and output."""
    fd, path = tempfile.mkstemp(prefix="simllm-rusage-", suffix=".json")
    os.close(fd)
    try:
        w0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, path, *map(str, cmd)], cwd=cwd,
                           env=env, capture_output=True, text=True)
        wall = time.perf_counter() - w0
        ru = json.loads(Path(path).read_text() or "{}") if p.returncode == 0 else {}
    finally:
        os.remove(path)
    if not ru:
        raise RuntimeError(f"could not start {cmd!r}: {p.stderr[-2000:]}")
    if check and ru["rc"]:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {ru['rc']}:\n{p.stdout[-2000:]}\n"
                           f"{p.stderr[-2000:]}")
    maxrss = ru["maxrss"] / 1e6 if sys.platform == "darwin" else ru["maxrss"] * 1024 / 1e6
    return {"cpu_s": ru["cpu_s"], "wall_s": wall, "peak_mb": maxrss, "returncode": ru["rc"],
            "stdout": p.stdout, "stderr": p.stderr}


def installed_env(env: dict, pycache: Path) -> dict:
    """``env`` for child processes that run as an installed package does: its modules' compiled
    bytecode cached (in ``pycache``, a ``PYTHONPYCACHEPREFIX``) and read back by later processes.
    pip compiles what it installs and ``.ci/run`` compiles the checkout; an environment that sets
    ``PYTHONDONTWRITEBYTECODE`` would otherwise have every child compile every module it imports
    (~0.04-0.08 CPU-s of a simllm process here), which no installed copy pays. The first child
    writes the cache: run a warm-up before timing."""
    out = dict(env)
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    out["PYTHONPYCACHEPREFIX"] = str(pycache)
    return out


def measure_child(cmd: Sequence[str], reps: int = 5, cwd=None, env=None, warmup: int = 1) -> dict:
    """``run_child`` ``warmup`` + ``reps`` times; cpu_s / wall_s / peak_mb as {min, median, max, n}.
    The warm-up fills the OS file cache (the first start of a fresh checkout reads every .py)."""
    for _ in range(warmup):
        run_child(cmd, cwd=cwd, env=env)
    runs = [run_child(cmd, cwd=cwd, env=env) for _ in range(max(1, reps))]
    return {"cpu_s": _stats([r["cpu_s"] for r in runs]), "wall_s": _stats([r["wall_s"] for r in runs]),
            "peak_mb": max(r["peak_mb"] for r in runs), "peak_method": "child maxrss",
            "last": runs[-1]}


def machine() -> dict:
    """What the figures were measured on: processor model, logical CPUs, memory (GB), OS."""
    cpu = platform.processor() or platform.machine()
    mem_gb = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        kb = _status_kb("MemTotal", "/proc/meminfo")
        mem_gb = None if kb is None else round(kb * 1024 / 1e9, 1)
    except OSError:
        pass
    return {"cpu": cpu, "cpus": os.cpu_count(), "memory_gb": mem_gb,
            "os": f"{platform.system()} {platform.release()}"}


def loadavg():
    """The 1-, 5- and 15-minute load averages (None where the OS has none)."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def git_commit() -> str:
    try:
        sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return (sha or "unknown") + ("-dirty" if dirty and sha else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ----------------------------------------------------------------------------------------- Bench
class Bench:
    """Collects the measured rows of one benchmark script; prints, writes JSON, logs to MLflow."""

    def __init__(self, name: str, doc: str | None = None, reps: int = 5):
        self.name = name
        self.rows: list[dict] = []
        self.info: dict = {}
        self.parser = argparse.ArgumentParser(description=doc,
                                              formatter_class=argparse.RawDescriptionHelpFormatter)
        self.parser.add_argument("--reps", type=int, default=reps,
                                 help=f"measured repetitions of each figure (min and median shown; default {reps})")
        self.parser.add_argument("--json", default=str(RESULTS / f"{name}.json"),
                                 help="where the JSON of the figures goes ('' for nowhere)")
        self.parser.add_argument("--track", action="store_true",
                                 help="also log the figures as one MLflow run (experiment 'benchmarks')")
        self.parser.add_argument("--track-uri", default=None,
                                 help="MLflow tracking URI for --track (default: simllm's default store)")
        self.args = None
        self.load_start = loadavg()      # the load when the benchmark began (and ``document``'s at its end)

    def parse_args(self, argv=None):
        self.args = self.parser.parse_args(argv)
        return self.args

    @property
    def reps(self) -> int:
        return self.args.reps if self.args is not None else 5

    def _add(self, label: str, stats: dict, n: int | None, unit: str | None, kind: str, extra: dict):
        row = {"label": label, "kind": kind, **{k: v for k, v in stats.items() if k != "last"}}
        if n:
            row["n"] = n
            row["unit"] = unit or "items"
            row["cpu_per_item_ms"] = stats["cpu_s"]["min"] / n * 1e3
        row.update(extra)
        self.rows.append(row)
        return row

    def region(self, label: str, fn: Callable[[], object], n: int | None = None, unit: str | None = None,
               reps: int | None = None, warmup: int = 1, **extra):
        """Time ``fn`` in this process (CPU-s of the call alone); returns fn's last result."""
        stats, out = measure(fn, reps or self.reps, warmup)
        self._add(label, stats, n, unit, "region", extra)
        return out

    def cli(self, label: str, cmd: Sequence[str], n: int | None = None, unit: str | None = None,
            reps: int | None = None, cwd=None, env=None, warmup: int = 1, **extra) -> dict:
        """Time a whole child process (imports and start-up included); returns its last run."""
        stats = measure_child(cmd, reps or self.reps, cwd=cwd, env=env, warmup=warmup)
        self._add(label, stats, n, unit, "process", {"cmd": " ".join(map(str, cmd)), **extra})
        return stats["last"]

    def record(self, label: str, cpu_s: Sequence[float], wall_s: Sequence[float], peak_mb: float | None = None,
               n: int | None = None, unit: str | None = None, kind: str = "region", **extra):
        """Add a row measured by the script itself (lists of per-repetition CPU-s and wall-s)."""
        stats = {"cpu_s": _stats(list(cpu_s)), "wall_s": _stats(list(wall_s)), "peak_mb": peak_mb,
                 "peak_method": "given"}
        return self._add(label, stats, n, unit, kind, extra)

    # ----------------------------------------------------------------------------------- output
    def table(self) -> str:
        lines = [f"{'figure':<46} {'kind':>7} {'reps':>4} {'CPU-s min':>10} {'CPU-s med':>10} "
                 f"{'wall min':>9} {'wall med':>9} {'peak MB':>8} {'CPU-ms/item':>12}"]
        for r in self.rows:
            per = f"{r['cpu_per_item_ms']:.3f}" if "cpu_per_item_ms" in r else ""
            pk = "" if r.get("peak_mb") is None else f"{r['peak_mb']:.1f}"
            lines.append(f"{r['label'][:46]:<46} {r['kind']:>7} {r['cpu_s']['n']:>4} "
                         f"{r['cpu_s']['min']:>10.4f} {r['cpu_s']['median']:>10.4f} "
                         f"{r['wall_s']['min']:>9.4f} {r['wall_s']['median']:>9.4f} {pk:>8} {per:>12}")
        return "\n".join(lines)

    def document(self) -> dict:
        return {"benchmark": self.name, "git_commit": git_commit(),
                "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "python": platform.python_version(), "machine": platform.machine(),
                "cpus": os.cpu_count(), "host": machine(), "loadavg_start": self.load_start,
                "loadavg": loadavg(),
                "argv": sys.argv[1:], "info": self.info, "rows": self.rows,
                "process": {"cpu_s": process_cpu_s(), "peak_rss_mb": peak_rss_mb()}}

    def finish(self) -> dict:
        """Print the table and the process totals; write the JSON; log to MLflow with --track."""
        doc = self.document()
        print(self.table())
        print(f"this process: {doc['process']['cpu_s']:.2f} CPU-s since start, peak RSS "
              f"{doc['process']['peak_rss_mb']:.0f} MB (commit {doc['git_commit']}, load {doc['loadavg']})")
        path = self.args.json if self.args is not None else str(RESULTS / f"{self.name}.json")
        if path:
            p = Path(path)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(doc, indent=1, default=str))
            print(f"figures written to {p}")
        if self.args is not None and self.args.track:
            rid = track(doc, self.args.track_uri)
            print(f"logged to MLflow: run {rid}")
        return doc


def _metrics(doc: dict) -> dict:
    """Flat MLflow metric names of a benchmark document (one per row and statistic)."""
    import re

    out = {"process_cpu_s": doc["process"]["cpu_s"], "process_peak_rss_mb": doc["process"]["peak_rss_mb"]}
    for r in doc["rows"]:
        key = re.sub(r"[^0-9A-Za-z_.\-/ ]", "", r["label"]).strip().replace(" ", "_")[:80]
        for stat in ("min", "median"):
            out[f"{key}.cpu_s_{stat}"] = r["cpu_s"][stat]
            out[f"{key}.wall_s_{stat}"] = r["wall_s"][stat]
        if r.get("peak_mb") is not None:
            out[f"{key}.peak_mb"] = r["peak_mb"]
        if "cpu_per_item_ms" in r:
            out[f"{key}.cpu_per_item_ms"] = r["cpu_per_item_ms"]
    return out


def track(doc: dict, uri: str | None = None, experiment: str = "benchmarks") -> str:
    """Log one benchmark document as a FINISHED MLflow run (through runner.tracking, simllm's one
    MLflow module): metrics per row, the JSON as an artifact, commit and load as tags."""
    sys.path.insert(0, str(ROOT))
    from runner import tracking

    uri = uri or tracking.default_uri()
    params = {"argv": " ".join(doc["argv"]), "cpus": doc["cpus"], "python": doc["python"]}
    tags = {"simllm.role": "benchmark", "simllm.git_commit": doc["git_commit"],
            "benchmark.loadavg": str(doc["loadavg"])}
    with tempfile.TemporaryDirectory(prefix="simllm-bench-") as d:
        (Path(d) / f"{doc['benchmark']}.json").write_text(json.dumps(doc, indent=1, default=str))
        return tracking.log_job(uri, experiment, doc["benchmark"], params, _metrics(doc), tags, Path(d))


def import_time_top(cmd_args: Sequence[str], top: int = 10, python: str | None = None, cwd=None,
                    env=None, reps: int = 3) -> list:
    """Run ``python -X importtime <cmd_args>`` ``reps`` times and return its ``top`` most expensive
    packages: {package, ms, modules}, the summed self time of every module of a top-level package
    (``hydra``, ``numpy``, ``mlflow`` ...; each module's own import work, including what its
    module-level code runs, so the figures add up to the total without counting a package twice),
    the minimum over the runs (the machine's noise only adds). The first row is the total."""
    best: dict = {}
    for _ in range(max(1, reps)):
        p = subprocess.run([python or sys.executable, "-X", "importtime", *cmd_args], cwd=cwd, env=env,
                           capture_output=True, text=True)
        pkgs: dict = {}
        for line in p.stderr.splitlines():
            if not line.startswith("import time:") or "cumulative" in line:
                continue
            self_us, _cum_us, name = line[len("import time:"):].split("|", 2)
            pkg = name.strip().split(".")[0]
            ms, n = pkgs.get(pkg, (0.0, 0))
            pkgs[pkg] = (ms + int(self_us) / 1e3, n + 1)
        pkgs["(all imports)"] = (sum(v[0] for v in pkgs.values()), sum(v[1] for v in pkgs.values()))
        for k, v in pkgs.items():
            best[k] = min(best.get(k, v), v, key=lambda x: x[0])
    rows = [{"package": k, "ms": v[0], "modules": v[1]} for k, v in best.items()]
    rows.sort(key=lambda r: (r["package"] != "(all imports)", -r["ms"]))
    return rows[:top + 1]
