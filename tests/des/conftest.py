"""Fixtures of the DES tests: Llama-3.1-8B on one H100 SXM (the default config), composed once per
module (specs_with: tests/conftest.py)."""

import pytest

from tests.conftest import compose_specs


@pytest.fixture(scope="module")
def base_specs():
    # The DES tests reason about iteration times; the default calibration's fitted per-request
    # overhead (tokenise/admit/respond, delays entry into the queue) is pinned to 0 here, and the
    # neutral profile (framework=generic: the hand-derived iteration times below are its roofline
    # prices and scheduler) is pinned against the default's vLLM V1; profile tests name theirs.
    return compose_specs("calibration.per_request_overhead=0", "framework=generic")
