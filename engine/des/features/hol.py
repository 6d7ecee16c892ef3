"""Head-of-line blocking detector (a cluster feature, on with ``DesSpec.cluster_features``): a
queue head that fails the KV-fit test while others wait behind it blocks them (FCFS, as in vLLM).
An episode runs from the head's first failed test to its leaving the queue; engine.des.cluster.fleet's
results report the blocked heads, the closed episodes' seconds and the longest."""

from engine.des.features.base import Feature


class HolDetector(Feature):
    """Blocked heads of one replica's queue and their episodes."""

    def __init__(self):
        self.heads: set = set()      # every head that ever blocked
        self.since: dict = {}        # blocked head -> when it first blocked (open episodes)
        self.s = 0.0                 # closed episodes: seconds from first block to leaving
        self.max_s = 0.0

    def __len__(self) -> int:
        return len(self.heads)

    def blocked(self, rep, rid, t):
        self.heads.add(rid)
        self.since.setdefault(rid, t)

    def dequeued(self, rep, rid, t):
        if not self.since:
            return
        t0 = self.since.pop(rid, None)
        if t0 is not None:
            self.s += t - t0
            self.max_s = max(self.max_s, t - t0)


__all__ = ["HolDetector"]
