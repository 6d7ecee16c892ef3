"""Config groups compose, convert to specs and fail early with the key named."""

from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError, ValidationError

from engine.analytical import run
from engine.errors import SpecError
from runner.convert import specs_from_config
from tests.conftest import CONF

GROUPS = ["hardware", "model", "partition", "workload", "calibration", "engine", "tracking"]


def options(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("group", GROUPS)
def test_every_option_composes_and_converts(cfg_of, group):
    for opt in options(group):
        cfg = cfg_of(f"{group}={opt}")
        specs = specs_from_config(cfg)
        assert getattr(specs, group, specs) is not None


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


def test_experiment_presets_compose(cfg_of):
    for path in sorted(Path(CONF.parent / "experiments").glob("*.yaml")):
        cfg = cfg_of(f"experiment={path.stem}")
        assert specs_from_config(cfg)
