"""DesSpec: the serving system the discrete-event engine simulates (scheduler, KV cache, cluster).

Defaults live in ``conf/engine/des.yaml``; the values here only make the dataclass usable from a
notebook and mirror that file.
"""

from dataclasses import dataclass

from engine.errors import SpecError
from engine.spec._check import non_negative, one_of, positive, positive_int

SCHEDULERS = ("vllm", "sarathi", "orca")
QUEUE_POLICIES = ("fcfs", "priority", "sjf")
ADMISSIONS = ("always", "token_bucket")
ROUTERS = ("round_robin", "least_outstanding", "least_kv", "prefix_affinity")
PROGRESS = ("auto", "on", "off")


@dataclass(frozen=True)
class DesSpec:
    """Scheduler, KV-cache and cluster settings of a simulated deployment.

    scheduler: vllm (prefill-prioritised continuous batching: an iteration is either whole
        prompts or decodes), sarathi (chunked prefill: decodes first, then prompt chunks up to the
        token budget), orca (iteration-level: decodes plus whole prompts; KV for prompt + output
        reserved on admission, so never preempts);
    token budget per iteration = max_num_batched_tokens (sarathi: min(that, chunk_size));
    queue_policy: fcfs | priority (SLO class, then arrival) | sjf (shortest prompt first);
    block_size: tokens per KV page; num_kv_blocks: 0 = from the memory model;
    watermark: fraction of KV blocks kept free when admitting (vLLM's watermark);
    preemption: recompute (drop the KV, prefill again) | swap (a decoding sequence's KV to host
        memory and back over a host link of swap_bandwidth_gb_s per device; host memory unbounded);
    admission: always | token_bucket (bucket_rate_rps refill, bucket_size burst; rejects counted);
    replicas: data-parallel replicas (0 = partition.dp) behind ``router``;
    prefill_replicas: > 0 disaggregates: that many of the replicas only prefill and hand each
        prompt's KV to one of the others, which only decode (hand-off time from
        engine.analytical.disagg with the engine.analytical.disagg link); 0 = co-located;
    prefix_caching: reuse KV of shared prefix blocks (requests with hash ids), LRU eviction;
    slo_ttft_ms / slo_tpot_ms: goodput counts requests meeting both;
    max_decode_run: most decode iterations advanced in one event (closed-form series);
    seed: engine-side randomness, for a step-time noise callable built by the caller (the request
        stream draws from ``WorkloadSpec.seed``).
    """

    scheduler: str = "vllm"
    queue_policy: str = "fcfs"
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunk_size: int = 512
    block_size: int = 16
    num_kv_blocks: int = 0
    watermark: float = 0.01
    preemption: str = "recompute"
    swap_bandwidth_gb_s: float = 50.0
    admission: str = "always"
    bucket_rate_rps: float = 0.0
    bucket_size: float = 0.0
    replicas: int = 0
    prefill_replicas: int = 0
    router: str = "round_robin"
    prefix_caching: bool = False
    slo_ttft_ms: float = 1000.0
    slo_tpot_ms: float = 100.0
    max_decode_run: int = 4096
    record_iterations: bool = False
    progress: str = "auto"
    seed: int = 0

    _group = "engine.des"

    def __post_init__(self):
        g = self._group
        one_of(g, "scheduler", self.scheduler, SCHEDULERS)
        one_of(g, "queue_policy", self.queue_policy, QUEUE_POLICIES)
        one_of(g, "admission", self.admission, ADMISSIONS)
        one_of(g, "preemption", self.preemption, ("recompute", "swap"))
        positive(g, "swap_bandwidth_gb_s", self.swap_bandwidth_gb_s)
        one_of(g, "router", self.router, ROUTERS)
        one_of(g, "progress", self.progress, PROGRESS)
        for f in ("max_num_seqs", "max_num_batched_tokens", "chunk_size", "block_size", "max_decode_run"):
            positive_int(g, f, getattr(self, f))
        positive_int(g, "num_kv_blocks", self.num_kv_blocks, minimum=0)
        positive_int(g, "replicas", self.replicas, minimum=0)
        positive_int(g, "prefill_replicas", self.prefill_replicas, minimum=0)
        positive_int(g, "seed", self.seed, minimum=0)
        if not 0 <= self.watermark < 1:
            raise SpecError(f"{g}.watermark", self.watermark, "a fraction in [0, 1)")
        non_negative(g, "bucket_rate_rps", self.bucket_rate_rps)
        non_negative(g, "bucket_size", self.bucket_size)
        if self.admission == "token_bucket" and (self.bucket_rate_rps <= 0 or self.bucket_size < 1):
            raise SpecError(f"{g}.bucket_rate_rps", self.bucket_rate_rps,
                            "bucket_rate_rps > 0 and bucket_size >= 1 for admission=token_bucket")
        positive(g, "slo_ttft_ms", self.slo_ttft_ms)
        positive(g, "slo_tpot_ms", self.slo_tpot_ms)

    @property
    def token_budget(self) -> int:
        """Tokens one iteration may process."""
        if self.scheduler == "sarathi":
            return min(self.max_num_batched_tokens, self.chunk_size)
        return self.max_num_batched_tokens
