"""Fixtures of the calibration tests: the default config (Llama-3.1-8B on one H100 SXM), composed
once per module, and a spec builder."""

from dataclasses import replace

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from engine.spec import WorkloadSpec
from runner.convert import specs_from_config
from tests.conftest import CONF


@pytest.fixture(scope="module")
def base_specs():
    from runner import schema

    schema.register()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["calibration=specsheet"])
    GlobalHydra.instance().clear()
    return specs_from_config(cfg)


@pytest.fixture
def specs_with(base_specs):
    """specs_with(**workload fields) -> Specs with that WorkloadSpec."""

    def _make(**wl):
        wl.setdefault("prompt_len", 512)
        wl.setdefault("output_len", 128)
        return replace(base_specs, workload=WorkloadSpec(**wl))

    return _make
