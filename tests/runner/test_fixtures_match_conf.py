"""The plain spec fixtures of tests/fixtures.py (what tests/engine and tests/cost run on) equal the
specs that Hydra composes from conf/ and the runner converts: a change to a conf/ option, a
schema default or a conversion shows here, not as a silently stale engine test."""

import pytest

from tests import fixtures
from tests.conftest import compose_specs

OPTIONS = [(group, name) for group, table in (
    ("hardware", fixtures.HARDWARE), ("model", fixtures.MODEL), ("partition", fixtures.PARTITION),
    ("workload", fixtures.WORKLOAD), ("calibration", fixtures.CALIBRATION),
    ("framework", fixtures.FRAMEWORK)) for name in table]


def test_the_default_config():
    assert fixtures.specs() == compose_specs()


@pytest.mark.parametrize("group,name", OPTIONS)
def test_each_option(group, name):
    """Every group option of the fixtures, composed alone over the defaults: the whole Specs (the
    option's own spec and the others at their defaults) equals the fixture."""
    assert fixtures.specs(**{group: name}) == compose_specs(f"{group}={name}")
