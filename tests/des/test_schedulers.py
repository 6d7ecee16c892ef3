"""Scheduler strategies (engine.des.schedulers); CUDA-graph padding and the framework host costs
are the step path's (tests/engine/test_framework_pass.py). The pre-refactor policies (vllm, sarathi, orca) are pinned exactly by
test_replay.py; these tests cover what is new."""

from dataclasses import replace

import numpy as np
import pytest

from engine.des import simulate
from engine.des.replica import DecodeRun, MixedRun, Replica
from engine.des.schedulers import REGISTRY
from engine.des.state import State
from engine.des.workload import RequestStream
from engine.spec import DesSpec, FrameworkSpec
from engine.spec.framework import FRAMEWORK_SCHEDULERS


def test_registry_has_every_policy_the_profiles_name():
    assert set(REGISTRY) == set(FRAMEWORK_SCHEDULERS)
    assert REGISTRY["orca"].reserves_output and not REGISTRY["sarathi"].reserves_output


def _iterations(specs_with, scheduler, **wl):
    specs = specs_with(**wl)
    sim = simulate(specs, DesSpec(scheduling=dict(scheduler=scheduler, chunk_size=512),
                                  outputs=dict(record_iterations=True)))
    return sim


def test_sglang_chunks_a_long_prompt_like_sarathi(specs_with):
    # one 2048-token prompt, chunk 512: four prefill iterations of 512 tokens before the first
    # token, the same iterations sarathi runs for a lone request (no decodes to mix in)
    wl = dict(prompt_len=2048, output_len=4, num_requests=1)
    g = _iterations(specs_with, "sglang", **wl)
    s = _iterations(specs_with, "sarathi", **wl)
    tl = g.timeline.filter(g.timeline["prefill_tokens"] > 0)
    assert tl["prefill_tokens"].to_list() == [512, 512, 512, 512]
    assert g.result.table["ttft_ms"][0] == pytest.approx(s.result.table["ttft_ms"][0], rel=1e-12)


def test_sglang_prefill_stalls_decodes_sarathi_mixes_them(specs_with):
    # request 0 decodes 200 tokens; request 1 arrives 0.5 s later. SGLang runs its prompt as a
    # prefill-only iteration (batch 1: the chunk alone); Sarathi puts it beside the decode (batch 2)
    wl = dict(prompt_len=256, output_len=200, num_requests=2, arrival="gamma", rate_rps=2.0, arrival_cv=0.01)
    g = _iterations(specs_with, "sglang", **wl).timeline
    s = _iterations(specs_with, "sarathi", **wl).timeline
    second_g = g.filter(g["prefill_tokens"] > 0)["batch"].to_list()
    second_s = s.filter(s["prefill_tokens"] > 0)["batch"].to_list()
    assert second_g == [1, 1] and second_s == [1, 2]


def _replica(fw: FrameworkSpec, n: int):
    """A replica with recording step functions and ``n`` requests of 64/8 tokens queued."""
    calls = []

    def one(T, logits, chunks, nd, dctx):
        calls.append(("one", T, nd))
        return 0.010

    def many(B, dctx0, k):
        calls.append(("many", B, k))
        return np.full(k, 0.005)

    st = State(RequestStream(arrival_s=np.zeros(n), prompt=np.full(n, 64), output=np.full(n, 8),
                             priority=np.ones(n, np.int8)))
    rep = Replica(0, st, DesSpec().resolve(fw), 10_000, one, many, None, 512)
    for r in range(n):
        rep.enqueue(r, 0.0)
    return rep, calls


def test_replica_passes_the_real_decode_batch():
    # CUDA-graph padding is the step path's (StepModel.graph_tokens, tests/engine/
    # test_graph_padding.py), shared with the analytical engine: the replica asks for the 3 real
    # sequences whether or not the profile pads
    fw = replace(FrameworkSpec(), cuda_graph_sizes=(1, 2, 4, 8), cuda_graph_padding=True)
    for f in (fw, FrameworkSpec()):
        rep, calls = _replica(f, 3)
        end = rep.plan(0.0)
        assert isinstance(rep.run, MixedRun)
        rep.finish(end)
        rep.plan(end)
        assert isinstance(rep.run, DecodeRun)
        assert calls[-1][:2] == ("many", 3)


def test_no_evict_with_chunked_context_splits_prompts_keeps_reservation(specs_with):
    # TensorRT-LLM chunked context: orca admits a 2048-token prompt in 512-token chunks (budget
    # 512) and still reserves prompt + output KV at admission (never preempts)
    fw = replace(FrameworkSpec(), scheduler="orca", max_num_batched_tokens=512, preemption="none", chunked_prefill=True)
    specs = replace(specs_with(prompt_len=2048, output_len=4, num_requests=1), framework=fw)
    sim = simulate(specs, DesSpec(outputs=dict(record_iterations=True)))
    tl = sim.timeline.filter(sim.timeline["prefill_tokens"] > 0)
    assert tl["prefill_tokens"].to_list() == [512, 512, 512, 512]
    assert REGISTRY["orca"]().chunks is False      # generic / LLM-API default: whole prompts


def test_router_and_scheduler_registries_match_the_spec_choices():
    from engine.des.cluster import ROUTERS
    from engine.spec.des import ROUTERS as SPEC_ROUTERS

    assert set(ROUTERS) == set(SPEC_ROUTERS)


def test_a_new_policy_is_one_registered_class(specs_with):
    """A policy is its traits (one engine.spec.scheduling.POLICIES record) and its class: a copy
    of sarathi's behaviour with the orca reservation trait is then a valid scheduler for
    FrameworkSpec and DesSpec, its traits set the token budget (budget_is_chunk: min(8192, 512)
    = 512 tokens), the preemption check (reserves_output: preemption=none allowed) and the class
    attributes the policy reads, and it simulates without preempting."""
    from engine.des.schedulers import register
    from engine.des.schedulers.sarathi import DecodeFirst
    from engine.spec.scheduling import POLICIES, SchedulerTraits

    with pytest.raises(KeyError, match="engine.spec.scheduling"):
        register("test_reserving_chunker")
    POLICIES["test_reserving_chunker"] = SchedulerTraits(
        "test: sarathi's iterations, orca's reservation", chunks=True, chunked_prefill=True,
        reserves_output=True, budget_is_chunk=True)

    @register("test_reserving_chunker")
    class Reserving(DecodeFirst):
        pass

    assert Reserving.reserves_output and Reserving.chunks and not DecodeFirst.reserves_output
    try:
        fw = FrameworkSpec(scheduler="test_reserving_chunker", chunked_prefill=True)
        des = DesSpec(scheduling=dict(scheduler="test_reserving_chunker", preemption="none", chunk_size=512,
                                      max_num_batched_tokens=8192)).resolve(fw)
        assert des.token_budget == 512
        sim = simulate(specs_with(num_requests=20, arrival="poisson", rate_rps=20.0), des)
        assert np.isfinite(sim.state.completion).all() and sim.state.preemptions.sum() == 0
    finally:
        del REGISTRY["test_reserving_chunker"], POLICIES["test_reserving_chunker"]
    with pytest.raises(Exception, match="scheduler"):
        DesSpec(scheduling=dict(scheduler="test_reserving_chunker"))
