"""Structured-config schemas (registered in Hydra's ConfigStore as ``<group>_schema``).

They reject unknown keys and wrong types at compose time, naming the full key. The groups that
become engine specs have their schemas generated from the specs' field metadata
(``runner.fields.schema_of``; engine.spec.meta): quantity fields are typed ``Any`` and take a
number in the field's default unit (``UNITS``, also shown in each YAML comment) or a string with a
unit ("4.8 TB/s", "141 GB"); ``runner.convert`` turns them into SI floats once, with pint. The
engine, tracking, paths and top-level nodes are written here.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore

from engine.spec import CalibrationSpec, HardwareSpec, ModelSpec, NoiseSpec, PartitionSpec, WorkloadSpec
from engine.spec.analytical import AnalyticalSpec, DisaggSpec, ParetoSpec, SpecDecodeSpec
from engine.spec.des import SUBSPECS, DesSpec
from engine.spec.framework import FrameworkSpec
from engine.spec.meta import units
from engine.spec.workload import LengthDist, TraceSpec
from runner.fields import schema_of
from runner.tracking import DEFAULT_URI

#: Default unit of each quantity field when it is given as a bare number: from the specs' field
#: metadata (engine.spec.meta).
UNITS = {
    **units(HardwareSpec, "hardware"), **units(CalibrationSpec, "calibration"),
    **units(AnalyticalSpec, "engine.analytical"), **units(FrameworkSpec, "framework"),
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


#: Config keys that moved, old -> new (full keys). The old ones are still accepted, on the command
#: line and in YAML, with a one-line deprecation message; ``runner.convert`` moves their values.
#: The operator-cost switch and its exclusions became ``calibration.cost`` (CostSpec).
#: The DES settings moved under their concern's sub-node (DesSpec's sub-specs: engine.des.max_num_seqs
#: -> engine.des.scheduling.max_num_seqs, engine.des.block_size -> engine.des.kv.block_size, ...).
DES_RENAMED = {f"engine.des.{f.name}": f"engine.des.{sub}.{f.name}"
               for sub, cls in SUBSPECS.items() for f in dataclasses.fields(cls)}
RENAMED = {"calibration.kernels": "calibration.cost.backend",
           "calibration.transfer_exclude": "calibration.cost.transfer_exclude", **DES_RENAMED}

#: CalibrationSpec's fields, its ``cost`` sub-node among them, and its CONFIG_EXTRA: provenance and
#: the old keys of RENAMED (null = not given).
CalibrationSchema = schema_of(CalibrationSpec)


#: Serving framework profile (FrameworkSpec); options in conf/framework/.
FrameworkSchema = schema_of(FrameworkSpec)


#: engine.des (DesSpec; defaults in conf/engine/des.yaml): a sub-node per sub-spec; the scheduler
#: settings a framework fixes are null there (null = the framework profile's). The flat keys of
#: DES_RENAMED are accepted too (null = not given) and moved by ``runner.convert.renamed``.
DesSchema = schema_of(DesSpec, extra=tuple((old.rsplit(".", 1)[1], Optional[Any], None) for old in DES_RENAMED))


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
class UncertaintySchema:
    """Prediction intervals (conf/uncertainty/default.yaml; runner.intervals)."""
    enabled: bool = True
    level: float = 0.8
    table: Optional[str] = None
    loco_table: Optional[str] = None


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
    uncertainty: UncertaintySchema = field(default_factory=UncertaintySchema)
    print_table: bool = True
    resume: bool = False
    #: simllm-plan's settings (conf/plan/, checked by engine.plan.spec.plan_spec); null otherwise
    plan: Optional[Any] = None


#: The group schemas, stored as ``<group>_schema`` (ConfigSchema itself as ``config_schema``).
GROUPS = (("hardware", HardwareSchema), ("model", ModelSchema), ("partition", PartitionSchema),
          ("workload", WorkloadSchema), ("calibration", CalibrationSchema),
          ("framework", FrameworkSchema), ("engine", EngineSchema), ("tracking", TrackingSchema),
          ("paths", PathsSchema), ("uncertainty", UncertaintySchema))


def classes() -> dict:
    """Every schema dataclass of ConfigSchema (nested ones included) by its name: how the compose
    cache (runner.compose_cache) refers to the generated ones. Raises if two share a name."""
    out: dict = {}

    def walk(cls):
        if out.setdefault(cls.__qualname__, cls) is not cls:
            raise ValueError(f"two schema classes named {cls.__qualname__}")
        for f in dataclasses.fields(cls):
            if isinstance(f.type, type) and dataclasses.is_dataclass(f.type):
                walk(f.type)

    walk(ConfigSchema)
    return out


def register(lazy: bool | None = None) -> None:
    """Store the schemas in Hydra's ConfigStore (idempotent). ``lazy`` (default: while the Hydra
    shortcuts are on, runner.hydra_fast.enabled) builds each node on its first load
    (hydra_fast.store_lazily) instead of now."""
    from runner import hydra_fast

    if lazy is None:
        lazy = hydra_fast.enabled()
    entries = (("config_schema", None, ConfigSchema),
               *((f"{group}_schema", group, node) for group, node in GROUPS))
    if lazy:
        for name, group, node in entries:
            hydra_fast.store_lazily(name, ("schema", node), lambda node=node: node, group=group)
        return
    cs = ConfigStore.instance()
    for name, group, node in entries:
        cs.store(group=group, name=name, node=node)
