"""Unit strings -> SI floats with pint, once, at the config/engine boundary."""

import functools
import math

import pint

from engine.errors import SpecError
from engine.ingest.units import registry as _sheet_registry

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


def registry() -> pint.UnitRegistry:
    """The shared sheet registry (FLOPS, TOPS, Gb/s ...): see ``engine.ingest.units.registry``."""
    return _sheet_registry()


@functools.lru_cache(maxsize=4096)
def _convert(kind: type, value, default_unit: str, target: str) -> float:
    """value (number in default_unit, or a string with a unit) -> magnitude in ``target``.

    Cached: a grid converts the same few strings thousands of times, and pint parsing costs
    about a millisecond each. ``kind`` keeps 1 and True and 1.0 apart in the cache.
    """
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
    except pint.DimensionalityError:
        raise SpecError(field, value, f"{example} (got the wrong kind of unit)") from None
    except Exception:  # noqa: BLE001 - pint's parser raises many kinds (tokenize, syntax, key ...)
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
    out = float(registry().Quantity(float(value), target).to(default_unit).magnitude)
    return round(out, 12)
