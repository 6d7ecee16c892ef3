"""Rows of measured_dev.csv -> prediction jobs (``Case``): which engine, which overrides, which
workload, which summary key is compared with the measurement, or why the row is skipped.
The grammar of each cell is in ``runner.tools.rowgrammar``."""

import functools
import math
from dataclasses import dataclass, field

from engine.des.workload.clients import PROFILES, client_requests, profile_fields
from runner.compose import CONF
from runner.tools import rowgrammar as rg

#: gpt-fast generate.py's default max_new_tokens (the README does not state the output length).
GPT_FAST_OUTPUT = 200
#: Metric groups of the error summary (itl and decode speed go with tpot; total and request
#: throughput with throughput).
GROUPS = ("ttft", "tpot", "e2e", "throughput")
_REPORT_GROUP = {"ttft": "ttft", "tpot": "tpot", "itl": "tpot", "e2e": "e2e", "throughput": "throughput",
                 "total_throughput": "throughput", "request_throughput": "throughput"}
#: Closed-loop rows with client ``none``: clients ramp up over this many seconds (user i of N
#: starts at i x W / N) and the summary leaves out the ramp and the drain (engine.des ramp_up_s,
#: warmup_s, exclude_drain) ...
CLOSED_RAMP_S = 2.0
#: ... and fixed-length requests differ slightly (+-5 %), which breaks up the waves a burst of
#: identical requests runs in. No benchmark tool does either (engine.des.workload.clients).
CLOSED_LENGTH_JITTER = 0.05
#: The benchmark client of a concurrency row that states none (a ``client`` column or
#: ``client=<name>`` in its notes; engine.des.workload.clients). Chosen by evidence: the serving
#: rows come from aiconfigurator's silicon sweep, whose benchmark scripts run AIPerf (20 N
#: requests after a drained warm-up), and an A/B of the profiles on two spread subsets of
#: serving_dev.csv (20 + 18 points across frameworks, TP and concurrency 8-224; --des-scale 1,
#: the same tree for each; one point of subset 1 does not fit in memory under the current KV
#: rule) ranks it first on TTFT with TPOT level with the best. TTFT median |error| / signed
#: median, then TPOT's, subset 1 | subset 2:
#:   aiperf          27.5 / -5.0,  14.5 / -11.5  |  17.8 / +1.7,  12.3 / -12.3
#:   vllm_bench      40.4 / +0.8,  15.7 / -11.5  |  27.1 / -1.4,  12.4 / -12.4
#:   inference_perf  35.6 / +30.8, 18.0 / -11.5  |  27.4 / +11.5, 14.3 / -14.3
#:   guidellm        35.6 / +30.8, 17.0 / +6.0   |  27.4 / +11.5, 11.9 / -1.5
#:   none            65.9 / -65.9, 18.1 / +0.0   |  70.7 / -70.7, 14.2 / -9.3
#: (the burst start halves the TTFT error or better; the TPOT bias left is the step and host
#: model's, and TensorRT-LLM rows at TP1 keep waves longer than measured).
DEFAULT_CLIENT = "aiperf"
#: Closed-loop rows: at most this many requests (a client's run length, e.g. AIPerf's 20 N, is cut
#: here to bound the DES time; with 6000 at N = 512 the drain is still a small share of the run).
CLOSED_MAX_REQUESTS = 6000
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
    des: dict = field(default_factory=dict)   # DesSpec.clients fields set for this row
    auto_tp_gpus: int = 0        # > 0: TP not stated, choose it for this many GPUs
    gpus: int = 1
    server: tuple = ()           # MLPerf server constraints (p99 TTFT ms, p99 TPOT ms)
    band: str = ""               # load band of its predicted run (engine.uncertainty.regimes.load_band)

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
        ov += ["engine.des.scheduling.max_num_batched_tokens=2048", "engine.des.scheduling.max_num_seqs=256"]
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
        client = rg.parse_client(row.get("client", ""), row.get("notes", "")) or DEFAULT_CLIENT
        wl.update(arrival="closed_loop", concurrency=users)
        harness = rg.parse_harness(row.get("harness", ""), row.get("notes", ""))
        deployed = rg.harness_settings(harness, fw, users, lengths.prompt, row.get("framework_version", ""))
        case.overrides = ov = ov + [f"{k}={v}" for k, v in deployed.items()]
        if client == "none":
            n = min(max(load.prompts, 6 * users, 200), 4000)
            case.des = dict(ramp_up_s=CLOSED_RAMP_S, warmup_s=CLOSED_RAMP_S, exclude_drain=True,
                            length_jitter=0.0 if lengths.dataset else CLOSED_LENGTH_JITTER)
            what = (f"closed loop of {users} clients, {n} requests of {src}"
                    + ("" if lengths.dataset else f" +-{CLOSED_LENGTH_JITTER:.0%}")
                    + f", ramp-up {CLOSED_RAMP_S:g} s, warm-up and drain excluded")
        else:
            n = min(load.prompts or client_requests(client, users, max(6 * users, 200)), CLOSED_MAX_REQUESTS)
            case.des = profile_fields(client)      # also for dataset rows (their stream is built here)
            if m.group == "itl" and m.stat == "mean" and case.des["tpot_definition"] != "decode":
                case.key = "itl_ms_mean"            # its TPOT has the first token; its ITL does not
            wl["client"] = client
            pr = PROFILES[client]
            start = f"{pr.start_ramp_s:g} s ramp" if pr.start_ramp_s else "burst start"
            what = (f"closed loop of {users} clients, {n} requests of {src}, client {client} ({start}"
                    + ("" if pr.length_jitter else ", exact lengths")
                    + (", every request counted" if not (pr.warmup_s or pr.exclude_drain) else "")
                    + (", TPOT with the first token" if pr.tpot_definition != "decode" else "") + ")")
        if deployed:
            what += (f", deployed as {harness} does ({deployed['framework.max_num_seqs']} seqs, "
                     f"{deployed['framework.max_num_batched_tokens']} batched tokens, graphs 1-{users})")
        wl["num_requests"] = n
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
    >= 70 GiB, as the runtime reports it (hbm_capacity x hbm_visible_fraction), and is not an A100."""
    from omegaconf import OmegaConf

    from runner.units import to_si

    node = OmegaConf.load(CONF / "hardware" / f"{hw}.yaml")
    cap = to_si("hardware.hbm_capacity", node.hbm_capacity, "GB") * float(node.get("hbm_visible_fraction", 1.0))
    return cap < 70 * 2 ** 30 or hw.startswith("a100")
