"""What a router sees: a snapshot of the candidate replicas' load (``pick(rid, snap)``).

``Fresh(replicas)``: the current values, read when the router asks (the plain event loop, each
pool of a disaggregated deployment, the live engine). ``Delayed``: the gateway's signals with
the cluster features: at every routing decision it records each replica's outstanding requests
(running + waiting), KV-block use and in-flight tokens (prompt + output of the requests routed
there and not finished); with ``signal_delay_s`` = d the router sees the latest record taken at
or before t - d (a gateway reading scraped metrics), with d = 0 the current values, which are
what ``Fresh`` reads, so the routers choose alike on both.
"""

import math
from collections import deque

import numpy as np


class Snapshot:
    """``replicas`` (the candidates) and, by replica index, ``out`` (outstanding), ``kv`` (KV-block
    use), ``tok`` (in-flight tokens), as recorded at ``t``."""

    __slots__ = ("replicas", "t", "out", "kv", "tok")

    def __init__(self, replicas, t, out, kv, tok):
        self.replicas, self.t, self.out, self.kv, self.tok = replicas, t, out, kv, tok


class Fresh:
    """The candidates' current load, read on access (no in-flight tokens: the gateway's)."""

    __slots__ = ("replicas",)
    t = math.inf

    def __init__(self, replicas):
        self.replicas = replicas

    @property
    def out(self) -> dict:
        return {r.idx: r.outstanding for r in self.replicas}

    @property
    def kv(self) -> dict:
        return {r.idx: r.kv_load for r in self.replicas}


class Delayed:
    """The gateway's recorded signals over the whole ``pool`` and their ``delay`` [s]."""

    def __init__(self, pool: list, delay: float):
        self.pool, self.delay = pool, delay
        P = len(pool)
        self.inflight = np.zeros(P)
        self.hist = deque([(-math.inf, np.zeros(P, np.int64), np.zeros(P), np.zeros(P))])

    def snapshot(self, t: float, replicas) -> Snapshot:
        """Record the pool's load at ``t``; the record the router sees, over ``replicas``."""
        pool = self.pool
        P = len(pool)
        out = np.fromiter((r.n + len(r.waiting) for r in pool), np.int64, P)
        kv = np.fromiter((r.kv.load if r.total else 1.0 for r in pool), np.float64, P)
        h = self.hist
        h.append((t, out, kv, self.inflight.copy()))
        lim = t - self.delay
        while len(h) > 1 and h[1][0] <= lim:
            h.popleft()
        return Snapshot(replicas, *h[0])


__all__ = ["Snapshot", "Fresh", "Delayed"]
