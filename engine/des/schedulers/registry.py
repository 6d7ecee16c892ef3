"""name -> scheduler policy class: the one list of policies (``register`` in each policy module).

engine.spec reads the names and traits through ``names()`` and ``traits(name)`` (engine.des.schedulers),
so a new policy is one module in this package plus its import in ``__init__``.
"""

#: name -> policy class
REGISTRY: dict = {}


def register(name: str):
    """Class decorator: register the policy under ``name`` (sets ``cls.name``)."""
    def deco(cls):
        cls.name = name
        REGISTRY[name] = cls
        return cls
    return deco


__all__ = ["REGISTRY", "register"]
