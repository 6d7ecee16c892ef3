"""Field metadata on the specs (engine.spec.meta) -> generated Hydra schemas, the generic loader
``from_mapping``, and every YAML default checked against its field."""

import dataclasses

import pytest
from omegaconf import OmegaConf

from engine.errors import SpecError
from engine.spec import CalibrationSpec, HardwareSpec, ModelSpec, NoiseSpec, PartitionSpec, WorkloadSpec
from engine.spec.analytical import AnalyticalSpec
from engine.spec.framework import FrameworkSpec
from engine.spec.meta import config_fields, units
from runner import schema
from runner.fields import from_mapping
from runner.units import to_si
from tests.conftest import CONF

#: config group folder -> (spec class, generated schema)
GENERATED = {"hardware": (HardwareSpec, schema.HardwareSchema), "model": (ModelSpec, schema.ModelSchema),
             "partition": (PartitionSpec, schema.PartitionSchema),
             "calibration": (CalibrationSpec, schema.CalibrationSchema),
             "calibration/noise": (NoiseSpec, schema.NoiseSchema),
             "workload": (WorkloadSpec, schema.WorkloadSchema),
             "framework": (FrameworkSpec, schema.FrameworkSchema)}


def test_loader_converts_by_metadata():
    """Hand values: 1 PFLOPS = 1e15 FLOP/s; a bare 80 in GB = 80e9 B; 3.35 TB/s = 3.35e12 B/s;
    a bare 2 in us = 2e-6 s; 0 MB of SRAM is allowed (zero=True)."""
    hw = from_mapping(HardwareSpec, {"name": "x", "peak_bf16": "1 PFLOPS", "hbm_capacity": 80,
                                     "hbm_bandwidth": "3.35 TB/s", "scaleup_latency": 2, "sram": 0,
                                     "description": "config-only, not in the spec"}, "hardware")
    assert (hw.peak_flops_bf16, hw.hbm_capacity_bytes, hw.hbm_bandwidth_bytes_s, hw.scaleup_latency_s,
            hw.sram_bytes) == (1e15, 80e9, 3.35e12, pytest.approx(2e-6), 0.0)
    cal = from_mapping(CalibrationSpec, {"name": "c", "compute_efficiency": 0.5, "memory_bandwidth_efficiency": 0.5,
                                         "comm_efficiency": 0.5, "memory_reserve": "2 GiB",
                                         "kv_usable_fraction": 0.9, "cost": {"transfer_exclude": ["h100_sxm"]},
                                         "noise": {"jump_size": 30, "throttle_after": "2 min"}}, "calibration")
    assert cal.memory_reserve_bytes == 2 * 2**30 and cal.transfer_exclude == ("h100_sxm",)
    assert cal.noise.jump_mean_s == pytest.approx(0.030) and cal.noise.throttle_after_s == 120.0
    with pytest.raises(SpecError, match=r"^hardware\.hbm_bandwidth"):
        from_mapping(HardwareSpec, {"name": "x", "peak_bf16": 1, "hbm_capacity": 1, "hbm_bandwidth": "5 GB"},
                     "hardware")
    with pytest.raises(SpecError, match=r"^hardware\.peak_bf16"):   # zero not allowed for a peak
        from_mapping(HardwareSpec, {"name": "x", "peak_bf16": 0, "hbm_capacity": 1, "hbm_bandwidth": 1},
                     "hardware")


@pytest.mark.parametrize("group", sorted(GENERATED))
def test_schema_is_the_spec(group):
    """One schema field per spec field under its config key (+ the spec's CONFIG_EXTRA); a quantity
    is typed Any and defaults to its SI default in its unit; required fields are '???'."""
    spec, sch = GENERATED[group]
    sf = {f.name: f for f in dataclasses.fields(sch)}
    extra = {k for k, _, _ in getattr(spec, "CONFIG_EXTRA", ())} | ({"name"} if spec is PartitionSpec else set())
    assert set(sf) == {md["key"] for _, md in config_fields(spec)} | extra
    for f, md in config_fields(spec):
        s = sf[md["key"]]
        default = s.default if s.default is not dataclasses.MISSING else s.default_factory()
        if md["required"] or (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING):
            assert default == "???", md["key"]
        elif md["unit"] and f.default is not None:
            assert to_si(md["key"], default, md["unit"], allow_zero=True) == pytest.approx(f.default), md["key"]
    assert units(HardwareSpec, "hardware")["hardware.hbm_bandwidth"] == "TB/s" == schema.UNITS["hardware.hbm_bandwidth"]


def _options(group):
    return sorted((CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("group", sorted(GENERATED))
def test_every_yaml_value_fits_its_field(group):
    """Every key of every option file is a field of the group's spec (or config-only), and every
    number or quantity lies in the field's plausible range after conversion with its unit."""
    spec, sch = GENERATED[group]
    by_key = {md["key"]: (f, md) for f, md in config_fields(spec)}
    known = {f.name for f in dataclasses.fields(sch)}
    checked = 0
    for path in _options(group):
        doc = OmegaConf.to_container(OmegaConf.load(path))
        doc.pop("defaults", None)
        for key, value in doc.items():
            assert key in known, (path.name, key)
            if key not in by_key or value is None or isinstance(value, (bool, dict, list)):
                continue
            f, md = by_key[key]
            if md["unit"]:
                value = to_si(f"{group}.{key}", value, md["unit"], allow_zero=md["zero"])
            if md["range"] and isinstance(value, (int, float)):
                lo, hi = md["range"]
                assert lo <= value <= hi, (path.name, key, value, md["range"])
                checked += 1
    assert checked > 0 or group in ("partition", "model", "workload")


def test_analytical_yaml_is_the_spec_default():
    """conf/engine/analytical.yaml holds the engine's defaults: loaded by the spec's metadata it
    is AnalyticalSpec() (overlap 'none' = 0), and its schema has every field."""
    doc = OmegaConf.to_container(OmegaConf.load(CONF / "engine" / "analytical.yaml"))["analytical"]
    assert doc["overlap"] == "none"
    doc["overlap"] = 0.0
    got = dataclasses.asdict(from_mapping(AnalyticalSpec, doc, "engine.analytical"))
    want = dataclasses.asdict(AnalyticalSpec())
    assert got.pop("disagg") == pytest.approx(want.pop("disagg"))   # pint: 5 us -> 4.9999999999999996e-06 s
    assert got == want
    assert {f.name for f in dataclasses.fields(schema.AnalyticalSchema)} == \
        {md["key"] for _, md in config_fields(AnalyticalSpec)}


def test_every_option_loads_like_the_runner(cfg_of):
    """The generic loader on the plain YAML values gives the spec the runner builds."""
    from runner.convert import specs_from_config

    for path in _options("hardware"):
        doc = OmegaConf.to_container(OmegaConf.load(path))
        assert from_mapping(HardwareSpec, doc, "hardware") == specs_from_config(cfg_of(f"hardware={path.stem}")).hardware


def _twin(cls):
    """``cls`` rebuilt by dataclasses with its generated ``__init__`` (same fields, defaults and
    factories): what runner.fields._schema_init stands in for."""
    def field_of(f):
        if f.default_factory is not dataclasses.MISSING:
            return dataclasses.field(default_factory=f.default_factory)
        return dataclasses.field(default=f.default)

    return dataclasses.make_dataclass(cls.__name__, [(f.name, f.type, field_of(f)) for f in dataclasses.fields(cls)])


@pytest.mark.parametrize("name", sorted(schema.classes()))
def test_schema_init_sets_what_a_dataclass_init_sets(name):
    """Every schema class: an instance without arguments holds what the dataclass-generated
    ``__init__`` of the same fields holds (nested schemas and new list/dict copies included),
    and OmegaConf builds the same node from either class."""
    cls = schema.classes()[name]
    twin = _twin(cls)
    mine, theirs = cls(), twin()
    assert dataclasses.asdict(mine) == dataclasses.asdict(theirs)
    assert OmegaConf.to_yaml(OmegaConf.structured(cls)) == OmegaConf.to_yaml(OmegaConf.structured(twin))
    for f in dataclasses.fields(cls):   # a factory's value is new per instance, as dataclasses make it
        v = getattr(mine, f.name)
        if isinstance(v, (list, dict)) or dataclasses.is_dataclass(v):
            assert getattr(cls(), f.name) is not v


def test_schema_init_arguments_like_a_dataclass():
    """A generated schema (PartitionSchema: name, tp, pp, ...): keyword and positional arguments
    in field order, the defaults for the rest, and the errors a dataclass raises."""
    cls = schema.PartitionSchema
    assert cls.__init__.__qualname__.startswith("_schema_init")   # not dataclasses' own
    twin = _twin(cls)
    for args, kwargs in (((), {}), (("tp4", 4), {"pp": 2}), ((), {"name": "x", "ep": 8})):
        assert dataclasses.asdict(cls(*args, **kwargs)) == dataclasses.asdict(twin(*args, **kwargs))
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        cls(nope=1)
    with pytest.raises(TypeError, match="multiple values for argument 'name'"):
        cls("a", name="b")
    with pytest.raises(TypeError, match="positional arguments"):
        cls(*range(len(dataclasses.fields(cls)) + 1))
