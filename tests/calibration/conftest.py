"""Fixtures of the calibration tests: the default config (Llama-3.1-8B on one H100 SXM) with the
seed document's calibration, composed once per module (specs_with: tests/conftest.py)."""

import pytest

from tests.conftest import compose_specs


@pytest.fixture(scope="module")
def base_specs():
    return compose_specs("calibration=specsheet")
