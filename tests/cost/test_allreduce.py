"""TP all-reduce implementations (engine.cost.allreduce; framework.allreduce), by hand."""

from dataclasses import replace

import pytest

from engine.analytical import parallel
from engine.cost import allreduce as ar
from engine.cost import kernel_model

from tests.fixtures import specs

M, W, A = 1.0e6, 100e9, 2e-6      # 1 MB, 100 GB/s, 2 us


def test_alpha_beta_forms_by_hand():
    # n = 8: one-shot 2us + 7 MB / 100 GB/s = 72 us; two-shot 4us + 2*7/8 MB/100 GB/s = 21.5 us;
    # ring 14 * 2us + 17.5 us = 45.5 us; tree 2*3*2us + 20 us = 32 us -> nccl 32 us
    assert float(ar.one_shot_time(M, 8, W, A)) == pytest.approx(72e-6)
    assert float(ar.two_shot_time(M, 8, W, A)) == pytest.approx(21.5e-6)
    assert float(ar.ring_allreduce_time(M, 8, W, A)) == pytest.approx(45.5e-6)
    assert float(ar.nccl_time(M, 8, W, A)) == pytest.approx(32e-6)
    assert float(ar.one_shot_time(M, 1, W, A)) == 0.0 == float(ar.two_shot_time(M, 1, W, A))


@pytest.fixture(scope="module")
def h100():
    return specs(hardware="h100_sxm", framework="vllm_v1", partition="tp8")


def test_measured_tables_per_implementation(h100):
    km = kernel_model(h100.hardware, "vllm", "measured")
    b = 256 * 1024.0
    nccl, custom = km.allreduce_s(b, 8, "nccl"), km.allreduce_s(b, 8, "custom")
    assert float(km.allreduce_s(b, 8)) == pytest.approx(min(float(nccl), float(custom)))
    for impl, want in (("nccl", nccl), ("one_shot", custom), ("two_shot", custom)):
        s = replace(h100, framework=replace(h100.framework, allreduce=impl))
        assert float(parallel.tp_allreduce(s, km)(b, 8)) == pytest.approx(float(want))


def test_alpha_beta_where_no_tables(h100):
    # the roofline path: link = 450 GB/s x comm_efficiency, 2 us per step (conf/hardware/h100_sxm)
    bw, lat = parallel.link(h100, 8)
    for impl, f in ar.ALPHA_BETA.items():
        s = replace(h100, framework=replace(h100.framework, allreduce=impl))
        assert float(parallel.tp_allreduce(s)(M, 8)) == pytest.approx(float(f(M, 8, bw, lat)))
    s = replace(h100, framework=replace(h100.framework, allreduce="analytical"))
    assert float(parallel.tp_allreduce(s, None, "ring")(M, 8)) == \
        pytest.approx(float(ar.ring_allreduce_time(M, 8, bw, lat)))
