"""Queue expiry and end-to-end deadlines.

Expiry (``timeout_s``): a request not admitted to a running batch within timeout_s of its
arrival leaves its queue (cancelled). Deadline (``deadline_s``, or its request class's): a
request not complete deadline seconds after its arrival is aborted wherever it is: in a queue it
leaves at once; in a running batch it is dropped at the end of the iteration in progress (a
decode run is cut after the step in progress, as an arrival cuts it), its KV blocks freed and
prefix entries unpinned as a preemption frees them (Replica.abort), not requeued; counted in
cancelled (cancelled_running / cancelled_queued). A cancelled session turn still triggers the
next turn (the user goes on).
"""

import numpy as np

from engine.des.cluster.loop import END, EXPIRE, PLAN


class Deadlines:
    def __init__(self, des, pool: list, st, trace, gateway):
        self.des, self.pool, self.st, self.trace, self.gateway = des, pool, st, trace, gateway
        self.cancelled = 0
        self.cancelled_running = 0
        self.aborting: dict = {}          # replica idx -> request ids to drop when its iteration ends
        self._deadline = None             # per-request deadline [s] (``start``) or None

    def start(self) -> None:
        """End-to-end deadlines per request: the request class's deadline_s, else deadline_s."""
        des, st = self.des, self.st
        dl = np.full(st.n, des.cluster.deadline_s)
        if st.klass is not None:
            for i, c in enumerate(des.clients.classes):
                if c.deadline_s:
                    dl[st.klass == i] = c.deadline_s
        self._deadline = dl if (dl > 0).any() else None

    def routed(self, loop, rid: int, t: float) -> None:
        """The expiry and deadline events of ``rid`` (ver 0: expiry, 1: deadline)."""
        st = self.st
        if self.des.cluster.timeout_s > 0:
            loop._push(max(t, st.arrival[rid] + self.des.cluster.timeout_s), 2, EXPIRE, rid)
        if self._deadline is not None and self._deadline[rid] > 0:
            loop._push(max(t, st.arrival[rid] + self._deadline[rid]), 2, EXPIRE, rid, 1)

    def event(self, loop, rid: int, t: float, ver: int) -> None:
        if ver == 0:            # queue expiry (timeout_s)
            rep = self.expire(rid, t)
            now = rep is not None
        else:                   # end-to-end deadline (deadline_s / the request class's)
            rep, now = self.deadline(rid, t)
            if rep is not None and not now:
                end = rep.truncate(t)       # a decode run stops after the step in progress
                if end is not None:
                    rep.version += 1
                    loop._push(end, 0, END, rep, rep.version)
        if now:
            loop._left(rid, t)
            if rep.run is None and not rep.plan_pending and rep.waiting:
                rep.plan_pending = True
                loop._push(t, 2, PLAN, rep)

    def expire(self, rid: int, t: float):
        """Queue expiry of ``rid``: removed from its replica's queue if still waiting there for
        its first admission; returns the replica (to re-plan) or None."""
        st = self.st
        if st.scheduled[rid] == st.scheduled[rid] or st.rejected[rid] or st.cancelled[rid]:
            return None
        rep = self.pool[int(st.replica[rid])]
        if not rep.unqueue(rid, t):
            return None
        self._cancel(rid, t, rep, "expire")
        return rep

    def deadline(self, rid: int, t: float):
        """End-to-end deadline of ``rid`` at ``t``. Returns (replica, now): now = True when it
        left at once (queue, or a replica between iterations: re-plan it); False when it is in a
        batch in progress (dropped at its end: ``flush``); (None, False) when it already
        finished, was rejected or cancelled."""
        st = self.st
        if st.completion[rid] == st.completion[rid] or st.rejected[rid] or st.cancelled[rid]:
            return None, False
        rep = self.pool[int(st.replica[rid])]
        if rep.unqueue(rid, t):
            self._cancel(rid, t, rep, "abort_queued")
            return rep, True
        if rep.run is None:
            if rep.abort(rid):
                self.cancelled_running += 1
                self._cancel(rid, t, rep, "abort_running")
                return rep, True
            return None, False
        self.aborting.setdefault(rep.idx, set()).add(rid)
        return rep, False

    def flush(self, rep, t) -> list:
        """Drop the requests whose deadline passed during ``rep``'s iteration that just ended
        (those it completed stay completed); returns the ids dropped."""
        if not self.aborting:
            return ()
        gone = []
        for rid in self.aborting.pop(rep.idx, ()):
            if self.st.completion[rid] != self.st.completion[rid] and rep.abort(rid):
                self.cancelled_running += 1
                self._cancel(rid, t, rep, "abort_running")
                gone.append(rid)
        return gone

    def _cancel(self, rid, t, rep, what):
        self.st.cancelled[rid] = True
        self.cancelled += 1
        self.gateway.finished(rid)
        self.trace.cancel(t, rid, rep, what)


__all__ = ["Deadlines"]
