"""Fixtures of the DES tests: Llama-3.1-8B on one H100 SXM as plain specs (tests/fixtures.py), once per
module (specs_with: tests/conftest.py)."""

import pytest

from tests.fixtures import specs, with_fields


@pytest.fixture(scope="module")
def base_specs():
    # Plain specs (tests/fixtures.py, checked against conf/ by tests/runner). The DES tests reason
    # about iteration times; the default calibration's fitted per-request overhead (tokenise/
    # admit/respond, delays entry into the queue) is pinned to 0 here, and the neutral profile
    # (framework=generic: the hand-derived iteration times below are its roofline prices and
    # scheduler) against the default's vLLM V1; profile tests name theirs.
    return with_fields(specs(framework="generic"), calibration=dict(per_request_overhead_s=0.0))
