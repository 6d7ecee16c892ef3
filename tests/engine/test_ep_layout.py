"""EP as an independent device-count factor (partition.ep_layout = extra): llm_perf's
PP8-TP4-EP2 on 64 GPUs is expressible, is priced as its equivalent shared layout, and the default
(shared) is today's behaviour."""

import dataclasses

import numpy as np
import pytest

from engine.analytical import kvcache, pareto
from engine.analytical.params import param_counts
from engine.analytical.run import run
from engine.errors import SpecError
from engine.spec import PartitionSpec
from tests.fixtures import specs, with_fields

#: GPT-1.8T MoE (FP4) on GB200 NVL72 with llm_perf's system figures, calibration ideal (plain specs:
#: tests/fixtures.py, equal to conf/'s options).
BASE = specs(model="gpt_1_8t_moe", hardware="gb200_nvl72_llmperf", calibration="ideal")


def _specs(partition=None, **groups):
    """BASE with a partition and fields of other groups (``with_fields``)."""
    s = with_fields(BASE, **groups) if groups else BASE
    return dataclasses.replace(s, partition=PartitionSpec(**partition)) if partition else s


def test_extra_multiplies_devices_and_converts_once():
    p = PartitionSpec(tp=4, pp=8, ep=2, ep_layout="extra")
    assert p.devices_per_replica == 64 and (p.tp, p.ep, p.sp, p.ep_groups) == (4, 8, 2, 2)
    assert p.label == "PP8-TP4-EP2x-SP1"
    q = dataclasses.replace(p, dp=2)                   # replace() does not convert a second time
    assert (q.tp, q.ep, q.sp, q.ep_groups, q.devices) == (4, 8, 2, 2, 128)
    # the default is unchanged: ep inside tp x sp, no extra devices
    d = PartitionSpec(tp=4, pp=8, ep=2)
    assert d.devices_per_replica == 32 and (d.ep, d.sp, d.ep_groups) == (2, 1, 1)
    assert PartitionSpec(tp=4, ep=1, ep_layout="extra").devices_per_replica == 4
    with pytest.raises(SpecError, match="ep_layout"):
        PartitionSpec(ep_layout="sideways")


def test_extra_weights_per_device_by_hand():
    s = _specs(dict(tp=4, pp=8, ep=2, ep_layout="extra"))
    m = s.model
    # hand: per layer attention 2.25 H^2 (q, o: H^2 each; k, v: H x 16 x 160 = H^2/8 each) and
    # 16 experts x 3 H I; non-expert weights split tp = 4 ways, experts tp x ep = 8 ways, 120/8
    # layers per stage, 0.5 byte per parameter; embeddings + LM head (2 x V H, untied) over tp
    H, I, V, L = 20480, 14336, 128256, 120
    attn = 2.25 * H * H * L
    experts = 16 * 3 * H * I * L
    pc = param_counts(m)
    assert pc.experts == pytest.approx(experts)
    other = pc.total - pc.experts
    assert other == pytest.approx(attn + 2 * V * H, rel=1e-3)   # norms are the rest
    hand = (other / 4 + experts / 8) / 8 * 0.5
    w = kvcache.weights_per_device(m, s.partition.tp, s.partition.pp, s.partition.ep)
    assert float(w) == pytest.approx(hand, rel=1e-9)


def test_extra_equals_its_shared_equivalent():
    a = run(_specs(dict(tp=4, pp=8, ep=2, ep_layout="extra"), workload=dict(batch_size=64))).summary
    b = run(_specs(dict(tp=4, pp=8, ep=8, sp=2), workload=dict(batch_size=64))).summary
    for k in ("ttft_ms_p50", "tpot_ms_p50", "weights_gb", "kv_cache_gb", "devices"):
        assert a[k] == b[k], k
    assert a["devices"] == 64


def test_pareto_extra_enumeration():
    s = _specs(workload=dict(prompt_len=8192, output_len=1024),
               analytical=dict(pareto=dataclasses.replace(BASE.analytical.pareto, ep_layout="extra")))
    tp, pp, ep, sp = pareto.partitions(s, 64, max_sp=1)
    g = np.where(ep > 1, ep / tp, 1)
    assert np.all(tp * pp * sp <= 64)                  # sp' = sp g holds the groups
    assert np.all(sp == g)                             # max_sp = 1: no sequence split of its own
    rows = set(zip(tp, pp, ep, sp))
    assert (4, 8, 8, 2) in rows                        # PP8-TP4-EP2 on 64 GPUs
    table, front, _ = pareto.sweep(s, 64, [1, 64], [0])
    assert "PP8-TP4-EP2x-SP1" in set(table["partition"])
    # the shared default enumerates what it did before: ep | tp x sp, replicas tp pp sp <= D
    d = _specs(workload=dict(prompt_len=8192))
    tp, pp, ep, sp = pareto.partitions(d, 64, max_sp=1)
    assert np.all(sp == 1) and np.all(tp * pp <= 64)


def test_extra_error_names_the_given_factor():
    # 16 experts: tp 8 x ep 4 = 32 expert shards cannot hold whole experts
    with pytest.raises(SpecError, match=r"partition.ep = 4: expected with ep_layout=extra, tp x ep = 32"):
        _specs(dict(tp=8, ep=4, ep_layout="extra"))
