"""Unit strings -> SI floats with pint, once, at the config/engine boundary.

A bare number, or a number followed by one of the common unit spellings of ``_FACTOR`` ("3.35
TB/s", "80GB", "2 us"), converts without pint: the value times pint's own conversion factor,
which is what pint's ``Quantity(...).to(...)`` computes (its magnitude times that factor), so
the float is the same; importing pint and building its registry (~0.07 CPU-s of a ``simllm``
process) is left to any other text, which pint parses as before.
"""

import functools
import math
import re

from engine.errors import SpecError

#: SI unit each quantity kind is converted to inside the engine.
_TARGET = {
    "TFLOPS": ("FLOPS", "a compute rate such as '989 TFLOPS'"),
    "TOPS": ("FLOPS", "a compute rate such as '1979 TOPS'"),
    "GB": ("byte", "a size such as '80 GB' or '141 GiB'"),
    "MB": ("byte", "a size such as '50 MB'"),
    "TB/s": ("byte / second", "a bandwidth such as '3.35 TB/s'"),
    "GB/s": ("byte / second", "a bandwidth such as '450 GB/s'"),
    "us": ("second", "a time such as '2 us'"),
    "ms": ("second", "a time such as '50 ms'"),
    "s": ("second", "a time such as '60 s'"),
    "W": ("watt", "a power such as '700 W'"),
}


#: pint's conversion factor (``registry()._get_conversion_factor``) from a unit as configs write
#: it to the SI unit of ``_TARGET``, and from each SI unit back to the default units: the
#: numbers pint multiplies a magnitude by (ints where pint's are ints). Checked against pint in
#: tests/runner/test_faststart.py; a unit not listed here goes through pint.
_FACTOR = {
    ("TFLOPS", "FLOPS"): 1e12, ("TOPS", "FLOPS"): 1e12, ("PFLOPS", "FLOPS"): 1e15,
    ("GFLOPS", "FLOPS"): 1e9,
    ("TB", "byte"): 1e12, ("GB", "byte"): 1e9, ("MB", "byte"): 1e6, ("TiB", "byte"): 1099511627776,
    ("GiB", "byte"): 1073741824, ("MiB", "byte"): 1048576, ("KiB", "byte"): 1024,
    ("TB/s", "byte / second"): 1e12, ("GB/s", "byte / second"): 1e9, ("MB/s", "byte / second"): 1e6,
    ("GiB/s", "byte / second"): 1073741824, ("Gb/s", "byte / second"): 125000000.0,
    ("s", "second"): 1, ("ms", "second"): 0.001, ("us", "second"): 1e-06, ("ns", "second"): 1e-09,
    ("W", "watt"): 1, ("kW", "watt"): 1000.0,
    # SI -> the default units (from_si)
    ("FLOPS", "TFLOPS"): 1e-12, ("FLOPS", "TOPS"): 1e-12, ("byte", "GB"): 1e-09, ("byte", "MB"): 1e-06,
    ("byte / second", "TB/s"): 1e-12, ("byte / second", "GB/s"): 1e-09, ("second", "us"): 1000000.0,
    ("second", "ms"): 1000.0, ("second", "s"): 1, ("watt", "W"): 1,
}

#: "<unsigned decimal number> <unit>" with the unit a single token of _FACTOR ("80GB", "2 us").
_NUMBER_UNIT = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*([A-Za-z]+(?:/s)?)")

#: From here on (and for nan, inf) a number converts through pint: pint keeps an integer
#: magnitude exact where its float would already be rounded.
_EXACT = 2.0 ** 53


def registry():
    """The shared sheet registry (FLOPS, TOPS, Gb/s ...): see ``engine.ingest.units.registry``."""
    from engine.ingest.units import registry as sheet_registry

    return sheet_registry()


def _fast(kind: type, value, default_unit: str, target: str) -> float | None:
    """``_convert`` without pint where its result is pint's value times a factor of _FACTOR:
    a number (or a string holding only a number) in ``default_unit``, or a number followed by a
    listed unit; None where pint must decide (any other text, bool, a huge number)."""
    if kind is bool:
        return None
    if kind in (int, float):
        number, unit = float(value), default_unit
    elif kind is str:
        text = value.strip()
        try:
            number, unit = float(text), default_unit
        except ValueError:
            m = _NUMBER_UNIT.fullmatch(text)
            if m is None:
                return None
            number, unit = float(m.group(0)[:m.start(2)].rstrip()), m.group(2)
    else:
        return None
    factor = _FACTOR.get((unit, target))
    if factor is None or not abs(number) < _EXACT:
        return None
    return float(number * factor)


@functools.lru_cache(maxsize=4096)
def _convert(kind: type, value, default_unit: str, target: str) -> float:
    """value (number in default_unit, or a string with a unit) -> magnitude in ``target``.

    Cached: a grid converts the same few strings thousands of times, and pint parsing costs
    about a millisecond each. ``kind`` keeps 1 and True and 1.0 apart in the cache.
    """
    fast = _fast(kind, value, default_unit, target)
    if fast is not None:
        return fast
    ureg = registry()
    if kind is bool:
        raise TypeError
    if isinstance(value, (int, float)):
        q = ureg.Quantity(float(value), default_unit)
    else:
        text = str(value).strip()
        try:
            q = ureg.Quantity(float(text), default_unit)
        except ValueError:
            q = ureg.Quantity(text)
    if q.unitless and not isinstance(value, (int, float)):
        q = ureg.Quantity(q.magnitude, default_unit)
    return float(q.to(target).magnitude)


def to_si(field: str, value, default_unit: str, allow_zero: bool = False) -> float | None:
    """Convert a config value to the SI float the engine uses.

    ``value`` is a number in ``default_unit`` or a string with its own unit. Raises SpecError
    naming ``field`` when the string does not parse, the dimension is wrong (a bandwidth in TFLOPS)
    or the number is not finite or not positive (zero allowed with ``allow_zero``). Plausibility
    ranges are checked by the spec itself.
    """
    if value is None:
        return None
    target, example = _TARGET[default_unit]
    try:
        out = _convert(type(value), value, default_unit, target)
    except Exception as e:  # noqa: BLE001 - pint's parser raises many kinds (tokenize, syntax, key ...)
        import pint   # imported by now if pint raised

        if isinstance(e, pint.DimensionalityError):
            raise SpecError(field, value, f"{example} (got the wrong kind of unit)") from None
        raise SpecError(field, value, f"{example} or a bare number in {default_unit}") from None
    if not math.isfinite(out):
        raise SpecError(field, value, f"a finite value: {example}")
    if out < 0 or (out == 0 and not allow_zero):
        sign = ">= 0" if allow_zero else "> 0"
        raise SpecError(field, value, f"a value {sign} in {default_unit} or with a unit: {example}")
    return out


def from_si(value: float, default_unit: str) -> float:
    """An SI magnitude in ``default_unit`` (the inverse of ``to_si`` on a bare number): the number
    a config shows for an engine default, e.g. 2e-6 s -> 2.0 us."""
    target, _ = _TARGET[default_unit]
    factor = _FACTOR.get((target, default_unit))   # pint's factor: the same float as pint's .to
    if factor is not None:
        out = float(float(value) * factor)
    else:
        out = float(registry().Quantity(float(value), target).to(default_unit).magnitude)
    return round(out, 12)
