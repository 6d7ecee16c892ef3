"""DesSpec moved to ``engine.spec.des`` (``Specs.des``); this name stays for existing imports."""

from engine.spec.des import ADMISSIONS, FROM_FRAMEWORK, QUEUE_POLICIES, ROUTERS, SCHEDULERS, DesSpec

__all__ = ["DesSpec", "FROM_FRAMEWORK", "SCHEDULERS", "QUEUE_POLICIES", "ADMISSIONS", "ROUTERS"]


def deployment(specs, des: DesSpec | None = None):
    """(specs, des) as the DES runs them: ``des`` (default ``specs.des``) with its None settings
    taken from ``specs.framework`` (``DesSpec.resolve``). (The KV usable fraction is
    ``Specs.kv_usable_fraction``, the same for both engines.)"""
    from dataclasses import replace

    from engine.des.workload.clients import client_des

    fw = specs.framework
    des = (des if des is not None else specs.des).resolve(fw)
    des = client_des(des, getattr(specs.workload, "client", "none"))   # benchmark client (workload.client)
    if des is not specs.des:
        specs = replace(specs, des=des)
    return specs, des


__all__ += ["deployment"]
