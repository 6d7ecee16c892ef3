"""Unit strings -> SI, checked against hand conversions (1 GB = 1e9 B, 1 GiB = 2^30 B, 8 bit = 1 B)."""

import pytest

from engine.errors import SpecError
from runner.units import to_si


@pytest.mark.parametrize("value,unit,expected", [
    ("4.8 TB/s", "TB/s", 4.8e12),
    ("4TB/s", "TB/s", 4e12),
    (3.35, "TB/s", 3.35e12),
    ("4096 GB/s", "TB/s", 4.096e12),
    ("900 Gb/s", "GB/s", 112.5e9),          # bits: 900e9 / 8
    ("141 GB", "GB", 141e9),
    ("80 GiB", "GB", 80 * 2**30),
    ("989.4 TFLOPS", "TFLOPS", 989.4e12),
    ("1.979 PFLOPS", "TFLOPS", 1.979e15),
    ("1979 TOPS", "TOPS", 1.979e15),
    ("2 us", "us", 2e-6),
    ("700 W", "W", 700.0),
    ("64 MB", "MB", 64e6),
    ("2", "TB/s", 2e12),                    # a bare number in a string: the default unit
])
def test_conversions(value, unit, expected):
    assert to_si("f", value, unit) == pytest.approx(expected)


@pytest.mark.parametrize("value,unit,needle", [
    ("5 TFLOPS", "TB/s", "wrong kind of unit"),
    ("8 TB/s", "GB", "wrong kind of unit"),
    ("fast", "TB/s", "bare number in TB/s"),
    (-3, "TB/s", "> 0"),
    (0, "GB", "> 0"),
    ("nan", "GB", "finite"),
])
def test_bad_values_name_field(value, unit, needle):
    with pytest.raises(SpecError) as e:
        to_si("hardware.x", value, unit)
    assert "hardware.x" in str(e.value) and needle in str(e.value)


def test_zero_allowed_where_meaningful():
    assert to_si("hardware.sram", 0, "MB", allow_zero=True) == 0


@pytest.mark.parametrize("value, expected", [("64 KB", 64e3), ("1 kB", 1e3), ("2 KiB", 2048.0)])
def test_capital_k_is_kilo(value, expected):
    """"KB" as datasheets write it is 10^3 bytes (pint alone reads K as kelvin); KiB stays 2^10."""
    assert to_si("hardware.sram_capacity", value, "MB") == expected
