"""TPOT of Llama-3.1-70B BF16 on 8x H100 SXM at TP=8, batch 1, context 2k.

Derived by hand from the shipped configs (conf/model/llama_3_1_70b.yaml, conf/hardware/h100_sxm.yaml,
conf/calibration/default.yaml); output_len=2 makes TPOT the single decode step at context 2049:

  weights streamed per GPU = (70,553,706,496 params - 1,050,673,152 input embedding) x 2 B / 8
                           = 17,375,758,336 B
  effective HBM            = 3.35 TB/s x 0.85 = 2.8475 TB/s          -> 6.1021 ms
  KV read + write          = 2050 positions x 327,680 B / 8 GPUs      -> 0.0295 ms
  activations              = 80 x 153,600 elems x 2 B / 8             -> 0.0011 ms
  all-reduces              = 80 layers x 2, ring over 8 GPUs, 2 us per hop (the YAML's NCCL hop
                             assumption), 16 KiB at 450 GB/s x 0.75:
                             160 x (14 x 2 us + 2 x 7/8 x 16,384 B / 337.5 GB/s) -> 4.4936 ms
  compute                  = 2 x 70.6e9 FLOP / (8 x 989.4 TFLOPS x 0.88)        -> 0.020 ms
  TPOT = 6.1021 + 0.0295 + 0.0011 + 4.4936 = 10.626 ms (no overlap), memory-bound.
Physically plausible: above the weights/8 at the full 3.35 TB/s floor (5.19 ms) and within the
range measured for TP=8 batch-1 decode of 70B models on H100 (roughly 7-12 ms); the all-reduce
latency term is 42 % of it, which is why allreduce=tree/auto and overlap move it most.
"""

import pytest

from engine.analytical import run
from tests.fixtures import specs, with_fields

BASE = with_fields(
    # the roofline prices and the alpha-beta all-reduce of the hand derivation: the neutral profile
    specs(model="llama_3_1_70b", hardware="h100_sxm", partition="tp8", calibration="default",
          framework="generic"),
    workload=dict(batch_size=1, prompt_len=2048, output_len=2),
    # the hand derivation's factors (the seed-document defaults), pinned so that refitting
    # conf/calibration/default.yaml to measurements does not move this check
    calibration=dict(compute_efficiency=0.88, memory_bandwidth_efficiency=0.85, comm_efficiency=0.75,
                     step_overhead_s=0.0, per_token_overhead_s=0.0, per_request_overhead_s=0.0,
                     launch_overhead_s=0.0))


def test_llama70b_tp8_tpot_is_bandwidth_bound_and_plausible():
    s = run(BASE).summary
    bw = 3.35e12 * 0.85
    weights = (70_553_706_496 - 128_256 * 8192) * 2 / 8
    kv = 2050 * 327_680 / 8
    act = 80 * 153_600 * 2 / 8
    ar = 160 * (14 * 2e-6 + 2 * 7 / 8 * 8192 * 2 / (450e9 * 0.75))
    hand = (weights + kv + act) / bw + ar
    assert s["tpot_ms_p50"] == pytest.approx(hand * 1e3, rel=1e-3)
    assert s["decode_bound"] == "memory"
    floor = 70_553_706_496 * 2 / 8 / 3.35e12 * 1e3   # 5.26 ms: weights/8 at the sheet's HBM peak
    assert floor < s["tpot_ms_p50"] < 2.5 * floor
    assert s["fits_in_memory"]


def test_overlap_and_tree_shrink_the_allreduce_term():
    """With full overlap the step is max(memory, comm) = 6.13 ms; a tree all-reduce has 2 log2(8)
    = 6 hops instead of 14: 160 x (6 x 2 us + 2 x 16,384 B / 337.5 GB/s) = 1.935 ms."""
    base = run(BASE).summary["tpot_ms_p50"]
    full = run(with_fields(BASE, analytical=dict(overlap=1.0))).summary
    mem = ((70_553_706_496 - 128_256 * 8192) * 2 / 8 + 2050 * 327_680 / 8 + 80 * 153_600 * 2 / 8) / (3.35e12 * 0.85)
    assert full["tpot_ms_p50"] == pytest.approx(mem * 1e3, rel=1e-3)
    tree = run(with_fields(BASE, analytical=dict(allreduce="tree"))).summary
    tree_ar = 160 * (6 * 2e-6 + 2 * 8192 * 2 / (450e9 * 0.75))
    assert tree["tpot_ms_p50"] == pytest.approx((mem + tree_ar) * 1e3, rel=1e-3)
    auto = run(with_fields(BASE, analytical=dict(allreduce="auto"))).summary
    assert auto["tpot_ms_p50"] == pytest.approx(tree["tpot_ms_p50"])
    assert tree["tpot_ms_p50"] < base
