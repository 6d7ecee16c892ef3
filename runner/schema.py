"""Structured-config schemas (registered in Hydra's ConfigStore as ``<group>_schema``).

They reject unknown keys and wrong types at compose time, naming the full key. Quantity fields are
typed ``Any``: they take a number in the field's default unit (``UNITS`` below, also shown in each
YAML comment) or a string with a unit ("4.8 TB/s", "141 GB"); ``runner.convert`` turns them into
SI floats once, with pint.
"""

from dataclasses import dataclass, field
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore

from engine.spec import CalibrationSpec, HardwareSpec, ModelSpec, NoiseSpec, PartitionSpec
from engine.spec.meta import units
from runner.fields import schema_of
from runner.tracking import DEFAULT_URI

#: Default unit of each quantity field when it is given as a bare number: from the specs' field
#: metadata (engine.spec.meta) for the generated schemas, written out for the others.
UNITS = {
    **units(HardwareSpec, "hardware"), **units(CalibrationSpec, "calibration"),
    "framework.step_overhead": "us", "framework.per_output_token_overhead": "us",
}


#: Generated from the spec's field metadata (runner.fields.schema_of): one source for the key,
#: default unit, default and required-ness of each field.
HardwareSchema = schema_of(HardwareSpec)


ModelSchema = schema_of(ModelSpec)


PartitionSchema = schema_of(PartitionSpec, "PartitionSchema", (("name", str, "custom"),))


@dataclass
class LengthSchema:
    """A length distribution of the DES request stream (engine.spec.workload.LengthDist)."""
    kind: str = "fixed"
    low: int = 1
    high: int = 0
    sigma: float = 0.5
    zipf_a: float = 1.2
    values: list = field(default_factory=list)


@dataclass
class TraceSchema:
    """A request trace file and its columns (engine.spec.workload.TraceSpec); '' = none/auto."""
    path: str = ""
    format: str = "auto"
    arrival_column: str = ""
    prompt_column: str = ""
    output_column: str = ""
    hash_column: str = ""
    time_unit: str = "auto"
    block_tokens: int = 512


@dataclass
class WorkloadSchema:
    name: str = "custom"
    prompt_len: int = "???"  # type: ignore[assignment]
    output_len: int = "???"  # type: ignore[assignment]
    batch_size: int = 1
    # request stream of the discrete-event engine (engine=des); see engine.spec.workload
    num_requests: int = 0
    arrival: str = "batch"
    rate_rps: float = 0.0
    arrival_cv: float = 1.0
    concurrency: int = 0
    think_time_s: float = 0.0
    prompt_dist: LengthSchema = field(default_factory=LengthSchema)
    output_dist: LengthSchema = field(default_factory=LengthSchema)
    trace: TraceSchema = field(default_factory=TraceSchema)
    priority_fraction: float = 0.0
    seed: int = 0


#: Step-time jump diffusion of the DES (NoiseSpec); options in conf/calibration/noise/.
NoiseSchema = schema_of(NoiseSpec)


CalibrationSchema = schema_of(CalibrationSpec)


@dataclass
class FrameworkSchema:
    """Serving framework profile (engine.spec.framework.FrameworkSpec); options in conf/framework/."""
    name: str = "???"
    versions: str = ""
    scheduler: str = "???"
    max_num_seqs: int = "???"  # type: ignore[assignment]
    max_num_batched_tokens: int = "???"  # type: ignore[assignment]
    chunked_prefill: bool = False
    chunk_size: int = 0
    cuda_graph_sizes: List[int] = field(default_factory=list)
    cuda_graph_padding: bool = False
    preemption: str = "recompute"
    block_size: int = 16
    kv_usable_fraction: float = 0.0
    watermark: float = 0.0
    step_overhead: Any = 0
    per_output_token_overhead: Any = 0
    frontend_tok_s: float = 0.0
    allreduce: str = "analytical"
    kernel_tables: str = "none"
    sources: List[str] = field(default_factory=list)


@dataclass
class DesSchema:
    """Discrete-event engine settings (engine.spec.des.DesSpec); defaults in conf/engine/des.yaml.
    The scheduler settings a framework fixes are null there: null = the framework profile's."""
    scheduler: Optional[str] = None
    queue_policy: str = "fcfs"
    max_num_seqs: Optional[int] = None
    max_num_batched_tokens: Optional[int] = None
    chunk_size: Optional[int] = None
    block_size: Optional[int] = None
    num_kv_blocks: int = 0
    watermark: Optional[float] = None
    preemption: Optional[str] = None
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
    ramp_up_s: float = 0.0
    length_jitter: float = 0.0
    think_time_dist: str = "fixed"
    warmup_s: float = 0.0
    exclude_drain: bool = False


@dataclass
class DisaggSchema:
    """Disaggregated prefill/decode (engine.spec.analytical.DisaggSpec)."""
    enabled: bool = False
    prefill_tp: int = 0
    prefill_pp: int = 0
    prefill_sp: int = 0
    prefill_replicas: int = 1
    link_bandwidth: Any = "50 GB/s"
    link_latency: Any = "5 us"
    per_wr: Any = "1 us"
    relayout_factor: float = 0.1
    overlap: float = 0.0


@dataclass
class SpecDecodeSchema:
    """Speculative decoding (engine.spec.analytical.SpecDecodeSpec)."""
    method: str = "none"
    gamma: int = 3
    acceptance: float = 0.7
    draft_cost_fraction: float = 0.05


@dataclass
class ParetoSchema:
    """Partition x batch x chunk Pareto sweep (engine.spec.analytical.ParetoSpec)."""
    enabled: bool = False
    devices: int = 8
    batches: list = field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    chunks: list = field(default_factory=lambda: [0])
    max_tp: int = 0
    max_pp: int = 0
    max_sp: int = 1
    throughput: str = "decode"


@dataclass
class AnalyticalSchema:
    """Analytical-engine switches (engine.spec.analytical.AnalyticalSpec); defaults in
    conf/engine/analytical.yaml. ``overlap``: none | full | a fraction in [0, 1]."""
    roofline: str = "op"
    overlap: Any = "none"
    allreduce: str = "ring"
    pp_microbatches: int = 0
    prefill_chunk: int = 0
    chunk_search: bool = False
    chunk_candidates: list = field(default_factory=lambda: [128, 256, 512, 1024, 2048, 4096, 8192, 16384])
    kv_block_tokens: int = 16
    idle_power_fraction: float = 0.3
    disagg: DisaggSchema = field(default_factory=DisaggSchema)
    spec_decode: SpecDecodeSchema = field(default_factory=SpecDecodeSchema)
    pareto: ParetoSchema = field(default_factory=ParetoSchema)


@dataclass
class EngineSchema:
    name: str = "analytical"
    analytical: AnalyticalSchema = field(default_factory=AnalyticalSchema)
    des: DesSchema = field(default_factory=DesSchema)


@dataclass
class TrackingSchema:
    enabled: bool = True
    uri: str = DEFAULT_URI  # runner.tracking: the one default store
    experiment: str = "simllm"
    run_name: Optional[str] = None
    tags: dict = field(default_factory=dict)


@dataclass
class PathsSchema:
    """Data outside the project (conf/paths/default.yaml; resolved by runner.paths)."""
    shared_data: str = "../shared/data"


@dataclass
class ConfigSchema:
    hardware: HardwareSchema = field(default_factory=HardwareSchema)
    model: ModelSchema = field(default_factory=ModelSchema)
    partition: PartitionSchema = field(default_factory=PartitionSchema)
    workload: WorkloadSchema = field(default_factory=WorkloadSchema)
    calibration: CalibrationSchema = field(default_factory=CalibrationSchema)
    framework: FrameworkSchema = field(default_factory=FrameworkSchema)
    engine: EngineSchema = field(default_factory=EngineSchema)
    tracking: TrackingSchema = field(default_factory=TrackingSchema)
    paths: PathsSchema = field(default_factory=PathsSchema)
    print_table: bool = True
    resume: bool = False


def register() -> None:
    """Store the schemas in Hydra's ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=ConfigSchema)
    for group, node in (("hardware", HardwareSchema), ("model", ModelSchema),
                        ("partition", PartitionSchema), ("workload", WorkloadSchema),
                        ("calibration", CalibrationSchema), ("framework", FrameworkSchema),
                        ("engine", EngineSchema),
                        ("tracking", TrackingSchema), ("paths", PathsSchema)):
        cs.store(group=group, name=f"{group}_schema", node=node)
