"""Analytical pruning: zero-load TTFT by hand from the step model, memory fit, estimate limits."""

from dataclasses import replace

import numpy as np
import pytest

from engine.analytical.step import StepModel
from engine.des.config import deployment
from engine.plan import bound
from runner.convert import specs_from_config


@pytest.fixture
def specs(cfg_of):
    return deployment(specs_from_config(cfg_of("experiment=capacity", "hardware=h100_sxm")))[0]


def test_zero_load_ttft_is_the_sum_of_the_chunk_passes(specs):
    """A 3000-token prompt in 1024-token chunks: passes of (c, k) = (1024, 0), (1024, 1024),
    (952, 2048) with c k + c (c + 1) / 2 attended pairs and k cached positions read, the last
    one emitting the first token."""
    sm = StepModel.from_specs(specs)
    hand = (sm.time(1024.0, 0.0, prefill_pairs=1024 * 1025 / 2, prefill_read=0.0)
            + sm.time(1024.0, 0.0, prefill_pairs=1024 * 1024 + 1024 * 1025 / 2, prefill_read=1024.0)
            + sm.time(952.0, 1.0, prefill_pairs=952 * 2048 + 952 * 953 / 2, prefill_read=2048.0))
    assert bound.prefill_s(sm, 3000, 1024) == pytest.approx(float(hand), rel=1e-12)
    assert bound.prefill_s(sm, 3000, 8192) == pytest.approx(
        float(sm.time(3000.0, 1.0, prefill_pairs=3000 * 3001 / 2)), rel=1e-12)


def test_estimate_prunes_what_cannot_serve(cfg_of):
    L = bound.Lengths(np.array([1000, 2000]), np.array([100, 300]))
    s70 = deployment(specs_from_config(cfg_of("experiment=capacity_l70b", "hardware=a100_sxm_80gb")))[0]
    e = bound.estimate(s70, L, 0.99, 500, 50)      # 70B in bf16 = 141 GB > one 80 GB A100
    assert not e.fits and "no KV blocks" in e.reason
    s8 = deployment(specs_from_config(cfg_of("experiment=capacity", "hardware=a100_sxm_80gb")))[0]
    e = bound.estimate(s8, L, 0.99, 500, 1.0)      # a 1 ms TPOT is below a batch-1 decode step
    assert e.fits and e.rate_rps == 0 and "zero-load p99 TPOT" in e.reason


def test_estimate_is_the_best_feasible_batch(specs):
    """The estimate's rate and batch satisfy its own constraints: r = B / (E[N-1] t(B)) with
    t(B) <= the TPOT SLO, and B + 1 breaks the named limit."""
    L = bound.Lengths(np.array([1000, 1500, 500]), np.array([200, 100, 300]))
    e = bound.estimate(specs, L, 0.99, 500, 30)
    sm = StepModel.from_specs(specs)
    B = e.batch
    x = B * L.mean_prompt / L.mean_decode
    t = float(sm.time(B + x, B + x / L.mean_prompt, prefill_pairs=x * L.pairs_per_prompt_token,
                      decode_seqs=B, decode_ctx=B * L.mean_context))
    assert e.rate_rps == pytest.approx(B / (L.mean_decode * t), rel=1e-9)
    assert t <= 0.030 and e.limit == "tpot"
    x1 = (B + 1) * L.mean_prompt / L.mean_decode
    t1 = float(sm.time(B + 1 + x1, B + 1 + x1 / L.mean_prompt, prefill_pairs=x1 * L.pairs_per_prompt_token,
                       decode_seqs=B + 1, decode_ctx=(B + 1) * L.mean_context))
    assert t1 > 0.030


def test_estimate_orders_chips_by_bandwidth(cfg_of):
    """Same model, TP1: the estimate grows with HBM bandwidth (A100 2.0 < H100 3.35 < H200 4.8 TB/s)."""
    L = bound.Lengths(np.full(50, 1000), np.full(50, 200))
    est = [bound.estimate(deployment(specs_from_config(cfg_of("experiment=capacity", f"hardware={h}")))[0],
                          L, 0.99, 500, 50).rate_rps for h in ("a100_sxm_80gb", "h100_sxm", "h200")]
    assert est[0] < est[1] < est[2]
