"""DesSpec moved to ``engine.spec.des`` (``Specs.des``); this name stays for existing imports."""

from engine.spec.des import ADMISSIONS, FROM_FRAMEWORK, QUEUE_POLICIES, ROUTERS, SCHEDULERS, DesSpec

__all__ = ["DesSpec", "FROM_FRAMEWORK", "SCHEDULERS", "QUEUE_POLICIES", "ADMISSIONS", "ROUTERS"]


def deployment(specs, des: DesSpec | None = None):
    """(specs, des) as the DES runs them: ``des`` (default ``specs.des``) with its None settings
    taken from ``specs.framework`` (``DesSpec.resolve``), and the calibration's KV usable fraction
    replaced by the framework's when the profile sets one (> 0)."""
    from dataclasses import replace

    fw = specs.framework
    des = (des if des is not None else specs.des).resolve(fw)
    if fw.kv_usable_fraction > 0 and fw.kv_usable_fraction != specs.calibration.kv_usable_fraction:
        specs = replace(specs, calibration=replace(specs.calibration, kv_usable_fraction=fw.kv_usable_fraction))
    if des is not specs.des:
        specs = replace(specs, des=des)
    return specs, des


__all__ += ["deployment"]
