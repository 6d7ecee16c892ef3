"""engine.des.live.LiveEngine against the offline DES (engine.des.simulate).

The reference is independent of the live code path: ``simulate`` runs the event loop
(engine.des.cluster.Loop) over the whole request stream at once; the live engine gets the same
requests one ``submit`` at a time and is stepped by ``advance`` at arbitrary times. Same
replica, scheduler and step model, so every request's first-token and completion times, and
every inter-token gap, must be the same numbers (to float rounding), and each request must
get exactly ``output`` tokens with non-decreasing times.
"""

from dataclasses import replace

import numpy as np
import pytest

from engine.des import DesSpec, simulate
from engine.des.live import EngineFull, LiveEngine
from engine.des.workload import RequestStream, arrivals
from engine.errors import SpecError


def _stream(n, rate, seed=5, prompt_hi=3000, out_hi=200):
    rng = np.random.default_rng(seed)
    return RequestStream(arrival_s=arrivals("poisson", n, rate, rng=seed),
                         prompt=rng.integers(32, prompt_hi, n).astype(np.int64),
                         output=rng.integers(1, out_hi, n).astype(np.int64),
                         priority=np.ones(n, np.int8))


def _drive(eng, stream, steps):
    """Submit the stream's requests at their arrival times, advancing at ``steps`` extra times
    in between; returns {request index: token times}."""
    times = {i: [] for i in range(len(stream))}
    rid_of = {}
    marks = sorted([(float(a), 0, i) for i, a in enumerate(stream.arrival_s)] +
                   [(float(s), 1, -1) for s in steps])
    def collect(em):
        for rid, ts in em.tokens:
            times[rid_of[rid]].extend(ts.tolist())
        for rid in em.done:
            eng.release(rid)
    for t, kind, i in marks:
        collect(eng.advance(t))
        if kind == 0:
            rid_of[eng.submit(stream.prompt[i], stream.output[i], t)] = i
    while eng.next_time() < float("inf"):
        collect(eng.advance(eng.next_time()))
    return times


@pytest.mark.parametrize("rate,blocks", [(4.0, 0), (40.0, 0), (40.0, 600)])
def test_live_matches_simulate(base_specs, rate, blocks):
    """Light load, heavy load, and a small KV cache (600 blocks: preemptions by recompute)."""
    stream = _stream(120, rate)
    des = DesSpec(kv=dict(num_kv_blocks=blocks)) if blocks else DesSpec()
    sim = simulate(base_specs, des, stream=stream)
    st = sim.state
    rng = np.random.default_rng(1)
    steps = rng.uniform(0, float(np.nanmax(st.completion)), 300)
    eng = LiveEngine(base_specs, des, capacity=256)
    got = _drive(eng, stream, steps)
    if blocks:
        assert st.preemptions.sum() > 0     # the scenario exercises preemption
    for i in range(len(stream)):
        ts = np.array(got[i])
        assert len(ts) == stream.output[i]
        assert np.all(np.diff(ts) >= 0)
        assert ts[0] == pytest.approx(st.first_token[i], abs=1e-9)
        assert ts[-1] == pytest.approx(st.completion[i], abs=1e-9)
    assert eng.in_engine == 0
    assert eng.generation_tokens == int(stream.output.sum())


def test_advance_granularity_does_not_matter(base_specs):
    """Stepping the clock every 1 ms or only at arrivals gives the same token times."""
    stream = _stream(40, 20.0, seed=9)
    a = _drive(LiveEngine(base_specs, capacity=64), stream, [])
    b = _drive(LiveEngine(base_specs, capacity=64), stream, np.arange(0, 5, 1e-3))
    for i in a:
        np.testing.assert_allclose(a[i], b[i], rtol=0, atol=1e-12)


def test_bounds_and_refusals(base_specs):
    eng = LiveEngine(base_specs, DesSpec(kv=dict(num_kv_blocks=100)), capacity=2)
    with pytest.raises(SpecError, match="at most"):
        eng.submit(100 * 16, 10, 0.0)        # 100 blocks of 16 tokens, less the watermark
    eng.submit(10, 5, 0.0)
    eng.submit(10, 5, 0.0)
    with pytest.raises(EngineFull):
        eng.submit(10, 5, 0.0)
    with pytest.raises(SpecError, match="at least 1"):
        eng.submit(0, 5, 0.0)
    with pytest.raises(SpecError, match="prefill_replicas"):
        LiveEngine(replace(base_specs, partition=replace(base_specs.partition, dp=2)),
                   DesSpec(cluster=dict(replicas=2, prefill_replicas=1)))


@pytest.mark.parametrize("rate,blocks,D", [(40.0, 0, 2.5), (40.0, 600, 6.0)])
def test_abort_matches_the_des_deadline(base_specs, rate, blocks, D):
    """A client that goes away: ``LiveEngine.abort(rid, t)`` at each request's arrival + D, for
    every request not completed by then, against the offline DES with the end-to-end deadline D
    (``engine.des.cluster.deadline_s``: the event loop's own abort path, independent of the live code).
    The same requests must be dropped, each with the same number of tokens emitted (DES
    ``State.emitted``), and every other request (including one that an iteration in progress
    completes after its client left) must keep its first and last token times; the engine ends
    empty (dropped slots come back without ``release``). Heavy load, so requests are
    dropped from the queue and while running; with a 600-block cache also after preemption. D is
    about the median latency of each scenario without a deadline."""
    stream = _stream(120, rate)
    base = DesSpec(kv=dict(num_kv_blocks=blocks)) if blocks else DesSpec()
    st = simulate(base_specs, base.with_(cluster=dict(deadline_s=D)), stream=stream).state
    dropped = np.flatnonzero(st.cancelled)
    assert 10 < dropped.size < 110                        # both outcomes are exercised
    eng = LiveEngine(base_specs, base, capacity=256)
    times = {i: [] for i in range(len(stream))}
    rid_of = {}
    marks = sorted([(float(a), 0, i) for i, a in enumerate(stream.arrival_s)] +
                   [(float(a) + D, 1, i) for i, a in enumerate(stream.arrival_s)])

    def collect(em):
        for rid, ts in em.tokens:
            times[rid_of[rid]].extend(ts.tolist())
        for rid in em.done:
            eng.release(rid)

    rid_by_index = {}
    for t, kind, i in marks:
        collect(eng.advance(t))
        if kind == 0:
            rid = eng.submit(stream.prompt[i], stream.output[i], t)
            rid_of[rid], rid_by_index[i] = i, rid
        elif len(times[i]) < stream.output[i]:
            eng.abort(rid_by_index[i], t)
    while eng.next_time() < float("inf"):
        collect(eng.advance(eng.next_time()))
    gone = {i for i in range(len(stream)) if len(times[i]) < stream.output[i]}
    assert sorted(gone) == dropped.tolist()
    for i in range(len(stream)):
        if i in gone:
            assert len(times[i]) == st.emitted[i] < stream.output[i]
        else:
            assert len(times[i]) == stream.output[i]
            assert times[i][0] == pytest.approx(st.first_token[i], abs=1e-9)
            assert times[i][-1] == pytest.approx(st.completion[i], abs=1e-9)
    assert eng.in_engine == 0 and eng.aborted == len(gone)


def test_live_serves_what_the_des_simulates_with_prefix_caching_and_speculation(base_specs):
    """One assembly (engine.des.assembly) for both: on the Mooncake excerpt (shared prefixes)
    with prefix caching and MTP speculation on, the live engine, fed the same requests with
    their prefix hashes, emits every token at the time the offline DES records for it
    (``token_times``), with the same prefix hits, the same speculative draws and the KV blocks
    the draft's share leaves (fewer than without speculation)."""
    from pathlib import Path

    from engine.des.workload import build_stream
    from engine.spec import WorkloadSpec
    from engine.spec.analytical import SpecDecodeSpec

    trace = Path(__file__).resolve().parents[2] / "conf/workload/traces/mooncake_conv_1k.jsonl"
    wl = WorkloadSpec(arrival="trace", rate_rps=2.0, num_requests=40, prompt_len=512, output_len=128,
                      trace={"path": str(trace)})
    sd = SpecDecodeSpec(method="mtp", gamma=3, acceptance=0.7)
    specs = replace(base_specs, workload=wl, analytical=replace(base_specs.analytical, spec_decode=sd))
    des = DesSpec(kv=dict(prefix_caching=True))
    stream = build_stream(specs.workload)
    sim = simulate(specs, des.with_(outputs=dict(token_times=True)), stream=stream)
    st = sim.state
    assert st.hit_tokens > 0                              # the prefixes are shared
    assert st.spec_tokens > 1.5 * st.spec_steps           # and speculation accepts tokens
    plain_blocks = simulate(replace(base_specs, workload=wl), des, stream=stream).result.summary["kv_blocks"]
    eng = LiveEngine(specs, des, capacity=64, block_tokens=stream.block_tokens)
    assert eng.blocks == sim.result.summary["kv_blocks"] < plain_blocks
    times = {i: [] for i in range(len(stream))}
    rid_of = {}
    last = -1.0
    for i, a in enumerate(stream.arrival_s):
        if a > last:        # requests arriving together are all submitted before time moves on
            em, last = eng.advance(float(a)), a
            for rid, ts in em.tokens:
                times[rid_of[rid]].extend(ts.tolist())
            for rid in em.done:
                eng.release(rid)
        rid_of[eng.submit(stream.prompt[i], stream.output[i], float(a), hashes=stream.hashes[i])] = i
    while eng.next_time() < float("inf"):
        em = eng.advance(eng.next_time())
        for rid, ts in em.tokens:
            times[rid_of[rid]].extend(ts.tolist())
        for rid in em.done:
            eng.release(rid)
    assert eng.st.hit_tokens == st.hit_tokens and eng.st.spec_tokens == st.spec_tokens
    for i in range(len(stream)):
        np.testing.assert_allclose(times[i], np.concatenate(st.token_times[i]), rtol=0, atol=1e-9)


def test_live_api_server_queue_matches_simulate(base_specs):
    """With the framework's per-request time on (an API server serving requests one at a time,
    engine.des.cluster.loop.ApiServer), the live engine queues submissions the same way:
    identical token times at a load where requests meet at the server (40 req/s, 20 ms each)."""
    from tests.fixtures import with_fields

    specs = with_fields(base_specs, framework=dict(per_request_s=0.02))
    stream = _stream(80, 40.0)
    st = simulate(specs, DesSpec(), stream=stream).state
    assert np.nanmax(st.entered_s - st.arrival) > 0.021      # some requests waited at the server
    got = _drive(LiveEngine(specs, DesSpec(), capacity=256), stream, [])
    for i in range(len(stream)):
        ts = np.array(got[i])
        assert ts[0] == pytest.approx(st.first_token[i], abs=1e-9)
        assert ts[-1] == pytest.approx(st.completion[i], abs=1e-9)
