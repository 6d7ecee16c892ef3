"""A replica's waiting queue and its policy (``DesSpec.scheduling.queue_policy``).

A binary heap of (tier, key, seq, rid): preempted requests come back in tier 0 (newest first:
key = -seq), new ones in tier 1 ordered by the policy's key:
    fcfs       arrival time
    priority   (priority class, arrival time): lower class first
    sjf        prompt tokens (shortest first)
``seq`` (a counter) breaks ties deterministically. A mixin of ``engine.des.replica.Replica``.
"""

import heapq

#: queue_policy -> key of a new request: f(State, rid)
KEYS = {
    "fcfs": lambda st, rid: st.arrival[rid],
    "priority": lambda st, rid: (int(st.priority[rid]), st.arrival[rid]),
    "sjf": lambda st, rid: int(st.prompt[rid]),
}


class Queue:
    """The waiting queue of ``Replica`` (see the module docstring)."""

    @property
    def outstanding(self) -> int:
        """Requests running or waiting here."""
        return self.n + len(self.waiting)

    def enqueue(self, rid: int, t: float) -> None:
        """Request ``rid`` joins the queue at ``t``."""
        self._seq += 1
        heapq.heappush(self.waiting, (1, self._key(self.st, rid), self._seq, rid))

    def unqueue(self, rid: int, t: float) -> bool:
        """Remove ``rid`` from the waiting queue (a deadline passed, or the client went away
        before it ran); False if it is not there."""
        w = self.waiting
        for i, e in enumerate(w):
            if e[3] == rid:
                w[i] = w[-1]
                w.pop()
                if i < len(w):
                    heapq.heapify(w)
                self.hooks.dequeued(self, rid, t)
                return True
        return False


__all__ = ["KEYS", "Queue"]
