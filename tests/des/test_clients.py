"""Clients as benchmark tools run them (DesSpec ramp_up_s, length_jitter, think_time_dist,
warmup_s / exclude_drain; engine.des.workload.apply_clients, engine.des.metrics).

Which statistic the summary reports (engine.des.metrics docstring): ``<metric>_p50`` (and p90,
p99, p99_9) is a percentile over requests, ``<metric>_mean`` the arithmetic mean over the same
requests, for ttft_ms, tpot_ms, e2e_ms, queueing_ms; itl_ms_* are percentiles over tokens;
throughput_tok_s is a rate over the measurement window (a mean).
"""

from dataclasses import replace

import numpy as np
import pytest

from engine.des import simulate
from engine.des.workload import ramp_arrivals
from engine.spec import DesSpec

N = 128


def _closed_128(specs_with, des, jitter_sigma=0.0):
    specs = specs_with(prompt_len=1024, output_len=128, arrival="closed_loop", concurrency=N,
                       num_requests=3 * N)
    if jitter_sigma:
        n = replace(specs.calibration.noise, jitter_sigma=jitter_sigma)
        specs = replace(specs, calibration=replace(specs.calibration, noise=n))
    return simulate(specs, des).result


def test_closed_loop_of_128_identical_requests_no_longer_lock_step(specs_with):
    # without client realism every one of the first 128 requests completes at the same instant
    # (the lock-step: one prefill storm, then 128 decodes in step) and every TTFT is equal
    lock = _closed_128(specs_with, DesSpec())
    c = lock.table["completion_s"].to_numpy()[:N]
    assert len(np.unique(c)) == 1
    assert lock.summary["ttft_ms_mean"] == pytest.approx(lock.summary["ttft_ms_p50"])
    # users ramping up over 2 s, lengths +-10 %, 2 % log-normal step jitter: completions spread
    # out (they group only by output length: +-13 tokens -> at most 27 decode steps apart)
    real = _closed_128(specs_with, DesSpec(clients=dict(ramp_up_s=2.0, length_jitter=0.1)), jitter_sigma=0.02)
    c = real.table["completion_s"].to_numpy()[:N]
    _, counts = np.unique(c, return_counts=True)
    assert len(counts) >= 20 and counts.max() <= 16
    assert real.summary["ttft_ms_p50"] < 0.2 * lock.summary["ttft_ms_p50"]
    for m in ("ttft_ms", "tpot_ms", "e2e_ms", "queueing_ms"):
        assert {f"{m}_mean", f"{m}_p50", f"{m}_p99"} <= set(real.summary)


def test_ramp_time_change_by_hand():
    W = 8.0
    # a = W/8 -> sqrt(2 W W/8) = W/2; a = W/2 -> W (continuous); a = W -> W + W/2
    got = ramp_arrivals(np.array([0.0, W / 8, W / 2, W]), W)
    assert np.allclose(got, [0.0, W / 2, W, 1.5 * W])


def test_closed_loop_users_start_evenly_over_the_ramp(specs_with):
    specs = specs_with(arrival="closed_loop", concurrency=8, num_requests=16)
    t = simulate(specs, DesSpec(clients=dict(ramp_up_s=4.0))).result.table
    # user i of 8 starts at i x 4 / 8 s
    assert np.allclose(t["arrival_s"].to_numpy()[:8], np.arange(8) * 0.5)


def test_length_jitter_bounds_and_seed(specs_with):
    specs = specs_with(num_requests=200, prompt_len=1000, output_len=100)
    a = simulate(specs, DesSpec(clients=dict(length_jitter=0.2))).result.table
    b = simulate(specs, DesSpec(clients=dict(length_jitter=0.2))).result.table
    p, o = a["prompt_len"].to_numpy(), a["output_len"].to_numpy()
    assert p.min() >= 800 and p.max() <= 1200 and o.min() >= 80 and o.max() <= 120
    assert p.std() > 50                           # uniform on +-200: std 200/sqrt(3) = 115
    assert np.array_equal(p, b["prompt_len"].to_numpy())


def test_exponential_think_time_has_the_mean(specs_with):
    specs = specs_with(arrival="closed_loop", concurrency=1, think_time_s=1.0, num_requests=300,
                       prompt_len=64, output_len=2)
    t = simulate(specs, DesSpec(clients=dict(think_time_dist="exponential"))).result.table
    think = t["arrival_s"].to_numpy()[1:] - t["completion_s"].to_numpy()[:-1]
    # exponential, mean 1 s: the sample mean of 299 draws is within 4 standard errors (1/sqrt(299))
    assert abs(think.mean() - 1.0) < 4 / np.sqrt(299)
    assert think.std() > 0.5


def test_measurement_window_drops_warm_up_and_drain(specs_with):
    specs = specs_with(arrival="closed_loop", concurrency=16, num_requests=160)
    r = simulate(specs, DesSpec(clients=dict(warmup_s=1.0, exclude_drain=True))).result
    t, s = r.table, r.summary
    m = t.filter(t["measured"])
    last_arrival = t["arrival_s"].max()
    assert m.height == s["num_measured"] < s["num_completed"] == 160
    assert m["arrival_s"].min() >= 1.0 and m["completion_s"].max() <= last_arrival
    assert s["ttft_ms_p50"] == pytest.approx(float(np.percentile(m["ttft_ms"].to_numpy(), 50)))
    # throughput: output tokens of the completions inside [1 s, last arrival] over its length
    done = t.filter((t["completion_s"] >= 1.0) & (t["completion_s"] <= last_arrival))
    assert s["throughput_tok_s"] == pytest.approx(done["output_len"].sum() / (last_arrival - 1.0))


def test_bad_client_setting_names_field():
    from engine.errors import SpecError

    with pytest.raises(SpecError, match=r"engine\.des\.clients\.length_jitter"):
        DesSpec(clients=dict(length_jitter=1.5))
    with pytest.raises(SpecError, match=r"engine\.des\.clients\.think_time_dist"):
        DesSpec(clients=dict(think_time_dist="gamma"))


def test_open_loop_rate_ramps_up(specs_with):
    # near-regular arrivals every 0.1 s (gamma, cv 0.01); a 4 s ramp moves the one due at 0.5 s
    # to sqrt(2 x 4 x 0.5) = 2 s and the one due at 3 s to 3 + 2 = 5 s (by hand, ramp_arrivals)
    specs = specs_with(num_requests=40, arrival="gamma", rate_rps=10.0, arrival_cv=0.01)
    plain = simulate(specs, DesSpec()).result.table["arrival_s"].to_numpy()
    ramped = simulate(specs, DesSpec(clients=dict(ramp_up_s=4.0))).result.table["arrival_s"].to_numpy()
    assert np.allclose(ramped, ramp_arrivals(plain, 4.0))
    assert ramped[5] == pytest.approx(2.0, rel=0.05) and ramped[30] == pytest.approx(5.0, rel=0.01)
