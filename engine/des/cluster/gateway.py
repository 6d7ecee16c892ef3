"""The fleet's gateway: routes each admitted request among the active replicas with the
registered router (engine.des.cluster.routers) on its recorded signals (signals.Delayed:
``signal_delay_s`` old), traces the decision and counts the tokens it sent where."""

from engine.des.cluster.routers import ROUTERS
from engine.des.cluster.signals import Delayed


class Gateway:
    def __init__(self, des, pool: list, st, trace):
        self.st, self.trace = st, trace
        self.signals = Delayed(pool, des.cluster.signal_delay_s)
        self.router = ROUTERS[des.cluster.router](st, des, pool)
        for r in pool:
            self.attach(r)

    def attach(self, rep) -> None:
        """Per-replica hooks: preemption decisions, evictions the router's index hears of."""
        self.trace.attach(rep)
        self.router.attach(rep)

    def route(self, rid: int, t: float, active: list):
        """The active replica for ``rid``."""
        snap = self.signals.snapshot(t, active)
        rep = active[0] if len(active) == 1 else self.router.pick(rid, snap)
        self.router.routed(rid, rep)
        self.trace.route(t, rid, rep, snap)
        self.signals.inflight[rep.idx] += int(self.st.prompt[rid]) + int(self.st.output[rid])
        return rep

    def finished(self, rid: int) -> None:
        """``rid`` left its replica (completed or cancelled)."""
        r = int(self.st.replica[rid])
        if r >= 0:
            self.signals.inflight[r] -= int(self.st.prompt[rid]) + int(self.st.output[rid])

    def recycled(self, rep) -> None:
        """``rep`` came back with an empty prefix cache: the router forgets its blocks."""
        self.router.forget(rep.idx)
        self.attach(rep)


__all__ = ["Gateway"]
