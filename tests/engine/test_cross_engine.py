"""One pass price for both engines: the DES at very low load reproduces the analytical engine.

Each request arrives alone (gaps of 50 s, far longer than its end-to-end time), so the DES prices
exactly the passes the analytical batch-1 pipeline prices in closed form: one prefill pass of the
whole prompt, then decode steps at contexts S+1 .. S+N-1. The two code paths are independent:
the analytical engine sums layer-pairs with ``attention.prefill_layer_pairs`` and takes the TPOT
as the exact mean of affine lines over the contexts (``latency.mean_of_max_affine``); the DES
forms each iteration's aggregates per chunk (``StepModel.chunk_positions``) and sums the steps one
by one. The prompt (512) exceeds gpt-oss's 128-token window, so windowed layers attend exactly W
positions in every decode step, where the analytical mid-context window is exact.
"""

from dataclasses import replace

import pytest

from engine.analytical import kvcache, memory
from engine.analytical import run as analytical_run
from engine.analytical.params import param_counts
from engine.analytical.precision import weight_bytes_per_param
from engine.des import DesSpec, simulate
from engine.spec import WorkloadSpec

from tests.fixtures import specs, with_fields

CASES = {
    "llama_3_1_8b": lambda: specs(model="llama_3_1_8b", hardware="h100_sxm", partition="tp1"),
    "gpt_oss_120b_windows": lambda: specs(model="gpt_oss_120b", hardware="h100_sxm", partition="tp2"),
    "deepseek_v3_mla_moe_ep": lambda: with_fields(specs(model="deepseek_v3", hardware="h200", partition="tp8"),
                                                  partition=dict(ep=8)),
    "llama_70b_int4_g128": lambda: with_fields(
        specs(model="llama_3_1_70b", hardware="h100_sxm", partition="tp1"),
        model=dict(weight_dtype="int4", weight_group_size=128, weight_scale_dtype="bf16")),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    return request.param, CASES[request.param]()   # calibration=default, the fixtures' default


def _alone(specs, n=3, prompt=512, output=64):
    wl = WorkloadSpec(prompt_len=prompt, output_len=output, num_requests=n, arrival="gamma",
                      rate_rps=0.02, arrival_cv=0.01)
    return replace(specs, workload=wl)


def test_des_low_load_equals_analytical(case):
    # The analytical engine adds the API server's mean time per request; the DES draws each
    # request's from the profile's law (framework.per_request_dist, exponential by default), so
    # the request-by-request identity is checked with the fixed law (every request the mean).
    name, specs = case
    s = _alone(with_fields(specs, framework=dict(per_request_dist="fixed")))
    des = simulate(s, DesSpec(scheduling=dict(max_num_batched_tokens=8192, max_num_seqs=256), kv=dict(block_size=16))).result
    ana = analytical_run(replace(s, workload=replace(s.workload, batch_size=1))).summary
    t = des.table
    assert t["ttft_ms"].to_list() == pytest.approx([ana["ttft_ms_p50"]] * 3, rel=1e-9), name
    assert t["tpot_ms"].to_list() == pytest.approx([ana["tpot_ms_p50"]] * 3, rel=1e-9), name


def test_des_kv_capacity_is_the_analytical_footprint(case):
    name, specs = case
    des_spec = DesSpec(scheduling=dict(max_num_batched_tokens=8192, max_num_seqs=256), kv=dict(block_size=16))
    r = simulate(_alone(specs, n=1), des_spec).result.summary
    m, p, c, hw = specs.model, specs.partition, specs.calibration, specs.hardware
    # Hand derivation, independent of kvcache.capacity: weights per device = non-expert weights
    # / tp + routed experts / max(tp, ep), at the weight dtype incl. group scales, on the largest
    # stage (pp = 1 here: all layers); activations at the DES's largest iteration; KV room by
    # the profile's rule: vLLM's (the default profile, vllm_v1: kv_rule total_fraction) is
    # V x gpu_memory_utilization - weights - activations (its reserves are 0 GB), V the memory the
    # runtime reports: hbm_capacity x hbm_visible_fraction (the H100 sheet: 79.15 GiB); one token's
    # KV is split min(tp, KV heads) ways (MLA: 1 head, the latent is whole on every rank).
    pc = param_counts(m)
    wb = weight_bytes_per_param(m)
    w = (pc.total - pc.experts) * wb / p.tp + pc.experts * wb / max(p.tp, p.ep)
    act = memory.activation_peak_bytes(m, des_spec.scheduling.max_num_batched_tokens, des_spec.scheduling.max_num_seqs, p.tp)
    fw = specs.framework
    assert fw.kv_rule == "total_fraction" and not fw.runtime_reserve_bytes and not fw.cuda_graph_reserve_bytes
    cap = hw.hbm_capacity_bytes * hw.hbm_visible_fraction * fw.gpu_memory_utilization - w - act
    split = 1 if m.attention == "mla" else min(p.tp, m.num_kv_heads)
    tokens = cap * split / memory.kv_bytes_per_token(m)
    assert r["weights_gb"] == pytest.approx(w / 1e9, rel=1e-9), name
    assert r["kv_capacity_gb"] == pytest.approx(cap / 1e9, rel=1e-9), name
    assert r["kv_blocks"] == int(tokens // des_spec.kv.block_size), name
    # ... and it is what the analytical engine's footprint says for the same iteration
    a = kvcache.footprint(m, des_spec.scheduling.max_num_seqs, 1, p.tp, p.pp, p.ep, p.sp,
                          des_spec.scheduling.max_num_batched_tokens, hw.visible_bytes,
                          c.memory_reserve_bytes, c.kv_usable_fraction, 16,
                          kvcache.framework_rule(fw, des_spec.scheduling.max_num_batched_tokens))
    assert float(a["kv_capacity"]) / 1e9 == pytest.approx(r["kv_capacity_gb"], rel=1e-12)
