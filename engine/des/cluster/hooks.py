"""The one interface between the event loop and the fleet's jobs (engine.des.cluster.fleet).

``Hooks`` is the null object: every method does what the loop does without cluster features
(admit everything, route with the pool's router, nothing periodic). ``Fleet`` overrides them.
"""


class Hooks:
    """Null hooks (no cluster features)."""

    def start(self, loop, arr):
        """Before the first event: periodic events; the open-loop request ids when they are not
        0..n-1 in order (sessions' first turns), else None."""
        return None

    def admit(self, rid: int, t: float):
        """Reason to reject ``rid`` at its arrival, or None."""
        return None

    def route(self, loop, rid: int, t: float):
        """The replica ``rid`` goes to."""
        return loop.router.pick(rid)

    def routed(self, loop, rid: int, t: float) -> None:
        """``rid`` was routed (its expiry and deadline events)."""

    def ended(self, rep, t: float):
        """``rep``'s iteration ended at ``t``: the request ids it drops (deadlines passed)."""
        return ()

    def done(self, loop, rids, t: float) -> None:
        """``rids`` completed at ``t``."""

    def gone(self, loop, rid: int, t: float) -> None:
        """``rid`` was rejected or cancelled at ``t`` (a session goes on)."""

    def event(self, loop, kind: int, tag, t: float, ver: int) -> None:
        """An event the hooks pushed (expiry, deadline, periodic tick)."""
        raise AssertionError(f"no hook pushed event kind {kind}")

    def close(self, loop, t: float) -> float:
        """After the last event at ``t``: the run's end time."""
        return t


NO_HOOKS = Hooks()

__all__ = ["Hooks", "NO_HOOKS"]
