"""Cluster-scale control of the event loop (engine.des.cluster.Loop): routing on delayed signals,
admission/flow control, queue expiry, multi-turn session turns, autoscaling with cost, the time
series and the decision trace. Built only when ``DesSpec.cluster_features`` is on; without it the
loop runs exactly as before.

Routing signals. At every routing decision the gateway records each replica's outstanding
requests (running + waiting), KV-block use and in-flight tokens (prompt + output of the requests
routed there and not finished); a router with ``signal_delay_s`` = d sees the latest record taken
at or before t - d (a gateway reading scraped metrics), with d = 0 the current values. Routers:
    round_robin         over the active replicas
    least_outstanding   fewest outstanding (seen), then lowest index
    least_kv            lowest KV use (seen), then fewest outstanding, then index
    prefix_affinity     longest cached prefix in the replica's own cache (fresh: KV events), then
                        fewest outstanding (seen)
    weighted            score = w_prefix m/M - w_queue q/max(q) - w_kv kv - w_tokens x/max(x),
                        the highest wins (ties: lowest index); m = leading prefix blocks the
                        gateway routed to that replica before (its own index of routed blocks,
                        llm-d's approximate prefix scorer), M = the request's blocks
The gateway's index (``prefix_index``): routed (every block ever routed to a replica, never
forgotten: it goes stale once the replica evicts), events (a replica's bit is cleared when that
replica's cache drops the block (HBM eviction, or the last tier's with kv_host_gb/kv_disk_gb), as
a gateway fed by the engines' KV events (llm-d's precise prefix scorer) knows; a block is known
from its routing on), lru (per replica at most as many routed blocks as its prefix cache can hold
(HBM blocks / pages per entry + host + disk entries), least recently routed forgotten first: the
approximate scorer's per-server LRU). A recycled (drained) replica forgets all its blocks.
With d = 0 and no autoscaling the first four choose exactly what engine.des.cluster's routers do.

Admission / flow control (at arrival, in order): max_model_len (prompt + output above it:
rejected), shedding (outstanding per active replica above shed_outstanding: arrivals of priority
class >= shed_priority rejected), then routing. Expiry: a request not admitted to a running batch
within timeout_s of its arrival leaves its queue (cancelled). Deadline (deadline_s, or its request
class's): a request not complete deadline seconds after its arrival is aborted wherever it is: in a
queue it leaves at once; in a running batch it is dropped at the end of the iteration in progress
(a decode run is cut after the step in progress, as an arrival cuts it), its KV blocks freed and
prefix entries unpinned as a preemption frees them (Replica.abort), not requeued; counted in
cancelled (cancelled_running / cancelled_queued). A cancelled or rejected session turn still
triggers the next turn (the user goes on).

Decision trace (record_decisions): route, shed, reject_max_len, expire, abort_queued,
abort_running, preempt (the victim, with its replica's outstanding, waiting and running requests,
KV use and the victim's cached context when the scheduler chose it), replica_ready, scale_up,
scale_up_undrain, scale_down.

Autoscaling every ``autoscale_interval_s``: signal s = busy fraction of the active replicas over
the last interval (utilisation) or outstanding requests per active replica (queue); desired =
ceil(active x s / target) clamped to [autoscale_min, autoscale_max]. Above active + provisioning:
draining replicas come back first (at once), then new ones are requested and serve after
provision_delay_s (billed from the request, as clouds bill). Below active: the newest active
replicas stop receiving requests and drain; a drained replica stops being billed at the first
tick (time-series or autoscaler) that finds it empty, and comes back with an empty cache.
Scale-down uses the highest recommendation of the last autoscale_stabilization_s (Kubernetes
HPA's scale-down stabilization), so a replica is not released in a short lull.
Cost = replica-hours x devices per replica x price_per_hour.
"""

import math
from collections import OrderedDict, deque
from itertools import islice

import numpy as np

from engine.des.kv import PrefixCache


class Fleet:
    """Per-run cluster state (see the module docstring)."""

    def __init__(self, des, pool: list, n_active: int, st, *, devices_per_replica: int,
                 price_per_hour: float, make_cache=None):
        self.des, self.pool, self.st = des, pool, st
        self.active = list(pool[:n_active])
        self.idle = list(pool[n_active:])
        self.provisioning: list = []      # (ready time, replica)
        self.draining: list = []
        self.devices = devices_per_replica
        self.price = price_per_hour
        self.make_cache = make_cache
        self.bill_start = {r.idx: 0.0 for r in self.active}
        self.billed_s = 0.0
        self.delay = des.signal_delay_s
        P = len(pool)
        self.inflight = np.zeros(P)
        zero = (-math.inf, np.zeros(P, np.int64), np.zeros(P), np.zeros(P))
        self.hist = deque([zero])
        self.owner: dict = {}             # prefix hash -> bitmask of replicas routed to
        self.decisions = [] if des.record_decisions else None
        self.samples: list = []
        self.pending = 0                  # ARRIVE events in the heap (session turns, users)
        self.t_last_open = 0.0
        self.rejected_max_len = 0
        self.shed = 0
        self.cancelled = 0
        self.scale_events = 0
        self._busy_prev = {r.idx: 0.0 for r in pool}
        self._busy_prev_ts = {r.idx: 0.0 for r in pool}
        self._t_prev_scale = 0.0
        self._t_prev_sample = 0.0
        self.peak_active = n_active
        self._recs: deque = deque()       # (t, recommended replicas) of the stabilization window
        self.cancelled_running = 0
        self.aborting: dict = {}          # replica idx -> request ids to drop when its iteration ends
        self._routed = None               # prefix_index=lru: per replica idx an LRU of routed blocks
        if des.router == "weighted" and des.prefix_index == "lru":
            self._routed = {r.idx: OrderedDict() for r in pool}
        for r in pool:
            self._hook(r)

    def _hook(self, r):
        """Per-replica hooks: preemption decisions, evictions the gateway's index hears of."""
        if self.decisions is not None:
            r.on_preempt = self._on_preempt
        pc = r.kv.prefix
        if pc is not None and self.des.router == "weighted" and self.des.prefix_index == "events":
            pc.on_drop = self._forget_fn(r.idx)

    def _forget_fn(self, idx):
        owner, keep = self.owner, ~(1 << idx)

        def forget(h):
            m = owner.get(h)
            if m is not None:
                m &= keep
                if m:
                    owner[h] = m
                else:
                    del owner[h]
        return forget

    # ------------------------------------------------------------ signals
    def _snapshot(self, t):
        P = len(self.pool)
        out = np.fromiter((r.n + len(r.waiting) for r in self.pool), np.int64, P)
        kv = np.fromiter((r.kv.load if r.total else 1.0 for r in self.pool), np.float64, P)
        rec = (t, out, kv, self.inflight.copy())
        h = self.hist
        h.append(rec)
        lim = t - self.delay
        while len(h) > 1 and h[1][0] <= lim:
            h.popleft()
        return h[0]

    def route(self, rid: int, t: float):
        """The active replica for ``rid`` (see the module docstring)."""
        act = self.active
        seen = self._snapshot(t)
        _, out, kv, tok = seen
        kind = self.des.router
        if len(act) == 1:
            rep = act[0]
        elif kind == "round_robin":
            self._rr = (getattr(self, "_rr", -1) + 1) % len(act)
            rep = act[self._rr]
        elif kind == "least_outstanding":
            rep = min(act, key=lambda r: (out[r.idx], r.idx))
        elif kind == "least_kv":
            rep = min(act, key=lambda r: (kv[r.idx], out[r.idx], r.idx))
        elif kind == "prefix_affinity":
            hashes = self.st.hashes[rid] if self.st.hashes is not None else None
            if hashes is None or act[0].prefix is None:
                rep = min(act, key=lambda r: (out[r.idx], r.idx))
            else:
                rep = min(act, key=lambda r: (-r.prefix.match(hashes, len(hashes)), out[r.idx], r.idx))
        else:
            rep = self._weighted(rid, act, out, kv, tok)
        self._remember(rid, rep)
        if self.decisions is not None:
            self.decisions.append((t, rid, "route", rep.idx, int(out[rep.idx]), int(out.min()),
                                   int(out.max()), float(kv[rep.idx]), float(tok[rep.idx]),
                                   t - seen[0] if seen[0] > -math.inf else math.nan, -1, -1, -1))
        self.inflight[rep.idx] += int(self.st.prompt[rid]) + int(self.st.output[rid])
        return rep

    def _prefix_match(self, rid):
        """{replica idx: leading blocks of ``rid`` the gateway routed there before}."""
        hashes = self.st.hashes[rid] if self.st.hashes is not None else None
        if hashes is None or not len(hashes):
            return {}, 0
        owner = self.owner
        mask = -1
        counts = {}
        b = 0
        for h in hashes.tolist():
            m = owner.get(h, 0) & mask
            dropped = mask & ~m if mask != -1 else 0
            while dropped:
                low = dropped & -dropped
                counts[low.bit_length() - 1] = b
                dropped ^= low
            mask = m
            if not mask:
                break
            b += 1
        while mask > 0:
            low = mask & -mask
            counts[low.bit_length() - 1] = b
            mask ^= low
        return counts, len(hashes)

    def _weighted(self, rid, act, out, kv, tok):
        d = self.des
        counts, M = self._prefix_match(rid) if d.w_prefix else ({}, 0)
        qmax = max(1, max(int(out[r.idx]) for r in act))
        xmax = max(1.0, max(float(tok[r.idx]) for r in act))
        best, best_s = None, -math.inf
        for r in act:
            s = ((d.w_prefix * counts.get(r.idx, 0) / M) if M else 0.0) - d.w_queue * out[r.idx] / qmax \
                - d.w_kv * kv[r.idx] - d.w_tokens * tok[r.idx] / xmax
            if s > best_s:
                best, best_s = r, s
        return best

    def _remember(self, rid, rep):
        if self.des.router != "weighted" or self.st.hashes is None:
            return
        bit = 1 << rep.idx
        owner = self.owner
        hs = self.st.hashes[rid].tolist()
        for h in hs:
            owner[h] = owner.get(h, 0) | bit
        if self._routed is not None:
            lru = self._routed[rep.idx]
            for h in hs:
                lru[h] = None
                lru.move_to_end(h)
            cap = self._index_cap(rep)
            if len(lru) > cap:
                forget = self._forget_fn(rep.idx)
                for _ in range(len(lru) - cap):
                    forget(lru.popitem(last=False)[0])

    def _index_cap(self, rep) -> int:
        """Prefix blocks replica ``rep`` can hold: HBM blocks / pages per entry + lower tiers."""
        pc = rep.kv.prefix
        ppe = pc.pages_per_entry if pc is not None else 1
        cap = rep.total // ppe
        if pc is not None and pc.tiered:
            cap += pc.host_cap + pc.disk_cap
        return max(cap, 1)

    # ------------------------------------------------------ admission
    def admit(self, rid: int, t: float) -> str | None:
        """Reason to reject ``rid`` at arrival (max_len | shed) or None."""
        d, st = self.des, self.st
        if d.max_model_len and int(st.prompt[rid]) + int(st.output[rid]) > d.max_model_len:
            self.rejected_max_len += 1
            return self._note(t, rid, "reject_max_len")
        if d.shed_outstanding and int(st.priority[rid]) >= d.shed_priority:
            tot = sum(r.n + len(r.waiting) for r in self.active)
            if tot > d.shed_outstanding * max(len(self.active), 1):
                self.shed += 1
                return self._note(t, rid, "shed")
        return None

    def _note(self, t, rid, what, rep=-1):
        if self.decisions is not None:
            self.decisions.append((t, rid, what, rep, -1, -1, -1, math.nan, math.nan, math.nan, -1, -1, -1))
        return what

    def finished(self, rid: int) -> None:
        """``rid`` left its replica (completed or cancelled)."""
        r = int(self.st.replica[rid])
        if r >= 0:
            self.inflight[r] -= int(self.st.prompt[rid]) + int(self.st.output[rid])

    def _unqueue(self, rep, rid, t) -> bool:
        """Remove ``rid`` from ``rep``'s waiting queue; False if it is not there."""
        return rep.unqueue(rid, t)

    def expire(self, rid: int, t: float):
        """Queue expiry of ``rid``: removed from its replica's queue if still waiting there for
        its first admission; returns the replica (to re-plan) or None."""
        st = self.st
        if st.scheduled[rid] == st.scheduled[rid] or st.rejected[rid] or st.cancelled[rid]:
            return None
        rep = self.pool[int(st.replica[rid])]
        if not self._unqueue(rep, rid, t):
            return None
        self._cancel(rid, t, rep, "expire")
        return rep

    def _cancel(self, rid, t, rep, what):
        st = self.st
        st.cancelled[rid] = True
        self.cancelled += 1
        self.finished(rid)
        if self.decisions is not None:
            self.decisions.append((t, rid, what, rep.idx, rep.n + len(rep.waiting), -1, -1,
                                   float(rep.kv.load) if rep.total else math.nan, math.nan, 0.0,
                                   len(rep.waiting), rep.n, -1))

    def deadline(self, rid: int, t: float):
        """End-to-end deadline of ``rid`` at ``t`` (module docstring). Returns (replica, now):
        now = True when it left at once (queue, or a replica between iterations: re-plan it);
        False when it is in a batch in progress (dropped at its end: ``flush``); (None, False)
        when it already finished, was rejected or cancelled."""
        st = self.st
        if st.completion[rid] == st.completion[rid] or st.rejected[rid] or st.cancelled[rid]:
            return None, False
        rep = self.pool[int(st.replica[rid])]
        if self._unqueue(rep, rid, t):
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
        gone = []
        for rid in self.aborting.pop(rep.idx, ()):
            if self.st.completion[rid] != self.st.completion[rid] and rep.abort(rid):
                self.cancelled_running += 1
                self._cancel(rid, t, rep, "abort_running")
                gone.append(rid)
        return gone

    def _on_preempt(self, rep, s):
        """Decision trace row of a preemption (before the victim's KV is freed)."""
        self.decisions.append((rep.t_plan, int(rep.rid[s]), "preempt", rep.idx, rep.n + len(rep.waiting),
                               -1, -1, float(rep.kv.load), math.nan, 0.0, len(rep.waiting), rep.n,
                               int(rep.ctx[s])))

    # -------------------------------------------------------- periodic
    def live(self, loop, t) -> bool:
        return t < self.t_last_open or loop.n_sys > 0 or self.pending > 0

    def _retire(self, t):
        for r in list(self.draining):
            if r.n == 0 and not r.waiting and r.run is None:
                self.draining.remove(r)
                self.billed_s += t - self.bill_start.pop(r.idx)
                if self.make_cache is not None and r.kv.prefix is not None:
                    old, new = r.kv.prefix, self.make_cache()    # empty, counters carried on
                    new.evictions = old.evictions
                    if old.tiered:
                        new.hit_entries, new.demotions, new.dropped = old.hit_entries, old.demotions, old.dropped
                    r.kv.prefix = new
                    self._forget_all(r.idx)
                    self._hook(r)
                r.kv.free = r.kv.total
                self.idle.append(r)

    def _forget_all(self, idx):
        """A recycled replica comes back empty: the gateway's index forgets its blocks
        (prefix_index events / lru; the routed index never forgets)."""
        if self.des.prefix_index == "routed":
            return
        forget = self._forget_fn(idx)
        for h in list(self.owner):
            forget(h)
        if self._routed is not None:
            self._routed[idx].clear()

    def ready(self, t):
        """Provisioned replicas whose delay is over join the active set."""
        keep = []
        for when, r in self.provisioning:
            if when <= t:
                self.active.append(r)
                self.active.sort(key=lambda x: x.idx)
                self._note(t, -1, "replica_ready", r.idx)
            else:
                keep.append((when, r))
        self.provisioning = keep
        self.peak_active = max(self.peak_active, len(self.active))

    def scale(self, t) -> float | None:
        """One autoscaler decision at ``t``; returns the time a provisioned replica is ready."""
        d = self.des
        self._retire(t)
        n = len(self.active)
        dt = t - self._t_prev_scale
        if d.autoscale == "utilisation":
            busy = sum(r.busy_s - self._busy_prev[r.idx] for r in self.active)
            sig = busy / (dt * n) if dt > 0 and n else 0.0
        else:
            sig = sum(r.n + len(r.waiting) for r in self.active) / max(n, 1)
        for r in self.pool:
            self._busy_prev[r.idx] = r.busy_s
        self._t_prev_scale = t
        hi = d.autoscale_max or len(self.pool)
        want = min(max(math.ceil(n * sig / d.autoscale_target - 1e-9), d.autoscale_min), hi)
        # scale-down stabilization: the highest recommendation of the last window
        recs = self._recs
        recs.append((t, want))
        while recs and recs[0][0] < t - d.autoscale_stabilization_s:
            recs.popleft()
        down_to = max(w for _, w in recs)
        pend = len(self.provisioning)
        ready_at = None
        if want > n + pend:
            k = want - n - pend
            while k and self.draining:
                r = self.draining.pop()
                self.active.append(r)
                self.active.sort(key=lambda x: x.idx)
                k -= 1
                self._note(t, -1, "scale_up_undrain", r.idx)
            while k and self.idle:
                r = self.idle.pop(0)
                self.bill_start[r.idx] = t
                ready_at = t + d.provision_delay_s
                self.provisioning.append((ready_at, r))
                k -= 1
                self._note(t, -1, "scale_up", r.idx)
            self.scale_events += 1
        elif down_to < n and not pend:
            for _ in range(n - down_to):
                r = self.active.pop()
                self.draining.append(r)
                self._note(t, -1, "scale_down", r.idx)
            self.scale_events += 1
        self.peak_active = max(self.peak_active, len(self.active))
        return ready_at

    def sample(self, loop, t) -> None:
        """One time-series row at ``t`` (the window ending at t)."""
        self._retire(t)
        act = self.active
        dt = t - self._t_prev_sample
        live = act + self.draining
        busy = sum(r.busy_s - self._busy_prev_ts[r.idx] for r in live)
        for r in self.pool:
            self._busy_prev_ts[r.idx] = r.busy_s
        self._t_prev_sample = t
        billed = len(self.bill_start)
        self.samples.append((
            t, len(act), len(self.provisioning), len(self.draining), billed,
            sum(len(r.waiting) for r in live), sum(r.n for r in live),
            float(np.mean([r.kv.load for r in act])) if act else math.nan,
            busy / (dt * len(act)) if dt > 0 and act else math.nan,
            (self.billed_s + sum(t - s for s in self.bill_start.values())) / 3600.0,
        ))

    def close(self, t_end: float) -> None:
        """Stop billing at the end of the run."""
        for idx, s in list(self.bill_start.items()):
            self.billed_s += t_end - s
        self.bill_start.clear()

    # --------------------------------------------------------- results
    @property
    def replica_hours(self) -> float:
        return self.billed_s / 3600.0

    def summary(self) -> dict:
        out = {"replica_hours": self.replica_hours,
               "rejected_max_len": self.rejected_max_len, "shed": self.shed,
               "cancelled": self.cancelled}
        if self.des.deadline_s or any(c.deadline_s for c in self.des.classes):
            out["cancelled_running"] = self.cancelled_running
            out["cancelled_queued"] = self.cancelled - self.cancelled_running
        if self.des.autoscale != "none":
            out.update(replicas_peak=self.peak_active, scale_events=self.scale_events)
        if self.price:
            out["cost_usd"] = self.replica_hours * self.devices * self.price
            out["price_per_device_hour"] = self.price
        return out

    def timeseries(self, st, slo_ok: np.ndarray):
        """The per-window frame: load (arrivals/s), queue, running, KV use, replicas, busy
        fraction, SLO attainment of the requests arriving in the window, cost so far."""
        import polars as pl

        cols = ("t_s", "replicas_active", "replicas_provisioning", "replicas_draining",
                "replicas_billed", "waiting", "running", "kv_use", "busy", "replica_hours")
        if not self.samples:
            return None
        df = pl.DataFrame(self.samples, schema=list(cols), orient="row")
        w = self.des.timeseries_s
        edges = np.concatenate([[df["t_s"][0] - w], df["t_s"].to_numpy()])
        arr = st.arrival
        ok_arr = np.isfinite(arr)
        idx = np.searchsorted(edges, arr[ok_arr], side="right") - 1
        nwin = len(df)
        inside = (idx >= 0) & (idx < nwin)
        cnt = np.bincount(idx[inside], minlength=nwin)[:nwin]
        good = np.bincount(idx[inside], weights=slo_ok[ok_arr][inside].astype(float), minlength=nwin)[:nwin]
        with np.errstate(invalid="ignore", divide="ignore"):
            att = np.where(cnt > 0, good / cnt, np.nan)
        df = df.with_columns(pl.Series("arrivals_per_s", cnt / w), pl.Series("slo_attainment", att))
        if self.price:
            df = df.with_columns((pl.col("replica_hours") * self.devices * self.price).alias("cost_usd"))
        return df

    def decisions_frame(self):
        import polars as pl

        if self.decisions is None:
            return None
        cols = ("t_s", "request_id", "decision", "replica", "seen_outstanding", "seen_min_outstanding",
                "seen_max_outstanding", "seen_kv_use", "seen_inflight_tokens", "signal_age_s",
                "seen_waiting", "seen_running", "victim_context_tokens")
        return pl.DataFrame(self.decisions, schema=list(cols), orient="row")


__all__ = ["Fleet"]


# ----------------------------------------------------------------- wiring for engine.des.run
def pool_size(des, n_rep: int) -> int:
    """Replicas to build: the autoscaler's ceiling when it is on, else ``n_rep``."""
    if des.autoscale != "none":
        return max(n_rep, des.autoscale_max or n_rep)
    return n_rep


class HeardCache(PrefixCache):
    """An HBM prefix cache that tells ``on_drop`` which entries it evicts (prefix_index=events:
    the KV events a gateway hears)."""

    on_drop = None

    def evict(self, pages: int) -> int:
        if self.on_drop is None:
            return super().evict(pages)
        # PrefixCache.evict pops min(len(lru), ceil(pages / pages_per_entry)) oldest entries
        gone = list(islice(self.lru, min(len(self.lru), -(-pages // self.pages_per_entry))))
        freed = super().evict(pages)
        for h in gone:
            self.on_drop(h)
        return freed


def cache_factory(specs, des, stream):
    """A function building one replica's prefix cache (HBM only, or tiered), or None when
    prefix caching is off or the stream has no hashes."""
    from engine.des.kv import PrefixCache
    from engine.errors import SpecError

    if (des.kv_host_gb or des.kv_disk_gb) and not des.prefix_caching:
        raise SpecError("engine.des.kv_host_gb" if des.kv_host_gb else "engine.des.kv_disk_gb",
                        des.kv_host_gb or des.kv_disk_gb,
                        "0 unless engine.des.prefix_caching=true (the tiers hold prefix-cache blocks)")
    if not des.prefix_caching or stream.hashes is None:
        return None
    ppe = max(1, stream.block_tokens // des.block_size)
    if des.kv_host_gb or des.kv_disk_gb:
        from engine.des.kv import TieredPrefixCache, tier_setup

        tiers = tier_setup(specs, des, stream.block_tokens)
        return lambda: TieredPrefixCache(ppe, *tiers)
    if des.router == "weighted" and des.prefix_index == "events":
        return lambda: HeardCache(ppe)
    return lambda: PrefixCache(ppe)


def make_fleet(specs, des, reps: list, n_rep: int, st, make_cache):
    """The Fleet of a run, or None when no cluster feature is on (the loop runs as before)."""
    from engine.errors import SpecError

    if not des.cluster_features:
        return None
    if des.prefill_replicas:
        raise SpecError("engine.des.prefill_replicas", des.prefill_replicas,
                        "0 with the cluster features (router=weighted, signal delay, autoscale, "
                        "sessions, time series ...): disaggregated pools are not supported there")
    if des.autoscale != "none" and des.autoscale_max and des.autoscale_max < des.autoscale_min:
        raise SpecError("engine.des.autoscale_max", des.autoscale_max,
                        f">= autoscale_min={des.autoscale_min}")
    price = des.price_per_hour or (specs.hardware.price_per_hour or 0.0)
    n0 = n_rep
    if des.autoscale != "none":
        n0 = min(max(n_rep, des.autoscale_min), len(reps))
    return Fleet(des, reps, n0, st, devices_per_replica=specs.partition.devices_per_replica,
                 price_per_hour=price, make_cache=make_cache)


def results(fleet, reps, st, table, des) -> tuple[dict, dict]:
    """(summary additions, frames) of the cluster features: tiers, fleet, classes, detectors."""
    from engine.des.metrics import class_summary, saturation_time, slo_ok

    s: dict = {}
    frames: dict = {}
    tiered = [r.prefix for r in reps if r.prefix is not None and r.prefix.tiered]
    if tiered and st.lookup_tokens:
        bt = reps[0].kv.bt
        for tier in ("hbm", "host", "disk"):
            s[f"prefix_hit_rate_{tier}"] = sum(p.hit_entries[tier] for p in tiered) * bt / st.lookup_tokens
        s["kv_demotions_host"] = sum(p.demotions["host"] for p in tiered)
        s["kv_demotions_disk"] = sum(p.demotions["disk"] for p in tiered)
        s["kv_dropped"] = sum(p.dropped for p in tiered)
    if fleet is None:
        return s, frames
    s.update(fleet.summary())
    ok = slo_ok(st, table, des)
    s.update(class_summary(st, table, des, ok))
    if des.timeseries_s > 0:
        ts = fleet.timeseries(st, ok)
        if ts is not None:
            frames["timeseries"] = ts
            s["saturation_time_s"] = saturation_time(ts)
    dec = fleet.decisions_frame()
    if dec is not None:
        frames["decisions"] = dec
    hol = [r for r in reps if getattr(r, "hol", None) is not None]
    s["hol_blocked_heads"] = sum(len(r.hol) for r in hol)
    # blocked time: first failed KV check (others queued behind) to admission; heads still
    # blocked when the run ends count to its end
    t_end = float(np.nanmax(st.completion)) if np.isfinite(st.completion).any() else 0.0
    open_s = [max(t_end - t0, 0.0) for r in hol for t0 in r.hol_since.values()]
    s["hol_blocked_s"] = sum(r.hol_s for r in hol) + sum(open_s)
    s["hol_blocked_max_s"] = max([r.hol_max_s for r in hol] + open_s, default=0.0)
    return s, frames


__all__ += ["pool_size", "cache_factory", "make_fleet", "results"]
