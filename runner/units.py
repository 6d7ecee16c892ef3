"""Unit strings -> SI floats with pint, once, at the config/engine boundary.

pint is imported only when a conversion is not yet known: the results of pint's conversions are
kept in a small JSON file in the user cache folder (engine.persist.JsonCache), so a process whose
values were all converted before (the shipped configs' "3.35 TB/s", "2 GB", "222.9 us" ...)
never imports pint (~0.1-0.3 CPU-s of a ``simllm`` process: its import and its registry). A value
pint rejects is never cached: it goes to pint each time and raises the same SpecError.
"""

import functools
import json
import math
from pathlib import Path

from engine.errors import SpecError
from engine.persist import JsonCache

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


def registry():
    """The shared sheet registry (FLOPS, TOPS, Gb/s ...): see ``engine.ingest.units.registry``."""
    from engine.ingest.units import registry as sheet_registry

    return sheet_registry()


#: pint's results across processes (engine.persist; SIMLLM_PERSIST=0 turns it off), stamped with
#: pint's installed copy and the source of the modules that define a conversion.
_CACHE = JsonCache("unit-conversions", packages=("pint",),
                   sources=(Path(__file__).resolve(),
                            Path(__file__).resolve().parent.parent / "engine" / "ingest" / "units.py"))


def _key(*parts) -> str:
    return json.dumps([repr(p) if not isinstance(p, str) else p for p in parts])


def _cached_convert(kind: type, value, default_unit: str, target: str) -> float:
    """``_convert`` through the conversion cache (raises pint's errors on a miss that fails)."""
    key = _key("to", kind.__name__, value, default_unit, target)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    out = _convert(kind, value, default_unit, target)
    _CACHE.put(key, out)
    return out


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
        out = _cached_convert(type(value), value, default_unit, target)
    except Exception as e:  # noqa: BLE001 - pint's parser raises many kinds (tokenize, syntax, key ...)
        import pint

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
    key = _key("from", float(value), target, default_unit)
    out = _CACHE.get(key)
    if out is None:
        out = float(registry().Quantity(float(value), target).to(default_unit).magnitude)
        _CACHE.put(key, out)
    return round(out, 12)
