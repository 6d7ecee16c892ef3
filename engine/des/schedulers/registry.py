"""name -> scheduler policy class: ``register`` in each policy module.

A policy's traits are declared once, by name, in engine.spec.scheduling (the specs' validation and
the capacity bound read them there, below the engine's layers); ``register`` copies them onto the
class as class attributes (``cls.chunks``, ``cls.reserves_output``, ...), so a policy reads its own
traits as ``self.<trait>``.
"""

from dataclasses import fields

from engine.spec.scheduling import SchedulerTraits, scheduler_traits

#: name -> policy class
REGISTRY: dict = {}


def register(name: str):
    """Class decorator: register the policy under ``name`` with the traits engine.spec.scheduling
    declares for it (a name it does not declare: KeyError)."""
    try:
        t = scheduler_traits(name)
    except KeyError:
        raise KeyError(f"scheduler {name!r}: declare its traits in engine.spec.scheduling.POLICIES "
                       "first") from None

    def deco(cls):
        cls.name = name
        for f in fields(SchedulerTraits):
            setattr(cls, f.name, getattr(t, f.name))
        REGISTRY[name] = cls
        return cls
    return deco


__all__ = ["REGISTRY", "register"]
