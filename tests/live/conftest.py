"""Fixtures of the live-endpoint tests: Llama-3.1-8B on one H100 SXM (the default config) with
the per-request overhead pinned to 0 (as the DES tests do), composed once per module."""

import pytest

from tests.conftest import compose_specs


@pytest.fixture(scope="module")
def base_specs():
    return compose_specs("calibration.per_request_overhead=0", "framework=generic")   # as tests/des
