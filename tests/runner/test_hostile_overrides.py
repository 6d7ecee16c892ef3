"""Property-based: hostile values in config overrides end in a clear error or a valid result.

Clear error = SpecError naming the field, or Hydra's compose error naming the key; never an
exception from deep inside the engine (ZeroDivisionError, TypeError, numpy warnings turned errors),
and never NaN/inf latencies reported for a configuration said to fit.
"""

import math

import pytest
from hydra.errors import HydraException
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf.errors import OmegaConfBaseException

from engine.analytical import run
from engine.errors import SpecError
from runner.convert import specs_from_config

QUANTITY_FIELDS = ["hardware.hbm_bandwidth", "hardware.hbm_capacity", "hardware.peak_bf16",
                   "hardware.scaleup_bandwidth", "hardware.scaleup_latency", "hardware.sram",
                   "hardware.tdp", "calibration.memory_reserve", "calibration.step_overhead"]
INT_FIELDS = ["partition.tp", "partition.pp", "partition.sp", "partition.dp", "workload.batch_size",
              "workload.prompt_len", "workload.output_len", "model.num_layers", "model.num_kv_heads"]
FLOAT_FIELDS = ["calibration.compute_efficiency", "calibration.memory_bandwidth_efficiency",
                "calibration.kv_usable_fraction", "hardware.sparse_to_dense_factor"]

units = st.sampled_from(["", " TB/s", "TB/s", " GB", " GiB", " TFLOPS", " W", " us", " MB", " Gb/s",
                         " furlongs", " %"])
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.integers(min_value=-10**20, max_value=10**20),
    st.sampled_from([0, -1, 1e-30, 1e30, 3, 7, 1024]),
)
values = st.one_of(
    numbers.map(repr),
    st.tuples(numbers, units).map(lambda t: f"{t[0]}{t[1]}"),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=0, max_size=12),
    st.just("null"),
)


def check(cfg_of, override: str, valid: bool = False) -> None:
    """``override`` is rejected naming its key (Hydra at compose time, or a SpecError naming
    group.field), or runs to finite positive latencies where it fits. ``valid``: it must run."""
    key = override.split("=", 1)[0]
    try:
        cfg = cfg_of("tracking=none", override)
    except (HydraException, OmegaConfBaseException) as e:
        assert not valid, (override, e)
        text = f"{e} {e.__cause__ or ''}"
        assert key in text or key.rsplit(".", 1)[-1] in text, (override, text)   # key named
        return
    try:
        r = run(specs_from_config(cfg))
    except SpecError as e:
        assert not valid, (override, e)
        assert str(e).split(" = ")[0].count(".") >= 1  # names group.field
        return
    s = r.summary
    assert s["fits_in_memory"] or not valid, override
    if s["fits_in_memory"]:
        for k in ("ttft_ms_p50", "tpot_ms_p50", "throughput_tok_s"):
            v = s[k]
            assert isinstance(v, float) and (math.isfinite(v) or (k == "tpot_ms_p50" and math.isnan(v))), (
                override, k, v)
            if math.isfinite(v):
                assert v > 0, (override, k, v)


# Each example composes a config (~0.1 s): few examples, derandomised so CI is repeatable.
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@SETTINGS
@given(field=st.sampled_from(QUANTITY_FIELDS), value=values)
def test_quantity_fields(cfg_of, field, value):
    check(cfg_of, f"{field}={value}" if value else f"{field}=''")


@SETTINGS
@given(field=st.sampled_from(INT_FIELDS + FLOAT_FIELDS), value=values)
def test_numeric_fields(cfg_of, field, value):
    check(cfg_of, f"{field}={value}" if value else f"{field}=''")


@pytest.mark.parametrize("override", ["workload.output_len=1", "partition.tp=8", "partition.pp=32",
                                      "workload.prompt_len=1", "hardware.sram=0",
                                      "calibration.memory_reserve=0"])
def test_edge_values_are_valid(cfg_of, override):
    check(cfg_of, override, valid=True)
