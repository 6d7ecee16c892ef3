"""Trace importers, registered by name (one module each): a foreign workload description -> a
DES trace (polars frame in a layout engine.des.workload.trace reads; ``simllm-import`` writes it).

    inference_perf.py   an inference-perf config (load stages, data distributions)
    servegen.py         ServeGen per-client data (arrival and length distributions)

A new importer: one module here calling ``register("name", f)``, and its import below.
"""

#: name -> importer function
IMPORTERS: dict = {}


def register(name: str, f):
    """Register importer ``f`` under ``name``; returns ``f``."""
    IMPORTERS[name] = f
    return f


from engine.des.workload.importers.inference_perf import inference_perf_requests  # noqa: E402
from engine.des.workload.importers.servegen import servegen_requests  # noqa: E402

__all__ = ["IMPORTERS", "register", "inference_perf_requests", "servegen_requests"]
