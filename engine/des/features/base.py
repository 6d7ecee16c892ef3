"""The hook protocol of the replica's optional features, with null objects (Ciw-style: optional
behaviour injected with a do-nothing default, so the replica and the event loop never test
``if feature is not None``).

A replica holds three slots, each filled by ``engine.des.features.build`` (the assembly) and
defaulting to the null object here:
    decoding   how decodes are planned and priced: ``PlainDecoding`` (one token per step;
               engine.des.features.decoding) or ``Speculation`` (engine.des.features.speculation)
    power      device power: ``NoPower`` (here) or ``Power`` (engine.des.features.power): prices
               iterations under the TDP throttle and charges their joules to the requests
    hooks      ``Feature`` observers of the replica's events (token timestamps, head-of-line
               blocking, ...): the null ``Feature`` or a ``Features`` of several
"""


class Feature:
    """Observer of a replica's events. Every hook does nothing: subclass and override the ones a
    feature needs (engine.des.features.token_times, engine.des.features.hol)."""

    def first_token(self, rep, rid: int, t: float) -> None:
        """Request ``rid`` emitted the first token of a (re)prefill at ``t``."""

    def decode_run(self, rep, t0: float, cum, emit, n: int) -> None:
        """A run of decode steps of the first ``n`` slots ended: step j at ``t0 + cum[j]``; ``emit``
        the cumulative tokens per step and sequence (speculation) or None (one per step)."""

    def iteration(self, rep, didx, emit, t: float) -> None:
        """A mixed iteration ended at ``t``: the decoding slots ``didx`` (or None) emitted one
        token each, or ``emit`` tokens each (speculation)."""

    def blocked(self, rep, rid: int, t: float) -> None:
        """Queue head ``rid`` failed the KV-fit test with others queued behind it."""

    def dequeued(self, rep, rid: int, t: float) -> None:
        """``rid`` left the waiting queue (admitted, cancelled or aborted)."""


#: the null observer
NO_FEATURE = Feature()


class Features(Feature):
    """Several observers behind one: each hook calls the observers that override it, in order."""

    def __init__(self, features):
        self.features = tuple(features)
        for name in ("first_token", "decode_run", "iteration", "blocked", "dequeued"):
            fs = [getattr(f, name) for f in self.features
                  if getattr(type(f), name) is not getattr(Feature, name)]
            if len(fs) == 1:
                setattr(self, name, fs[0])
            elif fs:
                setattr(self, name, _all(fs))

    def __iter__(self):
        return iter(self.features)


def _all(fs):
    def call(*a):
        for f in fs:
            f(*a)
    return call


def combine(features) -> Feature:
    """The null observer for none, the feature itself for one, else ``Features``."""
    features = [f for f in features if f is not None]
    if not features:
        return NO_FEATURE
    return features[0] if len(features) == 1 else Features(features)


class NoPower:
    """No power model: iterations keep their nominal times, nobody is charged joules."""

    throttle = False

    def busy_one(self, T, logits, pieces, nd, pd) -> float:
        return 0.0

    def price_one(self, t, dt, busy):
        return dt, None, None

    def price_run(self, t, x, n, p0, k):
        return x, None, None, None

    def price_steps(self, t, x, busy):
        return x, None, None

    def charge_run(self, rep, run, t) -> None:
        pass

    def charge_iteration(self, rep, run, t, q) -> None:
        pass


NO_POWER = NoPower()

__all__ = ["Feature", "NO_FEATURE", "Features", "combine", "NoPower", "NO_POWER"]
