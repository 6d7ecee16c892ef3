"""Sliding-window positions (engine.analytical.window) against brute-force sums, and the layer
groups every shipped model derives (ModelSpec.layer_groups)."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from engine.analytical import memory, window
from engine.analytical.step import StepModel
from engine.spec import ModelSpec
from engine.spec.model import LAYER_KINDS, LayerGroup

CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"


def _brute_pairs(a, b, w):
    return sum(min(i, w) if w else i for i in range(a, b + 1))


@pytest.mark.parametrize("a,b,w", [(1, 1, 4), (1, 10, 4), (3, 3, 4), (5, 12, 4), (1, 4, 4),
                                   (4, 4, 4), (129, 2176, 128), (1, 2048, 128), (6, 9, 0)])
def test_pairs_is_the_sum_of_min(a, b, w):
    """sum_{i=a}^{b} min(i, W) by its closed form equals the loop, for Python ints (the DES's
    path) and float arrays (the analytical grids) alike."""
    want = _brute_pairs(a, b, w) if w else None
    if w:
        assert window.pairs(a, b, w) == want
        assert float(window.pairs(np.array([a]), np.array([b]), w)[0]) == want
        assert isinstance(window.pairs(a, b, w), float)
    assert window.chunk_pairs(b - a + 1, a - 1, w) == _brute_pairs(a, b, w)


def test_kept_and_decode_kept():
    """min(n, W) rows kept; W = 0 keeps all. Three decode queries at contexts 10, 200, 300 with
    W = 128: exact sum 10 + 128 + 128 = 266, the aggregate form min(510, 3 x 128) = 384 (exact
    only when all or none of the contexts exceed W; all: 3 contexts of 200 -> 384 = 3 x 128)."""
    assert window.kept(100, 128) == 100 and window.kept(500, 128) == 128 and window.kept(500, 0) == 500
    assert list(window.kept(np.array([100.0, 500.0]), 128)) == [100.0, 128.0]
    assert window.decode_kept(510, 3, 128) == 384
    assert window.decode_kept(600, 3, 128) == sum(min(c, 128) for c in (200, 200, 200))
    assert window.decode_kept(30, 3, 128) == 30
    assert window.decode_kept(510, 3, 0) == 510


GPT_OSS_LIKE = dict(name="t", num_layers=4, hidden_size=8, num_heads=2, num_kv_heads=1,
                    head_dim=2, ffn_size=4, vocab_size=8, attention="mqa", sliding_window=4,
                    sliding_window_layers=1, kv_dtype="fp32")


def test_groups_of_a_windowed_model_and_their_positions():
    """4 layers, 1 windowed (W = 4), 1 KV head of 2, fp32: groups full x 3 and sliding x 1 of
    2 x 1 x 2 x 4 = 16 bytes per layer-token. n = 10: 3 x 10 + 4 = 34 layer-positions, 544 B.
    Prefill of 3 after 5 cached: full 3 x (15 + 6) = 63, windowed 3 x 4 = 12 -> 75 layer-pairs."""
    m = ModelSpec(**GPT_OSS_LIKE)
    assert m.layer_groups == (LayerGroup("full", 3, 0, 16.0), LayerGroup("sliding", 1, 4, 16.0))
    assert memory.kv_layer_positions(m, 10) == 34
    assert memory.sequence_kv_bytes(m, 10) == 544
    assert memory.kv_bytes_per_token(m) == 64
    assert window.chunk_positions(m.layer_groups, 3, 5) == 75
    # decode of 2 sequences attending 300 positions: 3 x 300 + min(300, 2 x 4) = 908
    assert window.decode_positions(m.layer_groups, 2, 300) == 908
    assert window.mid_windowed_positions(m.layer_groups, 2.5) == 2.5
    assert window.mid_windowed_positions(ModelSpec(**{**GPT_OSS_LIKE, "sliding_window_layers": 0,
                                                      "sliding_window": 0}).layer_groups, 7) == 0.0


def test_step_model_positions_use_the_groups():
    """StepModel.chunk_positions/decode_positions (the DES's per-iteration path) give the same
    numbers as the group sums above, as Python floats."""
    from tests.engine.test_features import mk

    s = mk(model=GPT_OSS_LIKE)
    sm = StepModel.from_specs(s)
    assert sm.layer_groups == s.model.layer_groups
    assert sm.chunk_positions(3, 5) == (75.0, 3 * 5 + 4.0)
    assert sm.decode_positions(2, 300) == 908


@pytest.mark.parametrize("stem", sorted(p.stem for p in CONF_MODEL.glob("*.yaml")))
def test_every_shipped_model_has_layer_groups(stem):
    """Every conf/model option: groups of known kinds covering all layers once, KV bytes per
    layer-token the per-layer figure, the window only on sliding groups."""
    doc = {k: v for k, v in yaml.safe_load((CONF_MODEL / f"{stem}.yaml").read_text()).items()
           if k not in ("defaults", "source", "hf_config")}
    if doc.get("num_params") is not None:
        doc["num_params"] = float(doc["num_params"])
    m = ModelSpec(**doc)
    g = m.layer_groups
    assert sum(x.count for x in g) == m.num_layers
    assert {x.kind for x in g} <= set(LAYER_KINDS)
    assert all((x.window > 0) == (x.kind == "sliding") for x in g)
    assert all(x.kv_bytes_per_token == memory.kv_bytes_per_layer_token(m) for x in g)
    assert ("mla" in {x.kind for x in g}) == (m.attention == "mla")
    assert memory.kv_bytes_per_token(m) == m.num_layers * memory.kv_bytes_per_layer_token(m)
