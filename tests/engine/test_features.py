"""Analytical-engine components checked against hand computations and brute-force loops (no compose: fast).

Models and chips are built inline: H100-like numbers (989.4 TFLOPS bf16, 3.35 TB/s, 80 GB,
450 GB/s + 2 us scale-up) and Llama-3.1-8B / Mixtral-8x7B shapes; calibration ideal (1.0) unless
a test says otherwise, so every expected number below is arithmetic on the stated figures.
"""

import dataclasses
import math

import numpy as np
import pytest

from engine.analytical import comm, disagg, energy, kvcache, parallel, pareto, precision, run, specdec
from engine.analytical.pipeline import evaluate
from engine.analytical.prefill import optimal_chunk
from engine.analytical.step import StepModel, build
from engine.errors import SpecError
from engine.spec import (AnalyticalSpec, CalibrationSpec, DisaggSpec, HardwareSpec, ModelSpec,
                         PartitionSpec, SpecDecodeSpec, Specs, WorkloadSpec)
from tests.fixtures import prefill_chunk_aggregates

H100 = dict(name="h100", peak_flops_bf16=989.4e12, peak_flops_fp8=1978.9e12,
            hbm_capacity_bytes=80e9, hbm_bandwidth_bytes_s=3.35e12, scaleup_bandwidth_bytes_s=450e9,
            scaleup_latency_s=2e-6, scaleout_bandwidth_bytes_s=50e9, scaleout_latency_s=5e-6,
            devices_per_node=8, tdp_w=700.0)
L8B = dict(name="l8b", num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8, head_dim=128,
           ffn_size=14336, vocab_size=128256)
MIX = dict(L8B, name="mixtral", vocab_size=32000, num_experts=8, experts_per_token=2,
           expert_ffn_size=14336)
IDEAL = CalibrationSpec(1.0, 1.0, 1.0, 0.0, 1.0, name="ideal")


def mk(model=L8B, tp=1, pp=1, ep=1, sp=1, batch=1, prompt=512, output=128, opts=None, calib=IDEAL,
       **hw):
    return Specs(HardwareSpec(**{**H100, **hw}), ModelSpec(**model),
                 PartitionSpec(tp=tp, pp=pp, ep=ep, sp=sp),
                 WorkloadSpec(prompt_len=prompt, output_len=output, batch_size=batch), calib,
                 opts or AnalyticalSpec())


# --- communication -------------------------------------------------------------------------

def test_collectives_hand():
    # 8 devices, 1 MB, 100 GB/s, 1 us hops
    assert comm.tree_allreduce_time(1e6, 8, 100e9, 1e-6) == pytest.approx(6e-6 + 20e-6)
    assert comm.allreduce_time(1e6, 8, 100e9, 1e-6, "auto") == pytest.approx(26e-6)  # ring 31.5 us
    assert comm.allreduce_time(1e3, 8, 100e9, 1e-6, "auto") == pytest.approx(6e-6 + 0.02e-6)
    # all-to-all over 4 on a switch: one alpha + 3/4 x 1 MB / 100 GB/s = 1 + 7.5 us
    assert comm.all_to_all_time(1e6, 4, 100e9, 1e-6) == pytest.approx(8.5e-6)
    # all-gather over 4 of 1 MB each: 3 x (1 + 10) us
    assert comm.all_gather_time(1e6, 4, 100e9, 1e-6) == pytest.approx(33e-6)
    for f in (comm.tree_allreduce_time, comm.all_to_all_time, comm.all_gather_time):
        assert f(1e6, 1, 100e9, 1e-6) == 0


def test_overlap_formula():
    assert parallel.overlapped(3.0, 1.0, 0.0) == 4.0
    assert parallel.overlapped(3.0, 1.0, 1.0) == 3.0
    assert parallel.overlapped(3.0, 1.0, 0.5) == 3.5
    assert parallel.overlapped(1.0, 3.0, 1.0) == 3.0


def test_scaleout_when_group_leaves_the_node():
    """tp=16 on 8-GPU nodes uses the 50 GB/s, 5 us scale-out link: a decode all-reduce of
    B=1 x 4096 x 2 B over 16 ranks costs 30 x 5 us + 30/16 x 8192 / 50e9 s."""
    s = mk(tp=16, batch=1, model=dict(L8B, num_heads=32, num_kv_heads=8))
    sm = StepModel.from_specs(s)
    ar = 30 * 5e-6 + 30 / 16 * 8192 / 50e9
    assert sm.comm_s(1.0) == pytest.approx(64 * ar)


def test_ep_replaces_ffn_allreduce_with_two_all_to_alls():
    """Mixtral, tp=2: ep=1 pays 2 all-reduces per layer; ep=2 pays 1 all-reduce + 2 all-to-alls.
    T=8 tokens: all-reduce of 8 x 4096 x 2 = 65,536 B over 2: 2 alpha + 65,536 / 450e9;
    all-to-all of 8 x 2 (top-2) / 2 (ep) x 4096 x 2 = 65,536 B over 2: alpha + 1/2 x 65,536 / 450e9."""
    ar = 2 * 2e-6 + 65_536 / 450e9
    a2a = 2e-6 + 0.5 * 65_536 / 450e9
    one = StepModel.from_specs(mk(MIX, tp=2, ep=1))
    two = StepModel.from_specs(mk(MIX, tp=2, ep=2))
    assert one.comm_s(8.0) == pytest.approx(32 * 2 * ar)
    assert two.comm_s(8.0) == pytest.approx(32 * (ar + 2 * a2a))
    # experts split max(tp, ep) = 2 ways either way; ep=4 with tp=2 needs sp=2
    assert one.expert_weight_s == pytest.approx(two.expert_weight_s)
    with pytest.raises(SpecError, match=r"partition\.ep"):
        mk(MIX, tp=2, ep=4)


def test_sp_all_gathers_kv():
    """sp=2, tp=1, T=1000 tokens: per layer an all-gather over 2 of 500 x 2 x 8 x 128 x 2 B:
    alpha + 2,048,000 B / 450e9; plus nothing else (tp = 1, pp = 1)."""
    sm = StepModel.from_specs(mk(sp=2, prompt=1000))
    ag = 2e-6 + 500 * 4096 / 450e9
    assert sm.comm_s(1000.0) == pytest.approx(32 * ag)


# --- precision ---------------------------------------------------------------------------------

def test_group_scale_bytes_and_math_dtype():
    m = ModelSpec(**L8B, weight_dtype="int4", weight_group_size=128, weight_scale_dtype="bf16")
    assert precision.weight_bytes_per_param(m) == 0.5 + 2 / 128
    assert m.math_dtype == "bf16"            # W4A16 dequantises to bf16
    fp8 = ModelSpec(**L8B, weight_dtype="fp8", activation_dtype="fp8")
    assert fp8.math_dtype == "fp8"
    assert HardwareSpec(**H100).peak_flops(fp8.math_dtype) == 1978.9e12   # fp8 x fp8: the fp8 peak
    forced = ModelSpec(**L8B, weight_dtype="fp8", compute_dtype="fp8")
    assert forced.math_dtype == "fp8"
    s = run(mk(dict(L8B, weight_dtype="int4", weight_group_size=128))).summary
    from engine.analytical.params import param_counts
    assert s["weights_gb"] == pytest.approx(param_counts(m).total * 0.515625 / 1e9)


def test_fp8_kv_halves_the_cache():
    bf = run(mk(batch=8)).summary
    f8 = run(mk(dict(L8B, kv_dtype="fp8"), batch=8)).summary
    assert f8["kv_cache_gb"] == pytest.approx(bf["kv_cache_gb"] / 2)


# --- roofline per operator vs per pass ---------------------------------------------------------

def test_op_roofline_is_sum_of_operator_maxima():
    """One decode pass of B=400 at context 17 (L8B, tp=1): the dense matmuls are compute-bound,
    attention is memory-bound, so op = max(dense) + max(attn) > pass = max(sum, sum)."""
    B, c = 400, 17
    P_tok = 32 * (4096 * 128 * (2 * 32 + 2 * 8) + 3 * 4096 * 14336)
    P_head = 128256 * 4096
    w = (P_tok + P_head + 32 * 2 * 4096 + 4096) * 2
    from engine.analytical import traffic
    act = traffic.activation_elems_per_token(ModelSpec(**L8B)) * 2
    dense_c, dense_m = B * 2 * (P_tok + P_head) / 989.4e12, (w + B * act) / 3.35e12
    att_c = B * 32 * 4 * 32 * 128 * c / 989.4e12
    att_m = B * 2 * 32 * 8 * 128 * 2 * (c + 1) / 3.35e12
    op = StepModel.from_specs(mk()).time(B, B, B * c, B * c)
    ps = StepModel.from_specs(mk(opts=AnalyticalSpec(roofline="pass"))).time(B, B, B * c, B * c)
    assert op == pytest.approx(max(dense_c, dense_m) + max(att_c, att_m))
    assert ps == pytest.approx(max(dense_c + att_c, dense_m + att_m))
    assert op > ps


# --- prefill -------------------------------------------------------------------------------------

@pytest.mark.parametrize("roofline", ["op", "pass"])
@pytest.mark.parametrize("S,C,B", [(1000, 256, 1), (4096, 512, 2), (3000, 1000, 4), (513, 512, 1)])
def test_chunked_prefill_equals_loop_of_passes(roofline, S, C, B):
    """Chunked TTFT (closed-form sums) = a Python loop of StepModel passes, prompt after prompt
    (C is the token budget of a pass), chunk by chunk, with a 50 us step overhead per pass and
    10 us per emitted token (only a prompt's last chunk emits)."""
    cal = CalibrationSpec(1.0, 1.0, 1.0, 0.0, 1.0, step_overhead_s=50e-6, per_token_overhead_s=10e-6,
                          name="oh")
    s = mk(batch=B, prompt=S, calib=cal, opts=AnalyticalSpec(roofline=roofline, prefill_chunk=C))
    sm = StepModel.from_specs(s)
    t = 0.0
    for _ in range(B):
        k = 0
        while k < S:
            c = min(C, S - k)
            pairs, read = prefill_chunk_aggregates(c, k)
            t += sm.time(c, 1 if k + c == S else 0, pairs, read)
            k += c
    r = run(s).summary
    assert r["ttft_ms_p50"] == pytest.approx(t * 1e3, rel=1e-9)
    assert r["prefill_passes"] == B * math.ceil(S / C)
    # activation memory is sized by the pass's C tokens, not B x S
    one = run(dataclasses.replace(s, analytical=AnalyticalSpec(roofline=roofline))).summary
    assert r["activation_gb"] <= one["activation_gb"]


def test_chunk_star_is_the_brute_force_minimum():
    """C* search = argmin of TTFT over the candidates, each evaluated on its own run.

    In a roofline model with causal attention TTFT(C) cannot be U-shaped: the attention pairs of
    all chunks add up to the single pass's, sum_i [C k_i + C(C+1)/2] = S(S+1)/2, so chunking only
    adds weight and KV re-reads and per-pass overheads; TTFT falls monotonically with C and the
    single pass (C = S) wins. (What chunking buys is decode interference and activation memory.)"""
    cal = CalibrationSpec(1.0, 1.0, 1.0, 0.0, 1.0, step_overhead_s=200e-6, name="oh")
    cands = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
    s = mk(batch=1, prompt=32768, output=2, calib=cal, tp=8,
           opts=AnalyticalSpec(chunk_search=True, chunk_candidates=cands))
    r = run(s).summary
    ttft = {C: run(dataclasses.replace(s, analytical=AnalyticalSpec(prefill_chunk=C))).summary["ttft_ms_p50"]
            for C in cands}
    ttft[32768] = run(dataclasses.replace(s, analytical=AnalyticalSpec())).summary["ttft_ms_p50"]
    best = min(ttft, key=ttft.get)
    assert r["chunk_star"] == best == 32768
    assert r["ttft_at_chunk_star_ms"] == pytest.approx(ttft[best])
    values = [ttft[c] for c in sorted(ttft)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_pp_prefill_warmup_and_decode_microbatching():
    """pp=2, B=8 (no overheads, no overlap), t(b) = one pass of b sequences without hand-offs,
    hop(b) = one stage hand-off of b tokens x 4096 x 2 B (2 us + bytes / 450 GB/s):
      decode, m = 2 microbatches of 4: TPOT = max(2 (t(4)/2 + hop(4)), 2 t(4)/2) = t(4) + 2 hop(4)
      decode, m = 1:                  TPOT = max(2 (t(8)/2 + hop(8)), t(8)/2)   = t(8) + 2 hop(8)
      prefill, m = 2 microbatches of 4 prompts: TTFT = (2 + 2 - 1) t_pf(4)/2 + hop(4 x S)."""
    S = 256
    s2 = mk(pp=2, batch=8, prompt=S, output=2)
    sm = StepModel.from_specs(s2)
    c = S + 1

    def hop(T):
        return 2e-6 + T * 4096 * 2 / 450e9

    def t_dec(b):
        return sm.time(b, b, b * c, b * c) - hop(b)

    r = run(s2).summary
    assert r["tpot_ms_p50"] == pytest.approx((t_dec(4) + 2 * hop(4)) * 1e3, rel=1e-9)
    r1 = run(dataclasses.replace(s2, analytical=AnalyticalSpec(pp_microbatches=1))).summary
    assert r1["tpot_ms_p50"] == pytest.approx((t_dec(8) + 2 * hop(8)) * 1e3, rel=1e-9)
    pairs, _ = prefill_chunk_aggregates(S, 0)
    t_pf4 = sm.time(4 * S, 4, 4 * pairs, 0) - hop(4 * S)
    assert r["ttft_ms_p50"] == pytest.approx((3 * t_pf4 / 2 + hop(4 * S)) * 1e3, rel=1e-9)


# --- KV cache ------------------------------------------------------------------------------------

def test_paged_kv_blocks():
    """S + N = 1000 tokens in 16-token blocks: 63 blocks = 1008 slots, fragmentation 8/1008."""
    s = mk(batch=4, prompt=900, output=100)
    r = run(s).summary
    kvpt = 2 * 32 * 8 * 128 * 2
    assert r["kv_cache_gb"] == pytest.approx(4 * 1008 * kvpt / 1e9)
    assert r["kv_fragmentation"] == pytest.approx(8 / 1008)
    assert kvcache.paged_tokens(1000, 1) == 1000
    cap = r["kv_capacity_gb"] * 1e9
    assert r["max_concurrent_seqs"] == math.floor(cap / (1008 * kvpt))


# --- disaggregation ----------------------------------------------------------------------------

def test_disagg_handoff_hand():
    """L8B, B=1, S=4096, decode tp=8: KV = 4096 x 131,072 B = 536,870,912 B.
    Same partition: 8 links: 5 us + 536.87 MB / (8 x 50 GB/s) + 32 x 256 WRs x 1 us / 8
      = 0.005 + 1.34218 + 1.024 ms = 2.37118 ms.
    Prefill at tp=4: 4 links and a re-layout x 1.1:
      (0.005 + 2.68435 + 2.048) x 1.1 = 5.21109 ms."""
    d = DisaggSpec(enabled=True, link_bandwidth_bytes_s=50e9, link_latency_s=5e-6, per_wr_s=1e-6,
                   relayout_factor=0.1, overlap=0.0)
    s = mk(tp=8, batch=1, prompt=4096, output=64, opts=AnalyticalSpec(disagg=d))
    r = run(s).summary
    assert r["disagg_handoff_ms"] == pytest.approx(2.37118, rel=1e-4)
    assert r["disagg_ttft_ms"] == pytest.approx(r["ttft_ms_p50"] + 2.37118, rel=1e-4)
    s4 = mk(tp=8, batch=1, prompt=4096, output=64,
            opts=AnalyticalSpec(disagg=dataclasses.replace(d, prefill_tp=4)))
    r4 = run(s4).summary
    assert r4["disagg_handoff_ms"] == pytest.approx(5.21109, rel=1e-4)
    assert r4["disagg_prefill_ttft_ms"] > r["ttft_ms_p50"]          # half the devices
    # overlap rho=1 hides the hand-off fully behind a longer prefill
    assert disagg.exposed_s(2.0, 10.0, 1.0) == 0.0
    assert disagg.exposed_s(2.0, 1.0, 1.0) == 1.0


# --- speculative decoding, energy -------------------------------------------------------------

def test_speculative_decoding_hand():
    """alpha=0.7, gamma=3: E[tokens] = (1 - 0.7^4)/0.3 = 2.533; TPOT = (3 x 0.05 x t + v) / 2.533
    with t the plain decode step and v the verify pass of 4 query tokens per sequence."""
    assert specdec.expected_tokens(0.7, 3) == pytest.approx((1 - 0.7 ** 4) / 0.3)
    assert specdec.expected_tokens(0.0, 3) == 1.0
    sd = SpecDecodeSpec(method="mtp", gamma=3, acceptance=0.7, draft_cost_fraction=0.05)
    r = run(mk(batch=4, prompt=512, output=2, opts=AnalyticalSpec(spec_decode=sd))).summary
    v = evaluate(mk(batch=4, prompt=512, output=2, opts=AnalyticalSpec(spec_decode=sd)))["spec_verify_ms"]
    t = r["tpot_no_spec_ms"]
    assert r["spec_tpot_ms"] == pytest.approx((0.15 * t + float(v)) / 2.5330)
    assert r["tpot_ms_p50"] == r["spec_tpot_ms"]        # the headline TPOT includes it
    # verify of 4 tokens at batch 4 is still weight-bound: barely dearer than one step
    assert float(v) < 1.2 * t and r["spec_tpot_ms"] < t / 2


def test_energy_per_token_hand():
    """Power = 700 W x (0.3 + 0.7 u), u = busy / step; J/token = P x devices x TPOT / B.
    tp=1, no comm, no overheads: the step is all roofline, u = 1 -> 700 W."""
    r = run(mk(batch=8, output=2)).summary
    assert r["power_w_per_gpu"] == pytest.approx(700.0)
    assert r["energy_j_per_token"] == pytest.approx(700.0 * r["tpot_ms_p50"] / 1e3 / 8)
    assert energy.power_w(700.0, 0.3, 1.0, 2.0) == pytest.approx(700 * (0.3 + 0.35))
    assert math.isnan(float(energy.power_w(None, 0.3, 1.0, 2.0)))


# --- B* ---------------------------------------------------------------------------------------

def test_batch_star_for_moe_by_bisection():
    """Mixtral at a short context: B* where total compute meets memory, found by bisection, is
    where decode_bound flips from memory to compute."""
    s = mk(MIX, tp=2, batch=1, prompt=64, output=2)
    b = run(s).summary["batch_star"]
    assert math.isfinite(b) and b > 8
    lo = run(dataclasses.replace(s, workload=WorkloadSpec(64, 2, int(b * 0.8)))).summary
    hi = run(dataclasses.replace(s, workload=WorkloadSpec(64, 2, int(b * 1.25) + 1))).summary
    assert lo["decode_bound"] == "memory" and hi["decode_bound"] == "compute"


def test_batch_star_matmul_is_the_classic_ridge_batch():
    """Dense matmuls alone: B* = w / (x - a), with w the streamed weights' seconds, x the FLOP
    seconds of one sequence (2 (P_tok + P_head) / peak) and a its activation bytes' seconds."""
    from engine.analytical import traffic
    from engine.analytical.params import param_counts
    m = ModelSpec(**L8B)
    pc = param_counts(m)
    w = (pc.total - pc.embedding) * 2 / 3.35e12
    x = 2 * (pc.per_token_matmul + pc.lm_head) / 989.4e12
    a = traffic.activation_elems_per_token(m) * 2 / 3.35e12
    assert run(mk()).summary["batch_star_matmul"] == pytest.approx(w / (x - a))


# --- Pareto -------------------------------------------------------------------------------------

def test_frontier_mask_hand():
    x = [1, 2, 3, 2, 1, 3]
    y = [5, 4, 1, 2, 1, 0.5]
    assert pareto.frontier_mask(x, y).tolist() == [True, True, True, False, False, False]


def test_pareto_drops_with_reasons_and_matches_pointwise():
    """Llama-3.1-70B shape on 12 devices, sp=ep=1. Sizes tried: divisors of 12 and powers of two,
    {1, 2, 3, 4, 6, 8, 12}; pairs with tp x pp <= 12: 7 + 5 + 4 + 3 + 2 + 1 + 1 = 23 (tp = 1 ... 12).
    tp in {3, 6, 12} does not divide 64 heads: 4 + 2 + 1 = 7 pairs; every pp <= 80 layers is
    allowed (uneven stages), so 16 partitions remain, x 3 batches."""
    m70 = dict(L8B, name="l70", num_layers=80, hidden_size=8192, num_heads=64, head_dim=128,
               ffn_size=28672)
    s = mk(m70, tp=4, batch=1, prompt=1024, output=64, hbm_capacity_bytes=141e9)
    batches = [1, 16, 256]
    table, front, dropped = pareto.sweep(s, 12, batches)
    assert dropped["heads not divisible by tp"] == 7 * 3
    assert "more stages than layers" not in dropped
    assert table.height + dropped.get("does not fit in memory", 0) == 16 * 3
    assert front.height >= 1 and front["on_frontier"].all()
    for row in front.iter_rows(named=True):
        p = dataclasses.replace(s, partition=dataclasses.replace(
            s.partition, tp=int(row["tp"]), pp=int(row["pp"]), ep=int(row["ep"]), sp=int(row["sp"])))
        p = dataclasses.replace(p, workload=WorkloadSpec(1024, 64, int(row["batch_size"])),
                                partition=dataclasses.replace(p.partition, dp=int(row["dp"])))
        point = run(p).summary
        assert point["tpot_ms_p50"] == pytest.approx(row["tpot_ms"], rel=1e-9)
        assert point["throughput_tok_s_per_gpu"] == pytest.approx(row["throughput_tok_s_per_gpu"], rel=1e-9)


def test_pareto_sweep_plots_with_the_runner_and_fronts_agree(tmp_path):
    """Plotting lives in runner/tools/plots.py: the engine's sweep table plots there, and the runner's
    frontier (both axes maximised, computed independently) is the engine's ``on_frontier``."""
    from runner.tools import plots

    s = mk(batch=1, prompt=512, output=64)
    table, front, _ = pareto.sweep(s, 8, [1, 8, 64])
    x = table["interactivity_tok_s_per_user"].to_list()
    y = table["throughput_tok_s_per_gpu"].to_list()
    assert sorted(plots.pareto_front(x, y)) == [i for i, on in enumerate(table["on_frontier"]) if on]
    pts = [(xi, yi, f"{part} b{b:g}", "") for xi, yi, part, b in
           zip(x, y, table["partition"], table["batch_size"])]
    out = plots.pareto(pts, tmp_path / "f.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 1000


# --- MLA / sliding windows in the engine ------------------------------------------------------

def test_mla_decode_pair_flops_and_latent_kv():
    """DeepSeek-V3 shapes: decode attends in the latent space, 2 x 128 x (512 + 64) +
    2 x 128 x 512 = 278,528 FLOP per layer-pair; prefill (per-head keys) 2 x 128 x 192 +
    2 x 128 x 128 = 81,920."""
    from engine.analytical import attention
    ds = ModelSpec(name="ds", num_layers=61, hidden_size=7168, num_heads=128, num_kv_heads=128,
                   head_dim=192, ffn_size=18432, vocab_size=129280, attention="mla",
                   num_experts=256, experts_per_token=8, expert_ffn_size=2048,
                   num_shared_experts=1, first_dense_layers=3, q_lora_rank=1536, kv_lora_rank=512,
                   qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, weight_dtype="fp8")
    assert attention.pair_flops_per_layer(ds, "decode") == 278_528
    assert attention.pair_flops_per_layer(ds, "prefill") == 81_920
    s = Specs(HardwareSpec(**{**H100, "hbm_capacity_bytes": 141e9}), ds, PartitionSpec(tp=8),
              WorkloadSpec(1024, 64, 32), IDEAL)
    r = run(s).summary
    assert r["fits_in_memory"]
    # latent KV replicated over TP: 32 seqs x (1088 -> 1088 slots) x 61 x 576 x 2 B per device
    assert r["kv_cache_gb"] == pytest.approx(32 * 1088 * 61 * 576 * 2 / 1e9)


def test_colocated_vs_disaggregated_steady_state():
    """B=32 sequences of N=256 tokens: every decode step 32/256 = 0.125 new prompts need a
    prefill, so co-located TPOT = TPOT + 0.125 x t_1 (one 2048-token prompt's prefill on the same
    partition); disaggregated keeps TPOT and its throughput is min(B/TPOT, N R / t_1,p)."""
    d = DisaggSpec(enabled=True)
    s = mk(tp=8, batch=32, prompt=2048, output=256, opts=AnalyticalSpec(disagg=d))
    r = run(s).summary
    t1 = run(mk(tp=8, batch=1, prompt=2048, output=256)).summary["ttft_ms_p50"]  # no overheads
    assert r["colocated_tpot_ms"] == pytest.approx(r["tpot_ms_p50"] + 0.125 * t1)
    assert r["disagg_tpot_ms"] == pytest.approx(r["tpot_ms_p50"])
    thr = min(32 / r["tpot_ms_p50"], 256 / t1) * 1e3 / 16
    assert r["disagg_throughput_tok_s_per_gpu"] == pytest.approx(thr)
    assert r["colocated_throughput_tok_s_per_gpu"] == pytest.approx(32 / r["colocated_tpot_ms"] * 1e3 / 8)


def test_launch_overhead_is_a_per_pass_cost_beside_the_scheduler():
    """calibration.launch_overhead (CUDA-graph replay / kernel launches) adds per forward pass,
    like step_overhead: TPOT + 30 us, single-pass TTFT + 30 us, a 4-chunk prefill of each of the
    16 prompts of the default chat workload (512 tokens in 128-token passes) + 64 x 30 us."""
    from tests.fixtures import specs, with_fields

    base = with_fields(specs(), workload=dict(prompt_len=512), analytical=dict(prefill_chunk=128))
    r0 = run(base).summary
    r1 = run(with_fields(base, calibration=dict(launch_overhead_s=30e-6))).summary
    B = base.workload.batch_size
    assert r1["tpot_ms_p50"] - r0["tpot_ms_p50"] == pytest.approx(0.030)
    assert r1["ttft_ms_p50"] - r0["ttft_ms_p50"] == pytest.approx(B * 4 * 0.030)



def test_uneven_pipeline_stages():
    """pp = 3 on 32 layers: stages of 11, 11, 10 layers; the largest holds 11/32 of the weights and
    sets the pace. Decode with m = 3 microbatches of B/3: TPOT = max(t_pass + 3 hop, 3 x 11/32 t_pass)
    with t_pass = one pass of B/3 sequences without hand-offs; weights per device = (total - embedding
    ... all weights) x 11/32 x 2 bytes."""
    from engine.analytical.params import param_counts
    s = mk(pp=3, batch=6, prompt=256, output=2)
    r = run(s).summary
    sm = StepModel.from_specs(s)
    c = 257

    def hop(T):
        return 2e-6 + T * 4096 * 2 / 450e9

    t2 = sm.time(2, 2, 2 * c, 2 * c) - 2 * hop(2)   # the pass's comm holds pp - 1 = 2 hops
    assert r["tpot_ms_p50"] == pytest.approx(max(t2 + 3 * hop(2), 3 * 11 / 32 * t2) * 1e3, rel=1e-9)
    assert r["weights_gb"] == pytest.approx(param_counts(ModelSpec(**L8B)).total * 2 * 11 / 32 / 1e9)
    with pytest.raises(SpecError, match=r"partition\.pp"):
        mk(pp=33)
