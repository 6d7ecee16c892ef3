"""What the fleet records: the decision trace and the time series.

Decision trace (``record_decisions``; frames["decisions"]): route, shed, reject_max_len, expire,
abort_queued, abort_running, preempt (the victim, with its replica's outstanding, waiting and
running requests, KV use and the victim's cached context when the scheduler chose it),
replica_ready, scale_up, scale_up_undrain, scale_down.

Time series (``timeseries_s``; frames["timeseries"]): one row per window: replicas active,
provisioning, draining and billed, waiting and running requests, KV use, busy fraction, replica
hours so far; the frame adds arrivals/s, the SLO attainment of the requests arriving in the window
and the cost so far.
"""

import math

import numpy as np

DECISION_COLUMNS = ("t_s", "request_id", "decision", "replica", "seen_outstanding", "seen_min_outstanding",
                    "seen_max_outstanding", "seen_kv_use", "seen_inflight_tokens", "signal_age_s",
                    "seen_waiting", "seen_running", "victim_context_tokens")
SAMPLE_COLUMNS = ("t_s", "replicas_active", "replicas_provisioning", "replicas_draining",
                  "replicas_billed", "waiting", "running", "kv_use", "busy", "replica_hours")


class Trace:
    """The decision trace; ``rows`` is None when it is off (every method then does nothing)."""

    def __init__(self, on: bool):
        self.rows = [] if on else None

    def attach(self, rep) -> None:
        if self.rows is not None:
            rep.on_preempt = self.preempt

    def note(self, t, rid, what, rep=-1):
        if self.rows is not None:
            self.rows.append((t, rid, what, rep, -1, -1, -1, math.nan, math.nan, math.nan, -1, -1, -1))
        return what

    def route(self, t, rid, rep, snap):
        if self.rows is not None:
            out, i = snap.out, rep.idx
            self.rows.append((t, rid, "route", i, int(out[i]), int(out.min()), int(out.max()),
                              float(snap.kv[i]), float(snap.tok[i]),
                              t - snap.t if snap.t > -math.inf else math.nan, -1, -1, -1))

    def cancel(self, t, rid, rep, what):
        if self.rows is not None:
            self.rows.append((t, rid, what, rep.idx, rep.n + len(rep.waiting), -1, -1,
                              float(rep.kv.load) if rep.total else math.nan, math.nan, 0.0,
                              len(rep.waiting), rep.n, -1))

    def preempt(self, rep, s):
        """Decision trace row of a preemption (before the victim's KV is freed)."""
        self.rows.append((rep.t_plan, int(rep.rid[s]), "preempt", rep.idx, rep.n + len(rep.waiting),
                          -1, -1, float(rep.kv.load), math.nan, 0.0, len(rep.waiting), rep.n,
                          int(rep.ctx[s])))

    def frame(self):
        import polars as pl

        if self.rows is None:
            return None
        return pl.DataFrame(self.rows, schema=list(DECISION_COLUMNS), orient="row")


class TimeSeries:
    """The per-window samples of the fleet (``sample``) and their frame."""

    def __init__(self, des, pool):
        self.des, self.pool = des, pool
        self.samples: list = []
        self._busy_prev = {r.idx: 0.0 for r in pool}
        self._t_prev = 0.0

    def sample(self, t, scaler) -> None:
        """One row at ``t`` (the window ending at t); ``scaler``: the replica sets and billing."""
        act = scaler.active
        dt = t - self._t_prev
        live = act + scaler.draining
        busy = sum(r.busy_s - self._busy_prev[r.idx] for r in live)
        for r in self.pool:
            self._busy_prev[r.idx] = r.busy_s
        self._t_prev = t
        self.samples.append((
            t, len(act), len(scaler.provisioning), len(scaler.draining), len(scaler.bill_start),
            sum(len(r.waiting) for r in live), sum(r.n for r in live),
            float(np.mean([r.kv.load for r in act])) if act else math.nan,
            busy / (dt * len(act)) if dt > 0 and act else math.nan,
            scaler.hours(t),
        ))

    def frame(self, st, slo_ok: np.ndarray, devices: int, price: float):
        """The per-window frame: load (arrivals/s), queue, running, KV use, replicas, busy
        fraction, SLO attainment of the requests arriving in the window, cost so far."""
        import polars as pl

        if not self.samples:
            return None
        df = pl.DataFrame(self.samples, schema=list(SAMPLE_COLUMNS), orient="row")
        w = self.des.outputs.timeseries_s
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
        if price:
            df = df.with_columns((pl.col("replica_hours") * devices * price).alias("cost_usd"))
        return df


__all__ = ["Trace", "TimeSeries", "DECISION_COLUMNS", "SAMPLE_COLUMNS"]
