"""Structured-config schemas (registered in Hydra's ConfigStore as ``<group>_schema``).

They reject unknown keys and wrong types at compose time, naming the full key. Quantity fields are
typed ``Any``: they take a number in the field's default unit (``UNITS`` below, also shown in each
YAML comment) or a string with a unit ("4.8 TB/s", "141 GB"); ``runner.convert`` turns them into
SI floats once, with pint.
"""

from dataclasses import dataclass, field
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore

from engine.spec import CalibrationSpec, HardwareSpec, ModelSpec, NoiseSpec, PartitionSpec, WorkloadSpec
from engine.spec.analytical import AnalyticalSpec, DisaggSpec, ParetoSpec, SpecDecodeSpec
from engine.spec.workload import LengthDist, TraceSpec
from engine.spec.meta import units
from runner.fields import schema_of
from runner.tracking import DEFAULT_URI

#: Default unit of each quantity field when it is given as a bare number: from the specs' field
#: metadata (engine.spec.meta) for the generated schemas, written out for the others.
UNITS = {
    **units(HardwareSpec, "hardware"), **units(CalibrationSpec, "calibration"),
    **units(AnalyticalSpec, "engine.analytical"),
    "framework.step_overhead": "us", "framework.per_output_token_overhead": "us",
}


#: Generated from the spec's field metadata (runner.fields.schema_of): one source for the key,
#: default unit, default and required-ness of each field.
HardwareSchema = schema_of(HardwareSpec)


ModelSchema = schema_of(ModelSpec)


PartitionSchema = schema_of(PartitionSpec, "PartitionSchema", (("name", str, "custom"),))


LengthSchema = schema_of(LengthDist, "LengthSchema")


TraceSchema = schema_of(TraceSpec, "TraceSchema")


WorkloadSchema = schema_of(WorkloadSpec, "WorkloadSchema", (("name", str, "custom"),))


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


DisaggSchema = schema_of(DisaggSpec, "DisaggSchema")


SpecDecodeSchema = schema_of(SpecDecodeSpec, "SpecDecodeSchema")


ParetoSchema = schema_of(ParetoSpec, "ParetoSchema")


#: engine.analytical (defaults in conf/engine/analytical.yaml); ``overlap``: none | full | a fraction.
AnalyticalSchema = schema_of(AnalyticalSpec, "AnalyticalSchema")


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
