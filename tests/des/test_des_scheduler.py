"""Schedulers, queue policies, admission control, replicas, routing and prefix caching."""

import numpy as np
import pytest

from engine.analytical.step import StepModel
from engine.des import DesSpec, simulate
from engine.des.workload import RequestStream
from engine.errors import SpecError
from runner.convert import _resolve_trace
from engine.spec import WorkloadSpec
from tests.fixtures import prefill_chunk_aggregates


def test_sarathi_chunks_a_long_prompt(base_specs, specs_with):
    # One 2048-token prompt, budget min(8192, 512) = 512: four chunks after 0, 512, 1024, 1536
    # cached tokens; TTFT = sum of the four pass times (the last one emits the first token).
    specs = specs_with(prompt_len=2048, output_len=4, num_requests=1)
    sm = StepModel.from_specs(base_specs)
    ttft = 0.0
    for i in range(4):
        pairs, read = prefill_chunk_aggregates(512, 512 * i)
        ttft += float(sm.time(512.0, 1.0 if i == 3 else 0.0, pairs, read))
    r = simulate(specs, DesSpec(scheduling=dict(scheduler="sarathi", chunk_size=512))).result
    assert r.table["ttft_ms"][0] == pytest.approx(ttft * 1e3, rel=1e-9)
    # vLLM (no chunking) does it in one pass of 2048
    pairs, read = prefill_chunk_aggregates(2048, 0)
    v = simulate(specs, DesSpec(scheduling=dict(scheduler="vllm"))).result
    assert v.table["ttft_ms"][0] == pytest.approx(float(sm.time(2048.0, 1.0, pairs, read)) * 1e3, rel=1e-9)


def test_sarathi_mixed_iteration_aggregates(base_specs, specs_with):
    # Request 0 (prompt 100) is decoding when request 1 (prompt 400) arrives; sarathi's next
    # iteration holds 1 decode token at context c plus the 400-token prompt:
    #   T = 401, logits = 2, pairs = c + 400*401/2, read = c.
    specs = specs_with(prompt_len=100, output_len=50, num_requests=2)
    sm = StepModel.from_specs(base_specs)
    stream = RequestStream(arrival_s=np.array([0.0, 0.05]), prompt=np.array([100, 400]),
                           output=np.array([50, 50]), priority=np.zeros(2, np.int8))
    sim = simulate(specs, DesSpec(scheduling=dict(scheduler="sarathi", chunk_size=512),
                                  outputs=dict(record_iterations=True)),
                   stream=stream)
    tl = sim.timeline
    mixed = tl.filter(tl["prefill_tokens"] == 400)
    assert mixed.height == 1 and mixed["batch"][0] == 2
    first1 = sim.result.table["first_token_s"][1]
    # context of request 0 there: 100 prompt + its first token + one per decode iteration before
    start = mixed["start_s"][0]
    before = (tl["end_s"].to_numpy() <= start) & (tl["prefill_tokens"].to_numpy() == 0)
    c = 100 + 1 + int(tl["iterations"].to_numpy()[before].sum())
    dt = float(sm.time(401.0, 2.0, c + 400 * 401 / 2, c))
    assert first1 - start == pytest.approx(dt, rel=1e-9)


def test_orca_never_preempts_and_vllm_does(specs_with):
    specs = specs_with(num_requests=120, arrival="poisson", rate_rps=40.0, prompt_len=1024,
                       output_len=256, prompt_dist={"kind": "uniform", "low": 256, "high": 1792},
                       output_dist={"kind": "uniform", "low": 16, "high": 496})
    o = simulate(specs, DesSpec(scheduling=dict(scheduler="orca"), kv=dict(num_kv_blocks=600))).result.summary
    v = simulate(specs, DesSpec(scheduling=dict(scheduler="vllm"), kv=dict(num_kv_blocks=600))).result.summary
    assert o["preemptions_total"] == 0 and v["preemptions_total"] > 0
    assert o["num_completed"] == v["num_completed"] == 120


def _overload(specs_with, **wl):
    return specs_with(num_requests=200, arrival="poisson", rate_rps=60.0, prompt_len=1024,
                      output_len=256, prompt_dist={"kind": "uniform", "low": 64, "high": 1984},
                      **wl)


def test_priority_and_sjf_policies(specs_with):
    # A small KV cache makes requests queue. Priority: class 0 waits less than class 1.
    # SJF: the shorter half of the prompts waits less than the longer half.
    specs = _overload(specs_with, priority_fraction=0.3)
    des = DesSpec(kv=dict(num_kv_blocks=800), scheduling=dict(queue_policy="priority"))
    t = simulate(specs, des).result.table
    q = [t.filter(t["priority"] == c)["queueing_ms"].mean() for c in (0, 1)]
    assert q[0] < 0.5 * q[1]
    t = simulate(specs, des.with_(scheduling=dict(queue_policy="sjf"))).result.table
    med = t["prompt_len"].median()
    short = t.filter(t["prompt_len"] < med)["queueing_ms"].mean()
    long_ = t.filter(t["prompt_len"] >= med)["queueing_ms"].mean()
    assert short < 0.5 * long_


def test_token_bucket_rejects_and_counts(specs_with):
    # 60 req/s offered for ~3.3 s into a bucket of 10 refilled at 5/s: about 10 + 5 x 3.3 = 27
    # admitted, the rest rejected.
    specs = _overload(specs_with)
    s = simulate(specs, DesSpec(scheduling=dict(admission="token_bucket", bucket_rate_rps=5.0, bucket_size=10))).result.summary
    assert s["num_rejected"] + s["num_completed"] == 200
    assert 20 <= s["num_completed"] <= 32 and s["rejected_admission"] == s["num_rejected"]


def test_replicas_round_robin_and_least_outstanding(specs_with):
    specs = specs_with(num_requests=400, arrival="poisson", rate_rps=40.0,
                       prompt_dist={"kind": "lognormal", "sigma": 0.8, "high": 65536})   # high: in the
    # context, 5.6 sigma above the mean: never drawn
    one = simulate(specs, DesSpec(cluster=dict(replicas=1))).result.summary
    rr = simulate(specs, DesSpec(cluster=dict(replicas=4, router="round_robin"))).result
    counts = rr.table.group_by("replica").len().sort("replica")["len"].to_list()
    assert counts == [100, 100, 100, 100]
    lo = simulate(specs, DesSpec(cluster=dict(replicas=4, router="least_outstanding"))).result.summary
    kv = simulate(specs, DesSpec(cluster=dict(replicas=4, router="least_kv"))).result.summary
    assert rr.summary["devices"] == 4
    for s in (rr.summary, lo, kv):
        assert s["num_completed"] == 400
        assert s["ttft_ms_p99"] < one["ttft_ms_p99"]     # four replicas queue less than one


def _mooncake(specs_with, n, rate):
    wl = _resolve_trace({"prompt_len": 512, "output_len": 128, "arrival": "trace", "rate_rps": rate,
                         "trace": {"path": "mooncake_conv_1k.jsonl"}, "num_requests": n})
    return specs_with(**{k: v for k, v in wl.items() if k not in ("prompt_len", "output_len")})


def _ideal_hit_rate(stream):
    """Leading-prefix hit fraction with an infinite cache, counted in prompt tokens: a request
    reuses its leading hash blocks already seen (at most (prompt-1)//512 of them)."""
    seen, hit = set(), 0
    for h, p in zip(stream.hashes, stream.prompt.tolist()):
        k = 0
        for x in h[:(p - 1) // 512]:
            if x not in seen:
                break
            k += 1
        hit += 512 * k
        seen.update(h[:p // 512].tolist())
    return hit / stream.prompt.sum()


def test_prefix_caching_on_mooncake_excerpt(specs_with):
    # The first 200 requests of Mooncake's conversation trace (2.7 M prompt tokens) with a cache of
    # 200k blocks (3.2 M tokens, never full): the hit rate equals the infinite-cache ideal
    # (computed above from the hash ids), prefill work drops by exactly the hit tokens, and TTFT
    # falls. (The real H100 cache, 26k blocks, holds ~30 such prompts: LRU evicts, see below.)
    from engine.des.workload import build_stream

    specs = _mooncake(specs_with, 200, 1.0)
    ideal = _ideal_hit_rate(build_stream(specs.workload))
    off = simulate(specs, DesSpec(kv=dict(prefix_caching=False, num_kv_blocks=200_000))).result.summary
    on_sim = simulate(specs, DesSpec(kv=dict(prefix_caching=True, num_kv_blocks=200_000)))
    on = on_sim.result.summary
    assert off["prefix_hit_rate"] == 0 and ideal > 0.05
    assert on["prefix_hit_rate"] == pytest.approx(ideal, rel=1e-9)
    hit = int(on_sim.state.cached_tokens.sum())
    assert on["prefill_tokens"] == off["prefill_tokens"] - hit
    assert on["ttft_ms_p50"] <= off["ttft_ms_p50"] and on["ttft_ms_mean"] < off["ttft_ms_mean"]
    assert on["num_completed"] == off["num_completed"] == 200
    two = simulate(specs, DesSpec(kv=dict(prefix_caching=True, num_kv_blocks=200_000),
                                  cluster=dict(replicas=2, router="prefix_affinity"))).result.summary
    rr = simulate(specs, DesSpec(kv=dict(prefix_caching=True, num_kv_blocks=200_000),
                                 cluster=dict(replicas=2, router="round_robin"))).result.summary
    assert two["prefix_hit_rate"] > rr["prefix_hit_rate"]


def test_prefix_cache_lru_eviction_under_pressure(specs_with):
    specs = _mooncake(specs_with, 200, 1.0)
    big = simulate(specs, DesSpec(kv=dict(prefix_caching=True, num_kv_blocks=200_000))).result.summary
    small = simulate(specs, DesSpec(kv=dict(prefix_caching=True))).result.summary     # H100: ~26k blocks
    assert small["prefix_evictions"] > 0 and big["prefix_evictions"] == 0
    assert small["prefix_hit_rate"] < big["prefix_hit_rate"]
    assert small["num_completed"] == 200


def test_noise_hook_is_applied_and_default_off(specs_with):
    # gaps of 4 s: even with every step doubled (E2E ~2.4 s at the fitted default) requests stay alone
    specs = specs_with(num_requests=5, arrival="gamma", rate_rps=0.25, arrival_cv=0.01)
    base = simulate(specs, DesSpec()).result.table
    slow = simulate(specs, DesSpec(), noise=lambda x: x * 2.0).result.table
    assert slow["ttft_ms"].to_numpy() == pytest.approx(2 * base["ttft_ms"].to_numpy(), rel=1e-9)
    assert slow["tpot_ms"].to_numpy() == pytest.approx(2 * base["tpot_ms"].to_numpy(), rel=1e-9)


def test_bad_des_setting_names_field():
    with pytest.raises(SpecError, match="engine.des.scheduling.scheduler"):
        DesSpec(scheduling=dict(scheduler="fifo"))
    with pytest.raises(SpecError, match="engine.des.scheduling.bucket_rate_rps"):
        DesSpec(scheduling=dict(admission="token_bucket"))


def test_request_too_long_for_the_cache_is_rejected(specs_with):
    specs = specs_with(num_requests=3, prompt_len=4000, output_len=100)
    s = simulate(specs, DesSpec(kv=dict(num_kv_blocks=100))).result.summary
    assert s["num_rejected"] == 3 and s["rejected_too_long"] == 3
    assert WorkloadSpec(prompt_len=1, output_len=1).arrival == "batch"


def test_disaggregated_pools_add_the_kv_handoff(specs_with):
    # One request, 512 in / 64 out, 1 prefill + 1 decode replica. Hand-off of the 512-token KV
    # (engine.analytical.disagg defaults: 50 GB/s per device, 5 us latency, 1 us per RDMA work
    # request, one WR per layer per 16-token block):
    #   bytes = 512 x 131,072 (Llama-3.1-8B: 2 x 32 layers x 8 KV heads x 128 x 2 B) = 67.1 MB
    #   t = 5 us + 67,108,864 / 50e9 + 32 x 32 x 1 us = 2.3712 ms,
    # so E2E grows by exactly that over co-located, and TTFT does not change.
    specs = specs_with(num_requests=1, output_len=64)
    co = simulate(specs, DesSpec(cluster=dict(replicas=2))).result.table
    dis = simulate(specs, DesSpec(cluster=dict(replicas=2, prefill_replicas=1))).result.table
    handoff_ms = (5e-6 + 512 * 131072 / 50e9 + 32 * 32 * 1e-6) * 1e3
    assert dis["ttft_ms"][0] == pytest.approx(co["ttft_ms"][0], rel=1e-12)
    assert dis["e2e_ms"][0] - co["e2e_ms"][0] == pytest.approx(handoff_ms, rel=1e-6)
    assert dis["replica"][0] == 1


def test_disaggregated_pools_conserve_and_remove_prefill_interference(specs_with):
    specs = specs_with(num_requests=400, arrival="poisson", rate_rps=40.0, prompt_len=1024,
                       output_len=128, prompt_dist={"kind": "lognormal", "sigma": 0.6, "high": 65536})
    co = simulate(specs, DesSpec(cluster=dict(replicas=4, router="least_outstanding"))).result.summary
    sim = simulate(specs, DesSpec(cluster=dict(replicas=4, prefill_replicas=2, router="least_outstanding")))
    dis = sim.result.summary
    assert dis["num_completed"] == 400 and sim.state.tokens_out == dis["output_tokens"]
    # decode replicas never run a prefill: no 1k-token pass between two tokens
    assert dis["itl_ms_p99"] < 0.5 * co["itl_ms_p99"]
    with pytest.raises(SpecError, match="engine.des.cluster.prefill_replicas"):
        simulate(specs, DesSpec(cluster=dict(replicas=2, prefill_replicas=2)))
