"""engine.uncertainty: the conformal rank, the interval arithmetic and the pooling of thin regimes.
Expected numbers are computed by hand in the comments (order statistics of small samples)."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from engine.uncertainty import ErrorModel, conformal_rank, fit, regime_of, residual
from engine.uncertainty.regimes import load_band, metric_of, queue_share


def _reg(**kw):
    base = {"metric": "ttft", "stat": "center", "load": "open", "band": "moderate", "framework": "vllm_v1",
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
    assert iv.n == 10 and iv.regime.startswith("metric=ttft|load=open|band=moderate|stat=center|framework=vllm_v1")
    assert iv.center == pytest.approx(0.45) and iv.q == pytest.approx(0.45)
    # measured in [p exp(-(c + q)), p exp(-(c - q))] = [p e^-0.9, p e^0]
    lo, hi = iv.bounds(100.0)
    assert lo == pytest.approx(100 * math.exp(-0.9)) and hi == pytest.approx(100.0)


def test_thin_regime_pools_to_coarser_key():
    # 5 rows in framework sglang (below min_rows 8) + 10 in vllm_v1: an sglang prediction falls back
    # to (metric, load, band, stat), the pool of all 15 rows.
    regs = [_reg(framework="sglang")] * 5 + [_reg()] * 10
    em = fit(regs, np.linspace(-0.2, 0.2, 15), min_rows=8)
    iv = em.interval(_reg(framework="sglang"), 0.8)
    assert iv.regime == "metric=ttft|load=open|band=moderate|stat=center" and iv.n == 15
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
    assert regime_of("tpot_ms_p50", "static", "generic", "fp8", "roofline")["band"] == "none"
    assert regime_of("ttft_ms_p50", "closed", "sglang", "fp8", "measured", band="heavy")["band"] == "heavy"
    assert regime_of("ttft_ms_p50", "open", "sglang", "fp8", "measured")["band"] == "unknown"
    with pytest.raises(ValueError, match="load band 'busy'"):
        regime_of("tpot_ms_p50", "closed", "generic", "fp8", "roofline", band="busy")


@pytest.mark.parametrize("queueing, ttft, band", [
    (50.0, 100.0, "light"),       # share 50 / 100 = 0.50 < 0.6
    (59.9, 100.0, "light"),       # 0.599 < 0.6
    (60.0, 100.0, "moderate"),    # 0.60: the lower edge belongs to moderate
    (138.0, 200.0, "moderate"),   # 138 / 200 = 0.69 < 0.7
    (70.0, 100.0, "heavy"),       # 0.70: heavy from its edge on
    (1492.05, 1616.56, "heavy"),  # an offline run (T17-01 as predicted): 0.923
    (0.0, 12.0, "light"),         # no queueing at all
])
def test_load_band_from_queue_share(queueing, ttft, band):
    assert load_band("closed", {"queueing_ms_mean": queueing, "ttft_ms_mean": ttft}) == band
    assert queue_share({"queueing_ms_mean": queueing, "ttft_ms_mean": ttft}) == pytest.approx(queueing / ttft)


def test_load_band_static_and_unknown():
    # a static job has no queue, whatever its summary says
    assert load_band("static", {"queueing_ms_mean": 90.0, "ttft_ms_mean": 100.0}) == "none"
    assert load_band("static", None) == "none"
    # DES summaries without the means, with NaN, a zero TTFT or non-numbers: unknown
    for s in (None, {}, {"ttft_ms_mean": 10.0}, {"queueing_ms_mean": float("nan"), "ttft_ms_mean": 10.0},
              {"queueing_ms_mean": 0.0, "ttft_ms_mean": 0.0}, {"queueing_ms_mean": True, "ttft_ms_mean": 2.0}):
        assert load_band("open", s) == "unknown", s
    assert math.isnan(queue_share({}))


def test_regime_without_band_is_completed_and_pools():
    # rows fitted without a band (callers or residual files from before it): static -> none, the
    # others -> unknown; a job with a band finds no rows at the band's levels and pools to
    # (metric, load, stat): 10 rows 0.00 .. 0.09, c = 0.045, 80 %: k = 9 -> q = 0.045.
    old = {k: v for k, v in _reg().items() if k != "band"}
    em = fit([old] * 10, np.arange(10) / 100)
    assert "metric=ttft|load=open|band=unknown|stat=center" in em.regimes
    iv = em.interval(_reg(band="heavy"), 0.8)
    assert iv.regime == "metric=ttft|load=open|stat=center" and iv.q == pytest.approx(0.045)
    assert em.interval(old, 0.8).regime.startswith("metric=ttft|load=open|band=unknown|stat=center|")


def test_table_fitted_before_the_band_is_looked_up_with_its_own_hierarchy(tmp_path):
    # an intervals.json of the six-field format (its "hierarchy" has no band): read, and looked
    # up at its own finest key, band or not in the asked regime
    old_h = [["metric", "load", "stat", "framework", "precision", "backend"], ["metric", "load", "stat"], ["metric"]]
    key = "metric=ttft|load=open|stat=center|framework=vllm_v1|precision=16-bit|backend=measured"
    st = {"n": 9, "center": 0.1, "scores": [0.01 * i for i in range(1, 10)]}
    (tmp_path / "old.json").write_text(json.dumps({"format": 1, "hierarchy": old_h, "min_rows": 8, "provenance": {},
                                                   "regimes": {key: st, "metric=ttft|load=open|stat=center": st,
                                                               "metric=ttft": st}}))
    em = ErrorModel.load(tmp_path / "old.json")
    iv = em.interval(_reg(band="heavy"), 0.8)       # 80 %: k = ceil(10 x 0.8) = 8 -> q = 0.08
    assert iv.regime == key and iv.q == pytest.approx(0.08) and iv.center == pytest.approx(0.1)


def test_old_residual_file_without_band_reads(tmp_path):
    from engine.uncertainty.residuals import read

    p = tmp_path / "old.residuals.csv"
    p.write_text("id,metric,stat,load,framework,precision,backend,log_ratio\n"
                 "A,ttft,center,static,vllm_v1,16-bit,measured,0.1\n"
                 "B,tpot,center,closed,sglang,fp8,measured,-0.2\n")
    ids, regs, res = read(p)
    assert ids == ["A", "B"] and res == [0.1, -0.2]
    assert [g["band"] for g in regs] == ["none", "unknown"]
    assert fit(regs, res).regimes["metric=tpot|load=closed|band=unknown|stat=center"]["n"] == 1


def test_spread_table_per_band(tmp_path):
    # 10 light rows 0.00 .. 0.09: c = 0.045, 80 %: k = 9 -> q = 0.045; 95 %: k = ceil(11 x 0.95) = 11 > 10 -> '-'
    from engine.uncertainty.residuals import spread_table

    p = tmp_path / "r.residuals.csv"
    p.write_text("id,metric,stat,load,band,framework,precision,backend,log_ratio\n" + "".join(
        f"R{i},ttft,center,closed,light,sglang,16-bit,measured,{i / 100}\n" for i in range(10)))
    lines = spread_table(p).splitlines()
    assert lines[1].split() == ["ttft", "closed", "light", "10", "+0.045", "0.045", "-"]
