"""The event loop: arrivals, routing to replicas, iteration ends; SimPy-style deterministic order.

Events are heap entries (time, priority, seq, kind, replica, version); ``seq`` is a global
counter, so equal (time, priority) pop in push order. Priorities at equal times: an iteration end
(0) first, then arrivals (1), then re-planning (2), so a replica plans once it has seen every
request that arrived at that instant (requests arriving together are batched together).
Open-loop arrivals are read from a sorted array instead of the heap.

Disaggregated pools: arrivals go to the prefill replicas; a finished prefill becomes a HANDOFF
event (priority 1) after the KV transfer time and is routed to a decode replica.

Clients (DesSpec ramp_up_s, length_jitter, think_time_dist, warmup_s/exclude_drain;
engine.des.workload.apply_clients): read from the replicas' DesSpec, applied before the loop runs;
the measurement window is stored on the State for the summary.

Routers (``DesSpec.router``): round_robin; least_outstanding (fewest running + waiting);
least_kv (lowest KV-block use, then fewest outstanding); prefix_affinity (longest cached
prefix of the request's hash blocks, then fewest outstanding).
"""

import heapq

import numpy as np

from engine.des.replica import Replica
from engine.des.state import State
from engine.des.workload import apply_clients

END, ARRIVE, PLAN, HANDOFF = 0, 1, 2, 3


#: router name -> pick(router, request id) -> Replica (a new router is one function + @register_router)
ROUTERS: dict = {}


def register_router(name: str):
    def deco(fn):
        ROUTERS[name] = fn
        return fn
    return deco


@register_router("round_robin")
def _round_robin(router, rid):
    router._rr = (router._rr + 1) % len(router.replicas)
    return router.replicas[router._rr]


@register_router("least_outstanding")
def _least_outstanding(router, rid):
    return min(router.replicas, key=lambda r: (r.outstanding, r.idx))


@register_router("least_kv")
def _least_kv(router, rid):
    return min(router.replicas, key=lambda r: (r.kv_load, r.outstanding, r.idx))


@register_router("prefix_affinity")
def _prefix_affinity(router, rid):
    reps = router.replicas
    hashes = router.st.hashes[rid] if router.st.hashes is not None else None
    if hashes is None or reps[0].prefix is None:
        return min(reps, key=lambda r: (r.outstanding, r.idx))
    return min(reps, key=lambda r: (-r.prefix.match(hashes, len(hashes)), r.outstanding, r.idx))


class Router:
    """Routes each arriving request to a replica with the registered policy ``kind``."""

    def __init__(self, kind: str, replicas: list[Replica], st: State):
        self.kind, self.replicas, self.st = kind, replicas, st
        self._pick = ROUTERS[kind]
        self._rr = -1

    def pick(self, rid: int) -> Replica:
        if len(self.replicas) == 1:
            return self.replicas[0]
        return self._pick(self, rid)


class Loop:
    """Runs the simulation over ``replicas`` for the requests in ``st``."""

    def __init__(self, st: State, replicas: list[Replica], router: Router, *, users: int,
                 think_time_s: float, request_overhead_s: float, max_blocks_per_request: int,
                 block_size: int, bucket=None, progress=None, decode_router=None,
                 handoff_s=None):
        self.st, self.replicas, self.router = st, replicas, router
        self.users, self.think, self.oh = users, think_time_s, request_overhead_s
        self.max_blocks, self.bs = max_blocks_per_request, block_size
        self.bucket = bucket            # (rate, size) or None
        self.progress = progress
        self.decode_router = decode_router      # disaggregated: routes hand-offs to decode replicas
        self.handoff_s = handoff_s              # prompt tokens -> KV hand-off time [s]
        self.heap: list = []
        self._seq = 0
        self.n_sys = 0                  # requests arrived and not finished (Little's law)
        self.area = 0.0
        self.t_prev = 0.0
        self.next_closed = 0
        self.rejected_too_long = 0
        self.rejected_bucket = 0
        self.completed = 0
        self.des = replicas[0].spec if replicas else None
        self._think_exp = self.des is not None and self.des.think_time_dist == "exponential"
        self._rng = apply_clients(st, self.des, users) if self.des is not None else None

    def _push(self, t, prio, kind, rep=None, version=0):
        self._seq += 1
        heapq.heappush(self.heap, (t, prio, self._seq, kind, rep, version))

    def run(self) -> float:
        st = self.st
        if self.users:
            self.next_closed = min(self.users, st.n)
            ramp = self.des.ramp_up_s if self.des is not None else 0.0
            for rid in range(self.next_closed):
                a = rid * ramp / self.users   # user i starts at i W / N (0 without a ramp)
                st.arrival[rid] = a
                self._push(a + self.oh, 1, ARRIVE, rid)
            arr, n_open = None, 0
        else:
            arr = (st.arrival + self.oh).tolist()
            n_open = st.n
        self._tokens = self.bucket[1] if self.bucket else 0.0
        self._t_bucket = 0.0
        ptr = 0
        heap = self.heap
        pop, push = heapq.heappop, heapq.heappush
        t = 0.0
        inf = float("inf")
        while True:
            nxt = arr[ptr] if ptr < n_open else inf
            if nxt < inf and (not heap or (nxt, 1) < heap[0][:2]):
                t = nxt
                self.area += self.n_sys * (t - self.t_prev)
                self.t_prev = t
                self._arrive(ptr, t)
                ptr += 1
                continue
            if not heap:
                break
            t, _, _, kind, rep, ver = pop(heap)
            self.area += self.n_sys * (t - self.t_prev)
            self.t_prev = t
            if kind == END:
                if ver != rep.version:
                    continue
                done = rep.finish(t)
                if done:
                    self._done(done, t)
                if rep.handoffs:
                    for rid in rep.handoffs:
                        self._push(t + self.handoff_s(int(st.prompt[rid])), 1, HANDOFF, rid)
                    rep.handoffs.clear()
                nxt = arr[ptr] if ptr < n_open else inf
                if nxt > t and (not heap or heap[0][0] > t):
                    # nothing else happens at t: plan now instead of through a PLAN event
                    end = rep.plan(t)
                    if end is not None:
                        rep.version += 1
                        self._seq += 1
                        push(heap, (end, 0, self._seq, END, rep, rep.version))
                else:
                    rep.plan_pending = True
                    self._push(t, 2, PLAN, rep)
            elif kind == ARRIVE:
                self._arrive(rep, t)
            elif kind == HANDOFF:
                dec = self.decode_router.pick(rep)
                st.replica[rep] = dec.idx
                self._enqueue(dec, rep, t)
            else:
                end = rep.plan(t)
                if end is not None:
                    rep.version += 1
                    self._push(end, 0, END, rep, rep.version)
        if self.progress is not None:
            self.progress.close()
        self._set_window()
        return t

    def _set_window(self):
        """The summary's measurement window from DesSpec.warmup_s / exclude_drain (State.window)."""
        d = self.des
        if d is None or (d.warmup_s <= 0 and not d.exclude_drain) or not self.st.n:
            return
        arr = self.st.arrival
        t0 = float(np.nanmin(arr))
        t_last = float(np.nanmax(arr))
        self.st.window = (t0 + d.warmup_s, t_last if d.exclude_drain else float("inf"), d.exclude_drain)

    def _tick(self, t):
        self.area += self.n_sys * (t - self.t_prev)
        self.t_prev = t

    def _done(self, rids, t):
        self.n_sys -= len(rids)
        self.completed += len(rids)
        if self.progress is not None:
            self.progress.update(len(rids))
        if self.users:
            for _ in rids:
                self._next_user(t)

    def _next_user(self, t):
        if self.next_closed < self.st.n:
            rid = self.next_closed
            self.next_closed += 1
            think = self._rng.exponential(self.think) if self._think_exp and self.think > 0 else self.think
            self.st.arrival[rid] = t + think
            self._push(t + think + self.oh, 1, ARRIVE, rid)

    def _reject(self, rid, t):
        self.st.rejected[rid] = True
        if self.progress is not None:
            self.progress.update(1)
        if self.users:
            self._next_user(t)

    def _arrive(self, rid, t):
        st = self.st
        if -(-(int(st.prompt[rid]) + int(st.output[rid])) // self.bs) > self.max_blocks:
            self.rejected_too_long += 1
            return self._reject(rid, t)
        if self.bucket is not None:
            rate, size = self.bucket
            self._tokens = min(size, self._tokens + rate * (t - self._t_bucket))
            self._t_bucket = t
            if self._tokens < 1.0:
                self.rejected_bucket += 1
                return self._reject(rid, t)
            self._tokens -= 1.0
        self.n_sys += 1
        rep = self.router.pick(rid)
        st.replica[rid] = rep.idx
        self._enqueue(rep, rid, t)

    def _enqueue(self, rep, rid, t):
        """Queue ``rid`` at replica ``rep``; plan it if idle, else end its decode run early."""
        rep.enqueue(rid, t)
        if rep.plan_pending:
            return
        if rep.run is None:
            rep.plan_pending = True
            self._push(t, 2, PLAN, rep)
        else:
            end = rep.truncate(t)
            if end is not None:
                rep.version += 1
                self._push(end, 0, END, rep, rep.version)


def kv_time_average(replicas) -> tuple[float, float]:
    """(mean KV-block use over busy time, mean batch size over busy time), all replicas."""
    busy = sum(r.busy_s for r in replicas)
    if busy <= 0:
        return float("nan"), float("nan")
    kv = sum(r.kv_area / r.total for r in replicas if r.total) / max(busy, 1e-300)
    return float(kv), float(sum(r.batch_area for r in replicas) / busy)


__all__ = ["Loop", "Router", "ROUTERS", "register_router", "kv_time_average"]
