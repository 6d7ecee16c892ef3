"""The ``simllm-validate`` console script: predicted vs published measurements, row by row.

    simllm-validate                                   # ../shared/data/reference/measured_dev.csv, calibration=default
    simllm-validate --csv my_benchmarks.csv --no-tracking --model-config Qwen2.5-7B=path/config.json
    simllm-validate --fit default --force             # fit ONE calibration on the whole set, write conf/calibration/NAME.yaml
    simllm-validate --half-split                      # fit on half the rows, report the error on the other half

Each row of the CSV (columns as in measured_dev.csv; the grammar of each cell is in
``runner.tools.rowgrammar`` and the README's "Benchmark rows" section) becomes one prediction:

* batch rows (``1``, ``batch=N``) with fixed lengths go through the analytical engine (all requests
  start together, lock-step decode); a per-user decode rate is compared as 1000 / TPOT;
* ``concurrency=N`` rows: the DES with a closed loop of N clients as benchmark tools run them
  (users ramping up over ``CLOSED_RAMP_S``, measurement after the ramp and before the drain);
* ``request_rate=R`` rows: the DES with Poisson arrivals at R req/s; ``request_rate=INF`` and
  offline rows: every request queued at t = 0;
* MLPerf ``server`` rows without a rate: the highest Poisson rate whose p99 TTFT and TPOT meet the
  scenario's constraints (``MLPERF_SERVER``), found by bisection; the row's metric at that rate;
* a dataset named instead of lengths (ShareGPT, OpenOrca): lengths drawn from the Sarathi ShareGPT
  trace's shape rescaled to the dataset's means (``rowgrammar.DATASETS``).

The serving framework profile (conf/framework/) comes from the row's framework and version
(``rowgrammar.pick_framework``); a missing TP layout ("submitter-chosen") takes the smallest power
of two whose weights leave half of each GPU's memory for KV, and the row's GPUs beyond one replica
run as data-parallel replicas. Metrics are compared like with like: a published mean with the
simulated mean, a median or unstated statistic with the simulated median, p90/p99 with the same
percentile. Errors are signed, predicted / measured - 1; the summary gives median and max |error|
per metric, per framework profile and per precision, and the coverage (predicted N of M rows,
skipped by reason). Results go to stdout, to outputs/validation/TIME/ (table.csv, report.md,
summary.json) and to an MLflow run.

``--fit NAME`` fits compute, memory-bandwidth and communication efficiency and the overheads
(scipy.optimize.least_squares, soft-L1 on log errors, each metric weighted the same) to all
expressible rows at once - one calibration for the whole set, never per row - and writes
conf/calibration/NAME.yaml. ``--half-split`` fits the same way on every other row (sorted by id)
and reports the error on the rows it did not see, so over-fitting shows.
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
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from runner import paths
from runner.tools import rowgrammar as rg
from runner.tools.cli import add_quiet, count_type, guard, positive_type

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CSV = paths.shared_file("reference", "measured_dev.csv")     # $SIMLLM_SHARED_DATA overrides
SHAREGPT_TRACE = "sarathi_sharegpt_8k_filtered_llama2tok.csv"

#: gpt-fast generate.py's default max_new_tokens (the README does not state the output length).
GPT_FAST_OUTPUT = 200
#: Metric groups of the error summary (itl and decode speed go with tpot; total and request
#: throughput with throughput).
GROUPS = ("ttft", "tpot", "e2e", "throughput")
_REPORT_GROUP = {"ttft": "ttft", "tpot": "tpot", "itl": "tpot", "e2e": "e2e", "throughput": "throughput",
                 "total_throughput": "throughput", "request_throughput": "throughput"}
#: Closed-loop rows: clients ramp up over this many seconds (user i of N starts at i x W / N) and
#: the summary leaves out the ramp and the drain (engine.des ramp_up_s, warmup_s, exclude_drain).
CLOSED_RAMP_S = 2.0
#: ... and fixed-length requests differ slightly (+-5 %: a random prompt of N tokens re-tokenises
#: to about N; vLLM bench --random-range-ratio): identical requests admitted together would
#: otherwise finish together and the closed loop would run in waves.
CLOSED_LENGTH_JITTER = 0.05
#: MLPerf Inference server-scenario constraints (p99 TTFT ms, p99 TPOT ms) by model option, from
#: the reference README (Llama-2-70B, v4.1: TTFT p99 <= 2 s, TPOT p99 <= 200 ms).
MLPERF_SERVER = {"llama_2_70b": (2000.0, 200.0)}
#: A model option with the dtype defaults of a 16-bit dense model: the base a user's config.json
#: (--model-config) replaces the architecture of.
HF_BASE_MODEL = "llama_2_7b"


@dataclass
class Case:
    """One row turned into a prediction job (or a skip)."""

    id: str
    metric: str                  # report group: ttft | tpot | e2e | throughput
    measured: float              # ms for latencies, tok/s (or req/s) for throughput
    engine: str = ""             # analytical | des
    overrides: list = field(default_factory=list)
    workload: dict = field(default_factory=dict)
    how: str = ""
    skip: str = ""
    skip_kind: str = ""
    predicted: float = float("nan")
    key: str = ""                # summary key compared with the measurement
    framework: str = ""          # conf/framework profile
    precision: str = ""          # precision class (16-bit | fp8 | int8 | int4 | fp4)
    des: dict = field(default_factory=dict)   # DesSpec fields set for this row
    auto_tp_gpus: int = 0        # > 0: TP not stated, choose it for this many GPUs
    gpus: int = 1
    server: tuple = ()           # MLPerf server constraints (p99 TTFT ms, p99 TPOT ms)

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0 if self.measured and math.isfinite(self.predicted) else float("nan")


def _skip(case: Case, why: rg.Skip) -> Case:
    case.skip, case.skip_kind = why.detail, why.kind
    return case


def _summary_key(m: rg.Metric, engine: str) -> str:
    """The summary key a metric is compared with (analytical runs are lock-step: their p50 is
    every request's value, so it stands for the mean too)."""
    if m.group in ("throughput", "total_throughput", "request_throughput"):
        base = {"throughput": "throughput_tok_s", "total_throughput": "total_throughput_tok_s",
                "request_throughput": "request_throughput_rps"}[m.group]
        return base + ("_per_gpu" if m.per_gpu and m.group == "throughput" else "")
    name = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2e": "e2e_ms"}[m.group]
    stat = m.stat
    if m.group == "itl" and stat == "mean":
        name, stat = "tpot_ms", "mean"     # mean ITL over tokens ~ mean TPOT (no mean of the ITL histogram)
    if engine == "analytical":
        name = "tpot_ms" if name == "itl_ms" else name
        stat = "p50" if stat in ("mean", "p90") else stat
    return f"{name}_{stat}"


def build_case(row: dict, model_configs: dict | None = None) -> Case:
    """The prediction job of one CSV row (or a Case with ``skip`` set and its reason)."""
    rid = row.get("id", "")
    try:
        value = float(str(row.get("value", "")).replace(",", ""))
    except ValueError:
        return _skip(Case(rid, "", float("nan")), rg.Skip("value not a number", f"value '{row.get('value')}' not a number"))
    m = rg.parse_metric(row.get("metric", ""), row.get("unit", ""))
    if isinstance(m, rg.Skip):
        return _skip(Case(rid, row.get("metric", ""), value), m)
    measured = 1000.0 / value if m.invert else value * m.scale
    case = Case(rid, _REPORT_GROUP[m.group], measured)
    hw = rg.resolve_hardware(row.get("hardware", ""))
    if isinstance(hw, rg.Skip):
        return _skip(case, hw)
    opt, hf, quant = rg.resolve_model(row.get("model", ""), model_configs)
    if opt is None and hf is None:
        return _skip(case, rg.Skip("no model config", f"no model config for '{row.get('model')}' "
                                   "(--model-config NAME=path/to/config.json adds one)"))
    dt = rg.dtype_overrides(row.get("precision", ""), quant)
    if isinstance(dt, rg.Skip):
        return _skip(case, dt)
    case.precision = rg.precision_class(row.get("precision", ""), quant)
    load = rg.parse_load(row.get("batch_or_concurrency", ""))
    if isinstance(load, rg.Skip):
        return _skip(case, load)
    lengths = rg.parse_lengths(row.get("input_len", ""), row.get("output_len", ""), row.get("model", ""))
    gpus = rg.to_int(row.get("num_gpus")) or 1
    tp, pp = rg.to_int(row.get("tp")), rg.to_int(row.get("pp")) or 1
    model_ov = [f"model={opt}"] if opt else [f"model={HF_BASE_MODEL}", f"model.hf_config={hf}"]
    ov = [f"hardware={hw}", *model_ov, *dt]
    if tp is None:
        case.auto_tp_gpus = gpus
    else:
        ov.append(f"partition.tp={tp}")
    if pp > 1:
        ov.append(f"partition.pp={pp}")
    fw, fw_why = rg.pick_framework(row.get("framework", ""), row.get("framework_version", ""))
    case.framework = fw
    ov.append(f"framework={fw}")
    if fw == "vllm_v1" and _small_gpu_for_vllm(hw):
        # vLLM V1's API-server defaults below 70 GiB or on A100: 2048 tokens, 256 sequences
        ov += ["engine.des.max_num_batched_tokens=2048", "engine.des.max_num_seqs=256"]
        fw_why += "; < 70 GiB or A100: 2048 tokens, 256 seqs"
    stated = rg.stated_settings(row.get("notes", ""))
    ov += [f"framework.{k}={v}" for k, v in stated.items()]
    if stated:
        fw_why += "; the row states " + ", ".join(f"{k}={v}" for k, v in stated.items())
    case.gpus = gpus
    latency = m.group in ("ttft", "tpot", "itl", "e2e")
    notes = [] if m.stated or m.invert or not latency else ["statistic not stated: compared with the median"]
    if hf:
        notes.append(f"architecture from {hf}")
    # ---- analytical: batch 1 (decode speed, first-token latency) and static batches
    if load.kind == "batch" and (m.invert or isinstance(lengths, rg.Lengths) and not lengths.dataset
                                 or (load.value == 1 and m.group == "ttft")):
        isl = lengths.prompt if isinstance(lengths, rg.Lengths) else rg.to_int(row.get("input_len"))
        osl = lengths.output if isinstance(lengths, rg.Lengths) else rg.to_int(row.get("output_len"))
        if not isl:
            return _skip(case, rg.Skip("lengths not stated", f"input length not stated ({row.get('input_len')})"))
        if not osl:
            if not (m.invert or m.group == "ttft"):
                return _skip(case, rg.Skip("lengths not stated", f"output length not stated ({row.get('output_len')})"))
            osl = GPT_FAST_OUTPUT if m.invert else 1
            notes.append("output length not stated: " + ("gpt-fast default max_new_tokens" if m.invert else "1"))
        b = int(load.value)
        case.engine = "analytical"
        case.workload = {"prompt_len": isl, "output_len": osl, "batch_size": b}
        case.overrides = ov
        case.key = _summary_key(m, "analytical")
        case.how = "; ".join([f"analytical {'batch 1' if b == 1 else f'static batch {b}'}, {isl}/{osl}", *notes])
        return case
    if isinstance(lengths, rg.Skip):
        return _skip(case, lengths)
    if load.kind == "batch":
        return _skip(case, rg.Skip("lengths not stated", "a static batch needs fixed lengths (dataset given)"))
    # ---- DES: offline, Poisson rate, closed loop, MLPerf server
    case.engine = "des"
    case.key = _summary_key(m, "des")
    case.overrides = ov
    wl: dict = {}
    if lengths.dataset:
        wl["dataset"] = lengths.dataset
        wl["means"] = (lengths.prompt, lengths.output)
        src = f"{lengths.dataset} ({lengths.prompt}/{lengths.output} mean, ShareGPT trace shape)"
    else:
        wl.update(prompt_len=lengths.prompt, output_len=lengths.output)
        src = f"{lengths.prompt}/{lengths.output}"
    n_default = 1500 if (lengths.prompt + lengths.output) <= 4096 else 600
    if load.kind == "offline":
        n = min(load.prompts or n_default, 2000)
        wl.update(arrival="batch", num_requests=n)
        what = f"offline: {n} requests of {src} at t=0"
    elif load.kind == "rate":
        n = min(load.prompts or 1000, 2000)
        wl.update(arrival="poisson", rate_rps=load.value, num_requests=n)
        what = f"Poisson {load.value:g} req/s, {n} requests of {src}"
    elif load.kind == "concurrency":
        users = int(load.value)
        n = min(max(load.prompts, 6 * users, 200), 4000)
        wl.update(arrival="closed_loop", concurrency=users, num_requests=n)
        case.des = dict(ramp_up_s=CLOSED_RAMP_S, warmup_s=CLOSED_RAMP_S, exclude_drain=True,
                        length_jitter=0.0 if lengths.dataset else CLOSED_LENGTH_JITTER)
        what = (f"closed loop of {users} clients, {n} requests of {src}"
                + ("" if lengths.dataset else f" +-{CLOSED_LENGTH_JITTER:.0%}")
                + f", ramp-up {CLOSED_RAMP_S:g} s, warm-up and drain excluded")
    else:  # server without a rate
        cons = MLPERF_SERVER.get(opt or "")
        if cons is None:
            return _skip(case, rg.Skip("server rate not stated", "server scenario: the rate is not stated and "
                                       "the model's latency constraints are not known"))
        case.server = cons
        n = 1500
        wl.update(arrival="poisson", num_requests=n)
        what = (f"MLPerf server: highest Poisson rate with p99 TTFT <= {cons[0]:g} ms and p99 TPOT <= "
                f"{cons[1]:g} ms, {n} requests of {src}")
    case.workload = wl
    case.how = "; ".join([f"DES {what}, framework {fw} ({fw_why})", *notes])
    return case


@functools.lru_cache(maxsize=32)
def _small_gpu_for_vllm(hw: str) -> bool:
    """vLLM V1 (engine/arg_utils.py get_batch_defaults) uses its small defaults unless the GPU has
    >= 70 GiB and is not an A100."""
    from omegaconf import OmegaConf

    from runner.units import to_si

    cap = to_si("hardware.hbm_capacity", OmegaConf.load(ROOT / "conf" / "hardware" / f"{hw}.yaml").hbm_capacity, "GB")
    return cap < 70 * 2 ** 30 or hw.startswith("a100")


@functools.lru_cache(maxsize=8)
def _trace_shape():
    """(prompt, output) lengths of the Sarathi ShareGPT trace (the shape of the dataset rows)."""
    import polars as pl

    t = pl.read_csv(paths.shared_file("traces", SHAREGPT_TRACE))
    return t["num_prefill_tokens"].to_numpy().astype(float), t["num_decode_tokens"].to_numpy().astype(float)


@functools.lru_cache(maxsize=32)
def _dataset_lengths(n: int, means: tuple, seed: int = 0):
    """n (prompt, output) lengths: rows of the Sarathi ShareGPT trace drawn at random, each column
    scaled to the dataset's ``means`` (prompt >= 1, output >= 2)."""
    p, o = _trace_shape()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(p), size=n)
    pr = np.maximum(1, np.rint(p[idx] * means[0] / p.mean())).astype(np.int64)
    ou = np.maximum(2, np.rint(o[idx] * means[1] / o.mean())).astype(np.int64)
    return pr, ou


def _weights_gb(specs) -> float:
    from engine.analytical.params import param_counts
    from engine.spec import DTYPE_BYTES

    return param_counts(specs.model).total * DTYPE_BYTES[specs.model.weight_dtype] / 1e9


class Runner:
    """Specs per case composed once; ``predict(case, cal)`` with calibration parameters swapped."""

    def __init__(self, calibration: str, des_scale: float = 1.0, extra: tuple = ()):
        self.calibration = calibration
        self.extra = list(extra)     # overrides applied to every row (e.g. calibration.x=...)
        self.des_scale = des_scale   # DES request counts x this (smaller while fitting)
        self._specs = {}

    def specs(self, case: Case):
        if case.id not in self._specs:
            from runner.tools.calibrate import compose
            from runner.convert import des_spec, specs_from_config

            ov = [f"calibration={self.calibration}", "engine=des", *case.overrides, *self.extra]
            cfg = compose(ov)
            specs = specs_from_config(cfg)
            if case.auto_tp_gpus:
                # TP not stated: the smallest power of two whose weights leave half of each GPU's
                # memory for KV (and that divides the heads), at most the row's GPUs
                hbm = specs.hardware.hbm_capacity_bytes / 1e9
                w = _weights_gb(specs)
                tp = 1
                while tp < case.auto_tp_gpus and (w / tp > 0.5 * hbm or specs.model.num_heads % tp):
                    tp *= 2
                ov.append(f"partition.tp={tp}")
                cfg = compose(ov)
                specs = specs_from_config(cfg)
                case.how += f"; TP not stated: TP{tp} (weights {w / tp:.0f} GB of {hbm:.0f} GB per GPU)"
            p = specs.partition
            replicas = max(1, case.gpus // (p.tp * p.pp * p.sp))
            des = des_spec(cfg)
            if case.engine == "des":
                des = replace(des, progress="off", replicas=replicas, **case.des,
                              **({"router": "least_outstanding"} if replicas > 1 else {}))
                if replicas > 1:
                    case.how += f"; {replicas} data-parallel replicas"
            self._specs[case.id] = (specs, des)
        return self._specs[case.id]

    def _stream(self, case: Case, wl: dict):
        """The request stream of a dataset row (None: the WorkloadSpec's own); arrivals from
        ``engine.des.workload.arrivals`` (Poisson seeded 1)."""
        from engine.des.workload import RequestStream, arrivals

        if "dataset" not in wl:
            return None, wl
        n = wl["num_requests"]
        pr, ou = _dataset_lengths(n, tuple(wl["means"]))
        rest = {"prompt_len": int(pr.mean()), "output_len": int(ou.mean())}
        users = wl["concurrency"] if wl["arrival"] == "closed_loop" else 0
        kind = wl["arrival"] if wl["arrival"] in ("poisson", "closed_loop") else "batch"
        arr = arrivals(kind, n, wl.get("rate_rps", 0.0), users=users, rng=1)
        return RequestStream(arrival_s=arr, prompt=pr, output=ou, priority=np.ones(n, np.int8),
                             users=users, source=f"{wl['dataset']} (rescaled Sarathi ShareGPT trace)"), rest

    def _des(self, case: Case, specs, des, wl: dict) -> dict:
        from engine.des import simulate
        from engine.spec import WorkloadSpec

        wl = dict(wl)
        stream, rest = self._stream(case, wl)
        if stream is None:
            wl.pop("means", None)
            sp = replace(specs, workload=WorkloadSpec(**wl))
        else:
            sp = replace(specs, workload=WorkloadSpec(**rest))
        return simulate(sp, des, stream=stream).result.summary

    def _server(self, case: Case, specs, des, wl: dict) -> dict:
        """MLPerf server: bisection on the Poisson rate for the highest one meeting the p99
        constraints (12 steps between 0 and the offline request throughput)."""
        ttft_max, tpot_max = case.server
        off = self._des(case, specs, des, {**wl, "arrival": "batch"})
        hi = float(off.get("request_throughput_rps") or 1.0)
        lo, best = 0.0, None
        for _ in range(12):
            mid = 0.5 * (lo + hi)
            s = self._des(case, specs, des, {**wl, "rate_rps": mid})
            if s.get("ttft_ms_p99", math.inf) <= ttft_max and s.get("tpot_ms_p99", math.inf) <= tpot_max:
                lo, best = mid, s
            else:
                hi = mid
        if best is None:
            return {}
        best = dict(best)
        best["server_rate_rps"] = lo
        return best

    def predict(self, case: Case, params: dict | None = None) -> float:
        from engine.spec import WorkloadSpec

        specs, des = self.specs(case)
        if params:
            cal = {k: v for k, v in params.items() if not k.startswith("framework.")}
            specs = replace(specs, calibration=replace(specs.calibration, **cal))
            fw = params.get(f"framework.{case.framework}.step_overhead_s")
            if fw is not None:
                specs = replace(specs, framework=replace(specs.framework, step_overhead_s=fw))
                if des.framework is not None:
                    des = replace(des, framework=specs.framework)
        wl = dict(case.workload)
        if case.engine == "analytical":
            from engine.analytical import run

            s = run(replace(specs, workload=WorkloadSpec(**wl))).summary
        else:
            if "num_requests" in wl:
                # offline and server rows: the stated (or default) request count per replica, so
                # that DP replicas do not each get a sliver and spend the run draining
                per = (des.replicas or 1) if (wl.get("arrival") == "batch" or case.server) else 1
                wl["num_requests"] = max(100, int(wl["num_requests"] * self.des_scale)) * per
            s = self._server(case, specs, des, wl) if case.server else self._des(case, specs, des, wl)
            if s:
                s = dict(s)
                s["total_throughput_tok_s"] = s.get("throughput_tok_s", math.nan) + s.get("input_throughput_tok_s", math.nan)
        v = s.get(case.key)
        if v is None and case.key == "total_throughput_tok_s" and case.engine == "analytical":
            # a static batch processes prompt + output tokens per request in the same time
            v = s["throughput_tok_s"] * (wl["prompt_len"] + wl["output_len"]) / wl["output_len"]
        return float(v) if v is not None else float("nan")


def read_cases(path, model_configs: dict | None = None) -> list[Case]:
    from engine.errors import SpecError

    try:
        with open(path, newline="", encoding="utf-8") as f:
            return [build_case(r, model_configs) for r in csv.DictReader(f)]
    except UnicodeDecodeError as e:
        raise SpecError("--csv", str(path), f"UTF-8 text (byte {e.object[e.start:e.start + 1]!r} at "
                        f"offset {e.start})") from None
    except csv.Error as e:
        raise SpecError("--csv", str(path), f"a well-formed CSV ({e})") from None


def _stats(errs) -> dict:
    e = np.array(errs, dtype=float)
    return {"n": int(e.size), "median_abs_error": float(np.median(e)) if e.size else float("nan"),
            "max_abs_error": float(e.max()) if e.size else float("nan")}


def summarize(cases: list[Case]) -> dict:
    """Median / max |error| per metric group (only rows with a prediction)."""
    ok = [c for c in cases if not c.skip and math.isfinite(c.error)]
    return {g: _stats([abs(c.error) for c in ok if c.metric == g]) for g in GROUPS}


def breakdown(cases: list[Case], attr: str) -> dict:
    """{value of ``attr`` (framework / precision): {metric group: stats}} over predicted rows."""
    ok = [c for c in cases if not c.skip and math.isfinite(c.error)]
    out: dict = {}
    for v in sorted({getattr(c, attr) for c in ok}):
        out[v] = {g: _stats([abs(c.error) for c in ok if getattr(c, attr) == v and c.metric == g])
                  for g in GROUPS}
        out[v] = {g: s for g, s in out[v].items() if s["n"]}
    return out


def coverage(cases: list[Case]) -> dict:
    """Predicted N of M rows, and the skipped ones counted by reason."""
    pred = sum(1 for c in cases if not c.skip and math.isfinite(c.predicted))
    nopred = sum(1 for c in cases if not c.skip and not math.isfinite(c.predicted))
    reasons = Counter(c.skip_kind for c in cases if c.skip)
    if nopred:
        reasons["no prediction (does not fit in memory / no rate meets the constraints)"] = nopred
    return {"rows": len(cases), "predicted": pred, "skipped": dict(reasons)}


def table_text(cases: list[Case], summary: dict) -> str:
    lines = [f"{'id':<9} {'metric':<10} {'engine':<10} {'measured':>10} {'predicted':>10} {'error':>8}  how"]
    for c in cases:
        if c.skip:
            continue
        unit = "tok/s" if c.metric == "throughput" else "ms"
        lines.append(f"{c.id:<9} {c.metric:<10} {c.engine:<10} {c.measured:>10.4g} {c.predicted:>10.4g} "
                     f"{c.error:>+8.1%}  {unit} ({c.key}); {c.how}")
    lines.append("")
    for g, s in summary.items():
        if s["n"]:
            lines.append(f"{g:<10} n={s['n']:<3} median |error| {s['median_abs_error']:.1%}   max |error| "
                         f"{s['max_abs_error']:.1%}")
    for attr, title in (("framework", "per framework profile"), ("precision", "per precision")):
        lines.append("")
        lines.append(f"median |error| {title}:")
        for v, per in breakdown(cases, attr).items():
            lines.append(f"  {v:<10} " + "  ".join(f"{g} {s['median_abs_error']:.1%} (n={s['n']})"
                                                   for g, s in per.items()))
    cov = coverage(cases)
    lines.append("")
    lines.append(f"coverage: predicted {cov['predicted']} of {cov['rows']} rows" +
                 ("; skipped: " + ", ".join(f"{k} {v}" for k, v in cov["skipped"].items()) if cov["skipped"] else ""))
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
#: A serving framework's host time per iteration beyond the common baseline (scheduler, input
#: preparation: vLLM V0 and SGLang 0.4 spend milliseconds more than CUDA-graphed engines) is the
#: framework's, not the hardware's: ``--fit`` fits the calibration's step overhead (the baseline,
#: pinned by the neutral ``generic`` profile's rows too) plus one ``framework.<profile>.
#: step_overhead_s`` on top of it per named profile with at least this many fitted rows, on all
#: of that profile's rows at once; other profiles keep their value, ``generic`` stays neutral.
MIN_FRAMEWORK_ROWS = 3
FRAMEWORK_STEP = (0.0, 0.02, 1e-3)


def fit_space(use: list) -> dict:
    """The parameters ``--fit`` moves for these rows: FIT_PARAMS plus
    ``framework.<profile>.step_overhead_s`` per named profile (not generic) with enough rows."""
    space = dict(FIT_PARAMS)
    rows = Counter(c.framework for c in use)
    for fw, n in sorted(rows.items()):
        if fw and fw != "generic" and n >= MIN_FRAMEWORK_ROWS:
            space[f"framework.{fw}.step_overhead_s"] = FRAMEWORK_STEP
    return space


def fit_calibration(runner: Runner, cases: list[Case], start: dict, max_nfev: int = 40, log=print,
                    polish: int = 0):
    """One calibration for all expressible rows: least_squares (soft-L1, f_scale 0.1) on the log
    of predicted / measured, each metric weighted to the same total; returns (params, scipy
    result, which also carries ``fit``: the ``engine.calibration.solve`` result with each
    coordinate's 95 % range and identifiability). Efficiencies move in log space, the overheads in
    ms (per token: in 10 us). The least squares is the project's one fitter
    (``engine.calibration.solve.least_squares_fit``, the one ``simllm-calibrate`` uses)."""
    from engine.calibration.solve import least_squares_fit

    # MLPerf server rows are a bisection on the rate (a step function of the parameters, and a
    # dozen DES runs each): evaluated and reported, not fitted
    use = [c for c in cases if not c.skip and not c.server]
    space = fit_space(use)
    names = list(space)

    def enc(k, v):
        unit = space[k][2]
        return math.log(v) if unit == "log" else v / unit

    def dec(u):
        return {k: float(np.exp(v)) if space[k][2] == "log" else float(v) * space[k][2]
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

    lo = np.array([enc(k, space[k][0]) if space[k][2] != "log" or space[k][0] > 0 else 0.0
                   for k in names])
    hi = np.array([enc(k, space[k][1]) for k in names])
    for k in names:   # a profile's current value (its YAML) starts its own step overhead
        if k.startswith("framework.") and k not in start:
            c0 = next(c for c in use if c.framework == k.split(".")[1])
            start[k] = runner.specs(c0)[0].framework.step_overhead_s or 0.5e-3
    u0 = np.clip(np.array([enc(k, start[k]) for k in names]), lo + 1e-6, hi - 1e-6)
    fit = least_squares_fit(resid, names, lo, hi, u0, loss="soft_l1", f_scale=0.1, diff_step=0.01,
                            max_nfev=max_nfev)
    sol = fit.sol
    sol.fit = fit
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
    """The fitted calibration as conf/calibration/NAME.yaml (``runner.calibration_yaml``: one
    layout, paths relative to the project); the kernel backend as composed (``--set``)."""
    from runner.calibration_yaml import calibration_yaml_text, display

    c = base_cfg.calibration
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    err = "; ".join(f"{g} median {s['median_abs_error']:.1%} / max {s['max_abs_error']:.1%} (n={s['n']})"
                    for g, s in summary.items() if s["n"])
    n = sum(1 for x in cases if not x.skip and not x.server)
    fws = sorted(k.split(".")[1] for k in params if k.startswith("framework."))
    header = [f"Default calibration: ONE set of factors fitted by `simllm-validate --fit {name}` ({date}) to all",
              f"{n} fittable rows of {csv_path.name} at once (never per row or model; host time per iteration",
              f"per framework profile on all of that profile's rows: {', '.join(fws) or 'none'}):",
              "least_squares, soft-L1 on log(predicted / measured). Error it reaches (|predicted / measured - 1|):",
              f"  {err}",
              "Noise stays off: the dev set publishes medians and means, no tails to fit a jump diffusion to."]
    prov = (f"simllm-validate --fit on {display(csv_path)} (sha256 {sha}); {n} rows (TTFT, TPOT,\n"
            "throughput; analytical batch-1/static-batch rows, DES offline and serving rows; MLPerf\n"
            f"server rows evaluated, not fitted); kernels={c.kernels}; memory reserve and KV fraction as\n"
            "the seed document (not fitted). Error reached: " + err)
    step = ("fitted: per iteration, every framework (profiles add their own: conf/framework/*.yaml)"
            if fws else "fitted: per iteration (scheduler)")
    fields = [("compute_efficiency", f"{params['compute_efficiency']:.4f}", "fitted (roofline-priced operators)"),
              ("memory_bandwidth_efficiency", f"{params['memory_bandwidth_efficiency']:.4f}", "fitted"),
              ("comm_efficiency", f"{params['comm_efficiency']:.4f}", "fitted"),
              ("memory_reserve", c.memory_reserve, "CUDA context, allocator and framework buffers"),
              ("kv_usable_fraction", c.kv_usable_fraction, ""),
              ("step_overhead", f"{params['step_overhead_s'] * 1e6:.1f} us", step),
              ("per_token_overhead", f"{params['per_token_overhead_s'] * 1e6:.2f} us",
               "fitted: per sequence per step (sampling, detokenise)"),
              ("per_request_overhead", f"{params['per_request_overhead_s'] * 1e6:.1f} us",
               "fitted: once per request (tokenise, admit, respond)"),
              ("launch_overhead", c.get("launch_overhead", "0 us"), "per forward pass; not fitted"),
              ("kernels", c.kernels, "operator prices: roofline | measured | transfer | anchored | auto"),
              ("transfer_exclude", list(c.get("transfer_exclude") or []),
               "kernel table sets the transfer curves are fitted without")]
    return calibration_yaml_text(name, header, prov, fields)


def write_framework_steps(conf_dir: Path, params: dict, csv_path: Path, cases: list[Case]) -> list:
    """Set each fitted profile's ``step_overhead`` line in conf_dir/framework/NAME.yaml to its
    fitted value (the rest of the file untouched); returns the paths written."""
    out = []
    for k, v in sorted(params.items()):
        if not k.startswith("framework."):
            continue
        fw = k.split(".")[1]
        path = Path(conf_dir) / "framework" / f"{fw}.yaml"
        n = sum(1 for c in cases if c.framework == fw and not c.skip and not c.server)
        line = (f"step_overhead: {v * 1e6:.1f} us   # on top of the calibration's; fitted by simllm-validate "
                f"--fit on all {n} rows of this profile in {csv_path.name}")
        text = path.read_text()
        new = re.sub(r"(?m)^step_overhead:.*$", line, text, count=1)
        if new == text and not re.search(r"(?m)^step_overhead:", text):
            new = text.rstrip("\n") + "\n" + line + "\n"
        path.write_text(new)
        out.append(path)
    return out


def _model_config(text: str) -> tuple:
    """--model-config NAME=PATH -> (NAME, PATH); the file must exist."""
    from engine.errors import SpecError

    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not Path(path).is_file():
        raise SpecError("--model-config", text, "NAME=PATH of an existing config.json")
    return name.strip(), str(Path(path).resolve())


def half_split(runner: Runner, cases: list[Case], args) -> dict:
    """Fit one calibration on every other predictable row (sorted by id: rows 0, 2, 4, ...) with
    the ``--fit`` machinery, then report median |error| on that half and on the held-out half.
    The fit starts from the composed calibration (``--calibration``, ``--set``): start it away from
    a calibration fitted on all rows, or the held-out half is not held out."""
    use = sorted((c for c in cases if not c.skip and math.isfinite(c.predicted)), key=lambda c: c.id)
    fit_half, held = use[0::2], use[1::2]
    # MLPerf server rows come from a bisection on the rate: a step function of the parameters that
    # finite differences cannot follow; they are evaluated, not fitted
    fit_rows = [c for c in fit_half if not c.server]
    cal = runner.specs(use[0])[0].calibration
    start = {k: getattr(cal, k) for k in FIT_PARAMS}
    fit_runner = Runner(args.calibration, des_scale=args.fit_des_scale * args.des_scale, extra=args.set)
    fit_runner._specs = runner._specs
    params, _ = fit_calibration(fit_runner, fit_rows, start, max_nfev=args.max_nfev, polish=args.polish,
                                log=lambda *a: print(*a, file=sys.stderr, flush=True))

    def errs(rows):
        out = []
        for c in rows:
            v = runner.predict(c, params)
            out.append(replace(c, predicted=v))
        return summarize(out)

    fit_s, held_s = errs(fit_half), errs(held)
    lines = ["", f"half split: fitted on {len(fit_rows)} rows (every other by id, MLPerf server rows left out), "
                 f"evaluated on those ({len(fit_half)} with server rows) and on the other {len(held)}:",
             "  fitted " + ", ".join(f"{k}={v:.4g}" for k, v in params.items())]
    for g in GROUPS:
        if fit_s[g]["n"] or held_s[g]["n"]:
            lines.append(f"  {g:<10} fit half median |error| {fit_s[g]['median_abs_error']:.1%} (n={fit_s[g]['n']})"
                         f"   held-out half {held_s[g]['median_abs_error']:.1%} (n={held_s[g]['n']})")
    return {"params": params, "fit": fit_s, "held_out": held_s, "text": "\n".join(lines) + "\n"}


def run(args) -> dict:
    from runner.tools.cli import Steps

    names = ["reading the rows", *(["fitting"] if args.fit else []), "predicting",
             *(["half split"] if args.half_split else []), "writing the report",
             *([] if args.no_tracking else ["logging to MLflow"])]
    with Steps(names, "simllm-validate", getattr(args, "quiet", False)) as steps:
        return _run(args, steps)


def _run(args, steps) -> dict:
    from tqdm import tqdm

    from engine.errors import SpecError

    steps.step("reading the rows")
    csv_path = Path(args.csv)
    if not csv_path.is_file():
        raise SpecError("--csv", str(csv_path), "an existing CSV of measured points")
    sha = hashlib.sha256(csv_path.read_bytes()).hexdigest()
    configs = dict(_model_config(x) for x in args.model_config)
    cases = read_cases(csv_path, configs)
    if args.only:
        try:
            cases = [c for c in cases if re.match(args.only, c.id)]
        except re.error as e:
            raise SpecError("--only", args.only, f"a regular expression ({e})") from None
    runner = Runner(args.calibration, des_scale=args.des_scale, extra=args.set)
    params = None
    evals = [0]

    def fit_log(line: str) -> None:      # the fit's lines stay on stdout, around the bar
        evals[0] += 1
        steps.note(f"fitting: evaluation {evals[0]}")
        tqdm.write(line, file=sys.stdout)

    if args.fit:
        steps.step("fitting")
        first = next(c for c in cases if not c.skip)
        cal = runner.specs(first)[0].calibration
        start = {k: getattr(cal, k) for k in FIT_PARAMS}
        fit_runner = Runner(args.calibration, des_scale=args.fit_des_scale * args.des_scale, extra=args.set)
        fit_runner._specs = runner._specs
        params, sol = fit_calibration(fit_runner, cases, start, max_nfev=args.max_nfev, polish=args.polish,
                                      log=fit_log)
    steps.step("predicting")
    for i, c in enumerate(cases):
        steps.note(f"predicting: row {i + 1} of {len(cases)} ({c.id})")
        if not c.skip:
            c.predicted = runner.predict(c, params)
            if not math.isfinite(c.predicted):
                c.how += " [no prediction: does not fit in memory at this calibration; not in the summary]"
    summary = summarize(cases)
    text = table_text(cases, summary)
    if args.half_split:
        steps.step("half split")
    split = half_split(runner, cases, args) if args.half_split else None
    if split:
        text += split["text"]
    steps.step("writing the report")
    print(text)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.output_dir) / stamp
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "table.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "metric", "engine", "measured", "predicted", "signed_error", "how", "skipped",
                    "compared_with", "framework", "precision"])
        for c in cases:
            w.writerow([c.id, c.metric, c.engine, c.measured, c.predicted, c.error, c.how, c.skip,
                        c.key, c.framework, c.precision])
    (out / "report.md").write_text(f"# Validation against {csv_path.name}\n\nsha256 `{sha}`, calibration "
                                   f"`{args.calibration}`" + (f", fitted {params}" if params else "")
                                   + "\n\n```\n" + text + "```\n")
    (out / "summary.json").write_text(json.dumps({
        "csv": str(csv_path), "sha256": sha, "summary": summary, "params": params,
        "calibration": args.calibration, "coverage": coverage(cases),
        "per_framework": breakdown(cases, "framework"), "per_precision": breakdown(cases, "precision"),
        "half_split": {k: v for k, v in (split or {}).items() if k != "text"} or None}, indent=2))
    if args.fit:
        from runner.tools.calibrate import compose

        path = Path(args.conf_dir) / "calibration" / f"{args.fit}.yaml"
        text_y = fitted_yaml(args.fit, params, csv_path, sha, summary, cases,
                             compose([f"calibration={args.calibration}", *args.set]))
        if path.exists() and not args.force and path.read_text() != text_y:
            raise FileExistsError(f"{path} exists and differs; pass --force to overwrite")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text_y)
        (out / f"{args.fit}.yaml").write_text(text_y)
        print(f"wrote {path}")
        for p in write_framework_steps(Path(args.conf_dir), params, csv_path, cases):
            print(f"wrote {p} (step_overhead)")
    if not args.no_tracking:
        from runner import tracking

        steps.step("logging to MLflow")
        metrics = {f"{g}_{k}": v for g, s in summary.items() for k, v in s.items()}
        metrics["rows_predicted"] = coverage(cases)["predicted"]
        if split:
            metrics.update({f"half_split_{g}_median_abs_error": s["median_abs_error"]
                            for g, s in split["held_out"].items() if s["n"]})
        p = {"csv": str(csv_path), "sha256": sha, "calibration": args.calibration,
             "rows": len(cases), "skipped": sum(1 for c in cases if c.skip)}
        if params:
            p.update({f"fitted.{k}": v for k, v in params.items()})
        try:
            args.tracking_uri = args.tracking_uri or tracking.default_uri()
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
    ap.add_argument("--max-nfev", type=count_type(1), default=30, help="--fit: least_squares evaluations")
    ap.add_argument("--polish", type=int, default=0,
                    help="--fit: then Nelder-Mead on the mean per-metric median |error| (this many evaluations)")
    ap.add_argument("--model-config", action="append", default=[], metavar="NAME=PATH",
                    help="a config.json for a model the project has no conf/model for (repeatable)")
    ap.add_argument("--des-scale", type=positive_type, default=1.0,
                    help="DES request counts x this (smaller: faster, noisier)")
    ap.add_argument("--half-split", action="store_true",
                    help="also fit on every other row (by id) and report the error on the rows not fitted")
    ap.add_argument("--fit-des-scale", type=positive_type, default=0.3,
                    help="--fit: DES request counts x this while fitting (the final table uses all)")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--conf-dir", default=str(ROOT / "conf"))
    ap.add_argument("--output-dir", default=str(ROOT / "outputs" / "validation"))
    ap.add_argument("--no-tracking", action="store_true")
    ap.add_argument("--tracking-uri", default=None, help="MLflow store (default: runner.tracking's)")
    ap.add_argument("--experiment", default="validation")
    add_quiet(ap)
    return ap


@guard("simllm-validate")
def main(argv=None) -> int:
    args = parser().parse_args(argv)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
