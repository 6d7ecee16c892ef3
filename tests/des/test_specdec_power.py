"""DES speculative decoding, energy, TDP throttle, token timestamps and the lower-bound ratios.

Low load (each request alone) makes the DES price the analytical batch-1 passes, so its figures
are checked against the analytical engine (an independent closed form: exact means over contexts
vs the DES's step-by-step sums); the throttle's cap is checked by hand on one long iteration."""

from dataclasses import replace

import numpy as np
import pytest

from engine.analytical import run as analytical_run
from engine.des import DesSpec, simulate
from engine.des.features.power import Power
from engine.spec import WorkloadSpec
from engine.spec.analytical import SpecDecodeSpec

from tests.conftest import compose_specs
from tests.fixtures import MODEL, NO_HOST, specs, with_fields

DES = dict(scheduling=dict(max_num_batched_tokens=8192, max_num_seqs=256), kv=dict(block_size=16))


@pytest.fixture(scope="module")
def l70b():
    # the profile's fitted host terms off: the engines' agreement and speculation's gain below
    # are about the passes
    return with_fields(specs(model="llama_3_1_70b", hardware="h100_sxm", partition="tp4"), framework=NO_HOST)


def _alone(base, n=12, prompt=512, output=192, sd=None):
    wl = WorkloadSpec(prompt_len=prompt, output_len=output, num_requests=n, arrival="gamma",
                      rate_rps=0.05, arrival_cv=0.01)
    s = replace(base, workload=wl)
    if sd is not None:
        s = replace(s, analytical=replace(s.analytical, spec_decode=sd))
    return s


@pytest.mark.parametrize("method", ["draft", "mtp"])
def test_spec_decode_des_matches_analytical_at_low_load(l70b, method):
    """TPOT and TTFT of draft (Llama-3.1-8B) and MTP speculation agree with the analytical
    engine within 3 %: the DES draws the accepted tokens per step (seeded), the analytical
    engine divides by E[A]; TTFT (no draws) to 1e-9."""
    sd = SpecDecodeSpec(method=method, gamma=3, acceptance=0.8, draft_model="llama_3_1_8b",
                        draft=MODEL["llama_3_1_8b"])
    s = _alone(l70b, sd=sd)
    des = simulate(s, DesSpec(**DES)).result.summary
    ana = analytical_run(replace(s, workload=replace(s.workload, batch_size=1))).summary
    assert des["tpot_ms_mean"] == pytest.approx(ana["tpot_ms_p50"], rel=0.03)
    assert des["ttft_ms_p50"] == pytest.approx(ana["ttft_ms_p50"], rel=1e-9)
    # the draws have the closed-form mean (12 x 191 tokens over ~780 steps: a few % noise)
    assert des["spec_tokens_per_step"] == pytest.approx(des["spec_expected_tokens"], rel=0.05)
    # speculation pays: plain decoding is slower
    plain = simulate(_alone(l70b), DesSpec(**DES)).result.summary
    assert des["tpot_ms_mean"] < 0.6 * plain["tpot_ms_mean"]


def test_spec_decode_kv_and_tokens(l70b):
    """Every request emits exactly its output tokens; the KV pool is whole at the end."""
    sd = SpecDecodeSpec(method="mtp", gamma=4, acceptance=0.7)
    wl = WorkloadSpec(prompt_len=256, output_len=100, num_requests=40, arrival="poisson", rate_rps=20.0)
    sim = simulate(replace(l70b, workload=wl, analytical=replace(l70b.analytical, spec_decode=sd)),
                   DesSpec(outputs=dict(token_times=True), **DES))
    t = sim.result.table
    assert sim.state.tokens_out == 40 * 100
    # token timestamps: output_len of them, first = first_token_s, last = completion_s
    for row in t.iter_rows(named=True):
        tt = row["token_times_s"]
        assert len(tt) == row["output_len"]
        assert tt[0] == pytest.approx(row["first_token_s"]) and tt[-1] == pytest.approx(row["completion_s"])
        assert np.all(np.diff(tt) >= 0)
        assert len(row["itl_ms"]) == row["output_len"] - 1


def test_des_energy_equals_analytical_at_low_load(l70b):
    """J per prefill token and per decode token: the DES sums P x step over its iterations, the
    analytical engine takes P at the mean utilisation x the mean step (both linear in time and
    busy time, so equal) - 1e-9."""
    s = _alone(l70b, n=3)
    sim = simulate(s, DesSpec(**DES)).result
    des, t = sim.summary, sim.table
    ana = analytical_run(replace(s, workload=replace(s.workload, batch_size=1))).summary
    assert des["energy_decode_j_per_token"] == pytest.approx(ana["energy_decode_j_per_token"], rel=1e-9)
    assert des["energy_prefill_j_per_token"] == pytest.approx(ana["energy_prefill_j_per_token"], rel=1e-9)
    assert t["energy_j"].to_list() == pytest.approx([ana["energy_j_per_request"]] * 3, rel=1e-9)
    # lower bounds: at spec-sheet peaks and no overheads the simulated latency is above them
    assert des["prefill_lb_ratio"] > 1 and des["decode_lb_ratio"] > 1


def test_throttle_cap_by_hand():
    """TDP 700 W, idle 0.3, peak ratio 1.4: P_idle = 210 W, dP = 770 W. The limiter's average is
    above TDP; an iteration of 10 ms all busy asks 980 W; capped at 700 W the busy part becomes
    dP b / (TDP - P_idle) = 770 x 10 / 490 = 15.71 ms; the dynamic energy stays 770 W x 10 ms, the
    static power runs over the longer time: per device 210 x 15.71 + 770 x 10 mJ = 700 W x 15.71 ms."""
    des = DesSpec(power=dict(throttle=True, peak_power_ratio=1.4, throttle_time_constant_s=5.0))
    p = Power(des, 700.0, 0.3, devices=2)
    p.ema = 800.0
    x, e, state = p.price(0.0, np.array([0.010]), np.array([0.010]))
    assert x[0] == pytest.approx(770 * 0.010 / 490)
    assert e[0] == pytest.approx(2 * (210 * x[0] + 770 * 0.010))
    assert e[0] / 2 / x[0] == pytest.approx(700.0)            # the iteration's power is TDP
    # the clock floor: min_clock 0.8 allows at most 10 / 0.8 = 12.5 ms
    p2 = Power(des.with_(power=dict(throttle_min_clock=0.8)), 700.0, 0.3, devices=2)
    p2.ema = 800.0
    assert p2.price(0.0, np.array([0.010]), np.array([0.010]))[0][0] == pytest.approx(0.0125)
    # below TDP on average: nominal clock
    p.ema = 600.0
    assert p.price(0.0, np.array([0.010]), np.array([0.010]))[0][0] == 0.010



def test_throttle_off_changes_nothing_and_on_moves_the_tail():
    # the profile's host terms off: host time idles the GPU between passes, and the test needs
    # passes busy enough to ask more than TDP
    s = with_fields(specs(workload="poisson_chat"), workload=dict(num_requests=300), framework=NO_HOST)
    base = simulate(s, DesSpec(**DES)).result
    off = simulate(s, DesSpec(power=dict(peak_power_ratio=1.3), **DES)).result         # throttle off
    assert off.table["ttft_ms"].to_list() == base.table["ttft_ms"].to_list()
    on = simulate(s, DesSpec(power=dict(peak_power_ratio=1.3, throttle=True), **DES)).result
    assert on.summary["throttled_fraction"] > 0 and on.summary["throttle_stretch_s"] > 0
    assert on.summary["ttft_ms_p99"] > base.summary["ttft_ms_p99"]
    assert on.summary["tpot_ms_p99"] > base.summary["tpot_ms_p99"]


def test_draft_kv_share_of_the_des_blocks(l70b):
    """The DES's KV blocks with a Llama-3.1-8B draft beside Llama-3.1-70B at tp 4: (KV room -
    4.015 GB draft weights) / (81,920 + 32,768 B per token per device) / 16 tokens; the default
    profile (vllm_v1) sizes KV by vLLM's rule (HBM x gpu_memory_utilization - all weights loaded
    - activations), so the draft's weights come off whole (x usable only under free_fraction)."""
    plain = simulate(_alone(l70b, n=1, output=8), DesSpec(**DES)).result.summary
    sd = SpecDecodeSpec(method="draft", gamma=3, acceptance=0.8, draft_model="llama_3_1_8b",
                        draft=MODEL["llama_3_1_8b"])
    d = simulate(_alone(l70b, n=1, output=8, sd=sd), DesSpec(**DES)).result.summary
    u = l70b.kv_usable_fraction if l70b.framework.kv_rule == "free_fraction" else 1.0
    room = plain["kv_capacity_gb"] * 1e9 - 8.03e9 * 2 / 4 * u
    assert d["kv_blocks"] == pytest.approx(room / (81920 + 32768) / 16, abs=1.5)
    assert d["kv_blocks"] < 0.7 * plain["kv_blocks"]


def test_chunked_prefill_iterations_speculate_too(l70b):
    """sarathi puts prompt chunks beside the decodes: those iterations verify gamma + 1 tokens per
    decode as well, so the accepted tokens per sequence-step still average E[A] = 2.533 (alpha 0.7,
    gamma 3) and every request emits exactly its output."""
    sd = SpecDecodeSpec(method="mtp", gamma=3, acceptance=0.7)
    wl = WorkloadSpec(prompt_len=2048, output_len=64, num_requests=60, arrival="poisson", rate_rps=8.0)
    s = replace(l70b, workload=wl, analytical=replace(l70b.analytical, spec_decode=sd))
    des = DesSpec(scheduling=dict(scheduler="sarathi", max_num_batched_tokens=512, max_num_seqs=64))
    sim = simulate(s, des)
    st = sim.state
    assert st.tokens_out == 60 * 64
    # decode steps taken in mixed iterations (with a chunk) count: steps > those of pure decode runs
    assert st.spec_tokens / st.spec_steps == pytest.approx(2.533, rel=0.05)
    plain = simulate(replace(l70b, workload=wl), des).result.summary
    assert sim.result.summary["tpot_ms_mean"] < 0.75 * plain["tpot_ms_mean"]


def test_disaggregated_pools_account_energy():
    """A disaggregated run (one prefill and one decode replica, power model on because the H100 has
    a TDP) completes, charges every request a positive, finite energy, and the requests together
    are charged no more than the devices' busy energy (iterations that move no token, such as a
    hand-off step, stay in the device total). Regression: such an iteration divided by zero."""
    s = compose_specs("hardware=h100_sxm", "workload=azure_conv_2k", "framework=vllm_v1",
                      "workload.num_requests=120")
    sim = simulate(s, DesSpec(cluster=dict(replicas=2, prefill_replicas=1), **DES)).result
    e = sim.table["energy_j"].to_numpy()
    assert len(e) == 120 and np.isfinite(e).all() and (e > 0).all()
    assert e.sum() <= sim.summary["energy_total_j"] * (1 + 1e-9)
