"""Must-show sanity physics of the DES (Llama-3.1-8B, one H100 SXM, default calibration).

Expected values come from the analytical engine (engine.analytical.run: closed-form pipeline),
not from the DES's own step model, so each test compares two independent code paths.
"""

from dataclasses import replace

import numpy as np
import pytest

from engine.analytical import run as analytical_run
from engine.des import DesSpec, simulate


def _analytical(specs, batch, prompt=512, output=128):
    from engine.spec import WorkloadSpec

    wl = WorkloadSpec(prompt_len=prompt, output_len=output, batch_size=batch)
    return analytical_run(replace(specs, workload=wl)).summary


def test_low_load_equals_analytical_batch_1(specs_with):
    # Near-constant gaps of 2 s (gamma, cv 0.01) and an E2E of ~0.7 s: every request is alone.
    # Its prefill is one pass of 512 tokens (TTFT = analytical batch-1 TTFT) and its decode the
    # steps at contexts 513..639 (their mean = analytical batch-1 TPOT).
    specs = specs_with(num_requests=20, arrival="gamma", rate_rps=0.5, arrival_cv=0.01)
    r = simulate(specs, DesSpec()).result
    a = _analytical(specs, 1)
    t = r.table
    assert t["ttft_ms"].to_numpy() == pytest.approx(a["ttft_ms_p50"], rel=0.01)
    assert t["tpot_ms"].to_numpy() == pytest.approx(a["tpot_ms_p50"], rel=0.01)
    assert r.summary["ttft_ms_p99"] == pytest.approx(a["ttft_ms_p50"], rel=0.01)
    assert r.summary["tpot_ms_p50"] == pytest.approx(a["tpot_ms_p50"], rel=0.01)
    assert r.summary["e2e_ms_p50"] == pytest.approx(a["e2e_ms_p50"], rel=0.01)
    assert r.summary["queueing_ms_p99"] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("n", [4, 16])
def test_closed_loop_lock_step_batch_n(specs_with, n):
    # n users, fixed 512/128, no think time: all n arrive together, are prefilled in one pass
    # (n*512 <= 8192 budget), decode 127 steps together and finish together, so every round is
    # the analytical static batch of n: TTFT = analytical TTFT(B=n), TPOT = analytical TPOT(B=n),
    # and the decode batch is n throughout.
    specs = specs_with(arrival="closed_loop", concurrency=n, num_requests=3 * n)
    sim = simulate(specs, DesSpec(outputs=dict(record_iterations=True)))
    a = _analytical(specs, n)
    t = sim.result.table
    assert t["tpot_ms"].to_numpy() == pytest.approx(a["tpot_ms_p50"], rel=0.01)
    assert t["ttft_ms"].to_numpy() == pytest.approx(a["ttft_ms_p50"], rel=0.01)
    tl = sim.timeline
    decode = tl.filter(tl["prefill_tokens"] == 0)
    assert (decode["batch"] == n).all()
    assert sim.result.summary["batch_size_mean"] == pytest.approx(n, rel=0.01)
    # throughput = n * 128 tokens per round of TTFT + 127 TPOT
    round_ms = a["ttft_ms_p50"] + 127 * a["tpot_ms_p50"]
    assert sim.result.summary["throughput_tok_s"] == pytest.approx(n * 128 / round_ms * 1e3, rel=0.01)


def test_littles_law(specs_with):
    # L (time average of requests in the system, counted by the event loop) = lambda x W
    # (lambda = completed / makespan, W = mean E2E from the per-request table).
    specs = specs_with(num_requests=600, arrival="poisson", rate_rps=20.0,
                       # high: the context (131,072 tokens) must hold the longest draws; 32,768 is
                       # > 10 sigma above these means, never drawn, so the stream is unchanged
                       prompt_dist={"kind": "lognormal", "sigma": 0.6, "high": 32768},
                       output_dist={"kind": "lognormal", "sigma": 0.6, "low": 2, "high": 32768})
    sim = simulate(specs, DesSpec())
    s = sim.result.summary
    lam = s["num_completed"] / s["makespan_s"]
    w = s["e2e_ms_mean"] / 1e3
    assert s["batch_size_mean"] > 5          # a loaded system, not a trivial one
    assert sim.mean_in_system == pytest.approx(lam * w, rel=0.02)


def _pressure(specs_with, blocks):
    specs = specs_with(num_requests=300, arrival="poisson", rate_rps=40.0, prompt_len=1024,
                       output_len=256, prompt_dist={"kind": "uniform", "low": 256, "high": 1792},
                       output_dist={"kind": "uniform", "low": 16, "high": 496})
    return simulate(specs, DesSpec(kv=dict(num_kv_blocks=blocks)))


@pytest.mark.parametrize("blocks", [0, 600])
def test_conservation(specs_with, blocks):
    # Every request finishes exactly once, after its first token, and the engine emits exactly
    # sum(output_len) tokens, with (600 blocks) or without preemption-by-recompute.
    sim = _pressure(specs_with, blocks)
    t, s, st = sim.result.table, sim.result.summary, sim.state
    assert s["num_completed"] == s["num_requests"] == 300 and s["num_rejected"] == 0
    assert np.isfinite(t["completion_s"].to_numpy()).all()
    assert (t["completion_s"] >= t["first_token_s"]).all() and (t["first_token_s"] > t["arrival_s"]).all()
    assert st.tokens_out == int(t["output_len"].sum()) == s["output_tokens"]
    assert sorted(t["request_id"].to_list()) == list(range(300))
    assert s["preemptions_total"] == int(t["preemptions"].sum())
    assert s["recompute_tokens"] == int(t["recomputed_tokens"].sum())
    assert (t.filter(t["preemptions"] == 0)["recomputed_tokens"] == 0).all()
    if blocks:
        assert (t.filter(t["preemptions"] > 0)["recomputed_tokens"] > 0).all()


def test_smaller_kv_cache_more_preemptions_and_higher_p99_ttft(specs_with):
    # 600 blocks of 16 tokens hold ~9,600 tokens: a handful of 1-2k-token requests, so the
    # scheduler must preempt; the full H100 cache (~26k blocks) never does.
    big, small = _pressure(specs_with, 0).result.summary, _pressure(specs_with, 600).result.summary
    assert big["preemptions_total"] == 0
    assert small["preemptions_total"] > 10
    assert small["ttft_ms_p99"] > 1.5 * big["ttft_ms_p99"]
    assert small["kv_utilisation_mean"] > big["kv_utilisation_mean"]


def test_closed_loop_think_time(specs_with):
    # One user, 1 s think time: each request arrives exactly 1 s after the previous completes.
    specs = specs_with(arrival="closed_loop", concurrency=1, think_time_s=1.0, num_requests=5)
    t = simulate(specs, DesSpec()).result.table
    gaps = t["arrival_s"].to_numpy()[1:] - t["completion_s"].to_numpy()[:-1]
    assert gaps == pytest.approx(1.0, abs=1e-12)


def test_model_that_does_not_fit_reports_it(base_specs):
    # Llama-3.1-8B's 16 GB of weights on a 12 GB device: no KV blocks, nothing runs.
    from engine.spec import WorkloadSpec

    hw = replace(base_specs.hardware, hbm_capacity_bytes=12e9)
    specs = replace(base_specs, hardware=hw,
                    workload=WorkloadSpec(prompt_len=512, output_len=128, num_requests=5))
    s = simulate(specs, DesSpec()).result.summary
    assert not s["fits_in_memory"] and s["kv_blocks"] == 0 and s["num_completed"] == 0


def test_swap_preemption_conserves_and_never_recomputes(specs_with):
    # Same pressure as above with preemption by swap: decoding sequences keep their KV (in host
    # memory), so nothing is prefilled twice, and still every token is emitted exactly once.
    # A 128 GB/s host link moves one Llama-3.1-8B token (131,072 B) in 1.02 us; at 0.001 GB/s
    # (1 ms/KB) swaps dominate and E2E grows.
    specs = specs_with(num_requests=300, arrival="poisson", rate_rps=40.0, prompt_len=1024,
                       output_len=256, prompt_dist={"kind": "uniform", "low": 256, "high": 1792},
                       output_dist={"kind": "uniform", "low": 16, "high": 496})
    fast = simulate(specs, DesSpec(kv=dict(num_kv_blocks=600),
                                   scheduling=dict(preemption="swap", swap_bandwidth_gb_s=128)))
    s = fast.result.summary
    assert s["preemptions_total"] > 10 and s["recompute_tokens"] == 0
    assert s["num_completed"] == 300 and fast.state.tokens_out == s["output_tokens"]
    slow = simulate(specs, DesSpec(kv=dict(num_kv_blocks=600),
                                   scheduling=dict(preemption="swap", swap_bandwidth_gb_s=0.001))).result.summary
    assert slow["e2e_ms_mean"] > fast.result.summary["e2e_ms_mean"]


def test_binding_bound_low_load_memory_overload_queueing(specs_with):
    # One request at a time: no queue, and a batch-1 decode step of an 8B model on H100 is
    # HBM-bound (the analytical engine says so too). Far above capacity (the load-curve
    # experiment puts it near 69 req/s) most of a request's TTFT is spent waiting: queueing.
    low = simulate(specs_with(num_requests=10, arrival="gamma", rate_rps=0.5, arrival_cv=0.01),
                   DesSpec()).result.summary
    assert low["bound"] == _analytical(specs_with(), 1)["decode_bound"] == "memory"
    high = simulate(specs_with(num_requests=400, arrival="poisson", rate_rps=400.0),
                    DesSpec()).result.summary
    assert high["queueing_ms_p50"] > 0.5 * high["ttft_ms_p50"] and high["bound"] == "queueing"


def test_bound_terms_are_the_step_models_decode_pass():
    """The bound label's decode-step terms (engine.des.run.decode_step_terms) price attention
    with the decode form of MLA on DeepSeek-V3: each more attended position per sequence adds
    B x decode_flops_per_pair of compute and B x kv_s_per_token of memory; the roof is the step
    model's own pass roof. Per pair and layer (H = 128 heads, latent r = 512, rope 64, nope 128,
    v 128): prefill form 2 H (128 + 64) + 2 H 128 = 81,920 FLOPs; absorbed decode form
    2 H (512 + 64) + 2 H 512 = 278,528 FLOPs (the old label used the former)."""
    from engine.analytical.step import StepModel
    from engine.des.run import decode_step_terms
    from tests.fixtures import specs

    sm = StepModel.from_specs(specs(model="deepseek_v3", hardware="h200", partition="tp8", framework="generic"))
    assert sm.decode_flops_per_pair / sm.flops_per_pair == pytest.approx(278528 / 81920, rel=1e-9)
    B, c1, c2 = 64.0, 1000.0, 3000.0
    a, b = decode_step_terms(sm, B, c1), decode_step_terms(sm, B, c2)
    assert b[0] - a[0] == pytest.approx(B * (c2 - c1) * sm.decode_flops_per_pair, rel=1e-9)
    assert b[1] - a[1] == pytest.approx(B * (c2 - c1) * sm.kv_s_per_token, rel=1e-9)
    assert a[3] == pytest.approx(float(sm.roof(sm.operators(B, B, *sm.attention(
        0.0, 0.0, 0.0, sm.num_layers * B * (c1 + 1), B, B)))), rel=1e-12)
