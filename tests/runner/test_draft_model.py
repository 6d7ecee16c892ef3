"""The runner resolves a speculative-decoding draft model (a conf/model option, its vendor
spelling, a model YAML or an HF config.json) into the ModelSpec the engine prices."""

import pytest

from engine.errors import SpecError
from runner.convert import draft_model_spec


def test_draft_model_spec_errors_name_the_field():
    with pytest.raises(SpecError, match="draft_model.*conf/model option"):
        draft_model_spec("no_such_model")
    with pytest.raises(SpecError, match="draft_model.*HF config.json"):
        draft_model_spec("no_such_config.json")


def test_draft_model_resolved_by_the_runner(cfg_of):
    """engine.analytical.spec_decode.draft_model=llama_3_1_8b (and its vendor spelling, through
    resolved_config) reaches the engine as the conf/model option's ModelSpec: 32 layers, 8 KV
    heads; a fixed draft_cost_fraction needs no draft model."""
    from runner.convert import resolved_config, specs_from_config

    sd = "engine.analytical.spec_decode."
    for name in ("llama_3_1_8b", "meta-llama/Llama-3.1-8B"):
        s = specs_from_config(resolved_config(cfg_of(sd + "method=draft", sd + f"draft_model={name}")))
        d = s.analytical.spec_decode.draft
        assert (d.name, d.num_layers, d.num_kv_heads) == ("llama_3_1_8b", 32, 8)
    s = specs_from_config(cfg_of(sd + "method=draft", sd + "draft_cost_fraction=0.05"))
    assert s.analytical.spec_decode.draft is None
