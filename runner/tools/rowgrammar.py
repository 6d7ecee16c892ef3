"""The benchmark-row grammar of ``simllm-validate``: load, lengths, metric, model, hardware and
framework of one published measurement, read case-insensitively (README, "Benchmark rows").

Pure text -> values; no engine and no Hydra here, so each rule can be tested alone. Every
function returns a value or a ``Skip`` carrying the reason the row cannot be predicted.
"""

import re
from dataclasses import dataclass
from pathlib import Path

CONF = Path(__file__).resolve().parents[2] / "conf"


@dataclass(frozen=True)
class Skip:
    """Why a row cannot be predicted: ``kind`` groups the coverage report, ``detail`` names the cell."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return self.detail


# ------------------------------------------------------------------------------------- load
@dataclass(frozen=True)
class Load:
    """How requests reach the server.

    kind: batch (a static batch of ``value`` requests decoding in lock-step) | concurrency
    (closed loop of ``value`` clients) | rate (Poisson arrivals at ``value`` req/s) | offline (all
    requests at t = 0; ``request_rate=INF``) | server (MLPerf server scenario, rate not stated:
    the highest rate meeting the latency constraints); prompts: requests stated in the row (0 = not).
    """

    kind: str
    value: float = 0.0
    prompts: int = 0


_NUM = r"(\d+(?:\.\d+)?)"


def parse_load(text: str) -> "Load | Skip":
    """The ``batch_or_concurrency`` cell. Grammar (case-insensitive, spaces optional):
    ``N`` | ``batch=N`` | ``bs=N`` -> static batch; ``concurrency=N`` | ``max_concurrency=N`` |
    ``N concurrent`` | ``users=N`` -> closed loop; ``request_rate=R`` | ``rate=R`` | ``qps=R`` |
    ``R req/s`` -> Poisson; ``request_rate=INF`` | ``offline`` | ``inf rate`` | ``all at once`` ->
    offline; ``server`` without a rate -> MLPerf server search. ``(N prompts)`` anywhere gives the
    request count."""
    t = (text or "").strip().lower()
    m = re.search(r"(\d+)\s*(?:prompts|requests|samples)", t)
    prompts = int(m.group(1)) if m else 0
    if re.fullmatch(r"\d+", t):
        return Load("batch", float(t))
    m = re.search(r"\b(?:batch|bs|batch_size)\s*[=:]?\s*(\d+)", t)
    if m:
        return Load("batch", float(m.group(1)), prompts)
    m = (re.search(r"\b(?:max_)?concurrency\s*[=:]?\s*(\d+)", t) or re.search(r"(\d+)\s*concurrent", t)
         or re.search(r"\busers\s*[=:]?\s*(\d+)", t))
    if m:
        return Load("concurrency", float(m.group(1)), prompts)
    m = re.search(r"\b(?:request_rate|rate|qps)\s*[=:]?\s*(inf\w*|" + _NUM + ")", t) \
        or re.search(_NUM + r"\s*(?:req/s|requests?/s|rps|qps)", t)
    if m:
        v = m.group(1)
        if v.startswith("inf"):
            return Load("offline", 0.0, prompts)
        return Load("rate", float(v), prompts)
    if "offline" in t or "inf rate" in t or "all at once" in t:
        return Load("offline", 0.0, prompts)
    if "server" in t:
        return Load("server", 0.0, prompts)
    return Skip("load not understood", f"load '{text}' not understood (batch=N, concurrency=N, "
                "request_rate=R|INF, offline)")


# ----------------------------------------------------------------------------------- lengths
#: Datasets a row may name instead of a length: (mean input, mean output, source). The lengths
#: are drawn from the Sarathi ShareGPT trace's shape rescaled to these means.
DATASETS = {
    "sharegpt": (202, 179, "vLLM/SGLang benchmark ShareGPT sample means quoted by the reference README"),
    # MLPerf v4.1 Llama-2-70B OpenOrca subset: mean output ~290 (README: tokens/s / samples/s);
    # ISL <= 1024 variable, its mean is not in the row: ASSUMED equal to the output's (unverified)
    "openorca": (290, 290, "output mean from the README (tokens/s / samples/s); input mean assumed = output (not stated)"),
}


@dataclass(frozen=True)
class Lengths:
    """Fixed ``prompt``/``output`` token counts, or a named ``dataset`` with mean lengths."""

    prompt: int = 0
    output: int = 0
    dataset: str = ""


def to_int(s):
    """An integer cell (commas and a decimal point allowed), or None."""
    try:
        return int(float(str(s).replace(",", "")))
    except (TypeError, ValueError):
        return None


def parse_lengths(isl: str, osl: str, model: str = "") -> "Lengths | Skip":
    """``input_len`` / ``output_len`` cells: integers, or a dataset name (ShareGPT, OpenOrca) in
    either; a '~N mean' output is the dataset's stated mean (the mixed Mixtral set: ~146)."""
    i, o = to_int(isl), to_int(osl)
    if i and o:
        return Lengths(i, o)
    text = f"{isl} {osl}".lower()
    for name, (pi, po, _) in DATASETS.items():
        if name in text:
            m = re.search(r"~\s*(\d+)\s*mean", str(osl).lower())
            out = int(m.group(1)) if m else po
            if "mixtral" in model.lower() and name == "openorca":
                out = 146       # README: the Mixtral task's mixed dataset, mean output ~146
            return Lengths(pi if name != "openorca" else out, out, name)
    return Skip("lengths not stated", f"lengths not stated ({isl or '-'} / {osl or '-'})")


# ------------------------------------------------------------------------------------ metric
@dataclass(frozen=True)
class Metric:
    """group: ttft | tpot | itl | e2e | throughput | total_throughput | request_throughput;
    stat: mean | p50 | p90 | p99 (the statistic the row reports); scale: measured value x scale
    is in ms (latencies) or tok/s; invert: the value is a rate (tok/s per user) compared as
    1000 / value ms; per_gpu: the row's throughput is per GPU."""

    group: str
    stat: str
    scale: float = 1.0
    invert: bool = False
    per_gpu: bool = False
    stated: bool = True


_GROUPS = (("ttft", "ttft"), ("time_to_first_token", "ttft"), ("tpot", "tpot"), ("itl", "itl"),
           ("inter_token", "itl"), ("e2el", "e2e"), ("e2e", "e2e"), ("end_to_end", "e2e"),
           ("request_latency", "e2e"), ("latency", "e2e"),
           ("total_throughput", "total_throughput"), ("total_token_throughput", "total_throughput"),
           ("request_throughput", "request_throughput"), ("req_s", "request_throughput"),
           ("output_throughput", "throughput"), ("output_tok", "throughput"), ("throughput", "throughput"))


def parse_metric(metric: str, unit: str) -> "Metric | Skip":
    """``metric`` + ``unit`` cells: a metric name (ttft_ms, mean_ttft_ms, p99_itl_ms, tpot_ms,
    e2e_latency_ms, output_throughput_tok_s, total_throughput_tok_s, request_throughput,
    decode_tok_s_per_user) with the statistic as a prefix/suffix (mean, median, p50, p90, p99) or
    in the unit ('ms (mean)'); not stated = the median. Units ms or s; tok/s, 'tok/s/GPU'."""
    m, u = (metric or "").strip().lower(), (unit or "").strip().lower()
    if m in ("decode_tok_s_per_user", "tok_s_per_user", "output_tok_s_per_user"):
        return Metric("tpot", "mean", invert=True)      # a per-user decode rate is 1000 / mean TPOT
    stat, stated = "p50", False
    words = {"mean": "mean", "avg": "mean", "average": "mean", "median": "p50", "p50": "p50",
             "p90": "p90", "p99": "p99"}
    found = [words[w] for w in m.split("_") if w in words] or \
        [words[w] for w in re.findall(r"[a-z0-9]+", u.split("(", 1)[1]) if w in words] if "(" in u else \
        [words[w] for w in m.split("_") if w in words]
    if found:
        stat, stated = found[0], True
    group = next((g for key, g in _GROUPS if key in m), None)
    if group is None:
        return Skip("metric not predicted", f"metric {metric} not predicted")
    scale = 1.0
    if group in ("ttft", "tpot", "itl", "e2e"):
        base = u.split("(")[0].strip() or ("s" if m.endswith("_s") else "ms")
        if base in ("s", "sec", "seconds"):
            scale = 1e3
        elif base not in ("ms", "msec"):
            return Skip("unit not understood", f"unit '{unit}' of {metric}: ms or s")
    per_gpu = ("/gpu" in u or "per_gpu" in m) and "total" not in u
    return Metric(group, stat, scale=scale, per_gpu=per_gpu, stated=stated)


# ------------------------------------------------------------------------------------ model
#: canonical model name (see ``canonical_model``) -> conf/model option, first match
MODEL_ALIASES = (
    (r"^llama-?3(\.1)?-8b", "llama_3_1_8b"), (r"^llama-?3(\.[13])?-70b", "llama_3_1_70b"),
    (r"^llama-?3\.1-405b", "llama_3_1_405b"), (r"^llama-?2-7b|^llama-7b", "llama_2_7b"),
    (r"^llama-?2-13b|^llama-13b", "llama_2_13b"), (r"^llama-?2-70b", "llama_2_70b"),
    (r"^mixtral-8x7b", "mixtral_8x7b"), (r"^qwen-?3-235b", "qwen3_235b_a22b"),
    (r"^qwen-?3-30b", "qwen3_30b_a3b"), (r"^qwen-?3-32b", "qwen3_32b"), (r"^qwen-?2\.5-72b", "qwen2_5_72b"),
    (r"^deepseek-(v3|r1)", "deepseek_v3"), (r"^gpt-oss-120b", "gpt_oss_120b"), (r"^gpt-oss-20b", "gpt_oss_20b"),
    (r"^gpt-?j-6b|^gptj", "gpt_j_6b"),
)
#: quantisation suffixes of model names (Hugging Face / vendor checkpoints) -> precision words
QUANT_SUFFIXES = (("nvfp4", "fp4"), ("fp4", "fp4"), ("fp8", "fp8"), ("w8a8", "fp8"), ("int8", "int8"),
                  ("w8a16", "int8"), ("awq", "int4"), ("gptq", "int4"), ("int4", "int4"), ("w4a16", "int4"))
_DROP = ("instruct", "chat", "hf", "base", "it")


def canonical_model(name: str) -> tuple[str, str]:
    """(canonical name, quantisation word or '') of a model cell: lower case, no organisation
    prefix ('meta-llama/'), no parenthesised notes, '-' separators, 'meta-' dropped, and the
    instruct/chat/hf and quantisation suffixes split off. 'meta-llama/Meta-Llama-3.1-8B-Instruct-FP8'
    -> ('llama-3.1-8b', 'fp8')."""
    s = re.sub(r"\(.*?\)", " ", (name or "").lower())
    s = s.split("/")[-1].strip()
    s = re.sub(r"[\s_]+", "-", s).strip("-")
    s = re.sub(r"^meta-", "", s)
    s = re.sub(r"^llama(\d)", r"llama-\1", s)
    quant = ""
    parts = s.split("-")
    keep = []
    for p in parts:
        q = next((w for suf, w in QUANT_SUFFIXES if p == suf), None)
        if q:
            quant = quant or q
        elif p in _DROP or re.fullmatch(r"v\d+(\.\d+)?", p) and keep and keep[-1].endswith("b"):
            continue
        else:
            keep.append(p)
    return "-".join(keep), quant


def resolve_model(name: str, configs: dict | None = None):
    """(conf/model option or None, config.json path or None, quantisation word). ``configs``:
    {model name: config.json path} the user supplied (--model-config) for models the project lacks."""
    canon, quant = canonical_model(name)
    for key, path in (configs or {}).items():
        if canonical_model(key)[0] == canon:
            return None, path, quant
    exact = re.sub(r"[\s.-]+", "_", (name or "").strip().lower())
    if exact and (CONF / "model" / f"{exact}.yaml").is_file():   # the option's own name
        return exact, None, ""
    # option-style separators in a version ('llama_3_1_8b', 'qwen2_5_72b') read as a dotted one
    canon = re.sub(r"(llama-\d|qwen-?\d)-(\d)-(\d+b)", r"\1.\2-\3", canon)
    opt = next((o for pat, o in MODEL_ALIASES if re.search(pat, canon)), None)
    if opt is not None and not (CONF / "model" / f"{opt}.yaml").is_file():
        opt = None
    return opt, None, quant


# -------------------------------------------------------------------------------- hardware
#: (pattern on the lower-cased cell without parentheses, conf/hardware option or skip reason)
HARDWARE_ALIASES = (
    (r"gb200", "gb200_nvl72"), (r"gh200", "gh200"), (r"b200", "b200"), (r"h200", "h200"),
    (r"h100.*(pcie|nvl)", None), (r"h100", "h100_sxm"), (r"a100.*40\s*gb", None), (r"a100", "a100_sxm_80gb"),
    (r"l40s", "l40s"), (r"mi325x", "mi325x"), (r"mi300x", "mi300x"), (r"gaudi\s*-?3", "gaudi3"),
    (r"tpu\s*-?v5e|v5\s*lite", "tpu_v5e"), (r"tpu\s*-?v5p", "tpu_v5p"), (r"tpu\s*-?v6e|trillium", "tpu_v6e"),
)


def resolve_hardware(name: str) -> "str | Skip":
    """conf/hardware option of a hardware cell ('H100 80GB HBM3', 'H100-SXM5-80GB (DGX H100)',
    'NVIDIA H200 141GB', 'AMD MI300X-192GB'), case-insensitive; vendor suffixes in parentheses are
    ignored (a power cap such as '(330W cap)' is not modelled)."""
    full = (name or "").lower()
    t = re.sub(r"\(.*?\)", " ", full)
    for pat, opt in HARDWARE_ALIASES:
        if re.search(pat, full if opt is None else t):   # PCIe/NVL/40GB variants: anywhere
            if opt and (CONF / "hardware" / f"{opt}.yaml").is_file():
                return opt
            break
    return Skip("no hardware config", f"no hardware config for '{name}'")


# ------------------------------------------------------------------------------- precision
def dtype_overrides(precision: str, quant: str = "") -> "list | Skip":
    """Config overrides of a precision cell (or of the model name's quantisation suffix when the
    cell is empty): bf16/fp16 -> none; fp8 (w+a+KV); int8 / int4 weight-only (group from 'gNN',
    default 128); fp4 (NVFP4: 4-bit weights and activations, fp8 scale per 16, FP8 KV)."""
    p = (precision or quant or "bf16").lower()
    if "int4" in p:
        g = re.search(r"g(\d+)", p)
        return ["model.weight_dtype=int4", f"model.weight_group_size={g.group(1) if g else 128}"]
    if "int8" in p:
        return ["model.weight_dtype=int8"]
    if "fp4" in p:
        return ["model.weight_dtype=fp4", "model.activation_dtype=fp4", "model.kv_dtype=fp8",
                "model.weight_group_size=16", "model.weight_scale_dtype=fp8"]
    if "fp8" in p:
        return ["model.weight_dtype=fp8", "model.activation_dtype=fp8", "model.kv_dtype=fp8"]
    if "bf16" in p or "fp16" in p or "float16" in p:
        return []
    return Skip("precision not mapped", f"precision '{precision}' not mapped")


def precision_class(precision: str, quant: str = "") -> str:
    """The precision group of the error report: fp4 | fp8 | int8 | int4 | 16-bit."""
    p = (precision or quant or "bf16").lower()
    for w in ("int4", "int8", "fp4", "fp8"):
        if w in p:
            return w
    return "16-bit"


# ------------------------------------------------------------------------------- framework
def stated_settings(notes: str) -> dict:
    """Framework settings a row's notes state, as framework-profile overrides:
    'kv_cache_free_gpu_mem_fraction 0.95' -> kv_usable_fraction (TensorRT-LLM's fraction of the
    memory free after weights, the profile's meaning); 'CUDA graphs padding enabled' ->
    cuda_graph_padding true."""
    n = (notes or "").lower()
    out = {}
    m = re.search(r"kv_cache_free_gpu_mem(?:ory)?_frac(?:tion)?\s*[=:]?\s*(0?\.\d+)", n)
    if m:
        out["kv_usable_fraction"] = float(m.group(1))
    if re.search(r"cuda[ -]?graphs?\s+padding\s+enabled", n):
        out["cuda_graph_padding"] = "true"
    return out



def _version(text: str):
    m = re.search(r"(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def pick_framework(framework: str, version: str) -> tuple[str, str]:
    """(conf/framework profile, why) from the framework and version cells: TensorRT-LLM ->
    trtllm (< 1.0 and not the PyTorch backend: trtllm_v0); SGLang -> sglang (< 0.4: sglang_v03); vLLM >= 0.8 -> vllm_v1 (V1 engine the default), < 0.8 -> vllm_v0,
    an MLPerf v4.x submission (2024) -> vllm_v0, no version -> vllm_v1; gpt-fast -> gpt_fast;
    anything else -> generic."""
    f = (framework or "").lower()
    if "tensorrt" in f or "trt-llm" in f or "trtllm" in f:
        v = None if "mlperf" in (version or "").lower() else _version(version)   # MLPerf v4.x: 0.x engines
        if "pytorch" in f or v is None and "mlperf" not in (version or "").lower() or v is not None and v >= (1, 0):
            return "trtllm", "TensorRT-LLM >= 1.0 (PyTorch backend)"
        return "trtllm_v0", "TensorRT-LLM < 1.0 (TensorRT-engine flow, C++ executor)"
    if "sglang" in f:
        v = _version(version)
        if v is not None and v < (0, 4):
            return "sglang_v03", f"SGLang {v[0]}.{v[1]} < 0.4 (no overlap scheduler)"
        return "sglang", "SGLang"
    if "vllm" in f:
        v = _version(version)
        if v is not None and "mlperf" not in (version or "").lower():
            return ("vllm_v1", f"vLLM {v[0]}.{v[1]} >= 0.8") if v >= (0, 8) else ("vllm_v0", f"vLLM {v[0]}.{v[1]} < 0.8")
        if re.search(r"mlperf\s*v?4", (version or "").lower()):
            return "vllm_v0", "vLLM in an MLPerf v4.x submission (2024, V0 engine)"
        return "vllm_v1", "vLLM, version not stated: the V1 engine"
    if "gpt-fast" in f or "gpt_fast" in f or "pytorch native" in f:
        return "gpt_fast", "PyTorch-native gpt-fast (torch.compile)"
    return "generic", f"no profile for '{framework}': generic"


# -------------------------------------------------------------------------------- harness
#: words a row may name the harness that deployed the server by (a ``harness`` cell, or the
#: notes) -> a key of HARNESSES
HARNESS_ALIASES = (
    (r"aiconfigurator[ _-]agg|aiconfigurator silicon e2e, agg", "aiconfigurator_agg"),
)
#: Deployment harnesses whose engine settings differ from the framework's defaults. A harness
#: fixes the engine's limits from the benchmark point; "none" leaves the framework profile's.
#: aiconfigurator_agg: the aggregated deployments aiconfigurator generates for its benchmark
#: sweeps (ai-dynamo/aiconfigurator, Apache-2.0: src/aiconfigurator/generator/rule_plugin/
#: benchmark/{vllm,trtllm,sglang}.rule, mapped to engine flags by generator/config/
#: backend_config_mapping.yaml). With max_batch_size = the concurrency N (the sample's batch
#: size per worker):
#:   vLLM          --max-num-seqs N, --max-num-batched-tokens N + ISL + 1500,
#:                 CUDA graphs captured for every batch size 1..N;
#:   TensorRT-LLM  max_batch_size N, max_num_tokens N + ISL + 1500 rounded up to the 32-token
#:                 KV block, CUDA graphs 1..N, whole prompts: the engine-args templates set
#:                 enable_chunked_prefill default(false) and the benchmark rule sets none (a
#:                 prompt joins an iteration only if all of it fits the budget left). With the
#:                 host terms refitted under each, whole prompts level the sample's TensorRT-LLM
#:                 TPOT bias across concurrency (signed median -4 % at 32-128 clients against -9 %
#:                 chunked) and its TTFT bias from 8 to 64 clients (-10 to +6 % against -3 to
#:                 +23 %); 128 clients stay short either way. Its
#:                 kv_cache_config.free_gpu_memory_fraction defaults to 0.80 in the engine-args
#:                 template of TensorRT-LLM 1.0.0rc3 (generator/config/backend_templates/trtllm/extra_engine_args.1.0.0rc3.yaml.j2;
#:                 the generator passes none of its own), not TensorRT-LLM's 0.9: the KV pool is
#:                 0.8 of the memory left after the model and the profiling pass; the template of
#:                 1.2.0rc6.post1 (extra_engine_args.1.2.0rc6.post1.yaml.j2) defaults to 0.90,
#:                 so rows of 1.2 and later get 0.9 (the releases between are taken as 1.0's);
#:   SGLang        --max-running-requests N, --max-prefill-tokens ISL + 1500, CUDA graphs 1..N.
#:                 The rule also sets --enable-mixed-chunk (running decodes ride in the prefill
#:                 batch: the decode-first chunked policy, engine.des.schedulers.sarathi), but the
#:                 sample's SGLang rows contradict it: with mixed chunks the DES puts their mean
#:                 TTFT 71 % short (signed median, 84 points) against 1 % with SGLang's separate
#:                 prefill batches, so the profile's prefill-first policy stays.
HARNESSES = ("none", "aiconfigurator_agg")
#: the rules' token headroom over one prompt (max_num_tokens = batch + ISL + 1500)
AIC_TOKEN_HEADROOM = 1500
#: the TensorRT-LLM engine-args templates' kv_cache_config.free_gpu_memory_fraction default:
#: 0.80 (1.0.0rc3's template), 0.90 from 1.2 (1.2.0rc6.post1's template)
AIC_TRTLLM_KV_FRACTION = 0.8
#: the TensorRT-LLM engine-args templates' enable_chunked_prefill (false: whole prompts)
AIC_TRTLLM_CHUNKED = False
AIC_TRTLLM_KV_FRACTION_1_2 = 0.9


def parse_harness(cell: str, notes: str = "") -> str:
    """The deployment harness of a row: its ``harness`` cell, else a harness the notes name
    (HARNESS_ALIASES); 'none' when neither does."""
    text = (cell or "").strip().lower()
    if text in HARNESSES:
        return text
    hay = text or (notes or "").lower()
    return next((h for pat, h in HARNESS_ALIASES if re.search(pat, hay)), "none")


def harness_settings(harness: str, framework: str, users: int, prompt_len: int, version: str = "") -> dict:
    """The engine settings (``framework.*`` override keys -> values) that
    harness ``harness`` deploys ``framework`` (its release ``version``, as the row states it) with
    for a point of ``users`` concurrent requests of ``prompt_len`` tokens ({} for 'none', an
    unknown framework or no concurrency). The budget is in tokens per iteration; the graph list
    every batch size up to the batch limit."""
    if harness != "aiconfigurator_agg" or users < 1 or prompt_len < 1:
        return {}
    graphs = "[" + ",".join(str(b) for b in range(1, users + 1)) + "]"
    budget = users + prompt_len + AIC_TOKEN_HEADROOM
    extra: dict = {}
    if framework in ("vllm_v1", "vllm_v0"):
        tokens = budget
    elif framework in ("trtllm", "trtllm_v0"):
        tokens = -(-budget // 32) * 32
        v = _version(version)
        frac = AIC_TRTLLM_KV_FRACTION_1_2 if v is not None and v >= (1, 2) else AIC_TRTLLM_KV_FRACTION
        extra = {"framework.kv_usable_fraction": frac, "framework.chunked_prefill": AIC_TRTLLM_CHUNKED}
    elif framework in ("sglang", "sglang_v03"):
        tokens = prompt_len + AIC_TOKEN_HEADROOM         # max_prefill_tokens
    else:
        return {}
    return {"framework.max_num_seqs": users, "framework.max_num_batched_tokens": tokens,
            "framework.cuda_graph_sizes": graphs, **extra}


# --------------------------------------------------------------------------------- client
#: words a row may name its benchmark client by -> workload.client profile (engine.des.workload.clients)
CLIENT_ALIASES = (
    (r"vllm[ _-]?bench|benchmark_serving|vllm bench serve", "vllm_bench"),
    (r"sglang[ _-]?bench|bench_serving", "sglang_bench"),
    (r"aiperf|genai[ _-]?perf|nim[ _-]?bench", "aiperf"),
    (r"guidellm", "guidellm"),
    (r"inference[ _-]?perf", "inference_perf"),
)


def parse_client(cell: str, notes: str = "") -> str:
    """The benchmark client of a row: its ``client`` cell, else ``client=<name>`` in its notes;
    a profile name (vllm_bench, sglang_bench, aiperf, guidellm, inference_perf, none) or a tool's
    own name (benchmark_serving, genai-perf, GuideLLM, ...). '' = not stated."""
    from engine.spec.workload import CLIENTS

    text = (cell or "").strip().lower()
    if not text:
        m = re.search(r"\bclient\s*[=:]\s*([a-z0-9_.-]+)", (notes or "").lower())
        text = m.group(1) if m else ""
    if not text:
        return ""
    if text in CLIENTS:
        return text
    return next((c for pat, c in CLIENT_ALIASES if re.search(pat, text)), "")
