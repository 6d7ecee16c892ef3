"""Config groups compose, convert to specs and fail early with the key named."""

from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError, ValidationError

from engine.analytical import run
from engine.errors import SpecError
from runner.convert import specs_from_config
from tests.conftest import CONF

from omegaconf import OmegaConf

#: Groups whose option becomes an engine spec (Specs.<group>).
SPEC_GROUPS = ["hardware", "model", "partition", "workload", "calibration", "framework"]
#: The option conf/config.yaml's defaults list picks per group ({"hardware": "h100_sxm", ...}).
DEFAULTS = {k: v for d in OmegaConf.to_container(OmegaConf.load(CONF / "config.yaml"))["defaults"]
            if isinstance(d, dict) for k, v in d.items()}


def options(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.fixture(scope="module")
def default_specs():
    from tests.conftest import compose_specs

    return compose_specs()


@pytest.mark.parametrize("group", SPEC_GROUPS)
def test_every_option_composes_and_converts(cfg_of, default_specs, group):
    """Each option reaches its spec: a named spec carries the option's name (the file stem), an
    unnamed one (partition) the file's values, and every option but the default changes the specs."""
    for opt in options(group):
        specs = specs_from_config(cfg_of(f"{group}={opt}"))
        spec = getattr(specs, group)
        if hasattr(spec, "name"):
            assert spec.name == opt, (group, opt)
        else:
            body = OmegaConf.to_container(OmegaConf.load(CONF / group / f"{opt}.yaml"))
            for k, v in body.items():
                if k not in ("defaults", "name"):
                    assert getattr(spec, k) == v, (group, opt, k)
        assert (specs == default_specs) == (opt == DEFAULTS[group]), (group, opt)


@pytest.mark.parametrize("group", ["engine", "tracking"])
def test_engine_and_tracking_options_compose(cfg_of, group):
    """engine=X selects engine X; a tracking option's ``enabled`` is the file's."""
    for opt in options(group):
        cfg = cfg_of(f"{group}={opt}")
        if group == "engine":
            assert cfg.engine.name == opt
        else:
            assert cfg.tracking.enabled == OmegaConf.load(CONF / group / f"{opt}.yaml").enabled


@pytest.mark.parametrize("hw", options("hardware"))
def test_every_hardware_runs(cfg_of, hw):
    # TPU v5e has 16 GB per chip: the default 8B bf16 model (16 GB of weights) needs two chips.
    part = ["partition=tp2"] if hw == "tpu_v5e" else []
    s = run(specs_from_config(cfg_of(f"hardware={hw}", *part))).summary
    assert s["fits_in_memory"] and s["ttft_ms_p50"] > 0 and s["tpot_ms_p50"] > 0


def test_b200_sparse_figures_converted(cfg_of):
    specs = specs_from_config(cfg_of("hardware=b200"))
    assert specs.hardware.peak_flops("bf16") == pytest.approx(2250e12)
    names = [a.name for a in run(specs).assumptions]
    assert "sparse TFLOPS converted to dense" in names


def test_unknown_key_fails_at_compose(cfg_of):
    with pytest.raises(ConfigCompositionException) as e:
        cfg_of("hardware.hbm_bandwith=4TB/s")
    assert "hbm_bandwith" in str(e.value.__cause__) or "hbm_bandwith" in str(e.value)


def test_wrong_type_fails_at_compose(cfg_of):
    with pytest.raises((ConfigCompositionException, ValidationError)) as e:
        cfg_of("partition.tp=two")
    assert "partition.tp" in str(e.value) or "partition.tp" in str(e.value.__cause__)


def test_missing_option_fails(cfg_of):
    with pytest.raises(ConfigCompositionException, match="model/nope"):
        cfg_of("model=nope")


@pytest.mark.parametrize("override,field", [
    ("hardware.hbm_bandwidth=-3", "hardware.hbm_bandwidth"),
    ("partition.tp=3", "partition.tp"),
    ("hardware.hbm_capacity=5TB/s", "hardware.hbm_capacity"),
    ("+hardware.hbm_bandwith=4", "hardware.hbm_bandwith"),
    ("model.attention=mha", "model.num_kv_heads"),   # llama-3.1-8b has 8 KV heads, MHA needs 32
])
def test_bad_values_name_the_field(cfg_of, override, field):
    with pytest.raises(SpecError) as e:
        specs_from_config(cfg_of(override))
    assert str(e.value).startswith(field)


def _leaves(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def test_experiment_presets_compose(cfg_of):
    """Every preset composes with the options its defaults list overrides and the values it sets
    (read from the file itself), and converts to specs."""
    for path in sorted(Path(CONF.parent / "experiments").glob("*.yaml")):
        cfg = cfg_of(f"experiment={path.stem}")
        doc = OmegaConf.to_container(OmegaConf.load(path))
        for entry in doc.pop("defaults", []):
            ((key, opt),) = entry.items()
            group = key.split("/")[-1].strip()
            assert cfg[group].name == opt, (path.stem, group)
        doc.pop("hydra", None)
        for key, value in _leaves(doc):
            assert OmegaConf.select(cfg, key) == value, (path.stem, key)
        specs_from_config(cfg)
