"""Field metadata of the specs: the one description of a config field.

Each spec field may carry, in ``dataclasses.field(metadata=...)`` (made by ``param``):

    key       the config key (``hardware.hbm_bandwidth`` for ``hbm_bandwidth_bytes_s``); default:
              the field name
    unit      the default unit of a quantity given as a bare number ("TB/s", "us"); the engine
              field is SI. None: not a quantity (counts, fractions, names)
    zero      a quantity may be 0 (no SRAM, no latency)
    range     (low, high) plausible values in the engine's unit, for documentation and for the
              test that checks every YAML default against its field; the spec's own checks
              (``__post_init__``) stay the authority
    required  the config must give it (Hydra's ``???``) even where the spec has a default
    config_type  the config's type where it differs from the field's (a tuple field is a list)
    config_default  the config's default where it is not the spec's written in the field's unit
              (``overlap: none`` for 0.0)
    config    False: not a config field (filled by the runner, e.g. DesSpec.framework)
    check     the field's validity rule (an ``engine.spec._check`` rule: ``IntAtLeast(0)``,
              ``POSITIVE``, ``OneOf(...)``, ``Within(0, 1, ...)``); ``check_fields`` runs every field's rule, so
              a range, choice or sign is declared once, beside the field (a None default: None
              passes, the framework profile's value)

A spec class may list config-only keys (kept in the config, not in the spec: a description, the
sheet's assumptions) as ``CONFIG_EXTRA = ((key, type, default), ...)``.

From this metadata ``runner.fields`` generates the Hydra structured-config schemas, converts a
config mapping to a spec (``from_mapping``, with pint), and the spec-sheet vocabulary reads the
units and limits. This module imports nothing outside the standard library.
"""

import dataclasses
from dataclasses import MISSING, Field

_KEYS = ("key", "unit", "zero", "range", "required", "config_type", "config_default", "config", "check")


def param(default=MISSING, *, default_factory=MISSING, key: str | None = None, unit: str | None = None,
          zero: bool = False, range: tuple | None = None, required: bool = False,  # noqa: A002
          config_type=None, config_default=MISSING, config: bool = True, check=None) -> Field:
    """A dataclass field with its config metadata (see the module docstring)."""
    md = {"key": key, "unit": unit, "zero": zero, "range": range, "required": required,
          "config_type": config_type, "config_default": config_default, "config": config,
          "check": check}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=md)
    return dataclasses.field(default=default, metadata=md)


def meta(f: Field) -> dict:
    """The metadata of field ``f``, defaults filled in (key = the field name)."""
    md = {k: f.metadata.get(k) for k in _KEYS}
    md["config_default"] = f.metadata.get("config_default", MISSING)
    md["config"] = f.metadata.get("config", True)
    md["key"] = md["key"] or f.name
    md["zero"] = bool(md["zero"])
    md["required"] = bool(md["required"])
    return md


def config_fields(cls) -> list[tuple[Field, dict]]:
    """(field, metadata) of every config field of spec class ``cls``, in declaration order."""
    return [(f, md) for f in dataclasses.fields(cls) for md in [meta(f)] if md["config"]]


def units(cls, group: str) -> dict[str, str]:
    """{'group.key': default unit} of the quantity fields of ``cls`` (nested specs included)."""
    out = {}
    for f, md in config_fields(cls):
        nested = _nested_class(f)
        if nested is not None:
            out.update(units(nested, f"{group}.{md['key']}"))
        elif md["unit"]:
            out[f"{group}.{md['key']}"] = md["unit"]
    return out


def _nested_class(f: Field):
    """The spec class of a nested spec field (CalibrationSpec.noise -> NoiseSpec), else None."""
    t = f.type
    return t if isinstance(t, type) and dataclasses.is_dataclass(t) else None


__all__ = ["param", "meta", "config_fields", "units"]
