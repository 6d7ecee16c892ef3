"""Unit checks of the analytical formulas against hand computations and brute force."""

import math

import numpy as np
import pytest

from engine.analytical import comm, latency, run, sweep, traffic
from engine.analytical.attention import pair_flops_per_layer, prefill_layer_pairs
from engine.errors import SpecError
from engine.spec import (AnalyticalSpec, CalibrationSpec, HardwareSpec, ModelSpec, PartitionSpec, Specs,
                         WorkloadSpec)

H100 = dict(name="h100", peak_flops_bf16=989.4e12, hbm_capacity_bytes=80e9,
            hbm_bandwidth_bytes_s=3.35e12, scaleup_bandwidth_bytes_s=450e9, scaleup_latency_s=2e-6,
            scaleout_bandwidth_bytes_s=50e9, scaleout_latency_s=5e-6, devices_per_node=8)
L8B = dict(name="l8b", num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8, head_dim=128,
           ffn_size=14336, vocab_size=128256)
IDEAL = CalibrationSpec(1.0, 1.0, 1.0, 0.0, 1.0, name="ideal")


def specs(tp=1, batch=1, prompt=512, output=128, calib=IDEAL, opts=None, **hw):
    return Specs(HardwareSpec(**{**H100, **hw}), ModelSpec(**L8B), PartitionSpec(tp=tp),
                 WorkloadSpec(prompt_len=prompt, output_len=output, batch_size=batch), calib,
                 opts or AnalyticalSpec())


def test_mean_of_max_affine_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(200):
        a0, b0 = rng.uniform(0, 10, 2)
        a1, b1 = rng.uniform(-0.1, 0.1, 2)
        x0 = rng.uniform(0, 50)
        x1 = x0 + rng.uniform(0, 100)
        xs = np.linspace(x0, x1, 200_001)
        brute = np.maximum(a0 + a1 * xs, b0 + b1 * xs).mean()
        assert latency.mean_of_max_affine(a0, a1, b0, b1, x0, x1) == pytest.approx(brute, rel=1e-4)
    assert latency.mean_of_max_affine(1, 0, 2, 0, 5, 5) == 2


def test_tpot_is_mean_of_discrete_steps():
    """TPOT = mean over decode steps at contexts S+1..S+N-1 of max(compute, memory): recompute it
    step by step from the table's per-token quantities at a batch where the bound flips.
    roofline = "pass": one max over the whole step's FLOPs and bytes."""
    s = specs(batch=400, prompt=16, output=512, opts=AnalyticalSpec(roofline="pass"))
    r = run(s).summary
    # per-step compute and memory times from first principles (tp=1, ideal efficiency):
    P_tok = 32 * (4096 * 128 * (2 * 32 + 2 * 8) + 3 * 4096 * 14336)
    P_head = 128256 * 4096
    kvpt = 2 * 32 * 8 * 128 * 2
    act = traffic.activation_elems_per_token(s.model) * 2
    weights = (P_tok + P_head + 32 * 2 * 4096 + 4096) * 2
    B = 400
    steps, compute_bound = [], []
    for c in range(17, 16 + 512):
        flops = B * 2 * (P_tok + P_head) + B * 32 * 4 * 32 * 128 * c
        bytes_ = weights + B * kvpt * (c + 1) + B * act
        steps.append(max(flops / 989.4e12, bytes_ / 3.35e12))
        compute_bound.append(flops / 989.4e12 > bytes_ / 3.35e12)
    assert r["fits_in_memory"]
    assert compute_bound[0] and not compute_bound[-1]  # the crossing lies inside the range
    assert r["tpot_ms_p50"] == pytest.approx(np.mean(steps) * 1e3, rel=2e-3)


def test_attention_prefill_flops_hand():
    """The live attention count (engine.analytical.attention): FLOPs = pair FLOPs x layer-pairs."""
    m = ModelSpec(name="t", num_layers=1, hidden_size=1, num_heads=1, num_kv_heads=1, head_dim=1,
                  ffn_size=1, vocab_size=1, attention="mha")
    # L=1, nh=1, dh=1, S=3: positions attend to 1,2,3 keys -> 4*(1+2+3) = 24 FLOP
    assert pair_flops_per_layer(m) * prefill_layer_pairs(m, 3) == 24
    # with 2 cached tokens: 4*(3+4+5) = 48
    assert pair_flops_per_layer(m) * prefill_layer_pairs(m, 3, 2) == 48


def test_ring_allreduce_hand():
    # 8 devices, 1 MB, 100 GB/s, 1 us: 14 us + 2*7/8 * 1e6/1e11 s = 14 us + 17.5 us
    assert comm.ring_allreduce_time(1e6, 8, 100e9, 1e-6) == pytest.approx(31.5e-6)
    assert comm.ring_allreduce_time(1e6, 1, 100e9, 1e-6) == 0


def test_expected_experts_touched():
    assert traffic.expected_experts_touched(8, 2, 1) == pytest.approx(2)
    assert traffic.expected_experts_touched(8, 2, 2) == pytest.approx(8 * (1 - 0.75 ** 2))
    assert traffic.expected_experts_touched(8, 2, 1000) == pytest.approx(8)


def test_batch_star_is_where_compute_meets_memory():
    s = specs(batch=1, prompt=256, output=2)
    bstar = run(s).summary["batch_star"]
    assert math.isfinite(bstar) and bstar > 1
    below = run(specs(batch=int(bstar * 0.8), prompt=256, output=2)).summary
    above = run(specs(batch=int(bstar * 1.25), prompt=256, output=2)).summary
    assert below["decode_bound"] == "memory" and above["decode_bound"] == "compute"


def test_tp_adds_allreduce_and_splits_work():
    one = run(specs(tp=1, batch=8)).summary
    two = run(specs(tp=2, batch=8)).summary
    assert two["tpot_ms_p50"] < one["tpot_ms_p50"]
    assert two["weights_gb"] == pytest.approx(one["weights_gb"] / 2)
    # decode comm: 2 all-reduces x 32 layers of 8*4096*2 B over tp=2 at 450 GB/s, 2 us hops
    msg = 8 * 4096 * 2
    hand = 64 * (2 * 2e-6 + 2 * 0.5 * msg / 450e9)
    assert run(specs(tp=2, batch=8)).table["decode_comm_ms"][0] == pytest.approx(hand * 1e3)


def test_does_not_fit_reports_no_latency():
    s = specs(batch=64, prompt=32768, output=1024)
    r = run(s).summary
    assert r["fits_in_memory"] is False
    assert math.isnan(r["ttft_ms_p50"]) and math.isnan(r["tpot_ms_p50"])
    assert "KV" in r["memory_reason"]


def test_sweep_matches_pointwise():
    s = specs(batch=1)
    df = sweep(s, batch_size=[1, 4, 16], hbm_bandwidth_bytes_s=[2e12, 4e12])
    assert df.height == 6
    for row in df.iter_rows(named=True):
        point = run(specs(batch=int(row["batch_size"]),
                          hbm_bandwidth_bytes_s=row["hbm_bandwidth_bytes_s"])).summary
        assert row["tpot_ms"] == pytest.approx(point["tpot_ms_p50"])
        assert row["ttft_ms"] == pytest.approx(point["ttft_ms_p50"])


def test_spec_errors_name_the_field():
    with pytest.raises(SpecError, match=r"partition\.tp"):
        Specs(HardwareSpec(**H100), ModelSpec(**L8B), PartitionSpec(tp=3),
              WorkloadSpec(prompt_len=8, output_len=8), IDEAL)
    with pytest.raises(SpecError, match=r"hardware\.hbm_bandwidth"):
        HardwareSpec(**{**H100, "hbm_bandwidth_bytes_s": 3.35e15})
    with pytest.raises(SpecError, match=r"model\.num_kv_heads"):
        ModelSpec(**{**L8B, "num_kv_heads": 5})
    with pytest.raises(SpecError, match=r"hardware\.peak_fp8"):
        HardwareSpec(**H100).peak_flops("fp8")


def test_sparse_figures_are_halved():
    hw = HardwareSpec(**{**H100, "peak_flops_bf16": 1978.8e12, "compute_figures_sparse": True})
    assert hw.peak_flops("bf16") == pytest.approx(989.4e12)


def test_step_model_matches_pipeline():
    """A decode-only pass of B sequences at context c and a single-pass prefill, through the
    step model, equal the pipeline's decode step and TTFT (same formulas, two code paths)."""
    from engine.analytical.step import StepModel
    from tests.fixtures import prefill_chunk_aggregates

    for tp in (1, 2):
        s = specs(tp=tp, batch=8, prompt=1000, output=2)
        sm = StepModel.from_specs(s)
        row = run(s).table.row(0, named=True)
        c = 1001  # the one decode step's context
        dec = sm.time(8, 8, 8 * c, 8 * c)
        assert dec * 1e3 == pytest.approx(row["tpot_ms"], rel=1e-9)
        pairs, read = prefill_chunk_aggregates(1000, 0)
        pf = sm.time(8 * 1000, 8, 8 * pairs, 8 * read)
        assert pf * 1e3 == pytest.approx(row["ttft_ms"], rel=1e-9)


def test_overheads_add_where_stated():
    """step_overhead per pass, per_token_overhead x B per pass, per_request once in TTFT."""
    base = run(specs(batch=4)).summary
    cal = CalibrationSpec(1.0, 1.0, 1.0, 0.0, 1.0, step_overhead_s=100e-6,
                          per_token_overhead_s=10e-6, per_request_overhead_s=1e-3, name="oh")
    oh = run(specs(batch=4, calib=cal)).summary
    assert oh["tpot_ms_p50"] - base["tpot_ms_p50"] == pytest.approx(0.1 + 4 * 0.01)
    assert oh["ttft_ms_p50"] - base["ttft_ms_p50"] == pytest.approx(0.1 + 4 * 0.01 + 1.0)
