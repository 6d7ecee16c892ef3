"""AnalyticalSpec: the modelling switches of the analytical engine (and of the step model the
discrete-event engine borrows).

Defaults live in ``conf/engine/analytical.yaml`` (section ``analytical``); the values here only make
the dataclass usable from a notebook and mirror that file (a test checks they agree).
"""

from dataclasses import dataclass, field
from typing import Any, Optional

from engine.errors import SpecError
from engine.spec._check import non_negative, one_of, positive_int
from engine.spec.meta import param
from engine.spec.model import ModelSpec

ROOFLINES = ("op", "pass")
ALLREDUCE = ("ring", "tree", "auto")
SPEC_METHODS = ("none", "draft", "mtp")


@dataclass(frozen=True)
class DisaggSpec:
    """Disaggregated prefill/decode: a prefill partition hands each prompt's KV to the decode
    partition (the job's ``partition``).

    prefill_tp / prefill_pp / prefill_sp: the prefill replica's layout (0 = same as decode);
    prefill_replicas: prefill replicas per decode replica;
    link_bandwidth_bytes_s / link_latency_s: the per-device link the KV crosses (alpha, W);
    per_wr_s: cost of one RDMA work request (one per layer per KV block);
    relayout_factor: eta, extra fraction of the transfer time the decode side spends re-laying
        the KV out when the two partitions differ;
    overlap: rho in [0, 1], fraction of the hand-off hidden behind the prefill (layer-wise
        streaming), never more than the prefill itself.
    """

    enabled: bool = False
    prefill_tp: int = 0
    prefill_pp: int = 0
    prefill_sp: int = 0
    prefill_replicas: int = 1
    link_bandwidth_bytes_s: float = param(50e9, key="link_bandwidth", unit="GB/s", range=(1e8, 100e12))
    link_latency_s: float = param(5e-6, key="link_latency", unit="us", zero=True, range=(0.0, 1e-2))
    per_wr_s: float = param(1e-6, key="per_wr", unit="us", zero=True, range=(0.0, 1e-3))
    relayout_factor: float = 0.1
    overlap: float = 0.0

    _group = "engine.analytical.disagg"

    def __post_init__(self):
        g = self._group
        for f in ("prefill_tp", "prefill_pp", "prefill_sp"):
            positive_int(g, f, getattr(self, f), minimum=0)
        positive_int(g, "prefill_replicas", self.prefill_replicas)
        if not self.link_bandwidth_bytes_s > 0:
            raise SpecError(f"{g}.link_bandwidth", self.link_bandwidth_bytes_s, "a bandwidth > 0")
        non_negative(g, "link_latency", self.link_latency_s, unit="s")
        non_negative(g, "per_wr", self.per_wr_s, unit="s")
        non_negative(g, "relayout_factor", self.relayout_factor)
        if not 0 <= self.overlap <= 1:
            raise SpecError(f"{g}.overlap", self.overlap, "a fraction in [0, 1]")


@dataclass(frozen=True)
class SpecDecodeSpec:
    """Speculative decoding (engine.analytical.specdec): ``gamma`` draft tokens per step, each
    accepted with probability ``acceptance`` (i.i.d.); ``method`` draft (a small model's own
    forward passes: ``draft_model``, a conf/model name, model YAML or HF config.json) or mtp
    (``mtp_layers`` extra layers + the LM head on the target: MTP / EAGLE-style heads); both
    priced by the StepModel. ``draft_cost_fraction`` > 0 instead prices one draft forward as
    that fraction of one target decode step of the same batch (0 = from the model).

    ``draft``: the draft model's ModelSpec, which the engine prices (not a config key: the runner
    resolves ``draft_model`` to it, ``runner.convert.draft_model_spec``; a notebook passes a
    ModelSpec). ``draft_model`` stays the name the config gave, for the record."""

    method: str = "none"
    gamma: int = 3
    acceptance: float = 0.7
    draft_model: str = ""
    mtp_layers: int = 1
    draft_cost_fraction: float = 0.0
    draft: Optional[ModelSpec] = param(None, config=False)

    _group = "engine.analytical.spec_decode"

    def __post_init__(self):
        g = self._group
        one_of(g, "method", self.method, SPEC_METHODS)
        positive_int(g, "gamma", self.gamma)
        if not 0 <= self.acceptance < 1:
            raise SpecError(f"{g}.acceptance", self.acceptance, "a probability in [0, 1)")
        non_negative(g, "draft_cost_fraction", self.draft_cost_fraction)
        positive_int(g, "mtp_layers", self.mtp_layers)
        if self.draft is not None and not isinstance(self.draft, ModelSpec):
            raise SpecError(f"{g}.draft_model", self.draft, "a ModelSpec (the resolved draft model)")


@dataclass(frozen=True)
class ParetoSpec:
    """The partition x batch x chunk sweep for ``devices`` devices (``enabled`` makes a job run it).

    batches / chunks: the batch sizes and prefill chunk sizes tried (chunk 0 = single pass);
    max_tp / max_pp / max_sp: bounds of the partition enumeration (0 = no bound);
    throughput: the frontier's x axis, decode (B / TPOT per GPU, llm_perf's decode frontier) or
    e2e (B N / (TTFT + (N-1) TPOT) per GPU, prefill included);
    ep_layout: shared (EP groups inside tp x sp) or extra (EP multiplies the devices, llm_perf's
    enumeration; see PartitionSpec)."""

    enabled: bool = False
    devices: int = 8
    batches: tuple = param((1, 2, 4, 8, 16, 32, 64, 128, 256, 512), config_type=list)
    chunks: tuple = param((0,), config_type=list)
    max_tp: int = 0
    max_pp: int = 0
    max_sp: int = 1
    throughput: str = "decode"
    ep_layout: str = "shared"     # partition.ep_layout of the enumerated layouts: shared | extra

    _group = "engine.analytical.pareto"

    def __post_init__(self):
        g = self._group
        positive_int(g, "devices", self.devices)
        one_of(g, "throughput", self.throughput, ("decode", "e2e"))
        one_of(g, "ep_layout", self.ep_layout, ("shared", "extra"))
        for f in ("max_tp", "max_pp", "max_sp"):
            positive_int(g, f, getattr(self, f), minimum=0)
        if not self.batches or any((not isinstance(b, int)) or b < 1 for b in self.batches):
            raise SpecError(f"{g}.batches", list(self.batches), "a non-empty list of integers >= 1")
        if not self.chunks or any((not isinstance(c, int)) or c < 0 for c in self.chunks):
            raise SpecError(f"{g}.chunks", list(self.chunks), "a non-empty list of integers >= 0")


@dataclass(frozen=True)
class AnalyticalSpec:
    """Modelling switches.

    roofline: op (each operator - dense matmuls, routed experts, attention core - is bound by its
        own roof, and a pass is their sum; "per-layer roofline") | pass (one max over the pass's
        total FLOPs and bytes: the looser, v1 bound);
    overlap: fraction in [0, 1] of the communication hidden behind compute
        (0 = none, 1 = full): time = roof + comm - overlap x min(roof, comm);
    allreduce: ring | tree | auto (the faster of the two for each message);
    pp_microbatches: microbatches in flight over the pp stages (0 = pp, a full pipeline);
    prefill_chunk: tokens per prefill chunk (0 = the whole prompt in one pass);
    chunk_search: also search the chunk size C* minimising TTFT over ``chunk_candidates``;
    kv_block_tokens: tokens per paged KV block (1 = no paging waste);
    idle_power_fraction: a device's power at zero utilisation as a fraction of TDP (energy model);
    sweep_stream_mb: a grid sweep (``engine.analytical.sweep``) whose result would hold more than
        this many MB streams it to parquet parts in a new temporary folder and returns a LazyFrame
        over them (the ``out=`` path; 0 = always in memory).
    """

    roofline: str = "op"
    overlap: float = param(0.0, config_type=Any, config_default="none", range=(0.0, 1.0))  # none|full|x
    allreduce: str = "ring"
    pp_microbatches: int = 0
    prefill_chunk: int = 0
    chunk_search: bool = False
    chunk_candidates: tuple = param((128, 256, 512, 1024, 2048, 4096, 8192, 16384), config_type=list)
    kv_block_tokens: int = 16
    idle_power_fraction: float = 0.3
    sweep_stream_mb: float = 256.0
    disagg: DisaggSpec = field(default_factory=DisaggSpec)
    spec_decode: SpecDecodeSpec = field(default_factory=SpecDecodeSpec)
    pareto: ParetoSpec = field(default_factory=ParetoSpec)

    _group = "engine.analytical"

    def __post_init__(self):
        g = self._group
        one_of(g, "roofline", self.roofline, ROOFLINES)
        one_of(g, "allreduce", self.allreduce, ALLREDUCE)
        if not 0 <= self.overlap <= 1:
            raise SpecError(f"{g}.overlap", self.overlap, "none, full or a fraction in [0, 1]")
        positive_int(g, "pp_microbatches", self.pp_microbatches, minimum=0)
        positive_int(g, "prefill_chunk", self.prefill_chunk, minimum=0)
        positive_int(g, "kv_block_tokens", self.kv_block_tokens)
        if not self.chunk_candidates or any((not isinstance(c, int)) or c < 1
                                            for c in self.chunk_candidates):
            raise SpecError(f"{g}.chunk_candidates", list(self.chunk_candidates),
                            "a non-empty list of integers >= 1")
        if not 0 <= self.idle_power_fraction <= 1:
            raise SpecError(f"{g}.idle_power_fraction", self.idle_power_fraction, "a fraction in [0, 1]")
        if not self.sweep_stream_mb >= 0:
            raise SpecError(f"{g}.sweep_stream_mb", self.sweep_stream_mb, "a size in MB >= 0 (0 = never stream)")
