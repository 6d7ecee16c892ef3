"""The request's path to its first token: scheduling one iteration ahead (engine.des.ahead)."""

from dataclasses import replace

import numpy as np
import pytest

from engine.analytical.step import StepModel
from engine.des import DesSpec, simulate
from engine.des.workload import RequestStream
from engine.errors import SpecError
from engine.spec import FrameworkSpec
from tests.fixtures import prefill_chunk_aggregates, with_fields


def _two(base_specs, ahead):
    """Request 0 (prompt 100, 50 out) at 0 s; request 1 (prompt 400, 50 out) at 50 ms, while
    request 0 decodes alone; decode-first chunked prefill (sarathi), the generic profile."""
    specs = with_fields(base_specs, framework=dict(schedule_ahead=ahead))
    stream = RequestStream(arrival_s=np.array([0.0, 0.05]), prompt=np.array([100, 400]),
                           output=np.array([50, 50]), priority=np.zeros(2, np.int8))
    return simulate(specs, DesSpec(scheduling=dict(scheduler="sarathi", chunk_size=512)), stream=stream).result


def _boundaries(sm, n):
    """Iteration ends of request 0 alone, by hand: its prefill (100 tokens, one logit), then
    decode step j of one sequence attending 101 + j positions (``StepModel.time`` with one decode
    sequence and that context: the decode aggregates of engine.des.features.decoding)."""
    pairs, read = prefill_chunk_aggregates(100, 0)
    b = [float(sm.time(100.0, 1.0, pairs, read))]
    for j in range(n):
        b.append(b[-1] + float(sm.time(1.0, 1.0, decode_seqs=1.0, decode_ctx=101.0 + j)))
    return b


def _mixed(sm, c):
    """Request 1's 400-token prompt beside request 0's decode attending ``c`` positions."""
    return float(sm.time(401.0, 2.0, 400 * 401 / 2, 0.0, decode_seqs=1.0, decode_ctx=float(c)))


@pytest.mark.parametrize("ahead", [0, 1])
def test_arrival_joins_after_the_iteration_already_scheduled(base_specs, ahead):
    # Request 1 arrives during decode step j* of request 0 (b[j*] < 0.05 <= b[j*+1]). A
    # synchronous loop (ahead 0) runs its prompt in the iteration after that step, from b[j*+1];
    # scheduling one ahead, the iteration after that one was fixed already: from b[j*+2]. That
    # iteration holds request 0's decode, attending c = 101 + (decode steps before it) positions,
    # beside the 400-token prompt: T = 401, logits 2, prompt pairs 400*401/2, no cached reads.
    sm = StepModel.from_specs(base_specs)
    b = _boundaries(sm, 49)
    j = int(np.searchsorted(b, 0.05, side="left")) - 1
    m = j + 1 + ahead                 # decode steps of request 0 before request 1's iteration
    dt = _mixed(sm, 101 + m)
    r = _two(base_specs, ahead)
    assert r.table["ttft_ms"][1] == pytest.approx((b[m] + dt - 0.05) * 1e3, rel=1e-9)
    # request 0 went first into an idle engine: its first token is its prefill either way
    assert r.table["ttft_ms"][0] == pytest.approx(b[0] * 1e3, rel=1e-12)


def test_lag_is_one_decode_step_and_leaves_decoding_alone(base_specs):
    # The difference ahead=1 minus ahead=0 in request 1's TTFT is one decode step of request 0
    # alone (b[m+1] - b[m]) plus the mixed iteration's change from one more cached token; the
    # single request on an idle engine is untouched (TTFT, TPOT exactly equal).
    r0, r1 = _two(base_specs, 0), _two(base_specs, 1)
    sm = StepModel.from_specs(base_specs)
    b = _boundaries(sm, 49)
    m = int(np.searchsorted(b, 0.05, side="left"))
    step = b[m + 1] - b[m]
    mixed = _mixed(sm, 102 + m) - _mixed(sm, 101 + m)
    d = (r1.table["ttft_ms"][1] - r0.table["ttft_ms"][1]) / 1e3
    assert d == pytest.approx(step + mixed, rel=1e-9)
    alone = with_fields(base_specs, workload=dict(num_requests=3, prompt_len=100, output_len=20,
                                                  arrival="batch"))
    a0 = simulate(alone, DesSpec(scheduling=dict(scheduler="sarathi"))).result.table
    a1 = simulate(with_fields(alone, framework=dict(schedule_ahead=1)),
                  DesSpec(scheduling=dict(scheduler="sarathi"))).result.table
    assert a0["ttft_ms"].to_list() == a1["ttft_ms"].to_list()
    assert a0["tpot_ms"].to_list() == a1["tpot_ms"].to_list()


@pytest.mark.parametrize("bad", [2, -1, True, 0.5])
def test_schedule_ahead_is_zero_or_one(bad):
    with pytest.raises(SpecError, match="schedule_ahead"):
        replace(FrameworkSpec(), schedule_ahead=bad)


def test_ttft_parts_add_up_and_name_the_step_scheduled_ahead(base_specs):
    # The parts are differences of consecutive timestamps: they add up to TTFT per request. In
    # the two-request case request 1's schedule-ahead share is the one decode step of request 0
    # it waited for besides the synchronous loop's wait (b[m+1] - b[m], hand-derived as above).
    from engine.des import ttft_parts

    specs = with_fields(base_specs, framework=dict(schedule_ahead=1))
    stream = RequestStream(arrival_s=np.array([0.0, 0.05]), prompt=np.array([100, 400]),
                           output=np.array([50, 50]), priority=np.zeros(2, np.int8))
    sim = simulate(specs, DesSpec(scheduling=dict(scheduler="sarathi", chunk_size=512)), stream=stream)
    t = ttft_parts.table(sim.state)
    total = sum(t[f"ttft_{k}_ms"].to_numpy() for k in ("path", "queue", "prefill", "first_token"))
    np.testing.assert_allclose(total, t["ttft_ms"].to_numpy(), rtol=1e-12)
    sm = StepModel.from_specs(base_specs)
    b = _boundaries(sm, 49)
    m = int(np.searchsorted(b, 0.05, side="left"))
    assert t["ttft_ahead_ms"][1] == pytest.approx((b[m + 1] - b[m]) * 1e3, rel=1e-9)
    assert t["ttft_ahead_ms"][0] == 0.0
    s = sim.result.summary
    assert s["ttft_ahead_ms_mean"] == pytest.approx(t["ttft_ahead_ms"].mean(), rel=1e-12)
