"""Fixtures of the live-endpoint tests: Llama-3.1-8B on one H100 SXM as plain specs
(tests/fixtures.py), neutral profile, per-request overhead pinned to 0 (as the DES tests do)."""

import pytest

from tests.fixtures import specs, with_fields


@pytest.fixture(scope="module")
def base_specs():
    return with_fields(specs(framework="generic"), calibration=dict(per_request_overhead_s=0.0))   # as tests/des
