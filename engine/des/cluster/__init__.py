"""The event loop and the fleet around it, one module per job.

Reading guide:
    loop.py         ``Loop``: iteration ends, arrivals, plans, hand-offs (deterministic ties);
                    no feature branches: everything optional goes through ``hooks``
    hooks.py        ``Hooks``, the loop's one interface to the cluster features; its null
                    object routes with the pool's router and does nothing else
    routers.py      the router registry (name -> class answering ``pick(rid, snapshot)``), the
                    pool ``Router``; signals.py the fresh or delayed load snapshot they read
    fleet.py        ``Fleet(Hooks)``: the cluster features composed from their jobs:
      gateway.py      routing on the recorded (delayed) signals, in-flight tokens
      shedding.py     admission: max_model_len, shedding by priority
      deadlines.py    queue expiry, end-to-end deadlines
      autoscaler.py   replica sets, autoscaling, billing
      telemetry.py    the decision trace and the time series
    counterfactual.py  the same arrivals under another policy, per-request regret

A router: a class in routers.py with ``pick`` and ``@register("name")`` + the name in
engine.spec.des.ROUTERS. A fleet control: a module here with the job and its calls from the
``Fleet`` hooks it needs (fleet.py), plus its DesSpec settings.
"""

from engine.des.cluster import counterfactual
from engine.des.cluster.autoscaler import pool_size
from engine.des.cluster.fleet import Fleet, cache_factory, make_fleet, results
from engine.des.cluster.hooks import NO_HOOKS, Hooks
from engine.des.cluster.loop import Loop, kv_time_average
from engine.des.cluster.routers import ROUTERS, HeardCache, Policy, Router, register, register_router

__all__ = ["Loop", "Hooks", "NO_HOOKS", "Router", "Policy", "ROUTERS", "register", "register_router",
           "kv_time_average", "Fleet", "HeardCache", "make_fleet", "results", "pool_size",
           "cache_factory", "counterfactual"]
