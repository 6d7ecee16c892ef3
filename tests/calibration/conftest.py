"""Fixtures of the calibration tests: the default config (Llama-3.1-8B on one H100 SXM) with the
seed document's calibration, composed once per module (specs_with: tests/conftest.py)."""

import pytest

from tests.conftest import compose_specs
from tests.fixtures import NO_HOST_OVERRIDES  # noqa: F401 (test_calibrate_cli, test_request_itl)


#: The default profile's fitted host terms off: the calibration tests make their measurements with
#: known calibration factors and fit those back, and profile host terms on top would be confounded
#: with the step overhead being fitted.


@pytest.fixture(scope="module")
def base_specs():
    return compose_specs("calibration=specsheet", *NO_HOST_OVERRIDES)
