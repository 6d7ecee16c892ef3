"""engine.uncertainty: the conformal rank, the interval arithmetic and the pooling of thin regimes.
Expected numbers are computed by hand in the comments (order statistics of small samples)."""

import math

import numpy as np
import pytest
from scipy import stats

from engine.uncertainty import ErrorModel, conformal_rank, fit, regime_of, residual
from engine.uncertainty.regimes import metric_of


def _reg(**kw):
    base = {"metric": "ttft", "stat": "center", "load": "open", "framework": "vllm_v1",
            "precision": "16-bit", "backend": "measured"}
    return {**base, **kw}


def test_rank_is_ceil_n_plus_one_times_level():
    assert conformal_rank(8, 0.8) == 8      # ceil(9 x 0.8) = ceil(7.2) = 8
    assert conformal_rank(4, 0.8) == 4      # ceil(5 x 0.8) = 4 exactly (no binary-noise round-up)
    assert conformal_rank(19, 0.95) == 19   # ceil(20 x 0.95) = 19
    assert conformal_rank(18, 0.95) == 19   # ceil(19 x 0.95) = ceil(18.05) = 19 > 18: no bound
    with pytest.raises(ValueError, match="level 1.0"):
        conformal_rank(10, 1.0)


def test_interval_from_order_statistic():
    # residuals 0.0, 0.1 ... 0.9 (n = 10): median c = 0.45, scores |r - c| sorted = 0.05, 0.05, 0.15,
    # 0.15, 0.25, 0.25, 0.35, 0.35, 0.45, 0.45; rank ceil(11 x 0.8) = 9 -> q = 0.45.
    r = np.arange(10) / 10
    em = fit([_reg()] * 10, r, min_rows=8)
    iv = em.interval(_reg(), 0.8)
    assert iv.n == 10 and iv.regime.startswith("metric=ttft|load=open|stat=center|framework=vllm_v1")
    assert iv.center == pytest.approx(0.45) and iv.q == pytest.approx(0.45)
    # measured in [p exp(-(c + q)), p exp(-(c - q))] = [p e^-0.9, p e^0]
    lo, hi = iv.bounds(100.0)
    assert lo == pytest.approx(100 * math.exp(-0.9)) and hi == pytest.approx(100.0)


def test_thin_regime_pools_to_coarser_key():
    # 5 rows in framework sglang (below min_rows 8) + 10 in vllm_v1: an sglang prediction falls back
    # to (metric, load, stat), the pool of all 15 rows.
    regs = [_reg(framework="sglang")] * 5 + [_reg()] * 10
    em = fit(regs, np.linspace(-0.2, 0.2, 15), min_rows=8)
    iv = em.interval(_reg(framework="sglang"), 0.8)
    assert iv.regime == "metric=ttft|load=open|stat=center" and iv.n == 15
    # 95 % needs ceil(16 x 0.95) = 16 > 15 rows: every level too thin -> None
    assert em.interval(_reg(framework="sglang"), 0.95) is None


def test_save_load_roundtrip(tmp_path):
    em = fit([_reg()] * 9, np.linspace(0, 1, 9), provenance={"csvs": [{"name": "x.csv"}]})
    back = ErrorModel.load(em.save(tmp_path / "m.json"))
    assert back.interval(_reg(), 0.8) == em.interval(_reg(), 0.8)
    assert back.provenance["csvs"][0]["name"] == "x.csv"
    with pytest.raises(FileNotFoundError, match="uncertainty.table"):
        ErrorModel.load(tmp_path / "missing.json")


def test_exchangeable_coverage_within_binomial_band():
    # i.i.d. log-normal residuals (sigma 0.3, bias 0.1): fit on 400, test on 2000 fresh draws.
    # Conditional on the fit the coverage is Beta-distributed around the level; with n = 400 its
    # sd is ~0.02, so the band is the binomial 99.9 % band of 2000 draws widened by 3 x 0.02.
    rng = np.random.default_rng(7)
    em = fit([_reg()] * 400, rng.normal(0.1, 0.3, 400))
    test = rng.normal(0.1, 0.3, 2000)
    for level in (0.8, 0.95):
        iv = em.interval(_reg(), level)
        covered = np.mean((test >= iv.center - iv.q) & (test <= iv.center + iv.q))
        lo = stats.binom.ppf(0.0005, 2000, level) / 2000 - 3 * math.sqrt(level * (1 - level) / 400)
        hi = stats.binom.isf(0.0005, 2000, level) / 2000 + 3 * math.sqrt(level * (1 - level) / 400)
        assert lo <= covered <= hi, (level, covered, lo, hi)


def test_regime_keys():
    assert metric_of("ttft_ms_p99") == ("ttft", "tail")
    assert metric_of("itl_ms_mean") == ("tpot", "center")
    assert metric_of("throughput_tok_s_per_gpu") == ("throughput", "center")
    assert regime_of("tpot_ms_p50", "static", "generic", "fp8", "roofline")["stat"] == "center"
    with pytest.raises(ValueError, match="load kind 'burst'"):
        regime_of("tpot_ms_p50", "burst", "generic", "fp8", "roofline")
    assert residual([2.0], [1.0])[0] == pytest.approx(math.log(2))
