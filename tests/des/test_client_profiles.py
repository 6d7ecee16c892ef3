"""Benchmark-client profiles (workload.client; engine.des.workload.clients) and the TPOT
definitions of the clients (engine.des.metrics.tpot_ms)."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from engine.des import simulate
from engine.des.metrics import tpot_ms
from engine.des.workload import build_stream
from engine.des.workload.clients import PROFILES, client_des, client_requests, profile_fields
from engine.errors import SpecError
from engine.spec import DesSpec, WorkloadSpec
from engine.spec.workload import CLIENTS

N, P, O = 8, 512, 16


def test_profile_names_match_the_spec():
    assert CLIENTS == ("none", *PROFILES)
    with pytest.raises(SpecError, match="workload.client"):
        WorkloadSpec(prompt_len=8, output_len=8, client="locust")


def test_burst_closed_loop_runs_in_waves_of_one_static_batch(specs_with):
    """N identical requests sent together by N users with no think time: each wave is the same
    static batch. Derivation: the first wave is exactly the batch of N requests at t = 0 (same
    lengths, empty server), with first token at T1 and completion at C for all N; the N users
    then send again at C into an empty server, so wave k spans [kC, (k+1)C] and repeats it:
    mean TTFT = T1, mean TPOT = (C - T1) / (O - 1), mean E2E = C, arrivals k C, last completion
    W C after W waves. The reference batch is a separate open-loop run (arrival=batch)."""
    batch = simulate(specs_with(prompt_len=P, output_len=O, arrival="batch", num_requests=N)).result.table
    t1, c = batch["first_token_s"].to_numpy(), batch["completion_s"].to_numpy()
    assert np.ptp(t1) == 0 and np.ptp(c) == 0          # one batch: all together
    T1, C = float(t1[0]), float(c[0])
    W = 3
    res = simulate(specs_with(prompt_len=P, output_len=O, arrival="closed_loop", concurrency=N,
                              num_requests=W * N, client="vllm_bench"), DesSpec(clients=dict(ramp_up_s=2.0))).result
    s, t = res.summary, res.table
    assert s["num_measured"] == W * N                  # every request counts (no window)
    assert s["ttft_ms_mean"] == pytest.approx(T1 * 1e3, rel=1e-9)
    assert s["tpot_ms_mean"] == pytest.approx((C - T1) / (O - 1) * 1e3, rel=1e-9)
    assert s["e2e_ms_mean"] == pytest.approx(C * 1e3, rel=1e-9)
    assert np.allclose(np.sort(t["arrival_s"].to_numpy()), np.repeat(np.arange(W) * C, N))
    assert t["completion_s"].max() == pytest.approx(W * C, rel=1e-9)
    # the client=none settings of old validate rows (2 s ramp, +-5 %) break the waves up
    spread = simulate(specs_with(prompt_len=P, output_len=O, arrival="closed_loop", concurrency=N,
                                 num_requests=W * N),
                      DesSpec(clients=dict(ramp_up_s=2.0, length_jitter=0.05))).result.table
    assert len(np.unique(spread["completion_s"].to_numpy()[:N])) == N


def test_client_sets_the_des_fields_and_none_leaves_them():
    d = DesSpec(clients=dict(ramp_up_s=2.0, warmup_s=2.0, exclude_drain=True, length_jitter=0.05))
    assert client_des(d, "none") is d
    a = client_des(d, "aiperf").clients
    assert (a.ramp_up_s, a.warmup_s, a.exclude_drain, a.length_jitter, a.tpot_definition) == (0.0, 0.0, False, 0.0, "decode")
    assert client_des(d, "guidellm").clients.tpot_definition == "per_output_token"
    assert profile_fields("none") == {}


def test_run_length_of_each_client():
    # AIPerf as aiconfigurator's sweep runs it: --request-count 20 x concurrency; vLLM and SGLang
    # bench: --num-prompts default 1000; GuideLLM and inference-perf state their own (fallback)
    assert client_requests("aiperf", 16) == 320
    assert client_requests("vllm_bench", 16, 99) == 1000
    assert client_requests("sglang_bench", 512, 99) == 1000
    assert client_requests("guidellm", 16, 99) == 99
    assert client_requests("inference_perf", 16, 99) == 99
    assert client_requests("none", 16, 99) == 99
    wl = WorkloadSpec(prompt_len=8, output_len=8, arrival="closed_loop", concurrency=4, client="aiperf")
    assert len(build_stream(wl)) == 80
    assert len(build_stream(replace(wl, num_requests=12))) == 12     # a stated count wins


def _timeline():
    # two requests by hand: (arrival, first token, completion, output tokens)
    # r0: 0.0, 0.1, 1.9, 10 tokens; r1: 1.0, 1.5, 2.0, 1 token
    return dict(arrival=np.array([0.0, 1.0]), first_token=np.array([0.1, 1.5]),
                completion=np.array([1.9, 2.0]), output=np.array([10, 1]))


def test_tpot_decode_definition_on_a_hand_timeline():
    # decode (vLLM/SGLang bench, AIPerf, inference-perf): (1.9 - 0.1) / (10 - 1) = 200 ms; a
    # one-token output has none
    v = tpot_ms(SimpleNamespace(**_timeline()))
    assert v[0] == pytest.approx(200.0) and np.isnan(v[1])


def test_tpot_per_output_token_definition_on_a_hand_timeline():
    # GuideLLM's time_per_output_token (first token included): (1.9 - 0) / 10 = 190 ms;
    # r1: (2.0 - 1.0) / 1 = 1000 ms
    v = tpot_ms(SimpleNamespace(**_timeline(), tpot_definition="per_output_token"))
    assert v == pytest.approx([190.0, 1000.0])


def test_guidellm_reports_tpot_with_the_first_token(specs_with):
    res = simulate(specs_with(prompt_len=P, output_len=O, arrival="closed_loop", concurrency=N,
                              num_requests=2 * N, client="guidellm")).result
    t = res.table
    want = ((t["completion_s"] - t["arrival_s"]) / t["output_len"] * 1e3).to_numpy()
    assert res.summary["tpot_ms_mean"] == pytest.approx(float(want.mean()), rel=1e-12)
    # and it exceeds the decode TPOT by the first token's wait: (e2e) / O > (e2e - ttft) / (O - 1)
    dec = ((t["completion_s"] - t["first_token_s"]) / (O - 1) * 1e3).to_numpy()
    assert want.mean() > dec.mean()
    # its ITL (inter_token_latency_ms) is the decode TPOT, per request then the mean
    assert res.summary["itl_ms_mean"] == pytest.approx(float(dec.mean()), rel=1e-12)
