"""FrameworkSpec: the serving framework's behaviour and its physically meaningful host costs.

A named profile per framework and version range (``conf/framework/*.yaml``, each with the upstream
files its defaults come from): how the scheduler forms iterations, its limits, CUDA-graph capture
sizes, preemption, KV paging and the host-side costs that do not scale with the model.

One source of truth with ``engine.des``: the DES scheduler settings that a framework fixes
(scheduler, max_num_seqs, max_num_batched_tokens, chunk_size, block_size, watermark, preemption)
default to ``null`` in ``conf/engine/des.yaml``; a null takes the framework's value here, a value
overrides it (``engine.des.DesSpec.resolve``). So the default lives in one place, the profile.

The neutral profile ``generic`` reproduces the DES as it was before profiles existed (vLLM V0-style
prefill-first scheduler, 256 sequences, 8192-token budget, 16-token blocks, no CUDA-graph padding,
no host costs beyond the calibration's, the engine's all-reduce model, roofline kernels).
"""

from dataclasses import dataclass
from typing import List

from engine.errors import SpecError
from engine.spec._check import non_negative, one_of, positive_int
from engine.spec.meta import param
from engine.spec.scheduling import scheduler_names, scheduler_traits

#: DES iteration policies and their traits: engine.spec.scheduling (``FRAMEWORK_SCHEDULERS`` stays
#: importable: a module attribute computed on access, so a policy declared later is in it).


def __getattr__(name):
    if name == "FRAMEWORK_SCHEDULERS":
        return scheduler_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PREEMPTIONS = ("recompute", "swap", "none")
ALLREDUCES = ("analytical", "one_shot", "two_shot", "nccl")   # engine.cost.allreduce
KERNEL_TABLES = ("none", "trtllm", "vllm", "sglang")
PER_REQUEST_DISTS = ("exponential", "fixed")   # the API server's time per request (engine.des.cluster.loop)


@dataclass(frozen=True)
class FrameworkSpec:
    """A serving framework's profile (all times in seconds, rates in tokens/s).

    name: profile name (generic | vllm_v1 | vllm_v0 | sglang | trtllm | user-defined);
    versions: the framework versions the profile describes, as a PEP 440-style range string
        ('' = any), e.g. ">=0.8,<0.11";
    scheduler: iteration policy, one of FRAMEWORK_SCHEDULERS (see there);
    max_num_seqs: most running sequences per replica (vLLM max_num_seqs, SGLang
        max_running_requests, TensorRT-LLM max_batch_size);
    max_num_batched_tokens: token budget of one iteration (vLLM max_num_batched_tokens, SGLang
        max_prefill_tokens, TensorRT-LLM max_num_tokens);
    chunked_prefill: prompts may be split across iterations;
    chunk_size: most prompt tokens of one prompt in one iteration when chunking (0 = the token
        budget; SGLang chunked_prefill_size);
    cuda_graph_sizes: decode batch sizes captured as CUDA graphs, ascending (empty = no graphs);
    cuda_graph_padding: a decode-only iteration of B <= max(cuda_graph_sizes) sequences runs the
        graph of the next captured size, and costs that batch (padded rows compute and read
        weights like real ones; their attention is empty);
    preemption: recompute | swap | none (never preempts: KV reserved at admission);
    block_size: tokens per KV page;
    kv_usable_fraction: fraction of (HBM - weights - activations - reserve) given to KV;
        0 = the calibration's ``kv_usable_fraction``;
    watermark: fraction of KV blocks kept free when admitting (vLLM V0 watermark);
    step_overhead_s: host time per iteration on top of the calibration's step overhead
        (scheduler, input preparation not hidden behind the GPU);
    per_output_token_s: host time per sequence that emits a token in an iteration (sampling,
        per-request output processing, detokenise, stream), on top of the calibration's
        per-token overhead;
    per_streamed_token_s: host time per sequence that emits a token in an iteration *when its
        request streams* (``workload.streaming``), on top of ``per_output_token_s``: the engine
        loop builds and hands over a response for every streaming request every iteration
        (TensorRT-LLM's PyExecutor ``_handle_responses`` / ``_enqueue_responses`` to the API
        server's proxy), while a request that does not stream gets one response when it finishes
        (trtllm-bench's default, offline throughput runs); like the other per-sequence host work
        it hides behind the GPU by ``host_overlap``;
    per_prefill_token_s: host time per prompt token scheduled in an iteration (token ids,
        positions and KV slot mapping prepared on the host and copied to the device);
    eager_layer_s: host time per decoder layer of a pass that is not replayed from a CUDA graph
        (eager mode: the framework's Python and the runtime dispatch every kernel of the layer
        and prepare its metadata); such a pass adds num_layers x this to its time, like the other
        host terms (engine.analytical.step). Passes with prompt tokens run eagerly in
        TensorRT-LLM's PyTorch backend and SGLang (CUDA graphs hold decode-only batches: up to
        the largest captured size with padding, the captured sizes without); vLLM V1 replays
        piecewise graphs for mixed batches too. 0 = none;
    per_request_s: host time once per request on its way in (API server: parse, tokenise,
        hand-off to the engine core), on top of the calibration's per-request overhead: it delays
        the request's arrival at the scheduler, not the iterations;
    per_request_token_s: host time per prompt token on the request's way in, served by the same
        API server as per_request_s (tokenising the prompt, rendering and copying its token ids
        to the engine core: work proportional to the prompt): the server's time for a request
        of L prompt tokens is per_request_s + L x this; 0 = none;
    per_request_dist: how that API-server time varies from request to request in the DES (one
        server, requests in arrival order: engine.des.cluster.loop): exponential (the default:
        the server's time per request is not a constant -- it shares one event loop with the
        streaming of every running request, tokenises prompts of different text and pauses for
        garbage collection -- and the exponential is the maximum-entropy law of a positive time
        of known mean, so no parameter is added) | fixed (every request takes the mean). The
        mean is the same, so the analytical engine, which adds the mean, is unaffected. The law
        matters under a benchmark client's burst and closed loop: with fixed times the requests
        of a wave reach the scheduler evenly spaced and stay in the same iterations round after
        round; with varying times the waves spread;
    frontend_tok_s: output tokens/s the front end (API server: detokenise and stream) can deliver:
        the DES queues every emitted token behind it (engine.des.frontend; iterations keep their
        price), the analytical decode holds its cycle to it; 0 = no limit;
    allreduce: TP all-reduce implementation (engine.cost.allreduce: formulas and sources):
        analytical (the engine's own model: engine.analytical.allreduce's alpha-beta ring/tree on
        the roofline, the faster of NCCL and the custom kernel on measured tables) | one_shot
        (custom all-reduce, 1 stage: every rank reads all n-1 peers once over NVLink, one latency
        term) | two_shot (custom all-reduce, reduce-scatter + all-gather, two latency terms) | nccl
        (NCCL ring/tree, the faster); measured tables of that implementation where the chip has
        them (custom: the framework's kernel as shipped), the alpha-beta form where not;
    kernel_tables: framework whose measured kernel tables price operators (none | trtllm | vllm |
        sglang; none = roofline), read by the kernel-cost backend;
    sources: URLs / repository paths of the upstream defaults the profile relies on.
    """

    name: str = param("generic", required=True)
    versions: str = ""
    scheduler: str = param("vllm", required=True)
    max_num_seqs: int = param(256, required=True)
    max_num_batched_tokens: int = param(8192, required=True)
    chunked_prefill: bool = False
    chunk_size: int = 512
    cuda_graph_sizes: tuple = param((), config_type=List[int])
    cuda_graph_padding: bool = False
    preemption: str = "recompute"
    block_size: int = 16
    kv_usable_fraction: float = 0.0
    watermark: float = 0.01
    step_overhead_s: float = param(0.0, key="step_overhead", unit="us", zero=True, range=(0.0, 1.0))
    per_output_token_s: float = param(0.0, key="per_output_token_overhead", unit="us", zero=True,
                                      range=(0.0, 1e-2))
    per_streamed_token_s: float = param(0.0, key="per_streamed_token_overhead", unit="us", zero=True,
                                        range=(0.0, 1e-2))
    per_prefill_token_s: float = param(0.0, key="per_prefill_token_overhead", unit="us", zero=True,
                                       range=(0.0, 1e-3))
    eager_layer_s: float = param(0.0, key="eager_layer_overhead", unit="us", zero=True,
                                 range=(0.0, 1e-2))
    per_request_s: float = param(0.0, key="per_request_overhead", unit="us", zero=True,
                                 range=(0.0, 1.0))
    per_request_token_s: float = param(0.0, key="per_request_token_overhead", unit="us", zero=True,
                                       range=(0.0, 1e-3))
    per_request_dist: str = "exponential"
    frontend_tok_s: float = 0.0
    # --- The request's path to its first token (engine.des.replica, engine.des.ahead) ---
    #: schedule_ahead: iterations the engine schedules ahead of the one on the GPU (vLLM V1
    #:     async scheduling, SGLang's overlap scheduler, TensorRT-LLM's overlap scheduler): a
    #:     request that arrives while iteration k runs is first scheduled into iteration
    #:     k + 1 + schedule_ahead (k + 1: a synchronous loop); an idle engine takes it at once;
    #:     0 or 1.
    schedule_ahead: int = 0
    #: host_overlap: the fraction of a pass's host work (scheduling, input preparation, output
    #:     processing: step, per-token and per-prompt-token overheads) that runs beside the GPU's
    #:     pass under an overlap scheduler instead of before it (engine.analytical.step
    #:     ``StepModel.wall``): 0 = all of it serial (a synchronous loop; the default), 1 = all
    #:     beside the GPU (a pass costs max(device, host)); > 0 needs schedule_ahead = 1.
    host_overlap: float = 0.0
    allreduce: str = "analytical"
    kernel_tables: str = "none"
    sources: tuple = param((), config_type=List[str])
    # --- KV capacity and admission (engine.analytical.kvcache.kv_room, engine.des.admission) ---
    #: kv_rule: how the KV cache is sized: free_fraction ((HBM - weights - activations - reserve)
    #:     x kv_usable_fraction, the calibration's when 0; TensorRT-LLM) | total_fraction (vLLM:
    #:     HBM x gpu_memory_utilization - weights - activation peak - runtime and CUDA-graph
    #:     reserves) | static_fraction (SGLang: (HBM - runtime reserve) x mem_fraction_static
    #:     - weights);
    #: gpu_memory_utilization: vLLM's share of all HBM (total_fraction);
    #: mem_fraction_static: SGLang's share of HBM for weights + KV (static_fraction; 0 = SGLang's
    #:     default from chunk_size, the largest CUDA-graph size and tp x pp);
    #: runtime_reserve_bytes: device memory outside the framework's count (CUDA context, NCCL,
    #:     cuBLAS workspaces) [bytes/device]; cuda_graph_reserve_bytes: CUDA-graph pool counted
    #:     before KV is sized [bytes/device];
    #: new_token_ratio: SGLang's admission reserve: a request is admitted when its prompt + its
    #:     output (clipped at clip_max_new_tokens) fits in the free KV less new_token_ratio x the
    #:     clipped remaining output of every running request; 0 = no reserve (vLLM: pages free);
    #:     the ratio decays to new_token_ratio_min over new_token_ratio_decay_steps decode steps
    #:     and is re-estimated on each retraction;
    #: retract_decode_steps: 0 = preempt the newest until the next step fits (vLLM); > 0 = retract
    #:     (fewest output tokens first) until every remaining request has this many steps of room.
    kv_rule: str = "free_fraction"
    gpu_memory_utilization: float = param(0.9, range=(0.0, 1.0))
    mem_fraction_static: float = param(0.0, range=(0.0, 1.0))
    runtime_reserve_bytes: float = param(0.0, key="runtime_reserve", unit="GB", zero=True,
                                         range=(0.0, 1e11))
    cuda_graph_reserve_bytes: float = param(0.0, key="cuda_graph_reserve", unit="GB", zero=True,
                                            range=(0.0, 1e11))
    new_token_ratio: float = param(0.0, range=(0.0, 1.0))
    new_token_ratio_min: float = param(0.0, range=(0.0, 1.0))
    new_token_ratio_decay_steps: int = 600
    clip_max_new_tokens: int = 4096
    retract_decode_steps: int = 0

    _group = "framework"

    def __post_init__(self):
        g = self._group
        object.__setattr__(self, "cuda_graph_sizes", tuple(self.cuda_graph_sizes))
        object.__setattr__(self, "sources", tuple(self.sources))
        if not isinstance(self.name, str) or not self.name:
            raise SpecError(f"{g}.name", self.name, "a non-empty profile name")
        one_of(g, "scheduler", self.scheduler, scheduler_names())
        one_of(g, "preemption", self.preemption, PREEMPTIONS)
        one_of(g, "allreduce", self.allreduce, ALLREDUCES)
        one_of(g, "kernel_tables", self.kernel_tables, KERNEL_TABLES)
        one_of(g, "per_request_dist", self.per_request_dist, PER_REQUEST_DISTS)
        positive_int(g, "max_num_seqs", self.max_num_seqs)
        positive_int(g, "max_num_batched_tokens", self.max_num_batched_tokens)
        positive_int(g, "chunk_size", self.chunk_size, minimum=0)
        positive_int(g, "block_size", self.block_size)
        for name in ("chunked_prefill", "cuda_graph_padding"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(f"{g}.{name}", getattr(self, name), "true or false")
        sizes = self.cuda_graph_sizes
        if any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in sizes) \
                or list(sizes) != sorted(set(sizes)):
            raise SpecError(f"{g}.cuda_graph_sizes", list(sizes),
                            "strictly ascending integers >= 1 (empty = no CUDA graphs)")
        if self.cuda_graph_padding and not sizes:
            raise SpecError(f"{g}.cuda_graph_padding", True, "false when cuda_graph_sizes is empty")
        if not 0 <= self.kv_usable_fraction <= 1:
            raise SpecError(f"{g}.kv_usable_fraction", self.kv_usable_fraction,
                            "a fraction in (0, 1], or 0 for the calibration's")
        if not 0 <= self.watermark < 1:
            raise SpecError(f"{g}.watermark", self.watermark, "a fraction in [0, 1)")
        non_negative(g, "step_overhead", self.step_overhead_s, unit="s")
        non_negative(g, "per_output_token_overhead", self.per_output_token_s, unit="s")
        non_negative(g, "per_streamed_token_overhead", self.per_streamed_token_s, unit="s")
        non_negative(g, "per_prefill_token_overhead", self.per_prefill_token_s, unit="s")
        non_negative(g, "per_request_overhead", self.per_request_s, unit="s")
        non_negative(g, "per_request_token_overhead", self.per_request_token_s, unit="s")
        non_negative(g, "eager_layer_overhead", self.eager_layer_s, unit="s")
        non_negative(g, "frontend_throughput", self.frontend_tok_s, unit="tokens/s")
        if self.schedule_ahead not in (0, 1) or isinstance(self.schedule_ahead, bool):
            raise SpecError(f"{g}.schedule_ahead", self.schedule_ahead,
                            "0 (synchronous loop) or 1 (one iteration scheduled ahead)")
        if not 0 <= self.host_overlap <= 1 or (self.host_overlap and not self.schedule_ahead):
            raise SpecError(f"{g}.host_overlap", self.host_overlap,
                            "a fraction in [0, 1]; above 0 only with schedule_ahead = 1 (host work "
                            "runs beside the GPU only when the engine schedules ahead)")
        need = scheduler_traits(self.scheduler).chunked_prefill
        if need is not None and self.chunked_prefill != need:
            raise SpecError(f"{g}.chunked_prefill", self.chunked_prefill,
                            f"{str(need).lower()} for scheduler={self.scheduler} "
                            f"({scheduler_traits(self.scheduler).summary})")
        _check_memory(self, g)    # the KV capacity and admission block


def host_costs_text(fw: FrameworkSpec) -> str:
    """One line naming the profile's host costs (us), '' when it has none: what both engines add
    on top of the calibration's overheads (per pass, per sequence emitting a token, per prompt
    token, per request and per prompt token before the scheduler)."""
    parts = [(fw.step_overhead_s, "per pass"), (fw.per_output_token_s, "per sequence emitting a token"),
             (fw.per_streamed_token_s, "per streaming sequence emitting a token"),
             (fw.per_prefill_token_s, "per prompt token"), (fw.per_request_s, "per request"),
             (fw.per_request_token_s, "per prompt token in the API server"),
             (fw.eager_layer_s, "per layer of an eager pass")]
    return ", ".join(f"{v * 1e6:.3g} us {what}" for v, what in parts if v)


KV_RULES = ("free_fraction", "total_fraction", "static_fraction")


def _check_memory(fw: "FrameworkSpec", g: str) -> None:
    """The KV capacity and admission block of ``FrameworkSpec`` (see its field comments)."""
    one_of(g, "kv_rule", fw.kv_rule, KV_RULES)
    if not 0 < fw.gpu_memory_utilization <= 1:
        raise SpecError(f"{g}.gpu_memory_utilization", fw.gpu_memory_utilization, "a fraction in (0, 1]")
    for name in ("mem_fraction_static", "new_token_ratio", "new_token_ratio_min"):
        if not 0 <= getattr(fw, name) <= 1:
            raise SpecError(f"{g}.{name}", getattr(fw, name), "a fraction in [0, 1]")
    if fw.new_token_ratio_min > fw.new_token_ratio:
        raise SpecError(f"{g}.new_token_ratio_min", fw.new_token_ratio_min,
                        f"at most new_token_ratio={fw.new_token_ratio}")
    non_negative(g, "runtime_reserve", fw.runtime_reserve_bytes, unit="bytes")
    non_negative(g, "cuda_graph_reserve", fw.cuda_graph_reserve_bytes, unit="bytes")
    positive_int(g, "new_token_ratio_decay_steps", fw.new_token_ratio_decay_steps)
    positive_int(g, "clip_max_new_tokens", fw.clip_max_new_tokens)
    positive_int(g, "retract_decode_steps", fw.retract_decode_steps, minimum=0)
