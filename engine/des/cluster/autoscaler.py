"""The fleet's replica sets and their bill: active, provisioning, draining, idle; autoscaling.

Every ``autoscale_interval_s``: signal s = busy fraction of the active replicas over the last
interval (utilisation) or outstanding requests per active replica (queue); desired =
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
from collections import deque


def pool_size(des, n_rep: int) -> int:
    """Replicas to build: the autoscaler's ceiling when it is on, else ``n_rep``."""
    if des.cluster.autoscale != "none":
        return max(n_rep, des.cluster.autoscale_max or n_rep)
    return n_rep


class Autoscaler:
    """The replica sets of ``pool`` (the first ``n_active`` serve) and their billing."""

    def __init__(self, des, pool: list, n_active: int, trace, *, make_cache=None, recycled=None):
        self.des, self.pool, self.trace = des, pool, trace
        self.active = list(pool[:n_active])
        self.idle = list(pool[n_active:])
        self.provisioning: list = []      # (ready time, replica)
        self.draining: list = []
        self.make_cache = make_cache
        self.recycled = recycled          # f(replica): it came back with an empty prefix cache
        self.bill_start = {r.idx: 0.0 for r in self.active}
        self.billed_s = 0.0
        self.scale_events = 0
        self.peak_active = n_active
        self._busy_prev = {r.idx: 0.0 for r in pool}
        self._t_prev = 0.0
        self._recs: deque = deque()       # (t, recommended replicas) of the stabilization window

    def hours(self, t: float) -> float:
        """Replica-hours billed up to ``t``."""
        return (self.billed_s + sum(t - s for s in self.bill_start.values())) / 3600.0

    def retire(self, t):
        """Drained replicas that are empty stop being billed and go idle (with an empty cache)."""
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
                    self.recycled(r)
                r.kv.free = r.kv.total
                self.idle.append(r)

    def ready(self, t):
        """Provisioned replicas whose delay is over join the active set."""
        keep = []
        for when, r in self.provisioning:
            if when <= t:
                self.active.append(r)
                self.active.sort(key=lambda x: x.idx)
                self.trace.note(t, -1, "replica_ready", r.idx)
            else:
                keep.append((when, r))
        self.provisioning = keep
        self.peak_active = max(self.peak_active, len(self.active))

    def scale(self, t) -> float | None:
        """One autoscaler decision at ``t``; returns the time a provisioned replica is ready."""
        d = self.des.cluster
        self.retire(t)
        n = len(self.active)
        dt = t - self._t_prev
        if d.autoscale == "utilisation":
            busy = sum(r.busy_s - self._busy_prev[r.idx] for r in self.active)
            sig = busy / (dt * n) if dt > 0 and n else 0.0
        else:
            sig = sum(r.n + len(r.waiting) for r in self.active) / max(n, 1)
        for r in self.pool:
            self._busy_prev[r.idx] = r.busy_s
        self._t_prev = t
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
                self.trace.note(t, -1, "scale_up_undrain", r.idx)
            while k and self.idle:
                r = self.idle.pop(0)
                self.bill_start[r.idx] = t
                ready_at = t + d.provision_delay_s
                self.provisioning.append((ready_at, r))
                k -= 1
                self.trace.note(t, -1, "scale_up", r.idx)
            self.scale_events += 1
        elif down_to < n and not pend:
            for _ in range(n - down_to):
                r = self.active.pop()
                self.draining.append(r)
                self.trace.note(t, -1, "scale_down", r.idx)
            self.scale_events += 1
        self.peak_active = max(self.peak_active, len(self.active))
        return ready_at

    def close(self, t_end: float) -> None:
        """Stop billing at the end of the run."""
        for idx, s in list(self.bill_start.items()):
            self.billed_s += t_end - s
        self.bill_start.clear()

    @property
    def replica_hours(self) -> float:
        return self.billed_s / 3600.0


__all__ = ["Autoscaler", "pool_size"]
