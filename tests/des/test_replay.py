"""The DES per-request tables of the test workloads are exactly what they were before the
scheduler strategies, the KvPool and the framework profiles (fixture written by
``python -m tests.des.replay_cases`` at commit 6491ca9; see tests/des/replay_cases.py). The
pre-refactor scheduler settings are now the ``generic`` framework profile's, so DesSpec's None
fields resolve to them."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.des.replay_cases import CASES, RECORDED_CALIBRATION, tables

FIXTURE = Path(__file__).parent / "data" / "replay_tables.parquet"


@pytest.fixture(scope="module")
def now():
    from tests.conftest import compose_specs

    return tables(compose_specs(*RECORDED_CALIBRATION))


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_per_request_table_identical_to_pre_refactor(now, name):
    old = pl.read_parquet(FIXTURE).filter(pl.col("case") == name).drop("case")
    new = now[name]
    # every recorded column, in order; later features add columns after them (energy, bounds)
    assert [c for c in new.columns if c in old.columns] == old.columns
    assert new.height == old.height
    for col in old.columns:
        a, b = old[col].to_numpy(), new[col].to_numpy()
        if a.dtype.kind == "f":
            # bit-identical, NaN where NaN
            assert np.array_equal(a, b, equal_nan=True), (name, col)
        else:
            assert np.array_equal(a, b), (name, col)
