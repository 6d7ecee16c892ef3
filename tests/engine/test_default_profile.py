"""The default experiment prices with measured kernels through a real serving profile (vLLM V1);
the roofline path stays one switch away (framework=generic)."""

import pytest

from engine.analytical import run
from engine.analytical.kernels import kernel_model
from tests.fixtures import NO_HOST, specs as compose, with_fields


def test_default_is_vllm_v1_on_measured_kernels():
    specs = compose()
    assert specs.framework.name == "vllm_v1"
    km = kernel_model(specs)
    # H100 SXM has its own measured vLLM tables: the measured backend, not transfer or roofline
    assert km is not None and km.name.startswith("measured") and "h100_sxm" in km.name


def test_roofline_one_switch_away():
    assert kernel_model(compose(framework="generic")).closed_form     # the roofline backend


def test_default_batch1_tpot_between_the_weight_stream_and_the_roofline_profile():
    """Llama-3.1-8B BF16 on one H100 SXM at batch 1: a decode step must at least stream the
    weights once, 16.06e9 bytes (8.03e9 parameters x 2 bytes) / 3.35e12 byte/s = 4.79 ms; the
    measured kernels run much nearer that floor than the roofline profile, whose default
    calibration prices the same stream at ~56 % of peak bandwidth (~8.3 ms). The kernels' step:
    the profile's fitted host terms (scheduler, output processing) are off."""
    measured = run(with_fields(compose(), workload=dict(batch_size=1), framework=NO_HOST)).summary["tpot_ms_p50"]
    roofline = run(with_fields(compose(framework="generic"), workload=dict(batch_size=1))).summary["tpot_ms_p50"]
    floor = 16.06e9 / 3.35e12 * 1e3
    assert floor == pytest.approx(4.79, abs=0.01)
    assert floor < measured < 0.8 * roofline
