"""Small validation helpers shared by the spec dataclasses."""

import math

from engine.errors import SpecError


def positive(group: str, name: str, value, *, allow_none: bool = False, unit: str = "") -> None:
    """Raise SpecError unless ``value`` is a finite number > 0 (or None when allowed)."""
    if value is None and allow_none:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise SpecError(f"{group}.{name}", value, f"a finite number > 0{(' ' + unit) if unit else ''}")


def non_negative(group: str, name: str, value, unit: str = "") -> None:
    """Raise SpecError unless ``value`` is a finite number >= 0."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0:
        raise SpecError(f"{group}.{name}", value, f"a finite number >= 0{(' ' + unit) if unit else ''}")


def fraction(group: str, name: str, value) -> None:
    """Raise SpecError unless 0 < value <= 1."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not (0 < value <= 1):
        raise SpecError(f"{group}.{name}", value, "a fraction in (0, 1]")


def positive_int(group: str, name: str, value, *, minimum: int = 1) -> None:
    """Raise SpecError unless ``value`` is an int >= minimum."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise SpecError(f"{group}.{name}", value, f"an integer >= {minimum}")


def one_of(group: str, name: str, value, choices) -> None:
    """Raise SpecError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise SpecError(f"{group}.{name}", value, "one of " + ", ".join(map(str, choices)))
