"""Optional features of the discrete-event engine, each behind the replica's slots and hooks with
null defaults (engine.des.features.base), so the replica and the event loop have no
``if feature is not None`` branches:

    base.py         the hook protocol (Feature), the null objects (NO_FEATURE, NoPower), Features
    decoding.py     plain decoding (the default decoding slot): runs of k decode steps
    speculation.py  speculative decoding (draft model, MTP head or a fixed draft cost)
    power.py        device power, energy per request, the TDP throttle
    token_times.py  per-token timestamps (DesSpec.outputs.token_times)
    hol.py          head-of-line blocking detector (cluster features)
    bounds.py       the lower bounds of the seed's sanity check (prefill_lb_ms, decode_lb_ms)
    report.py       what they add to the summary, the table and assumptions.md

A new feature: a ``Feature`` subclass overriding the hooks it needs (or a strategy for a slot),
built in ``build`` below from the specs; ``report`` for its figures.
"""

from engine.des.features.base import NO_FEATURE, NO_POWER, Feature, Features, NoPower, combine
from engine.des.features.decoding import PLAIN, PlainDecoding


def build(specs, des, sm, noise, reps, st) -> dict:
    """Fill the replicas' feature slots from the specs: speculation (analytical.spec_decode),
    power (hardware.tdp), token timestamps (des.outputs.token_times), the head-of-line detector
    (des.cluster_features). Returns the shared objects for the report: {"spec": Speculation or
    None, "powers": [Power per replica]}."""
    out = {"spec": None, "powers": []}
    if specs.analytical.spec_decode.method != "none":
        from engine.des.features.speculation import Speculation
        out["spec"] = Speculation(specs, sm, noise, des.seed)
    tdp = specs.hardware.tdp_w
    roofs = None
    if tdp is not None:
        from engine.des.features.power import Power, roof_functions
        # the iteration roofs from the step functions' memo (one pass evaluation for both)
        roofs = roof_functions(sm, getattr(reps[0].step_time, "roof", None) if reps else None)
    tokens = None
    if des.outputs.token_times:
        from engine.des.features.token_times import TokenTimes
        tokens = TokenTimes(st)
    for r in reps:
        if out["spec"] is not None:
            r.decoding = out["spec"]
        if roofs is not None:
            r.power = Power(des, tdp, specs.analytical.idle_power_fraction,
                            specs.partition.devices_per_replica, roofs)
            out["powers"].append(r.power)
        hol = None
        if des.cluster_features:
            from engine.des.features.hol import HolDetector
            hol = r.hol_detector = HolDetector()
        r.hooks = combine([tokens, hol])
    return out


__all__ = ["build", "Feature", "Features", "NO_FEATURE", "NoPower", "NO_POWER", "combine", "PlainDecoding",
           "PLAIN"]
