"""Specs' field metadata (engine.spec.meta) -> Hydra schemas, units and specs.

``schema_of(SpecClass)`` generates the structured-config schema of a config group from the spec:
one field per spec field under its config key, typed ``Any`` for a quantity (a number in the
field's default unit or a string with a unit), the config default derived from the spec's (SI ->
default unit), ``???`` where the config must give it, plus the spec's ``CONFIG_EXTRA`` keys.
``from_mapping(SpecClass, mapping, group)`` is the generic, Hydra-free loader: quantities to SI
with pint (runner.units), lists to tuples, nested specs recursively, then the spec's own checks.
"""

import dataclasses
import functools
from dataclasses import MISSING
from typing import Any, Optional, Union, get_args, get_origin

from engine.errors import SpecError
from engine.spec.meta import config_fields
from runner.units import from_si, to_si


def _nested(f):
    t = f.type
    return t if isinstance(t, type) and dataclasses.is_dataclass(t) else None


def _config_type(f, md):
    """The schema type of a spec field: Any for quantities, Optional[T] for ``T | None``."""
    if md["unit"]:
        return Any
    if md["config_type"] is not None:
        return md["config_type"]
    t = f.type
    if get_origin(t) in (Union, getattr(__import__("types"), "UnionType", Union)):
        args = [a for a in get_args(t) if a is not type(None)]
        return Optional[args[0]] if len(args) == 1 else Any
    if t is tuple:
        return list
    return t


def _config_default(f, md):
    """The schema default: ``???`` if required or the spec has none; the field's config_default;
    a quantity's SI default written in its unit (0 stays the integer 0); a tuple as a list; else
    the spec's."""
    if md["required"] or (f.default is MISSING and f.default_factory is MISSING):
        return "???"
    if md["config_default"] is not MISSING:
        return md["config_default"]
    value = f.default if f.default is not MISSING else f.default_factory()
    if md["unit"] and value is not None:   # "50 GB/s" for 50e9 B/s; a zero stays the number 0
        return 0 if value == 0 else f"{from_si(value, md['unit']):g} {md['unit']}"
    if isinstance(value, tuple):
        return list(value)
    return value


@functools.lru_cache(maxsize=None)
def schema_of(cls, name: str | None = None, front: tuple = (), extra: tuple = ()) -> type:
    """The Hydra schema dataclass of spec class ``cls``: ``front`` ((key, type, default), ...)
    first (e.g. the option's ``name``), then its fields, then ``cls.CONFIG_EXTRA``, then ``extra``
    (keys the runner accepts beside the spec's, e.g. moved keys)."""
    specs = []
    for key, typ, default in (*front, *getattr(cls, "CONFIG_EXTRA", ())):
        specs.append((key, typ, _field_default(default)))
    keys = {k for k, _, _ in specs}
    for f, md in config_fields(cls):
        if md["key"] in keys:
            continue
        nested = _nested(f)
        if nested is not None:
            specs.append((md["key"], schema_of(nested), dataclasses.field(default_factory=schema_of(nested))))
        else:
            specs.append((md["key"], _config_type(f, md), _field_default(_config_default(f, md))))
    for key, typ, default in extra:
        specs.append((key, typ, _field_default(default)))
    order = [k for k, _, _ in front] + [md["key"] for _, md in config_fields(cls)] + \
        [k for k, _, _ in getattr(cls, "CONFIG_EXTRA", ())] + [k for k, _, _ in extra]
    specs.sort(key=lambda s: order.index(s[0]))
    # Hydra and OmegaConf read a schema's fields and defaults only, never compare or print its
    # instances: no __eq__ and __repr__ are generated (nor the docstring dataclasses would derive
    # from the signature), ~40 % of the time building the schemas takes in every process. Nor is
    # __init__ generated: compiling one per schema (hundreds of fields) was most of the rest
    # (~8 ms of every process), though only a compose that misses the compose cache makes an
    # instance (a nested schema's default_factory); _schema_init does the same assignments.
    name = name or cls.__name__.replace("Spec", "Schema")
    schema = dataclasses.make_dataclass(name, specs, eq=False, repr=False, init=False, namespace={
        "__doc__": f"{name}: the structured-config schema of {cls.__name__} (runner.fields.schema_of)."})
    schema.__init__ = _schema_init(dataclasses.fields(schema))
    return schema


def _schema_init(fields: tuple):
    """The ``__init__`` dataclasses would generate for a schema whose fields all have a default
    (or a default_factory), keyword or positional arguments in field order: each field set to
    its argument, else a new ``default_factory()``, else its default."""
    names = tuple(f.name for f in fields)
    if any(f.default is MISSING and f.default_factory is MISSING for f in fields):
        raise TypeError("a schema field without a default")   # schema_of gives each one
    defaults = tuple((f.default_factory, True) if f.default_factory is not MISSING else (f.default, False)
                     for f in fields)

    def __init__(self, *args, **kwargs):
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes {len(names)} positional arguments "
                            f"but {len(args)} were given")
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument '{k}'")
            if k in given:
                raise TypeError(f"{type(self).__name__}() got multiple values for argument '{k}'")
            given[k] = v
        for n, (d, factory) in zip(names, defaults):
            object.__setattr__(self, n, given[n] if n in given else (d() if factory else d))

    return __init__


def _field_default(value):
    if isinstance(value, dataclasses.Field):
        return value
    if isinstance(value, (list, dict)):
        return dataclasses.field(default_factory=lambda v=value: type(v)(v))
    return dataclasses.field(default=value)


def from_mapping(cls, mapping, group: str):
    """Spec ``cls`` from a plain mapping of config keys (a resolved config group): quantities to
    SI floats with pint (SpecError naming ``group.key``), lists to tuples, nested specs
    recursively; keys the spec does not have (its CONFIG_EXTRA, a name) are left out."""
    kw = {}
    for f, md in config_fields(cls):
        key = md["key"]
        if key not in mapping:
            continue
        value = mapping[key]
        nested = _nested(f)
        if nested is not None:
            kw[f.name] = from_mapping(nested, value or {}, f"{group}.{key}")
        elif md["unit"]:
            kw[f.name] = to_si(f"{group}.{key}", value, md["unit"], allow_zero=md["zero"])
        elif isinstance(value, list):
            kw[f.name] = tuple(value)
        else:
            kw[f.name] = value
    try:
        return cls(**kw)
    except TypeError as e:  # a required field the mapping lacks
        raise SpecError(group, dict(mapping), f"all required fields of {cls.__name__} ({e})") from None


__all__ = ["schema_of", "from_mapping"]
