"""Small validation helpers shared by the spec dataclasses, and the field rules they declare.

A spec field states its rule once, in its metadata (``param(..., check=IntAtLeast(0))``,
engine.spec.meta); ``check_fields(spec, group)`` runs every field's rule and raises SpecError
naming ``group.field``, the value and what was expected. Checks that tie several fields together
stay code in the spec's ``__post_init__``.
"""

import dataclasses
import math
from dataclasses import dataclass

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



def boolean(group: str, name: str, value) -> None:
    """Raise SpecError unless ``value`` is true or false."""
    if not isinstance(value, bool):
        raise SpecError(f"{group}.{name}", value, "true or false")


@dataclass(frozen=True)
class IntAtLeast:
    """An integer >= ``minimum``."""
    minimum: int = 1

    def __call__(self, group, name, value):
        positive_int(group, name, value, minimum=self.minimum)


@dataclass(frozen=True)
class FunctionRule:
    """The rule that is one of the functions above, called as it is (``positive``, ...)."""
    function: object

    def __call__(self, group, name, value):
        self.function(group, name, value)


#: A finite number > 0; a finite number >= 0; true or false.
POSITIVE, NON_NEGATIVE, BOOL = FunctionRule(positive), FunctionRule(non_negative), FunctionRule(boolean)


@dataclass(frozen=True)
class OneOf:
    """One of ``choices``: a tuple, or a function giving it (a registry read when checked)."""
    choices: object

    def __call__(self, group, name, value):
        one_of(group, name, value, self.choices() if callable(self.choices) else self.choices)


@dataclass(frozen=True)
class Within:
    """A number in [low, high] (``high_open``: [low, high); ``zero``: 0 too, the off value);
    ``expected`` words the range."""
    low: float
    high: float
    expected: str
    high_open: bool = False
    zero: bool = False

    def __call__(self, group, name, value):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (
            (self.zero and value == 0)
            or (self.low <= value and (value < self.high if self.high_open else value <= self.high)))
        if not ok:
            raise SpecError(f"{group}.{name}", value, self.expected)


@dataclass(frozen=True)
class EachPositive:
    """A list of numbers > 0; ``expected`` words it."""
    expected: str

    def __call__(self, group, name, value):
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in value):
            raise SpecError(f"{group}.{name}", list(value), self.expected)


def check_fields(spec, group: str) -> None:
    """Run the ``check`` rule of every field of dataclass ``spec`` (engine.spec.meta.param), in
    declaration order; a None value passes where the field's default is None (the framework
    profile's value). Raises SpecError naming ``group.<config key>``."""
    for f in dataclasses.fields(spec):
        rule = f.metadata.get("check")
        if rule is None:
            continue
        value = getattr(spec, f.name)
        if value is None and f.default is None:
            continue
        rule(group, f.metadata.get("key") or f.name, value)
