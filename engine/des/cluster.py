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

END, ARRIVE, PLAN, HANDOFF, EXPIRE, TICK = 0, 1, 2, 3, 4, 5


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


@register_router("weighted")
def _weighted(router, rid):
    """router=weighted is the gateway model of engine.des.fleet (Fleet.route: its prefix index,
    delayed load signals and weighted score). It always builds a Fleet (DesSpec.cluster_features),
    and the loop then routes through the fleet, so this registry entry is never asked to pick."""
    raise AssertionError("router=weighted routes through engine.des.fleet.Fleet.route")


class Router:
    """Routes each arriving request to a replica with the registered policy ``kind``."""

    def __init__(self, kind: str, replicas: list[Replica], st: State):
        self.kind, self.replicas, self.st = kind, replicas, st
        self._pick = ROUTERS[kind]         # "weighted": the loop routes through engine.des.fleet
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
                 handoff_s=None, fleet=None, des=None):
        self.st, self.replicas, self.router = st, replicas, router
        self.users, self.think, self.oh = users, think_time_s, request_overhead_s
        self.max_blocks, self.bs = max_blocks_per_request, block_size
        self.bucket = bucket            # (rate, size) or None
        self.progress = progress
        self.decode_router = decode_router      # disaggregated: routes hand-offs to decode replicas
        self.handoff_s = handoff_s              # prompt tokens -> KV hand-off time [s]
        self.heap: list = []
        self.fleet = fleet              # engine.des.fleet.Fleet (cluster features) or None
        self._deadline = None           # per-request end-to-end deadline [s] (fleet) or None
        self._seq = 0
        self.n_sys = 0                  # requests arrived and not finished (Little's law)
        self.area = 0.0
        self.t_prev = 0.0
        self.next_closed = 0
        self.rejected_too_long = 0
        self.rejected_bucket = 0
        self.completed = 0
        self.des = des if des is not None else (replicas[0].spec if replicas else None)
        self._think_exp = self.des is not None and self.des.think_time_dist == "exponential"
        self._rng = apply_clients(st, self.des, users) if self.des is not None else None
        # client round trip: half on the way in (with the request overhead), half on the way out
        self._rtt_half = self.des.client_rtt_ms * 5e-4 if self.des is not None else 0.0
        self.oh += self._rtt_half

    def _push(self, t, prio, kind, rep=None, version=0):
        if kind == ARRIVE and self.fleet is not None:
            self.fleet.pending += 1
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
        ids = None
        if self.fleet is not None:
            ids = self._fleet_start(arr)
            if ids is not None:
                arr = (st.arrival[ids] + self.oh).tolist()
                n_open = len(ids)
                ids = ids.tolist()
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
                self._arrive(ptr if ids is None else ids[ptr], t)
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
                if self.fleet is not None and self.fleet.aborting:
                    for rid in self.fleet.flush(rep, t):
                        self._left(rid, t)
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
                if self.fleet is not None:
                    self.fleet.pending -= 1
                self._arrive(rep, t)
            elif kind == HANDOFF:
                dec = self.decode_router.pick(rep)
                st.replica[rep] = dec.idx
                self._enqueue(dec, rep, t)
            elif kind == PLAN:
                end = rep.plan(t)
                if end is not None:
                    rep.version += 1
                    self._push(end, 0, END, rep, rep.version)
            else:
                self._fleet_event(kind, rep, t, ver)
        if self.fleet is not None:
            # the run ends with its last arrival or completion, not with a periodic tick
            st = self.st
            work = [x for x in (np.nanmax(st.completion) if np.isfinite(st.completion).any() else None,
                                np.nanmax(st.arrival) + self.oh if np.isfinite(st.arrival).any() else None)
                    if x is not None]
            t = min(t, max(work)) if work else t
            f = self.fleet
            if self.des.timeseries_s > 0 and (not f.samples or f.samples[-1][0] < t):
                f.sample(self, t)           # the last (partial) window
            f.close(t)
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
        if self.fleet is not None:
            for rid in rids:
                self.fleet.finished(rid)
                self._next_turn(rid, t)

    # ------------------------------------------------ cluster features (engine.des.fleet)
    def _fleet_start(self, arr):
        """Periodic events and, with sessions, the open-loop ids (first turns, by arrival)."""
        f, d, st = self.fleet, self.des, self.st
        ids = None
        if st.next_turn is not None and not self.users:
            first = np.flatnonzero(np.isfinite(st.arrival))
            ids = first[np.argsort(st.arrival[first], kind="stable")]
        # end-to-end deadlines per request: the request class's deadline_s, else deadline_s
        dl = np.full(st.n, d.deadline_s)
        if st.klass is not None:
            for i, c in enumerate(d.classes):
                if c.deadline_s:
                    dl[st.klass == i] = c.deadline_s
        self._deadline = dl if (dl > 0).any() else None
        fin = st.arrival[np.isfinite(st.arrival)]
        f.t_last_open = float(fin.max()) + self.oh if fin.size else 0.0
        if d.timeseries_s > 0:
            self._push(d.timeseries_s, 3, TICK, "sample")
        if d.autoscale != "none":
            self._push(d.autoscale_interval_s, 3, TICK, "scale")
        return ids

    def _fleet_event(self, kind, tag, t, ver=0):
        f, d = self.fleet, self.des
        if kind == EXPIRE:
            if ver == 0:            # queue expiry (timeout_s)
                rep = f.expire(tag, t)
                now = rep is not None
            else:                   # end-to-end deadline (deadline_s / the request class's)
                rep, now = f.deadline(tag, t)
                if rep is not None and not now:
                    end = rep.truncate(t)       # a decode run stops after the step in progress
                    if end is not None:
                        rep.version += 1
                        self._push(end, 0, END, rep, rep.version)
            if now:
                self._left(tag, t)
                if rep.run is None and not rep.plan_pending and rep.waiting:
                    rep.plan_pending = True
                    self._push(t, 2, PLAN, rep)
            return
        if tag == "ready":
            f.ready(t)
            return
        if not f.live(self, t):
            return
        if tag == "sample":
            f.sample(self, t)
            self._push(t + d.timeseries_s, 3, TICK, "sample")
        else:
            when = f.scale(t)
            if when is not None:
                self._push(when, 1, TICK, "ready")
            self._push(t + d.autoscale_interval_s, 3, TICK, "scale")

    def _left(self, rid, t):
        """``rid`` was cancelled (expired or aborted): it leaves the system; a session goes on."""
        self.n_sys -= 1
        if self.progress is not None:
            self.progress.update(1)
        self._next_turn(rid, t)

    def _next_turn(self, rid, t):
        """Session: send the next turn of ``rid``'s session after the client sees the answer
        (half the round trip) and thinks."""
        st = self.st
        if st.next_turn is None:
            return
        nxt = int(st.next_turn[rid])
        if nxt < 0:
            return
        a = t + self._rtt_half + float(st.think_s[nxt])
        st.arrival[nxt] = a
        self._push(a + self.oh, 1, ARRIVE, nxt)

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
        if self.fleet is not None:
            self._next_turn(rid, t)

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
        fleet = self.fleet
        if fleet is not None:
            if fleet.admit(rid, t) is not None:
                return self._reject(rid, t)
            self.n_sys += 1
            rep = fleet.route(rid, t)
            st.replica[rid] = rep.idx
            if self.des.timeout_s > 0:
                self._push(max(t, st.arrival[rid] + self.des.timeout_s), 2, EXPIRE, rid)
            if self._deadline is not None and self._deadline[rid] > 0:
                self._push(max(t, st.arrival[rid] + self._deadline[rid]), 2, EXPIRE, rid, 1)
            return self._enqueue(rep, rid, t)
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
