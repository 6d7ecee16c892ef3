"""The front end as a FIFO queue of frontend_tok_s tokens/s (engine.des.frontend)."""

import numpy as np
import pytest

from engine.des import DesSpec, simulate
from engine.des.frontend import FrontEnd, make
from tests.fixtures import with_fields


def test_single_server_timeline_by_hand():
    # 100 tokens/s = 10 ms a token. Batches (arrival, tokens): (1.00, 5) -> 1.00 + 0.05 = 1.05;
    # (1.02, 3) waits for the server: 1.05 + 0.03 = 1.08; (2.00, 1) finds it idle: 2.01.
    fe = FrontEnd(100.0)
    assert [fe.batch(1.0, 5), fe.batch(1.02, 3), fe.batch(2.0, 1)] == pytest.approx([1.05, 1.08, 2.01],
                                                                                   rel=1e-12)
    # a run of steps ending every 10 ms with 2 tokens each (20 ms of service): the queue builds,
    # f_j = 0.02 (j + 1) after the first step at 0; then a step at 0.5 with 1 token: 0.51
    fe = FrontEnd(100.0)
    np.testing.assert_allclose(fe.run(np.array([0.0, 0.01, 0.02, 0.03]), 2),
                               [0.02, 0.04, 0.06, 0.08], rtol=1e-12)
    np.testing.assert_allclose(fe.run(np.array([0.5]), np.array([1])), [0.51], rtol=1e-12)
    assert make(0.0) is None


def _one(base_specs, rate):
    specs = with_fields(base_specs, framework=dict(frontend_tok_s=rate),
                        workload=dict(num_requests=1, prompt_len=100, output_len=6, arrival="batch"))
    return simulate(specs, DesSpec(scheduling=dict(scheduler="vllm")))


def test_fast_front_end_shifts_every_token_by_its_service_time(base_specs):
    # One request, 1 us of service a token, far below a step: each token (first and streamed)
    # reaches the client 1 us after the engine emits it: TTFT + 1 us, TPOT unchanged; the
    # iterations themselves are not lengthened (the engine's first token is unchanged).
    off, on = _one(base_specs, 0.0), _one(base_specs, 1e6)
    a, b = off.result.table, on.result.table
    assert b["ttft_ms"][0] == pytest.approx(a["ttft_ms"][0] + 1e-3, rel=1e-9)
    assert b["tpot_ms"][0] == pytest.approx(a["tpot_ms"][0], rel=1e-9)
    assert on.state.first_token_engine[0] == off.state.first_token_engine[0]
    assert on.result.summary["ttft_first_token_ms_mean"] == pytest.approx(1e-3, rel=1e-6)


def test_slow_front_end_sets_the_pace_of_the_stream(base_specs):
    # 20 tokens/s = 50 ms a token, longer than any step of this request: the first token leaves
    # 50 ms after the prefill; each later token is queued behind the previous one, so they leave
    # 50 ms apart whatever the steps: TPOT = 50 ms, E2E = engine first token + 6 x 50 ms.
    r = _one(base_specs, 20.0)
    t, st = r.result.table, r.state
    assert t["ttft_ms"][0] == pytest.approx((st.first_token_engine[0] - st.arrival[0] + 0.05) * 1e3,
                                            rel=1e-9)
    assert t["tpot_ms"][0] == pytest.approx(50.0, rel=1e-9)
    assert t["e2e_ms"][0] == pytest.approx((st.first_token_engine[0] - st.arrival[0] + 0.3) * 1e3,
                                           rel=1e-9)
