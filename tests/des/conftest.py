"""Fixtures of the DES tests: Llama-3.1-8B on one H100 SXM (the default config), composed once."""

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
        # The DES tests reason about iteration times; the default calibration's fitted per-request
        # overhead (tokenise/admit/respond, delays entry into the queue) is pinned to 0 here.
        cfg = compose(config_name="config", overrides=["calibration.per_request_overhead=0"])
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
