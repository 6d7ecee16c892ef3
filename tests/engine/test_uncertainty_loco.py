"""engine.uncertainty.loco: the widening sqrt(q_regime^2 + q_loco^2), the LOCO quantiles (order
statistics of |r|) and their table. Expected numbers are computed by hand in the docstrings."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from engine.uncertainty import Interval
from engine.uncertainty.loco import GROUP, LEVELS, SHIPPED, LocoTable, build, combine, quantiles, save, widen


def test_combine_is_the_root_sum_of_squares():
    """q_regime 0.3 and q_loco 0.4 (log scale): sqrt(0.09 + 0.16) = sqrt(0.25) = 0.5 (the 3-4-5
    triangle); with q_loco 0 the regime's half-width is unchanged; a bad half-width is refused."""
    assert combine(0.3, 0.4) == pytest.approx(0.5, abs=1e-12)
    assert combine(0.25, 0.0) == 0.25
    for bad in (-0.1, math.nan, math.inf):
        with pytest.raises(ValueError, match="q_loco"):
            combine(0.3, bad)
    with pytest.raises(ValueError, match="q_regime"):
        combine(-1.0, 0.3)


def test_widen_keeps_the_centre_and_widens_the_half_width():
    """Regime interval c = 0.1, q = 0.3 (factors exp(-0.4), exp(0.2)); q_loco = 0.4 -> q_total = 0.5
    (above), so measured / predicted in [exp(-(0.1 + 0.5)), exp(-(0.1 - 0.5))] = [exp(-0.6), exp(0.4)]
    = [0.548812, 1.491825]; a prediction of 200 ms -> [109.762, 298.365] ms."""
    iv = Interval(0.8, math.exp(-0.4), math.exp(0.2), "metric=ttft", 12, 0.1, 0.3)
    w = widen(iv, 0.4)
    assert (w.center, w.q, w.n, w.regime, w.level) == (0.1, pytest.approx(0.5), 12, "metric=ttft", 0.8)
    assert w.lo_factor == pytest.approx(0.548812, abs=1e-6) and w.hi_factor == pytest.approx(1.491825, abs=1e-6)
    lo, hi = w.bounds(200.0)
    assert lo == pytest.approx(109.762, abs=1e-3) and hi == pytest.approx(298.365, abs=1e-3)


def test_quantiles_are_the_conformal_order_statistics():
    """Scores 0.01 .. 0.10 (n = 10): level 0.8 -> k = ceil(11 x 0.8) = 9 -> 0.09; level 0.5 ->
    k = ceil(5.5) = 6 -> 0.06; level 0.95 -> k = ceil(10.45) = 11 > 10 -> None (no bound)."""
    s = np.arange(1, 11)[::-1] / 100      # order of the input does not matter
    assert quantiles(s, (0.5, 0.8, 0.95)) == [0.06, 0.09, None]


def _toy():
    """Two held-out chips of one framework: chip a bf16 residuals 0.1, -0.2; chip b attention
    decode 0.3 and MoE 5.0 (MoE is outside the gemm+attention pool)."""
    return {"vllm": {"a": {"bf16": np.array([0.1, -0.2])},
                     "b": {"attn_decode": np.array([0.3]), "moe": np.array([5.0])}}}


def test_pool_takes_gemm_and_attention_only():
    """Pooled r = 0.1, -0.2, 0.3 (n = 3, median 0.1), scores |r| = 0.1, 0.2, 0.3: level 0.5 -> k =
    ceil(4 x 0.5) = 2 -> 0.2; level 0.75 -> k = 3 -> 0.3; level 0.76 -> k = ceil(3.04) = 4 > 3 -> None.
    The MoE class alone: n = 1, level 0.5 -> k = ceil(1) = 1 -> 5.0."""
    t = build(_toy(), {"command": "test"})
    g = t["frameworks"]["vllm"][GROUP]
    assert g["n"] == 3 and g["chips"] == {"a": 2, "b": 1} and g["median"] == pytest.approx(0.1)
    q = dict(zip(t["levels"], g["q"]))
    assert (q[0.5], q[0.75], q[0.76]) == (0.2, 0.3, None)
    assert dict(zip(t["levels"], t["frameworks"]["vllm"]["moe"]["q"]))[0.5] == 5.0


def test_table_roundtrip_and_level_lookup(tmp_path):
    """A level between two stored ones takes the next one up: 0.745 -> 0.75 -> 0.3 (above); 0.5
    exactly -> 0.2; 0.9 -> rank 4 > 3 points -> None. Errors name what is wrong."""
    p = save(build(_toy(), {"command": "test"}), tmp_path / "loco.json")
    lt = LocoTable.load(p)
    lq = lt.quantile("vllm", 0.745)
    assert (lq.q, lq.level, lq.n, lq.chips, lq.group) == (0.3, 0.75, 3, ("a", "b"), GROUP)
    assert lt.quantile("vllm", 0.5).q == 0.2
    assert lt.quantile("vllm", 0.9) is None
    with pytest.raises(ValueError, match="no framework 'trtllm'.*vllm"):
        lt.quantile("trtllm", 0.8)
    with pytest.raises(ValueError, match="level 1.0"):
        lt.quantile("vllm", 1.0)
    with pytest.raises(FileNotFoundError, match="uncertainty.loco_table.*simllm-kernels --loco"):
        LocoTable.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text(json.dumps({"format": 1, "regimes": {}}))
    with pytest.raises(ValueError, match="not a transfer LOCO table"):
        LocoTable.load(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        LocoTable.load(tmp_path / "junk.json")


def test_shipped_table_is_complete_and_relative():
    """The shipped table covers the three kernel-table frameworks, pools six held-out chips each, its
    quantiles do not decrease with the level, and its provenance names no absolute path."""
    d = json.loads(SHIPPED.read_text())
    assert tuple(d["levels"]) == LEVELS
    prov = d["provenance"]
    assert prov["command"].startswith("simllm-kernels --loco") and prov["tables"]["path"] == "engine/cost/data/tables.npz"
    assert "/work" not in json.dumps(prov) and not any(str(v).startswith("/") for v in prov.values())
    for fw in ("trtllm", "vllm", "sglang"):
        g = d["frameworks"][fw][GROUP]
        assert len(g["chips"]) == 6 and sum(g["chips"].values()) == g["n"]
        q = [x for x in g["q"] if x is not None]
        assert len(q) == len(LEVELS) and q == sorted(q)
    assert Path(SHIPPED).name == "transfer_loco.json"


def test_unknown_held_out_chip_is_named():
    """engine.cost.loco.residuals refuses a chip with no tables of the framework before any refit."""
    from engine.cost.loco import residuals
    from engine.cost.model import shipped_tables

    with pytest.raises(ValueError, match="chips nope: no vllm kernel tables.*h100_sxm"):
        residuals(shipped_tables(), "vllm", chips=["nope"])
