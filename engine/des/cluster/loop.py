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

Cluster features talk to the loop through ``hooks`` (engine.des.cluster.hooks; the null
``NO_HOOKS`` without them): admission, routing, expiry and deadline events, periodic ticks.
"""

import heapq

import numpy as np

from engine.des.cluster.hooks import NO_HOOKS
from engine.des.workload import apply_clients

END, ARRIVE, PLAN, HANDOFF, EXPIRE, TICK, SEND = 0, 1, 2, 3, 4, 5, 6


class ApiServer:
    """The framework's API server: one FIFO server of the requests on their way in (parse,
    tokenise, hand off to the engine core, one request at a time on one Python thread: vLLM's
    API server process, SGLang's TokenizerManager, trtllm-serve's front end). A request that
    reaches it at t leaves it for the scheduler at
        leave = max(t, leave of the request before) + s   [s]
    s: the mean ``api_s + token_s L`` for a request of L prompt tokens (framework
    ``per_request_overhead`` + L ``per_request_token_overhead``: the server's work per request
    and per prompt token, tokenising and handing over the prompt) for every request
    (``framework.per_request_dist=fixed``), or drawn from the exponential law of that mean
    (``exponential``: sub-stream 13 of the engine seed;
    engine.spec.framework). Requests that come together (a benchmark client's burst, a closed
    loop's wave of completions) leave one service time apart, not all at once: a burst's k-th
    request leaves k api_s after it came on average under either law (the sum of k exponentials
    has mean k api_s), but with varying times a wave's requests fall into different iterations
    from round to round. The event loop and the live engine both serve requests through one, in
    the order they reach it, so they draw the same times."""

    def __init__(self, api_s: float, dist: str, seed: int, token_s: float = 0.0):
        self.api_s, self.token_s, self.free = float(api_s), float(token_s), float("-inf")
        #: whether requests pass through it (a service time above 0)
        self.on = self.api_s > 0 or self.token_s > 0
        self.rng = (np.random.default_rng(np.random.SeedSequence([seed, 13]))
                    if dist == "exponential" and self.on else None)

    def leave(self, t: float, tokens=0) -> float:
        """The time a request of ``tokens`` prompt tokens reaching the server at ``t`` leaves
        it [s]."""
        mean = self.api_s + self.token_s * float(tokens) if self.token_s else self.api_s
        s = mean if self.rng is None else self.rng.exponential(mean)
        self.free = (t if t > self.free else self.free) + s
        return self.free


class Loop:
    """Runs the simulation over ``replicas`` for the requests in ``st``."""

    def __init__(self, st, replicas: list, router, *, users: int,
                 think_time_s: float, request_overhead_s: float, max_blocks_per_request: int,
                 block_size: int, bucket=None, progress=None, decode_router=None,
                 handoff_s=None, hooks=NO_HOOKS, des=None, api_s: float = 0.0,
                 api_dist: str = "fixed", api_token_s: float = 0.0):
        self.st, self.replicas, self.router = st, replicas, router
        self.users, self.think, self.oh = users, think_time_s, request_overhead_s
        self.max_blocks, self.bs = max_blocks_per_request, block_size
        self.bucket = bucket            # (rate, size) or None
        self.progress = progress
        self.decode_router = decode_router      # disaggregated: routes hand-offs to decode replicas
        self.handoff_s = handoff_s              # prompt tokens -> KV hand-off time [s]
        self.heap: list = []
        self.hooks = hooks              # cluster features (engine.des.cluster.fleet.Fleet) or NO_HOOKS
        self._seq = 0
        self.pending = 0                # ARRIVE events in the heap (session turns, users)
        self.n_sys = 0                  # requests arrived and not finished (Little's law)
        self.area = 0.0
        self.t_prev = 0.0
        self.next_closed = 0
        self.rejected_too_long = 0
        self.rejected_bucket = 0
        self.completed = 0
        self.des = des if des is not None else (replicas[0].spec if replicas else None)
        self._think_exp = self.des is not None and self.des.clients.think_time_dist == "exponential"
        self._rng = apply_clients(st, self.des, users) if self.des is not None else None
        # client round trip: half on the way in (with the request overhead), half on the way out
        self._rtt_half = self.des.clients.client_rtt_ms * 5e-4 if self.des is not None else 0.0
        self.oh += self._rtt_half
        # the framework's per-request and per-prompt-token host time, served by one API server in
        # arrival order (``_through_api``); both 0: requests reach the scheduler after
        # ``request_overhead_s`` alone
        self._api = ApiServer(api_s, api_dist, self.des.seed if self.des is not None else 0, api_token_s)
        self._api_on = self._api.on

    def _push(self, t, prio, kind, rep=None, version=0):
        if kind == ARRIVE and self._api_on:
            kind = SEND          # through the API server first (``_through_api``)
        if kind in (ARRIVE, SEND):
            self.pending += 1
        self._seq += 1
        heapq.heappush(self.heap, (t, prio, self._seq, kind, rep, version))

    def run(self) -> float:
        st, hooks = self.st, self.hooks
        if self.users:
            self.next_closed = min(self.users, st.n)
            ramp = self.des.clients.ramp_up_s if self.des is not None else 0.0
            for rid in range(self.next_closed):
                a = rid * ramp / self.users   # user i starts at i W / N (0 without a ramp)
                st.arrival[rid] = a
                self._push(a + self.oh, 1, ARRIVE, rid)
            arr, n_open = None, 0
        else:
            arr = (st.arrival + self.oh).tolist()
            n_open = st.n
        ids = hooks.start(self, arr)
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
            # the arrival first unless the heap's head is earlier, or as early with priority 0
            # (an iteration end; (nxt, 1) < (time, priority) as tuples)
            if nxt < inf and (not heap or nxt < heap[0][0] or (nxt == heap[0][0] and 1 < heap[0][1])):
                t = nxt
                self.area += self.n_sys * (t - self.t_prev)
                self.t_prev = t
                if self._api_on:     # through the API server first, in time order with the rest
                    self.pending += 1
                    self._through_api(ptr if ids is None else ids[ptr], t)
                else:
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
                for rid in hooks.ended(rep, t):
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
                self.pending -= 1
                self._arrive(rep, t)
            elif kind == SEND:
                self._through_api(rep, t)
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
                hooks.event(self, kind, rep, t, ver)
        t = hooks.close(self, t)
        if self.progress is not None:
            self.progress.close()
        self._set_window()
        return t

    def _through_api(self, rid, t):
        """``rid`` reaches the API server (``ApiServer``) at ``t``; it arrives at the scheduler
        when the server lets it go."""
        self.heap_push_arrive(self._api.leave(t, self.st.prompt[rid]), rid)

    def heap_push_arrive(self, t, rid):
        """An ARRIVE event at ``t`` that has already passed the API server."""
        self._seq += 1
        heapq.heappush(self.heap, (t, 1, self._seq, ARRIVE, rid, 0))

    def _set_window(self):
        """The summary's measurement window from DesSpec.clients.warmup_s / exclude_drain (State.window)."""
        d = self.des.clients if self.des is not None else None
        if d is None or (d.warmup_s <= 0 and not d.exclude_drain) or not self.st.n:
            return
        arr = self.st.arrival
        t0 = float(np.nanmin(arr))
        t_last = float(np.nanmax(arr))
        self.st.window = (t0 + d.warmup_s, t_last if d.exclude_drain else float("inf"), d.exclude_drain)

    def _done(self, rids, t):
        self.n_sys -= len(rids)
        self.completed += len(rids)
        if self.progress is not None:
            self.progress.update(len(rids))
        if self.users:
            for _ in rids:
                self._next_user(t)
        self.hooks.done(self, rids, t)

    def _left(self, rid, t):
        """``rid`` was cancelled (expired or aborted): it leaves the system; a session goes on."""
        self.n_sys -= 1
        if self.progress is not None:
            self.progress.update(1)
        self.hooks.gone(self, rid, t)

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
        self.hooks.gone(self, rid, t)

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
        hooks = self.hooks
        if hooks.admit(rid, t) is not None:
            return self._reject(rid, t)
        self.n_sys += 1
        rep = hooks.route(self, rid, t)
        st.replica[rid] = rep.idx
        hooks.routed(self, rid, t)
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


__all__ = ["Loop", "ApiServer", "kv_time_average", "END", "ARRIVE", "PLAN", "HANDOFF", "EXPIRE", "TICK"]
