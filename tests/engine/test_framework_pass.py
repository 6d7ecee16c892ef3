"""The framework profile's share of a pass lives in the step path, so both engines price it alike:
CUDA-graph padding, per-iteration and per-token host costs, the front end's token ceiling, the
launches of a pass no CUDA graph holds.

A decode-only pass of B sequences, B at most the largest captured size, runs the graph of the next
captured size: its dense matmuls, LM head and collectives cost as for that size, its attention and
per-token host costs as for the B real sequences.
"""

from dataclasses import replace

import pytest

from engine.analytical import run as analytical_run
from engine.analytical.step import StepModel
from engine.des import DesSpec, simulate
from engine.spec import WorkloadSpec

from tests.fixtures import NO_HOST, specs, with_fields


@pytest.fixture(scope="module")
def padded():
    s = with_fields(specs(model="llama_3_1_8b", hardware="h100_sxm", partition="tp2", calibration="ideal"),
                    calibration=dict(step_overhead_s=9.999999999999999e-05,         # 100 us, 10 us as
                                      per_token_overhead_s=9.999999999999999e-06))  # pint gives them
    # the profile's fitted host terms off: the times below are derived from the operators and
    # the calibration's overheads
    return replace(s, framework=replace(s.framework, cuda_graph_sizes=(1, 2, 4, 8),
                                        cuda_graph_padding=True, **NO_HOST))


def test_decode_pass_of_3_costs_the_4_graph(padded):
    sm = StepModel.from_specs(padded)
    plain = replace(sm, graph_sizes=())
    L, C = sm.num_layers, 3 * 1000.0
    # by hand from the roofline operators: dense/experts at 4 tokens (4 logits), attention of the
    # 3 real sequences (decode form, 3000 positions: compute and memory), comm of 4 tokens
    att = plain.attention(0.0, 0.0, 0.0, L * C, 3.0, 3.0)
    ops = plain.operators(4.0, 4.0, *att)
    want = plain.roof(ops) + plain.comm_s(4.0) + 100e-6 + 3 * 10e-6
    assert float(sm.time(3.0, 3.0, decode_seqs=3.0, decode_ctx=C)) == pytest.approx(want, rel=1e-12)
    # a captured size, a batch above the largest graph and a prefill pass are not padded
    for T, n, Bd, ctx in ((4.0, 4.0, 4.0, 4000.0), (9.0, 9.0, 9.0, 9000.0)):
        assert float(sm.time(T, n, decode_seqs=Bd, decode_ctx=ctx)) == \
            pytest.approx(float(plain.time(T, n, decode_seqs=Bd, decode_ctx=ctx)), rel=1e-12)
    assert float(sm.time(3.0, 1.0, prefill_pairs=6.0)) == pytest.approx(float(plain.time(3.0, 1.0, prefill_pairs=6.0)))


def test_engines_pad_alike(padded):
    # 3 users in a closed loop, fixed 512/64, no think time: every round is the analytical static
    # batch of 3 (one prefill pass of the 3 prompts, then 63 decode steps of 3), both padded to 4
    wl = WorkloadSpec(prompt_len=512, output_len=64, arrival="closed_loop", concurrency=3,
                      num_requests=9)
    s = replace(padded, workload=wl)
    des = simulate(s, DesSpec(scheduling=dict(max_num_batched_tokens=8192, max_num_seqs=256))).result
    ana = analytical_run(replace(s, workload=WorkloadSpec(prompt_len=512, output_len=64,
                                                          batch_size=3))).summary
    assert des.table["tpot_ms"].to_list() == pytest.approx([ana["tpot_ms_p50"]] * 9, rel=1e-9)
    unpadded = analytical_run(replace(s, framework=replace(s.framework, cuda_graph_padding=False),
                                      workload=WorkloadSpec(prompt_len=512, output_len=64,
                                                            batch_size=3))).summary
    assert ana["tpot_ms_p50"] > unpadded["tpot_ms_p50"]


def test_host_costs_and_front_end_ceiling(padded):
    plain = StepModel.from_specs(replace(padded, framework=replace(padded.framework,
                                                                    cuda_graph_padding=False)))
    fw = replace(padded.framework, cuda_graph_padding=False, step_overhead_s=1e-3,
                 per_output_token_s=1e-4)
    sm = StepModel.from_specs(replace(padded, framework=fw))
    # by hand: the profile's 1 ms per iteration and 0.1 ms per emitted token on top of the pass
    # (a prefill of 3 x 64 tokens emitting 3 first tokens; a decode step of 3 at 1000 each)
    for args, kw, n in (((192.0, 3.0), dict(prefill_pairs=3 * 64 * 65 / 2), 3),
                        ((3.0, 3.0), dict(decode_seqs=3.0, decode_ctx=3000.0), 3)):
        assert float(sm.time(*args, **kw)) == pytest.approx(float(plain.time(*args, **kw)) + 1e-3 + n * 1e-4,
                                                            rel=1e-12)
    # front end at 200 tokens/s: the pass itself is not lengthened (the engine does not wait for
    # its output handler; the DES queues the tokens, engine.des.frontend), while the analytical
    # TPOT of a batch of 3 is held to the front end's pace, 3 tokens / 200 tokens/s = 15 ms
    fe = StepModel.from_specs(replace(padded, framework=replace(fw, frontend_tok_s=200.0)))
    kw = dict(decode_seqs=3.0, decode_ctx=3000.0)
    assert float(fe.time(3.0, 3.0, **kw)) == float(sm.time(3.0, 3.0, **kw))
    s = replace(padded, framework=replace(fw, frontend_tok_s=200.0),
                workload=WorkloadSpec(prompt_len=512, output_len=64, batch_size=3))
    assert analytical_run(s).summary["tpot_ms_p50"] == pytest.approx(15.0)


def test_eager_passes_pay_their_launches(padded):
    # eager_layer_overhead 50 us on Llama-3.1-8B's 32 layers: a pass no CUDA graph holds adds
    # 32 x 50 us = 1.6 ms, one that a graph holds adds nothing (derived from the definition:
    # StepModel.launch_s; graphs captured for 1, 2, 4, 8 sequences)
    x = 50e-6
    L = StepModel.from_specs(padded).num_layers
    assert L == 32
    extra = L * x
    for pad in (True, False):
        base = replace(padded, framework=replace(padded.framework, cuda_graph_padding=pad))
        sm0 = StepModel.from_specs(base)
        sme = StepModel.from_specs(replace(base, framework=replace(base.framework, eager_layer_s=x)))

        def diff(T, n, **kw):
            return float(sme.time(T, n, **kw)) - float(sm0.time(T, n, **kw))

        assert diff(192.0, 3.0, prefill_pairs=3 * 64 * 65 / 2) == pytest.approx(extra, rel=1e-9)
        assert diff(4.0, 4.0, decode_seqs=4.0, decode_ctx=4000.0) == 0.0        # a captured size
        assert diff(9.0, 9.0, decode_seqs=9.0, decode_ctx=9000.0) == pytest.approx(extra, rel=1e-9)
        # 3 sequences: padded to the graph of 4; without padding no graph of 3 exists
        want3 = 0.0 if pad else extra
        assert diff(3.0, 3.0, decode_seqs=3.0, decode_ctx=3000.0) == pytest.approx(want3, abs=1e-15)
        # a mixed pass (2 decodes beside a 64-token chunk) is eager
        assert diff(66.0, 3.0, prefill_pairs=64 * 65 / 2, decode_seqs=2.0, decode_ctx=2000.0) == \
            pytest.approx(extra, rel=1e-9)


def test_engines_charge_eager_launches_alike(padded):
    # 3 users in a closed loop, fixed 512/64, no think time: every round is one prefill pass of the
    # 3 prompts (eager: +1.6 ms to every TTFT) and 63 decode steps of 3 (the graph of 4: +0);
    # the analytical static batch of 3 the same
    wl = WorkloadSpec(prompt_len=512, output_len=64, arrival="closed_loop", concurrency=3,
                      num_requests=9)
    eager = replace(padded, framework=replace(padded.framework, eager_layer_s=50e-6))
    des_kw = DesSpec(scheduling=dict(max_num_batched_tokens=8192, max_num_seqs=256))
    d0 = simulate(replace(padded, workload=wl), des_kw).result.table
    d1 = simulate(replace(eager, workload=wl), des_kw).result.table
    ttft_gain = [b - a for a, b in zip(d0["ttft_ms"].to_list(), d1["ttft_ms"].to_list())]
    assert ttft_gain == pytest.approx([1.6] * 9, rel=1e-6)
    assert d1["tpot_ms"].to_list() == pytest.approx(d0["tpot_ms"].to_list(), rel=1e-12)
    static = WorkloadSpec(prompt_len=512, output_len=64, batch_size=3)
    a0 = analytical_run(replace(padded, workload=static)).summary
    a1 = analytical_run(replace(eager, workload=static)).summary
    assert a1["ttft_ms_p50"] - a0["ttft_ms_p50"] == pytest.approx(1.6, rel=1e-6)
    assert a1["tpot_ms_p50"] == pytest.approx(a0["tpot_ms_p50"], rel=1e-12)
    assert a1["tpot_ms_p50"] == pytest.approx(d1["tpot_ms"].to_list()[0], rel=1e-9)


def test_overlap_scheduler_runs_host_work_beside_the_gpu(padded):
    # The same profile twice: a synchronous loop and an overlap scheduler running all its host
    # work beside the GPU (schedule_ahead 1, host_overlap 1), with host costs of 1 ms per pass and
    # 0.1 ms per emitted token on top of the calibration's 100 us and 10 us. By the definition
    # (StepModel.wall): synchronous pass = device + host, fully overlapped pass = max(device,
    # host), host = StepModel.host_s (step overhead + n per-token overhead + prompt tokens x
    # per-prompt-token overhead); so device = synchronous pass - host.
    fw = replace(padded.framework, cuda_graph_padding=False, step_overhead_s=1e-3,
                 per_output_token_s=1e-4)
    sync = StepModel.from_specs(replace(padded, framework=fw))
    ovl = StepModel.from_specs(replace(padded, framework=replace(fw, schedule_ahead=1, host_overlap=1.0)))
    assert sync.host_overlap == 0.0 and ovl.host_overlap == 1.0
    host3 = 100e-6 + 1e-3 + 3 * (10e-6 + 1e-4)
    assert float(ovl.host_s(3.0, 0.0)) == pytest.approx(host3, rel=1e-12)
    kw = dict(decode_seqs=3.0, decode_ctx=3000.0)
    dev = float(sync.time(3.0, 3.0, **kw)) - host3
    assert dev > host3          # a decode step of 3 on TP2 (~5 ms) hides 1.43 ms of host work
    assert float(ovl.time(3.0, 3.0, **kw)) == pytest.approx(dev, rel=1e-9)
    # 400 sequences at short context: 400 x 0.11 ms = 44 ms of host work outlasts the GPU's pass
    host400 = 100e-6 + 1e-3 + 400 * (10e-6 + 1e-4)
    big = dict(decode_seqs=400.0, decode_ctx=400 * 16.0)
    assert float(sync.time(400.0, 400.0, **big)) - host400 < host400
    assert float(ovl.time(400.0, 400.0, **big)) == pytest.approx(host400, rel=1e-12)
    # an idle engine's first pass pays both (StepModel.cold): the analytical TTFT of a static
    # batch (one prompt pass from idle) is the synchronous one; its decode steps hide the host work
    static = WorkloadSpec(prompt_len=512, output_len=64, batch_size=3)
    a_s = analytical_run(replace(padded, framework=fw, workload=static)).summary
    a_o = analytical_run(replace(padded, framework=replace(fw, schedule_ahead=1, host_overlap=1.0),
                                 workload=static)).summary
    assert a_o["ttft_ms_p50"] == pytest.approx(a_s["ttft_ms_p50"], rel=1e-9)
    assert a_o["tpot_ms_p50"] == pytest.approx(a_s["tpot_ms_p50"] - host3 * 1e3, rel=1e-9)
    # a quarter of it beside the GPU: (1 - f) host + max(device, f host) = device + 0.75 host
    # for the decode of 3 (device > host/4); for the 400, whichever of device and f host is the
    # longer - each from the definition with the device times derived as above
    qtr = StepModel.from_specs(replace(padded, framework=replace(fw, schedule_ahead=1, host_overlap=0.25)))
    assert float(qtr.time(3.0, 3.0, **kw)) == pytest.approx(dev + 0.75 * host3, rel=1e-9)
    dev400 = float(sync.time(400.0, 400.0, **big)) - host400
    assert float(qtr.time(400.0, 400.0, **big)) == pytest.approx(
        0.75 * host400 + max(dev400, 0.25 * host400), rel=1e-9)


@pytest.mark.parametrize("bad", [(1, -0.1), (1, 1.5), (0, 0.5)])
def test_host_overlap_is_a_fraction_and_needs_scheduling_ahead(bad):
    from engine.errors import SpecError
    from engine.spec import FrameworkSpec

    ahead, f = bad
    with pytest.raises(SpecError, match="host_overlap"):
        replace(FrameworkSpec(), schedule_ahead=ahead, host_overlap=f)


def test_engines_overlap_host_work_alike(padded):
    # 3 users, fixed 512/64, arriving together at an idle engine (no API-server time): the DES's
    # prompt pass starts the idle engine (device + host: the analytical TTFT) and its 63 decode
    # steps of 3 cost max(device, host) = device each, as the analytical decode cycle does
    fw = replace(padded.framework, cuda_graph_padding=False, step_overhead_s=1e-3,
                 per_output_token_s=1e-4, schedule_ahead=1, host_overlap=1.0)
    s = replace(padded, framework=fw, calibration=replace(padded.calibration, per_request_overhead_s=0.0))
    wl = WorkloadSpec(prompt_len=512, output_len=64, arrival="batch", num_requests=3)
    des = simulate(replace(s, workload=wl),
                   DesSpec(scheduling=dict(max_num_batched_tokens=8192, max_num_seqs=256))).result.table
    ana = analytical_run(replace(s, workload=WorkloadSpec(prompt_len=512, output_len=64,
                                                          batch_size=3))).summary
    assert des["ttft_ms"].to_list() == pytest.approx([ana["ttft_ms_p50"]] * 3, rel=1e-9)
    assert des["tpot_ms"].to_list() == pytest.approx([ana["tpot_ms_p50"]] * 3, rel=1e-9)
