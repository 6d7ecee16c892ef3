"""plan.confidence: the slowed step model (engine.plan.confidence.slowed) and the key's check.

By hand: the throttle applies to steps that start after 1 ns of busy time, i.e. to every step
but a run's first (it starts at busy time 0). A lone request's first step is its prefill, so its
TTFT is unchanged, and each later step (one decode per token) takes f x as long: the time from
first token to completion is f x the unslowed one (no host time outside the steps here)."""

import numpy as np
import pytest

from engine.des import DesSpec, simulate
from engine.errors import SpecError
from engine.plan.confidence import slowed
from engine.plan.spec import plan_spec
from tests.fixtures import NO_HOST, specs, with_fields


@pytest.fixture(scope="module")
def base_specs():
    # the neutral profile on one H100 (tests/fixtures.py), no per-request overhead: only steps take time
    return with_fields(specs(framework="generic"), calibration=dict(per_request_overhead_s=0.0))


def _lone(specs):
    s = with_fields(specs, framework=NO_HOST,
                    workload=dict(num_requests=1, prompt_len=256, output_len=16, arrival="poisson", rate_rps=1.0))
    return simulate(s, DesSpec(scheduling=dict(scheduler="vllm"))).state


def test_slowed_scales_every_step(base_specs):
    base, slow = _lone(base_specs), _lone(slowed(base_specs, 1.5))
    ttft = lambda st: st.first_token - st.arrival                      # noqa: E731
    np.testing.assert_allclose(ttft(slow), ttft(base), rtol=1e-9)
    np.testing.assert_allclose(slow.completion - slow.first_token, 1.5 * (base.completion - base.first_token),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="factor 0.5"):
        slowed(base_specs, 0.5)


@pytest.mark.parametrize("bad", [1.0, -0.1, "high"])
def test_confidence_key_checked(bad):
    with pytest.raises(SpecError, match="plan.confidence"):
        plan_spec({"confidence": bad})
    assert plan_spec({"confidence": 0.9}).confidence == 0.9
