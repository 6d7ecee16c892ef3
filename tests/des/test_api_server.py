"""The framework's per-request host time as one API server serving requests in arrival order
(engine.des.cluster.loop.ApiServer, through which Loop._through_api passes each request)."""

import numpy as np
import pytest

from engine.des import DesSpec, simulate
from tests.fixtures import with_fields


def _run(base_specs, api_s, dist="fixed", seed=0, **workload):
    wl = dict(num_requests=4, prompt_len=100, output_len=4, arrival="batch")
    wl.update(workload)
    specs = with_fields(base_specs, framework=dict(per_request_s=api_s, per_request_dist=dist), workload=wl)
    return simulate(specs, DesSpec(scheduling=dict(scheduler="vllm"), seed=seed)).state


def test_a_burst_reaches_the_scheduler_one_service_time_apart(base_specs):
    # 4 requests sent together at t = 0 through a 10 ms server: they leave it (enter a replica's
    # queue) at 10, 20, 30, 40 ms - leave_i = max(arrive_i, leave_{i-1}) + 10 ms by hand.
    st = _run(base_specs, 0.010)
    np.testing.assert_allclose(np.sort(st.entered_s), [0.01, 0.02, 0.03, 0.04], rtol=1e-12)
    assert np.all(st.arrival == 0.0)


def test_spaced_arrivals_see_no_queue(base_specs):
    # Poisson-free spacing: requests 1 s apart through a 1 ms server never wait for it: each
    # enters 1 ms after it is sent, so TTFT grows by exactly 1 ms against no server (the engine
    # is idle at each arrival, so the rest of the path is the same).
    arr = dict(arrival="poisson", rate_rps=1.0)
    off, on = _run(base_specs, 0.0, **arr), _run(base_specs, 0.001, **arr)
    gaps = np.diff(np.sort(off.arrival))
    assert gaps.min() > 0.01          # the stream is spaced (a seeded Poisson stream at 1 req/s)
    np.testing.assert_allclose(on.entered_s - on.arrival, 0.001, rtol=1e-9)
    np.testing.assert_allclose((on.first_token - on.arrival) - (off.first_token - off.arrival), 0.001,
                               rtol=1e-6, atol=1e-12)


def test_closed_loop_wave_is_spread_by_the_server(base_specs):
    # 3 clients, closed loop, no think time: the first wave is sent at 0 and enters at 5, 10,
    # 15 ms; with the server off they all enter at 0.
    on = _run(base_specs, 0.005, arrival="closed_loop", concurrency=3, num_requests=6)
    off = _run(base_specs, 0.0, arrival="closed_loop", concurrency=3, num_requests=6)
    np.testing.assert_allclose(np.sort(on.entered_s[:3]), [0.005, 0.010, 0.015], rtol=1e-12)
    assert np.all(off.entered_s[:3] == 0.0)
    assert np.isfinite(on.first_token).all()


def test_the_default_law_is_exponential_with_the_same_mean(base_specs):
    # framework.per_request_dist=exponential (the profiles' default): a burst of n = 2000 requests
    # through a 10 ms server leaves it at the partial sums of n draws, so the gaps between
    # consecutive entries are the draws themselves: i.i.d. exponential of mean 10 ms. Their mean
    # is within 4 standard errors (sd of an exponential = its mean: 4 x 10 ms / sqrt(2000) =
    # 0.89 ms) and their coefficient of variation is 1 (within 0.1); the fixed law gives every
    # gap exactly 10 ms. The draws follow engine.des seed: the same seed, the same entries.
    from engine.spec.framework import FrameworkSpec

    assert FrameworkSpec().per_request_dist == "exponential"
    n = 2000
    st = _run(base_specs, 0.010, dist="exponential", num_requests=n, prompt_len=4, output_len=1)
    gaps = np.diff(np.concatenate([[0.0], np.sort(st.entered_s)]))
    assert gaps.mean() == pytest.approx(0.010, abs=4 * 0.010 / np.sqrt(n))
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.1)
    again = _run(base_specs, 0.010, dist="exponential", num_requests=n, prompt_len=4, output_len=1)
    np.testing.assert_array_equal(st.entered_s, again.entered_s)
    other = _run(base_specs, 0.010, dist="exponential", seed=1, num_requests=n, prompt_len=4, output_len=1)
    assert not np.array_equal(st.entered_s, other.entered_s)
    fixed = _run(base_specs, 0.010, num_requests=n, prompt_len=4, output_len=1)
    np.testing.assert_allclose(np.diff(np.sort(fixed.entered_s)), 0.010, rtol=1e-9)


def test_an_unknown_law_names_the_field(base_specs):
    from engine.errors import SpecError

    with pytest.raises(SpecError, match="per_request_dist"):
        _run(base_specs, 0.010, dist="gamma")


def _run_tok(base_specs, api_s, token_s, **workload):
    wl = dict(num_requests=4, prompt_len=100, output_len=4, arrival="batch")
    wl.update(workload)
    specs = with_fields(base_specs, framework=dict(per_request_s=api_s, per_request_token_s=token_s,
                                                   per_request_dist="fixed"), workload=wl)
    return simulate(specs, DesSpec(scheduling=dict(scheduler="vllm"))).state


def test_the_server_spends_time_per_prompt_token(base_specs):
    # framework.per_request_token_overhead: a request of L prompt tokens takes api_s + L token_s
    # at the server. By hand: 100-token prompts, 50 us per token, no per-request part: 5 ms each,
    # so a burst of 4 enters at 5, 10, 15, 20 ms; with 10 ms per request too, 15 ms each: 15, 30,
    # 45, 60 ms.
    st = _run_tok(base_specs, 0.0, 50e-6)
    np.testing.assert_allclose(np.sort(st.entered_s), [0.005, 0.010, 0.015, 0.020], rtol=1e-12)
    st = _run_tok(base_specs, 0.010, 50e-6)
    np.testing.assert_allclose(np.sort(st.entered_s), [0.015, 0.030, 0.045, 0.060], rtol=1e-12)


def test_the_analytical_ttft_adds_the_prompts_server_time():
    # The analytical engine adds the server's mean time for the workload's prompt: composed with
    # framework.per_request_token_overhead=5us instead of 0us, TTFT grows by prompt_len x 5 us
    # (512 x 5 us = 2.56 ms for the default workload), nothing else in the prefill moves.
    from engine.analytical import run
    from tests.conftest import compose_specs

    off = compose_specs("tracking=none", "framework.per_request_token_overhead=0us")
    on = compose_specs("tracking=none", "framework.per_request_token_overhead=5us")
    assert on.framework.per_request_token_s == pytest.approx(5e-6, rel=1e-12)
    t_off = run(off).table["ttft_ms"][0]
    t_on = run(on).table["ttft_ms"][0]
    assert t_on - t_off == pytest.approx(off.workload.prompt_len * 5e-3, rel=1e-9)


def test_a_negative_time_per_prompt_token_names_the_field(base_specs):
    from engine.errors import SpecError

    with pytest.raises(SpecError, match="per_request_token_overhead"):
        with_fields(base_specs, framework=dict(per_request_token_s=-1e-6)).framework.validate()
