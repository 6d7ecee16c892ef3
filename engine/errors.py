"""Errors raised by the engine when a spec is invalid."""


class SpecError(ValueError):
    """A spec field holds a value the engine cannot use.

    ``field`` is the full config key (``hardware.hbm_bandwidth``), ``value`` what was given and
    ``expected`` what would have been accepted, so the message can be shown to a user as is.
    """

    def __init__(self, field: str, value, expected: str):
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"{field} = {value!r}: expected {expected}")
