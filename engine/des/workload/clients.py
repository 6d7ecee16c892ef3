"""Benchmark clients as the tools run them, and their behaviour applied to a run's requests.

A client profile (``WorkloadSpec.client``) fixes what a benchmark tool does around the server:
how its users start (all at once, a *burst*, or ramped), which requests its reported means
leave out (warm-up, drain), how many requests one run sends, whether fixed lengths stay exact,
and how it defines TPOT. ``client_des`` turns a profile into the DesSpec fields the event loop
already reads (ramp_up_s, warmup_s, exclude_drain, length_jitter, tpot_definition) and
``client_requests`` gives its run length; ``none`` leaves the DesSpec as configured (the explicit
engine.des settings).

What each tool does in concurrency mode (``--max-concurrency N`` / ``--concurrency N``), read
from its source:

* ``vllm_bench`` -- vLLM ``vllm bench serve`` (vllm-project/vllm ``vllm/benchmarks/serve.py``,
  v0.10-v0.11; the older ``benchmarks/benchmark_serving.py`` the same): ``request_rate`` defaults
  to inf, so every request is released at once and an ``asyncio.Semaphore(max_concurrency)``
  lets N run: a burst of N at t=0, each next request when one completes. One test prompt runs
  before the benchmark and is not counted. ``--num-prompts`` default 1000. The random dataset's
  ``range_ratio`` defaults to 0.0: lengths in [L(1 - r), L(1 + r)], i.e. exact. Every completed
  request counts; TPOT = (latency - ttft) / (output_len - 1) per request, then mean; ITL is every
  gap between streamed chunks. ``--ramp-up-strategy`` ramps a *request rate*, not the users.
* ``sglang_bench`` -- ``python -m sglang.bench_serving`` (sgl-project/sglang
  ``python/sglang/bench_serving.py``, 0.4-0.5): derived from vLLM's script; the same burst,
  semaphore, 1000 prompts, one uncounted warm-up request and the same TPOT/ITL. Its random
  dataset draws lengths in [max(1, r L), L] with default r = 0.0 (uniform, not exact); a row that
  states fixed ISL/OSL ran with r = 1, which this profile assumes (exact lengths).
* ``aiperf`` -- NVIDIA AIPerf (ai-dynamo/aiperf ``aiperf/timing/request_rate_strategy.py``
  CONCURRENCY_BURST, ``credit_issuing_strategy.py``; 0.1-0.3), the successor of genai-perf
  (NIM's benchmark guide runs genai-perf): credits are issued with no delay under a semaphore of
  N (a burst). A warm-up phase of ``--warmup-request-count`` requests runs first and *all its
  credits return* before the profiling phase starts, so the measured phase starts from an idle
  server with a fresh burst of N: simulated as a plain burst start with nothing excluded.
  ``--request-count`` defaults to 10; aiconfigurator's benchmark sweep (ai-dynamo/aiconfigurator
  ``generator/config/backend_templates/benchmark/bench_run.sh.j2``, ``generator/sflow.py``) runs
  ``--request-count 20 N`` (``MULTI_ROUND`` = 20) with 1-2 N warm-up requests and ISL/OSL stddev
  0: this profile takes that run length. The reported mean is over every profiled request
  (the drain included); "inter_token_latency" = (request_latency - ttft) / (osl - 1) per request
  (``metrics/types/inter_token_latency_metric.py``).
* ``guidellm`` -- GuideLLM (vllm-project/guidellm ``benchmark/profiles/concurrent.py``,
  ``schemas/request_stats.py``; 0.4-0.5): N concurrent streams, ``rampup_duration`` default 0
  (burst), warm-up and cool-down off by default, the run bounded by ``--max-requests`` or
  ``--max-seconds`` (no default count: the caller's ``num_requests``). Its
  ``time_per_output_token_ms`` *includes the first token*: (last token - request start) /
  output tokens (``tpot_definition=per_output_token``); its ``inter_token_latency_ms`` is
  (last - first) / (output - 1), the decode TPOT.
* ``inference_perf`` -- kubernetes-sigs/inference-perf (``config/loadgen/config.py``
  ConcurrentLoadStage, ``reportgen/base.py``; 0.2-0.4): a ``concurrent`` stage of
  ``num_requests`` at ``concurrency_level`` workers started together (burst), no warm-up;
  time_per_output_token = (last chunk - first chunk) / (output tokens - 1) per request (the decode
  TPOT: the event loop's completion is the last token); normalized_time_per_output_token =
  e2e / output tokens; inter_token_latency per gap. Its token times are per content chunk (each
  token of a chunk gets the chunk's time); before upstream's fix (#564) every chunk was
  re-tokenised with a BOS, which counted ~2 tokens per one-token chunk and halved ITL -- a
  reporting artefact of those versions, not modelled.

Burst starts with exact lengths make a closed loop of identical requests run in waves (all N
prefill together, decode together, finish together); the ``none`` settings of
``simllm-validate``'s old closed-loop rows (2 s ramp, +-5 % lengths, warm-up and drain excluded)
broke the waves up, which no tool above does.
"""

from dataclasses import dataclass

import numpy as np

from engine.des.workload.arrivals import ramp_arrivals
from engine.errors import SpecError
from engine.spec.workload import CLIENTS

TPOT_DEFINITIONS = ("decode", "per_output_token")


@dataclass(frozen=True)
class ClientProfile:
    """What a benchmark tool does around the server in concurrency mode.

    start_ramp_s: users start i x this / N (0 = burst: all N at t=0; engine.des.clients.ramp_up_s);
    warmup_s / exclude_drain: the reported means leave out requests arriving in the first
        warmup_s or completing after the last arrival (0 / false = every completed request);
    length_jitter: lengths x U[1 - j, 1 + j] (0 = exact, as a fixed ISL/OSL run);
    requests_per_user: run length as a multiple of the concurrency (0 = ``default_requests``);
    default_requests: the tool's default request count (0 = none: the caller's num_requests);
    tpot_definition: decode = (completion - first token) / (output - 1); per_output_token =
        (completion - arrival) / output (the first token included);
    source: the tool, its version range and the file the behaviour was read from.
    """

    name: str
    start_ramp_s: float = 0.0
    warmup_s: float = 0.0
    exclude_drain: bool = False
    length_jitter: float = 0.0
    requests_per_user: int = 0
    default_requests: int = 0
    tpot_definition: str = "decode"
    source: str = ""


#: The profiles (module docstring: what each tool does, and where that was read).
PROFILES: dict[str, ClientProfile] = {p.name: p for p in (
    ClientProfile("vllm_bench", default_requests=1000,
                  source="vLLM bench serve (vllm/benchmarks/serve.py, v0.10-0.11)"),
    ClientProfile("sglang_bench", default_requests=1000,
                  source="sglang.bench_serving (python/sglang/bench_serving.py, 0.4-0.5), --random-range-ratio 1"),
    ClientProfile("aiperf", requests_per_user=20,
                  source="AIPerf 0.1-0.3 / genai-perf as aiconfigurator's sweep runs it (bench_run.sh.j2: "
                         "--concurrency N --request-count 20N, warm-up drained before profiling)"),
    ClientProfile("guidellm", tpot_definition="per_output_token",
                  source="GuideLLM 0.4-0.5 concurrent profile (rampup 0, no warm-up; TPOT with the first token)"),
    ClientProfile("inference_perf",
                  source="inference-perf 0.2-0.4 concurrent load stage (reportgen/base.py TPOT, per-gap ITL)"),
)}


def profile(name: str) -> ClientProfile | None:
    """The profile called ``name`` (None for ``none``); SpecError naming the known ones."""
    if name == "none":
        return None
    if name not in PROFILES:
        raise SpecError("workload.client", name, f"one of {', '.join(CLIENTS)}")
    return PROFILES[name]


def client_des(des, name: str):
    """``des`` (DesSpec) with the client fields of profile ``name`` (ramp_up_s, warmup_s,
    exclude_drain, length_jitter, tpot_definition); unchanged for ``none``. The profile wins over
    those engine.des settings (use client=none to set them by hand)."""
    f = profile_fields(name)
    return des.with_(clients=f) if f else des


def profile_fields(name: str) -> dict:
    """The engine.des.clients fields client ``name`` sets ({} for ``none``)."""
    p = profile(name)
    if p is None:
        return {}
    return dict(ramp_up_s=p.start_ramp_s, warmup_s=p.warmup_s, exclude_drain=p.exclude_drain,
                length_jitter=p.length_jitter, tpot_definition=p.tpot_definition)


def client_requests(name: str, users: int, fallback: int = 0) -> int:
    """Requests one run of client ``name`` sends at ``users`` concurrency: requests_per_user x
    users, else the tool's default count, else ``fallback`` (``none``: fallback)."""
    p = profile(name)
    if p is None:
        return fallback
    if p.requests_per_user:
        return p.requests_per_user * max(users, 1)
    return p.default_requests or fallback


def apply_clients(st, des, users: int) -> np.random.Generator:
    """Client behaviour of ``des`` (DesSpec.clients: ramp_up_s, length_jitter, tpot_definition) applied to
    the state's request arrays before the loop runs (copies; the caller's stream is untouched).
    Returns the generator the loop draws exponential think times from. Seeded from ``des.seed``
    (sub-streams 1: lengths, 2: think times), so turning a client option on does not move the
    request stream (workload.seed). A TPOT definition other than ``decode`` is left on the state
    for ``engine.des.metrics.request_table``."""
    ss = np.random.SeedSequence([des.seed, 12])
    r_len, r_think = (np.random.default_rng(s) for s in ss.spawn(2))
    j = des.clients.length_jitter
    if j > 0:
        n = st.n
        f = r_len.uniform(1.0 - j, 1.0 + j, size=(2, n))
        st.prompt = np.maximum(1, np.rint(st.prompt * f[0])).astype(np.int64)
        st.output = np.maximum(1, np.rint(st.output * f[1])).astype(np.int64)
    if des.clients.ramp_up_s > 0 and not users:
        order = np.argsort(st.arrival, kind="stable")
        arr = st.arrival.copy()
        arr[order] = ramp_arrivals(st.arrival[order], des.clients.ramp_up_s)
        st.arrival = arr
    if des.clients.tpot_definition != "decode":
        st.tpot_definition = des.clients.tpot_definition
    return r_think


__all__ = ["apply_clients", "client_des", "profile_fields", "client_requests", "profile", "ClientProfile", "PROFILES",
           "TPOT_DEFINITIONS"]
