"""The kernel-priced pass (engine.analytical.kernels) with a synthetic kernel model whose costs are
known in closed form, so every expected number below is written out by hand from those formulas:

    gemm(m, n, k)      = G m n k + G0            (G0: a launch floor per GEMM call)
    moe(t, ...)        = E t
    attn prefill(b, s) = PF + PT b s + PP b s(s+1)/2      (exactly the fitted form: recovered)
    attn decode(b, c)  = DF + DS b + DP b c
    allreduce(x, n)    = A0 + A1 x               (x in bytes; alltoall the same)
"""

from dataclasses import replace

import numpy as np
import pytest

from engine.analytical import kernels
from engine.analytical.params import gemm_shapes
from engine.analytical.step import StepModel
from engine.result import Assumption

from tests.fixtures import specs, with_fields

G, G0, E = 1e-16, 5e-6, 2e-7
PF, PT, PP = 8e-6, 3e-9, 1e-12
DF, DS, DP = 6e-6, 4e-8, 2e-10
A0, A1 = 7e-6, 1e-12


class FakeKernels:
    name = "synthetic"
    assumptions = (Assumption("synthetic kernels", "closed form", "test"),)

    def dtype_for(self, model):
        return "bf16"

    def gemm_s(self, m, n, k, dtype):
        return G * np.asarray(m, dtype=float) * n * k + G0

    def moe_s(self, tokens, hidden, inter, topk, num_experts, tp, ep, dtype):
        return E * np.asarray(tokens, dtype=float)

    def attn_prefill_s(self, batch, isl, heads, kv_heads, head_dim, kv_dtype):
        return PF + PT * batch * isl + PP * batch * isl * (isl + 1) / 2

    def attn_decode_s(self, batch, ctx, heads, kv_heads, head_dim, kv_dtype):
        return DF + DS * batch + DP * batch * ctx

    mla_prefill_s = None
    mla_decode_s = None

    def allreduce_s(self, message_bytes, n_gpus, table=None):
        return A0 + A1 * np.asarray(message_bytes, dtype=float)

    def has_allreduce_table(self, table):      # every framework.allreduce reads this closed form
        return True

    alltoall_s = allreduce_s


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(kernels, "backend", lambda specs: "measured")
    monkeypatch.setattr(kernels, "kernel_model", lambda specs: FakeKernels())
    kernels._CACHE.clear()
    yield
    kernels._CACHE.clear()


def test_pass_time_is_the_sum_of_kernels(fake):
    s = specs(model="llama_3_1_8b", hardware="h100_sxm", partition="tp2", calibration="ideal")
    sm = StepModel.from_specs(s)
    m = s.model
    L = m.num_layers
    assert sm.kern is not None
    # attention lines are recovered exactly (the synthetic costs have the fitted form)
    assert (sm.kern.att_pf, sm.kern.att_pt, sm.kern.att_pp) == pytest.approx((PF, PT, PP), rel=1e-6)
    assert (sm.kern.att_df, sm.kern.att_ds, sm.kern.att_dp) == pytest.approx((DF, DS, DP), rel=1e-6)
    # one iteration: a 300-token chunk after 100 cached, plus 5 decoding sequences at 1000 each
    T, n, c, k, Bd, C = 305, 6, 300, 100, 5, 5000
    shapes = gemm_shapes(m, 2)
    dense = sum(layers * (G * T * nn * kk + G0) for _, nn, kk, layers in shapes)
    lm = G * n * (m.vocab_size // 2) * m.hidden_size + G0
    act = sm.elem_s_per_token * T                      # element-wise kernels stay roofline
    pairs = c * k + c * (c + 1) / 2
    att = L * (PF + PT * c + PP * pairs) + L * (DF + DS * Bd + DP * C)
    msg = T * m.hidden_size * 2                         # bf16 activations, sp = 1
    comm = 2 * L * (A0 + A1 * msg)                      # 2 all-reduces per dense layer
    fw = s.framework           # the profile's host terms: per pass, per emitting sequence, per prompt token,
    # and per layer of a pass no CUDA graph holds (prompt tokens in it: eager)
    want = dense + lm + act + att + comm + s.calibration.step_overhead_s \
        + n * s.calibration.per_token_overhead_s \
        + fw.step_overhead_s + n * fw.per_output_token_s + (T - Bd) * fw.per_prefill_token_s \
        + L * fw.eager_layer_s
    got = sm.time(T, n, prefill_pairs=pairs, prefill_read=k, decode_seqs=Bd, decode_ctx=C)
    assert float(got) == pytest.approx(want, rel=1e-6)


def test_kernel_priced_engines_agree(fake):
    """DES at very low load = analytical batch-1, with kernel-priced passes (as with the roofline
    in test_cross_engine, with the API server's fixed law: the analytical engine adds its mean)."""
    from engine.analytical import run as analytical_run
    from engine.des import DesSpec, simulate
    from engine.spec import WorkloadSpec
    from tests.fixtures import with_fields

    s = with_fields(specs(model="llama_3_1_8b", hardware="h100_sxm", partition="tp1"),
                    framework=dict(per_request_dist="fixed"))
    wl = WorkloadSpec(prompt_len=512, output_len=64, num_requests=3, arrival="gamma",
                      rate_rps=0.02, arrival_cv=0.01)
    s = replace(s, workload=wl)
    des = simulate(s, DesSpec(scheduling=dict(max_num_batched_tokens=8192, max_num_seqs=256))).result
    ana = analytical_run(replace(s, workload=replace(wl, batch_size=1))).summary
    assert des.table["ttft_ms"].to_list() == pytest.approx([ana["ttft_ms_p50"]] * 3, rel=1e-9)
    assert des.table["tpot_ms"].to_list() == pytest.approx([ana["tpot_ms_p50"]] * 3, rel=1e-9)


def test_kernel_tables_refuse_swept_peaks(fake):
    from engine.analytical.pipeline import evaluate
    from engine.errors import SpecError

    s = specs(model="llama_3_1_8b", hardware="h100_sxm")
    with pytest.raises(SpecError, match="calibration.cost.backend"):
        evaluate(s, hbm_bandwidth_bytes_s=np.array([3.35e12, 8e12]))


def test_curve_interpolates_and_extends():
    # piecewise linear on the grid, exact at grid points, along the last segment beyond it
    grid = np.array([0.0, 1.0, 2.0, 4.0])
    cv = kernels.Curve(grid, np.array([[0.0, 1.0, 3.0, 7.0]]))
    assert float(cv(3.0)) == pytest.approx(5.0)
    assert float(cv(8.0)) == pytest.approx(15.0)
    assert cv(np.array([1.0, 2.0])).tolist() == [1.0, 3.0]


def test_vectorised_grid_equals_point_by_point(fake):
    """A sweep over partitions x batches (one table row per partition, gathered per point, C*
    search on a trailing axis) gives what each point gives on its own."""
    from engine.analytical.pipeline import evaluate

    s = with_fields(specs(model="mixtral_8x7b", hardware="h100_sxm"), analytical=dict(chunk_search=True))
    tp = np.array([[2], [4], [8]])
    ep = np.array([[1], [2], [8]])
    B = np.array([[1, 8, 64]])
    grid = evaluate(s, tp=tp, ep=ep, batch_size=B)
    for i in range(3):
        for j in range(3):
            one = evaluate(s, tp=tp[i, 0], ep=ep[i, 0], batch_size=B[0, j])
            for key in ("ttft_ms", "tpot_ms", "chunk_star", "ttft_at_chunk_star_ms"):
                assert float(grid[key][i, j]) == pytest.approx(float(one[key]), rel=1e-12), key


def test_elementwise_traffic_by_hand():
    # Llama-3.1-8B per layer: two fused add+RMSNorm 8 x 4096 = 32,768; rotary of 32 q + 8 kv heads
    # of 128, read + write: 2 x 40 x 128 = 10,240; silu(gate) x up: 3 x 14,336 = 43,008;
    # 86,016 elements x 32 layers = 2,752,512 per token
    from engine.analytical import traffic

    m = specs(model="llama_3_1_8b").model
    assert traffic.elementwise_elems_per_token(m) == 2_752_512
