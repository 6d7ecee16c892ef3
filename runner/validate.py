"""The ``simllm-validate`` console script: predicted vs published measurements, row by row.

    simllm-validate                                   # ../shared/data/reference/measured_dev.csv, calibration=default
    simllm-validate --csv other.csv --calibration specsheet --no-tracking
    simllm-validate --fit default --force             # fit ONE calibration on the whole set, write conf/calibration/default.yaml

Each row of the CSV (columns as in measured_dev.csv) becomes one prediction:

* batch-1 decode speed (``decode_tok_s_per_user``), batch-1 first-token latency and static-batch
  throughput rows go through the analytical engine (all requests start together, lock-step decode);
* offline max-throughput rows ("max (offline, inf rate)", "offline, all at once") go through the
  DES: every request queued at t = 0, the runtime's batch found by the scheduler, the KV cache
  and the framework's limits (``FRAMEWORKS``); output tokens over the makespan;
* serving rows (a dataset at a request rate) go through the DES with Poisson arrivals and the
  dataset's length distribution (ShareGPT: the Sarathi ShareGPT trace's shape rescaled to the
  stated mean lengths), reporting the median TTFT / TPOT.

Rows the engines cannot express (no hardware config, TP layout not stated, dataset lengths not
stated) are listed as skipped with the reason. Errors are signed: predicted / measured - 1, on
TTFT, on TPOT (decode speed rows compared as TPOT = 1000 / tok/s) and on throughput; the summary
gives the median and max absolute error per metric. Results go to stdout, to
outputs/validation/TIME/ (table.csv, report.md, summary.json) and to an MLflow run.

``--fit NAME`` fits compute efficiency, memory-bandwidth efficiency, communication efficiency and
the per-step overhead (scipy.optimize.least_squares, soft-L1 on log errors) to all expressible rows
at once - one calibration for the whole set, never per row - and writes conf/calibration/NAME.yaml
with the data's path and sha256 and the error it reaches.
"""

import argparse
import csv
import functools
import datetime as _dt
import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CSV = ROOT.parent / "shared" / "data" / "reference" / "measured_dev.csv"
SHAREGPT_TRACE = "sarathi_sharegpt_8k_filtered_llama2tok.csv"

#: Hardware column -> conf/hardware option (first matching prefix); rows with no match are skipped.
HARDWARE = (("A100-SXM4-80GB", "a100_sxm_80gb"), ("H100-SXM5-80GB", "h100_sxm"),
            ("H200-SXM-141GB", "h200"), ("B200", "b200"), ("AMD MI300X", "mi300x"))
#: Model column -> conf/model option (regex, first match).
MODELS = ((r"Mixtral-8x7B", "mixtral_8x7b"), (r"Qwen3-235B", "qwen3_235b_a22b"),
          (r"Qwen3-30B", "qwen3_30b_a3b"), (r"Llama-3\.1-405B", "llama_3_1_405b"),
          (r"Llama-3\.[13]-70B", "llama_3_1_70b"), (r"Llama-3\.1-8B", "llama_3_1_8b"),
          (r"Llama-2-70B", "llama_2_70b"), (r"Llama-2-7B|LLaMA 7B", "llama_2_7b"))
#: Framework -> DES settings of its runtime (scheduler, limits, KV share), stated per row.
FRAMEWORKS = {
    # TensorRT-LLM in-flight batching: context and generation requests in one iteration, KV for
    # the whole request reserved at admission (GUARANTEED_NO_EVICT) -> the orca scheduler;
    # trtllm-bench limits max_num_tokens 8192; kv_cache_free_gpu_mem_fraction 0.95 (README).
    "TensorRT-LLM": {"engine.des.scheduler": "sarathi", "engine.des.chunk_size": 8192, "engine.des.max_num_seqs": 2048,
                     "engine.des.max_num_batched_tokens": 8192, "calibration.kv_usable_fraction": 0.95},
    # SGLang / vLLM: prefill-prioritised continuous batching, paged KV with preemption.
    "SGLang": {"engine.des.scheduler": "vllm", "engine.des.max_num_seqs": 1024,
               "engine.des.max_num_batched_tokens": 16384},
    "vLLM": {"engine.des.scheduler": "vllm", "engine.des.max_num_seqs": 256,
             "engine.des.max_num_batched_tokens": 8192},
}
#: gpt-fast generate.py's default max_new_tokens (the README does not state the output length).
GPT_FAST_OUTPUT = 200
#: Mean ShareGPT lengths the reference README quotes (vLLM blog, 500-prompt sample).
SHAREGPT_MEANS = (202, 179)
#: Metric groups of the error summary.
GROUPS = ("ttft", "tpot", "throughput")


@dataclass
class Case:
    """One row turned into a prediction job (or a skip)."""

    id: str
    metric: str                  # ttft | tpot | throughput
    measured: float              # ms for ttft/tpot, tok/s for throughput
    engine: str = ""             # analytical | des
    overrides: list = field(default_factory=list)
    workload: dict = field(default_factory=dict)
    how: str = ""
    skip: str = ""
    predicted: float = float("nan")

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0 if self.measured and math.isfinite(self.predicted) else float("nan")


def _dtype_overrides(precision: str) -> list | None:
    p = precision.lower()
    if "int4" in p:
        g = re.search(r"g(\d+)", p)
        return ["model.weight_dtype=int4", f"model.weight_group_size={g.group(1) if g else 128}"]
    if "int8" in p:
        return ["model.weight_dtype=int8"]
    if "fp4" in p:
        # NVFP4 / MLPerf FP4: 4-bit weights and activations, an fp8 scale per 16, FP8 KV cache
        return ["model.weight_dtype=fp4", "model.activation_dtype=fp4", "model.kv_dtype=fp8",
                "model.weight_group_size=16", "model.weight_scale_dtype=fp8"]
    if "fp8" in p:
        return ["model.weight_dtype=fp8", "model.activation_dtype=fp8", "model.kv_dtype=fp8"]
    if "bf16" in p or "fp16" in p:
        return []
    return None


def _int(s: str):
    try:
        return int(float(s))
    except (TypeError, ValueError):
        return None


def build_case(row: dict) -> Case:
    """The prediction job of one CSV row (or a Case with ``skip`` set)."""
    rid, metric, value = row["id"], row["metric"], float(row["value"])
    group = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "tpot", "decode_tok_s_per_user": "tpot",
             "output_throughput_tok_s": "throughput"}.get(metric)
    measured = 1000.0 / value if metric == "decode_tok_s_per_user" else value
    case = Case(rid, group or metric, measured)
    if group is None:
        case.skip = f"metric {metric} not predicted"
        return case
    if "(mean)" in row.get("unit", ""):
        case.how = "mean reported; compared with the simulated median"
    hw = next((opt for pre, opt in HARDWARE if row["hardware"].startswith(pre)), None)
    if hw is None:
        case.skip = f"no hardware config for '{row['hardware']}'"
        return case
    model = next((opt for pat, opt in MODELS if re.search(pat, row["model"])), None)
    if model is None:
        case.skip = f"no model config for '{row['model']}'"
        return case
    dt = _dtype_overrides(row["precision"])
    if dt is None:
        case.skip = f"precision '{row['precision']}' not mapped"
        return case
    tp = _int(row["tp"])
    if tp is None:
        case.skip = f"TP layout not stated ('{row['tp']}')"
        return case
    fw = next((v for k, v in FRAMEWORKS.items() if row["framework"].startswith(k)), {})
    ov = [f"hardware={hw}", f"model={model}", f"partition.tp={tp}", *dt]
    conc, isl, osl = row["batch_or_concurrency"], _int(row["input_len"]), _int(row["output_len"])
    if metric == "decode_tok_s_per_user" or (_int(conc) == 1 and group == "ttft"):
        case.engine = "analytical"
        out = osl or (GPT_FAST_OUTPUT if metric == "decode_tok_s_per_user" else 1)
        case.workload = {"prompt_len": isl, "output_len": out, "batch_size": 1}
        case.how = f"analytical batch 1, {isl} in / {out} out" + \
            (" (gpt-fast default max_new_tokens)" if not osl else "")
        case.overrides = ov
        return case
    if _int(conc) and isl and osl:
        case.engine = "analytical"
        case.workload = {"prompt_len": isl, "output_len": osl, "batch_size": _int(conc)}
        case.how = f"analytical static batch {_int(conc)}, {isl}/{osl}"
        case.overrides = ov + [f"{k}={v}" for k, v in fw.items() if k.startswith("calibration.")]
        return case
    offline = "offline" in conc or "inf" in conc
    if offline and isl and osl:
        n = 1500 if isl + osl <= 4096 else 600
        case.engine = "des"
        case.workload = {"prompt_len": isl, "output_len": osl, "num_requests": n, "arrival": "batch"}
        case.overrides = ov + [f"{k}={v}" for k, v in fw.items()]
        case.how = f"DES offline: {n} requests of {isl}/{osl} at t=0, {fw.get('engine.des.scheduler', 'vllm')} scheduler"
        return case
    if "ShareGPT" in row["input_len"]:
        m = re.search(r"request_rate=([\d.]+)", conc)
        n = _int((re.search(r"\((\d+) prompts\)", conc) or re.search(r"(\d+) prompts", conc) or [None, None])[1])
        case.engine = "des"
        case.workload = {"sharegpt": True, "num_requests": min(n or 1000, 2000)}
        if m:
            case.workload.update(arrival="poisson", rate_rps=float(m.group(1)))
            how = f"Poisson {m.group(1)} req/s"
        else:
            case.workload.update(arrival="batch")
            how = "all at t=0"
        case.overrides = ov + [f"{k}={v}" for k, v in fw.items()]
        case.how = (f"DES {how}, {case.workload['num_requests']} ShareGPT requests (Sarathi trace shape "
                    f"rescaled to mean {SHAREGPT_MEANS[0]}/{SHAREGPT_MEANS[1]})")
        return case
    case.skip = "dataset lengths or load not stated (" + f"{row['input_len']} / {conc}".strip() + ")"
    return case


@functools.lru_cache(maxsize=8)
def _sharegpt_lengths(n: int, seed: int = 0):
    """n (prompt, output) lengths: rows of the Sarathi ShareGPT trace drawn at random, each column
    scaled to SHAREGPT_MEANS (the reference README's means for the sglang/vLLM benchmark sample)."""
    import polars as pl

    path = ROOT.parent / "shared" / "data" / "traces" / SHAREGPT_TRACE
    t = pl.read_csv(path)
    p = t["num_prefill_tokens"].to_numpy().astype(float)
    o = t["num_decode_tokens"].to_numpy().astype(float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(p), size=n)
    pr = np.maximum(1, np.rint(p[idx] * SHAREGPT_MEANS[0] / p.mean())).astype(np.int64)
    ou = np.maximum(2, np.rint(o[idx] * SHAREGPT_MEANS[1] / o.mean())).astype(np.int64)
    return pr, ou


class Runner:
    """Specs per case composed once; ``predict(case, cal)`` with calibration parameters swapped."""

    def __init__(self, calibration: str, des_scale: float = 1.0, extra: tuple = ()):
        self.calibration = calibration
        self.extra = list(extra)     # overrides applied to every row (e.g. calibration.x=...)
        self.des_scale = des_scale   # DES request counts x this (smaller while fitting)
        self._specs = {}

    def specs(self, case: Case):
        if case.id not in self._specs:
            from runner.calibrate import compose
            from runner.convert import des_spec, specs_from_config

            cfg = compose([f"calibration={self.calibration}", "engine=des", *case.overrides, *self.extra])
            self._specs[case.id] = (specs_from_config(cfg), des_spec(cfg))
        return self._specs[case.id]

    def predict(self, case: Case, params: dict | None = None) -> float:
        from engine.spec import WorkloadSpec

        specs, des = self.specs(case)
        if params:
            specs = replace(specs, calibration=replace(specs.calibration, **params))
        wl = dict(case.workload)
        if case.engine == "analytical":
            from engine.analytical import run

            s = run(replace(specs, workload=WorkloadSpec(**wl))).summary
        else:
            from engine.des import simulate
            from engine.des.workload import RequestStream

            stream = None
            if "num_requests" in wl:
                wl["num_requests"] = max(100, int(wl["num_requests"] * self.des_scale))
            if wl.pop("sharegpt", False):
                n = wl["num_requests"]
                pr, ou = _sharegpt_lengths(n)
                rng = np.random.default_rng(1)
                if wl.get("arrival") == "poisson":
                    gaps = rng.exponential(1.0 / wl["rate_rps"], size=n)
                    gaps[0] = 0.0
                    arr = np.cumsum(gaps)
                else:
                    arr = np.zeros(n)
                stream = RequestStream(arrival_s=arr, prompt=pr, output=ou, priority=np.ones(n, np.int8),
                                       source="ShareGPT (rescaled Sarathi trace)")
                wl = {"prompt_len": int(pr.mean()), "output_len": int(ou.mean())}
            sp = replace(specs, workload=WorkloadSpec(**wl))
            s = simulate(sp, replace(des, progress="off"), stream=stream).result.summary
        key = {"ttft": "ttft_ms_p50", "tpot": "tpot_ms_p50", "throughput": "throughput_tok_s"}[case.metric]
        v = s.get(key)
        return float(v) if v is not None else float("nan")


def read_cases(path) -> list[Case]:
    with open(path, newline="", encoding="utf-8") as f:
        return [build_case(r) for r in csv.DictReader(f)]


def summarize(cases: list[Case]) -> dict:
    out = {}
    for g in GROUPS:
        e = np.array([abs(c.error) for c in cases if not c.skip and c.metric == g and math.isfinite(c.error)])
        out[g] = {"n": int(e.size), "median_abs_error": float(np.median(e)) if e.size else float("nan"),
                  "max_abs_error": float(e.max()) if e.size else float("nan")}
    return out


def table_text(cases: list[Case], summary: dict) -> str:
    lines = [f"{'id':<9} {'metric':<10} {'engine':<10} {'measured':>10} {'predicted':>10} {'error':>8}  how"]
    for c in cases:
        if c.skip:
            continue
        unit = "tok/s" if c.metric == "throughput" else "ms"
        lines.append(f"{c.id:<9} {c.metric:<10} {c.engine:<10} {c.measured:>10.4g} {c.predicted:>10.4g} "
                     f"{c.error:>+8.1%}  {unit}; {c.how}")
    lines.append("")
    for g, s in summary.items():
        lines.append(f"{g:<10} n={s['n']:<3} median |error| {s['median_abs_error']:.1%}   max |error| "
                     f"{s['max_abs_error']:.1%}")
    skipped = [c for c in cases if c.skip]
    if skipped:
        lines.append("")
        lines.append(f"skipped ({len(skipped)}):")
        lines += [f"  {c.id:<9} {c.skip}" for c in skipped]
    return "\n".join(lines) + "\n"


#: Parameters ``--fit`` adjusts (one value each for the whole set), their bounds and the unit the
#: optimiser sees (so that a 1 % finite-difference step means something for each).
FIT_PARAMS = {"compute_efficiency": (0.2, 1.0, "log"), "memory_bandwidth_efficiency": (0.3, 1.0, "log"),
              "comm_efficiency": (0.1, 1.0, "log"), "step_overhead_s": (0.0, 0.01, 1e-3),
              "per_token_overhead_s": (0.0, 2e-4, 1e-5), "per_request_overhead_s": (0.0, 0.05, 1e-3)}


def fit_calibration(runner: Runner, cases: list[Case], start: dict, max_nfev: int = 40, log=print,
                    polish: int = 0):
    """One calibration for all expressible rows: least_squares (soft-L1, f_scale 0.1) on the log
    of predicted / measured, each metric weighted to the same total; returns (params, scipy
    result). Efficiencies move in log space, the overheads in ms (per token: in 10 us)."""
    from scipy.optimize import least_squares

    use = [c for c in cases if not c.skip]
    names = list(FIT_PARAMS)

    def enc(k, v):
        unit = FIT_PARAMS[k][2]
        return math.log(v) if unit == "log" else v / unit

    def dec(u):
        return {k: float(np.exp(v)) if FIT_PARAMS[k][2] == "log" else float(v) * FIT_PARAMS[k][2]
                for k, v in zip(names, u)}

    # each metric (TTFT, TPOT, throughput) weighs the same in total, however many rows it has
    count = {g: sum(1 for c in use if c.metric == g) for g in GROUPS}
    weight = np.array([math.sqrt(len(use) / (len(GROUPS) * count[c.metric])) for c in use])

    def resid(u):
        p = dec(u)
        r = []
        for c in use:
            v = runner.predict(c, p)
            r.append(math.log(v / c.measured) if v > 0 and math.isfinite(v) else 3.0)
        r = np.array(r)
        med = {g: np.median(np.abs([x for x, c in zip(r, use) if c.metric == g])) for g in GROUPS if count[g]}
        log(f"  fit: {', '.join(f'{k}={v:.4g}' for k, v in p.items())}  median |log err| "
            + ", ".join(f"{g} {v:.3f}" for g, v in med.items()))
        return weight * r

    lo = np.array([enc(k, FIT_PARAMS[k][0]) if FIT_PARAMS[k][2] != "log" or FIT_PARAMS[k][0] > 0 else 0.0
                   for k in names])
    hi = np.array([enc(k, FIT_PARAMS[k][1]) for k in names])
    u0 = np.clip(np.array([enc(k, start[k]) for k in names]), lo + 1e-6, hi - 1e-6)
    sol = least_squares(resid, u0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1, diff_step=0.01,
                        max_nfev=max_nfev)
    if polish:
        # the reported figure is the median |error| per metric: polish on the mean of the three
        # medians (piecewise in the parameters, so Nelder-Mead), from the least-squares solution
        from scipy.optimize import minimize

        groups = np.array([c.metric for c in use])

        def medians(u):
            r = np.abs(resid(np.clip(u, lo, hi)) / weight)
            return float(np.mean([np.median(r[groups == g]) for g in GROUPS if count[g]]))

        simplex = np.vstack([sol.x] + [sol.x + np.where(np.arange(len(names)) == i,
                                                        0.1 * np.maximum(np.abs(sol.x), 0.5), 0.0)
                                       for i in range(len(names))])
        nm = minimize(medians, sol.x, method="Nelder-Mead",
                      options={"initial_simplex": simplex, "maxfev": polish, "xatol": 1e-3, "fatol": 1e-4})
        if nm.fun < medians(sol.x):
            sol.x = np.clip(nm.x, lo, hi)
    return dec(sol.x), sol


def fitted_yaml(name: str, params: dict, csv_path: Path, sha: str, summary: dict, cases: list[Case],
                base_cfg) -> str:
    c = base_cfg.calibration
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    err = "; ".join(f"{g} median {s['median_abs_error']:.1%} / max {s['max_abs_error']:.1%} (n={s['n']})"
                    for g, s in summary.items())
    n = sum(1 for x in cases if not x.skip)
    return "\n".join([
        f"# Default calibration: ONE set of factors fitted by `simllm-validate --fit {name}` ({date}) to all",
        f"# {n} expressible rows of {csv_path.name} at once (never per row, model or framework):",
        "# least_squares, soft-L1 on log(predicted / measured). Error it reaches (|predicted / measured - 1|):",
        f"#   {err}",
        "# Noise stays off: the dev set publishes medians and means, no tails to fit a jump diffusion to.",
        "defaults:", "  - calibration_schema", "  - noise: none   # step-time jitter/jumps for engine=des (conf/calibration/noise/)",
        "  - _self_", f"name: {name}",
        "provenance: >-",
        f"  simllm-validate --fit on {csv_path} (sha256 {sha}); {n} rows (TTFT, TPOT, throughput;",
        "  analytical batch-1/static-batch rows, DES offline and serving rows); memory reserve and KV",
        "  fraction as the seed document (not fitted). Error reached: " + err,
        f"compute_efficiency: {params['compute_efficiency']:.4f}           # fitted",
        f"memory_bandwidth_efficiency: {params['memory_bandwidth_efficiency']:.4f}  # fitted",
        f"comm_efficiency: {params['comm_efficiency']:.4f}              # fitted",
        f"memory_reserve: {c.memory_reserve}          # CUDA context, allocator and framework buffers",
        f"kv_usable_fraction: {c.kv_usable_fraction}",
        f"step_overhead: {params['step_overhead_s'] * 1e6:.1f} us          # fitted: per iteration (scheduler)",
        f"per_token_overhead: {params['per_token_overhead_s'] * 1e6:.2f} us      # fitted: per sequence per step (sampling, detokenise)",
        f"per_request_overhead: {params['per_request_overhead_s'] * 1e6:.1f} us  # fitted: once per request (tokenise, admit, respond)",
        f"launch_overhead: {c.get('launch_overhead', '0 us')}          # per forward pass; not fitted (folded into step_overhead)",
    ]) + "\n"


def run(args) -> dict:
    csv_path = Path(args.csv)
    if not csv_path.is_file():
        raise FileNotFoundError(f"--csv {csv_path}: no such file")
    sha = hashlib.sha256(csv_path.read_bytes()).hexdigest()
    cases = read_cases(csv_path)
    if args.only:
        cases = [c for c in cases if re.match(args.only, c.id)]
    runner = Runner(args.calibration, extra=args.set)
    params = None
    if args.fit:
        first = next(c for c in cases if not c.skip)
        cal = runner.specs(first)[0].calibration
        start = {k: getattr(cal, k) for k in FIT_PARAMS}
        fit_runner = Runner(args.calibration, des_scale=args.fit_des_scale, extra=args.set)
        fit_runner._specs = runner._specs
        params, sol = fit_calibration(fit_runner, cases, start, max_nfev=args.max_nfev, polish=args.polish)
    for c in cases:
        if not c.skip:
            c.predicted = runner.predict(c, params)
            if not math.isfinite(c.predicted):
                c.how += " [no prediction: does not fit in memory at this calibration; not in the summary]"
    summary = summarize(cases)
    text = table_text(cases, summary)
    print(text)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.output_dir) / stamp
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "table.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "metric", "engine", "measured", "predicted", "signed_error", "how", "skipped"])
        for c in cases:
            w.writerow([c.id, c.metric, c.engine, c.measured, c.predicted, c.error, c.how, c.skip])
    (out / "report.md").write_text(f"# Validation against {csv_path.name}\n\nsha256 `{sha}`, calibration "
                                   f"`{args.calibration}`" + (f", fitted {params}" if params else "")
                                   + "\n\n```\n" + text + "```\n")
    (out / "summary.json").write_text(json.dumps({"csv": str(csv_path), "sha256": sha, "summary": summary,
                                                  "params": params, "calibration": args.calibration},
                                                 indent=2))
    if args.fit:
        from runner.calibrate import compose

        path = Path(args.conf_dir) / "calibration" / f"{args.fit}.yaml"
        text_y = fitted_yaml(args.fit, params, csv_path, sha, summary, cases,
                             compose([f"calibration={args.calibration}"]))
        if path.exists() and not args.force and path.read_text() != text_y:
            raise FileExistsError(f"{path} exists and differs; pass --force to overwrite")
        path.write_text(text_y)
        (out / f"{args.fit}.yaml").write_text(text_y)
        print(f"wrote {path}")
    if not args.no_tracking:
        from runner import tracking

        metrics = {f"{g}_{k}": v for g, s in summary.items() for k, v in s.items()}
        p = {"csv": str(csv_path), "sha256": sha, "calibration": args.calibration,
             "rows": len(cases), "skipped": sum(1 for c in cases if c.skip)}
        if params:
            p.update({f"fitted.{k}": v for k, v in params.items()})
        try:
            rid = tracking.log_job(args.tracking_uri, args.experiment, f"validate:{csv_path.stem}", p,
                                   metrics, {"simllm.kind": "validation"}, out)
            print(f"MLflow run {rid} ({args.tracking_uri}, experiment {args.experiment})")
        except Exception as e:  # noqa: BLE001
            print(f"simllm-validate: warning: MLflow logging failed ({e}); results are in {out}", file=sys.stderr)
    return {"cases": cases, "summary": summary, "params": params, "out": out}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="simllm-validate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", default=str(DEFAULT_CSV), help="measured points (measured_dev.csv columns)")
    ap.add_argument("--calibration", default="default", help="conf/calibration option to predict with")
    ap.add_argument("--only", default="", help="regex on row ids (e.g. 'GF|TPM')")
    ap.add_argument("--set", nargs="*", default=[], help="overrides for every row, e.g. "
                    "calibration.compute_efficiency=0.7 (with --fit: the start)")
    ap.add_argument("--fit", default="", help="fit one calibration on all rows, write conf/calibration/NAME.yaml")
    ap.add_argument("--max-nfev", type=int, default=30, help="--fit: least_squares evaluations")
    ap.add_argument("--polish", type=int, default=0,
                    help="--fit: then Nelder-Mead on the mean per-metric median |error| (this many evaluations)")
    ap.add_argument("--fit-des-scale", type=float, default=0.3,
                    help="--fit: DES request counts x this while fitting (the final table uses all)")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--conf-dir", default=str(ROOT / "conf"))
    ap.add_argument("--output-dir", default=str(ROOT / "outputs" / "validation"))
    ap.add_argument("--no-tracking", action="store_true")
    ap.add_argument("--tracking-uri", default=f"sqlite:///{ROOT / 'outputs' / 'mlflow.db'}")
    ap.add_argument("--experiment", default="validation")
    return ap


def main(argv=None) -> int:
    from engine.errors import SpecError

    args = parser().parse_args(argv)
    try:
        run(args)
    except (SpecError, FileExistsError, FileNotFoundError) as e:
        print(f"simllm-validate: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
