"""The fleet: the cluster features' ``Hooks`` (engine.des.cluster.hooks), built only when
``DesSpec.cluster_features`` is on; without it the loop runs with the null hooks. It composes
the jobs, one module each:
    gateway.py      routing on the recorded (delayed) signals, in-flight tokens
    shedding.py     admission: max_model_len, shedding by priority class
    deadlines.py    queue expiry and end-to-end deadlines (aborting running requests)
    autoscaler.py   active / provisioning / draining / idle replicas, autoscaling, billing
    telemetry.py    the decision trace and the time series
and, here, multi-turn sessions: a completed, rejected or cancelled turn sends the session's next
turn after the client sees the answer (half the round trip) and thinks.
"""

import numpy as np

from engine.des.cluster.autoscaler import Autoscaler
from engine.des.cluster.deadlines import Deadlines
from engine.des.cluster.gateway import Gateway
from engine.des.cluster.hooks import Hooks
from engine.des.cluster.loop import ARRIVE, EXPIRE, TICK
from engine.des.cluster.routers import HeardCache
from engine.des.cluster.shedding import Shedding
from engine.des.cluster.telemetry import TimeSeries, Trace


class Fleet(Hooks):
    """Per-run cluster state: the jobs (module docstring) behind the loop's hooks."""

    def __init__(self, des, pool: list, n_active: int, st, *, devices_per_replica: int,
                 price_per_hour: float, make_cache=None):
        self.des, self.pool, self.st = des, pool, st
        self.devices = devices_per_replica
        self.price = price_per_hour
        self.trace = Trace(des.outputs.record_decisions)
        self.gateway = Gateway(des, pool, st, self.trace)
        self.scaler = Autoscaler(des, pool, n_active, self.trace, make_cache=make_cache,
                                 recycled=self.gateway.recycled)
        self.shedding = Shedding(des, st, self.trace)
        self.deadlines = Deadlines(des, pool, st, self.trace, self.gateway)
        self.series = TimeSeries(des, pool)
        self.t_last_open = 0.0

    # ------------------------------------------------------------ hooks
    def start(self, loop, arr):
        """Periodic events and, with sessions, the open-loop ids (first turns, by arrival)."""
        d, st = self.des, self.st
        ids = None
        if st.next_turn is not None and not loop.users:
            first = np.flatnonzero(np.isfinite(st.arrival))
            ids = first[np.argsort(st.arrival[first], kind="stable")]
        self.deadlines.start()
        fin = st.arrival[np.isfinite(st.arrival)]
        self.t_last_open = float(fin.max()) + loop.oh if fin.size else 0.0
        if d.outputs.timeseries_s > 0:
            loop._push(d.outputs.timeseries_s, 3, TICK, "sample")
        if d.cluster.autoscale != "none":
            loop._push(d.cluster.autoscale_interval_s, 3, TICK, "scale")
        return ids

    def admit(self, rid, t):
        return self.shedding.admit(rid, t, self.scaler.active)

    def route(self, loop, rid, t):
        return self.gateway.route(rid, t, self.scaler.active)

    def routed(self, loop, rid, t):
        self.deadlines.routed(loop, rid, t)

    def ended(self, rep, t):
        return self.deadlines.flush(rep, t)

    def done(self, loop, rids, t):
        for rid in rids:
            self.gateway.finished(rid)
            self.gone(loop, rid, t)

    def gone(self, loop, rid, t):
        """Session: send the next turn of ``rid``'s session."""
        st = self.st
        if st.next_turn is None:
            return
        nxt = int(st.next_turn[rid])
        if nxt < 0:
            return
        a = t + loop._rtt_half + float(st.think_s[nxt])
        st.arrival[nxt] = a
        loop._push(a + loop.oh, 1, ARRIVE, nxt)

    def event(self, loop, kind, tag, t, ver):
        d = self.des
        if kind == EXPIRE:
            return self.deadlines.event(loop, tag, t, ver)
        if tag == "ready":
            self.scaler.ready(t)
            return
        if not (t < self.t_last_open or loop.n_sys > 0 or loop.pending > 0):
            return                      # nothing left to arrive or to serve: the ticks stop
        if tag == "sample":
            self.sample(t)
            loop._push(t + d.outputs.timeseries_s, 3, TICK, "sample")
        else:
            when = self.scaler.scale(t)
            if when is not None:
                loop._push(when, 1, TICK, "ready")
            loop._push(t + d.cluster.autoscale_interval_s, 3, TICK, "scale")

    def close(self, loop, t):
        """The run ends with its last arrival or completion, not with a periodic tick."""
        st = self.st
        work = [x for x in (np.nanmax(st.completion) if np.isfinite(st.completion).any() else None,
                            np.nanmax(st.arrival) + loop.oh if np.isfinite(st.arrival).any() else None)
                if x is not None]
        t = min(t, max(work)) if work else t
        s = self.series.samples
        if self.des.outputs.timeseries_s > 0 and (not s or s[-1][0] < t):
            self.sample(t)              # the last (partial) window
        self.scaler.close(t)
        return t

    def sample(self, t) -> None:
        self.scaler.retire(t)
        self.series.sample(t, self.scaler)

    # --------------------------------------------------------- results
    @property
    def replica_hours(self) -> float:
        return self.scaler.replica_hours

    def summary(self) -> dict:
        dl, d = self.deadlines, self.des
        out = {"replica_hours": self.replica_hours,
               "rejected_max_len": self.shedding.rejected_max_len, "shed": self.shedding.shed,
               "cancelled": dl.cancelled}
        if d.cluster.deadline_s or any(c.deadline_s for c in d.clients.classes):
            out["cancelled_running"] = dl.cancelled_running
            out["cancelled_queued"] = dl.cancelled - dl.cancelled_running
        if d.cluster.autoscale != "none":
            out.update(replicas_peak=self.scaler.peak_active, scale_events=self.scaler.scale_events)
        if self.price:
            out["cost_usd"] = self.replica_hours * self.devices * self.price
            out["price_per_device_hour"] = self.price
        return out

    def timeseries(self, st, slo_ok: np.ndarray):
        return self.series.frame(st, slo_ok, self.devices, self.price)

    def decisions_frame(self):
        return self.trace.frame()


# ----------------------------------------------------------------- wiring for engine.des.run
def cache_factory(specs, des, stream):
    """A function building one replica's prefix cache (HBM only, or tiered), or None when
    prefix caching is off or the stream has no hashes."""
    from engine.des.kv import PrefixCache
    from engine.errors import SpecError

    if (des.kv.kv_host_gb or des.kv.kv_disk_gb) and not des.kv.prefix_caching:
        raise SpecError("engine.des.kv.kv_host_gb" if des.kv.kv_host_gb else "engine.des.kv.kv_disk_gb",
                        des.kv.kv_host_gb or des.kv.kv_disk_gb,
                        "0 unless engine.des.kv.prefix_caching=true (the tiers hold prefix-cache blocks)")
    if not des.kv.prefix_caching or stream.hashes is None:
        return None
    ppe = max(1, stream.block_tokens // des.kv.block_size)
    if des.kv.kv_host_gb or des.kv.kv_disk_gb:
        from engine.des.kv import TieredPrefixCache, tier_setup

        tiers = tier_setup(specs, des, stream.block_tokens)
        return lambda: TieredPrefixCache(ppe, *tiers)
    if des.cluster.router == "weighted" and des.cluster.prefix_index == "events":
        return lambda: HeardCache(ppe)
    return lambda: PrefixCache(ppe)


def make_fleet(specs, des, reps: list, n_rep: int, st, make_cache):
    """The Fleet of a run, or None when no cluster feature is on (the loop runs as before)."""
    from engine.errors import SpecError

    if not des.cluster_features:
        return None
    if des.cluster.prefill_replicas:
        raise SpecError("engine.des.cluster.prefill_replicas", des.cluster.prefill_replicas,
                        "0 with the cluster features (router=weighted, signal delay, autoscale, "
                        "sessions, time series ...): disaggregated pools are not supported there")
    cl = des.cluster
    if cl.autoscale != "none" and cl.autoscale_max and cl.autoscale_max < cl.autoscale_min:
        raise SpecError("engine.des.cluster.autoscale_max", des.cluster.autoscale_max,
                        f">= autoscale_min={des.cluster.autoscale_min}")
    price = des.cluster.price_per_hour or (specs.hardware.price_per_hour or 0.0)
    n0 = n_rep
    if des.cluster.autoscale != "none":
        n0 = min(max(n_rep, des.cluster.autoscale_min), len(reps))
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
    if des.outputs.timeseries_s > 0:
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


__all__ = ["Fleet", "cache_factory", "make_fleet", "results"]
