"""One arrival rate -> pass / fail against the SLOs, from DES runs (the stability rule).

A run simulates the first n requests of the workload's stream at mean rate ``rate`` (a trace's
timestamps rescaled, as ``workload.rate_rps`` does for any run; Poisson/gamma streams drawn at
that rate) on the candidate's deployment. Measured requests: those arriving after the first
``warmup_fraction`` of the stream's span (DesSpec.clients.warmup_s; the drain is kept: under overload the
late requests are the evidence). Requests that never complete (rejected as too long for the KV
cache) count as missing every threshold. Verdict per requirement by ``stats.verdict`` (binomial
interval of the fraction meeting the threshold vs the percentile). A pass also needs the measured
span (first measured to last arrival) to last ``min_span_e2e`` times the mean E2E of the measured
requests: a rate slightly above capacity builds its queue over many request lifetimes, so a run
short against a request's residence time can pass by never leaving its start-up transient. While
the verdict is ``unsure`` the run is repeated with 2n requests, up to ``max_requests``; then the
point estimate decides and the trial says so (``decided_by = 'point'``). Within one search no
probe starts below the requests an earlier decisive run needed (``first_requests``).
"""

from dataclasses import dataclass, field, replace

import numpy as np

from engine.des.run import simulate
from engine.errors import SpecError
from engine.plan import stats
from engine.plan.spec import RuleSpec, SloSpec
from engine.spec import Specs


@dataclass
class Trial:
    """The outcome at one rate (the last, decisive run) and every run it took."""

    rate: float
    verdict: str                  # pass | fail
    decided_by: str               # ci | point
    requests: int                 # requests of the decisive run
    runs: int                     # DES runs this rate took (1 + doublings)
    metrics: dict = field(default_factory=dict)   # p-quantiles, their CIs, throughput, ...
    failing: str = ""             # which requirement failed ("" when pass)


def _measure(table, summary, slo: SloSpec, conf: float, start_s: float) -> tuple[str, dict, str]:
    """(verdict, metrics, failing requirements) of one run's request table: requests arriving at
    or after ``start_s`` (s, the table's clock), never-completed ones as +inf."""
    q = slo.percentile / 100.0
    arr = table["arrival_s"].to_numpy()
    keep = arr >= start_s
    done = np.isfinite(table["completion_s"].to_numpy()[keep])
    out, verdicts, failing = {}, [], []
    ok_all = np.ones(int(keep.sum()), dtype=bool)
    for col, thr in slo.thresholds().items():
        x = table[col].to_numpy()[keep].astype(float)
        x = np.where(done, x, np.inf)
        valid = (table["output_len"].to_numpy()[keep] > 1) if col == "tpot_ms" else np.ones(x.size, bool)
        xv = np.where(np.isnan(x[valid]), np.inf, x[valid])
        v, frac, _, _ = stats.verdict(xv <= thr, q, conf)
        point, plo, phi = stats.order_stat_ci(xv, q, conf)
        name = col[:-3]
        out.update({f"{name}_ms_q": point, f"{name}_ms_q_lo": plo, f"{name}_ms_q_hi": phi,
                    f"{name}_ok_fraction": frac})
        verdicts.append(v)
        if v == "fail" or (v == "unsure" and point > thr):
            failing.append(name)
        ok_all[valid] &= xv <= thr
    if slo.goodput_fraction:
        v, frac, _, _ = stats.verdict(ok_all, slo.goodput_fraction, conf)
        out["goodput_fraction"] = frac
        verdicts.append(v)
        if v == "fail" or (v == "unsure" and frac < slo.goodput_fraction):
            failing.append("goodput")
    out.update({k: summary.get(k) for k in (
        "ttft_ms_p50", "tpot_ms_p50", "ttft_ms_p99", "tpot_ms_p99", "e2e_ms_p99", "throughput_tok_s",
        "throughput_tok_s_per_gpu", "request_throughput_rps", "utilisation", "batch_size_mean",
        "kv_utilisation_mean", "bound", "devices", "rejected_too_long")})
    out["measured_requests"] = int(keep.sum())
    return stats.combine(verdicts), out, ",".join(failing)


class Probe:
    """rate -> Trial for one candidate (``specs`` with its partition and DES deployment)."""

    def __init__(self, specs: Specs, slo: SloSpec, rule: RuleSpec, on_run=None):
        w = specs.workload
        if w.arrival not in ("trace", "poisson", "gamma"):
            raise SpecError("workload.arrival", w.arrival,
                            "an open-loop stream (trace, poisson or gamma) for a rate search")
        self.specs, self.slo, self.rule = specs, slo, rule
        self.on_run = on_run          # callback(rate, requests, verdict) after each DES run
        self.cache: dict = {}
        self.runs = 0
        self.e2e_hint = None          # mean E2E [s] of the last run (first_requests)
        self.n_floor = 0              # requests of the largest decisive run so far

    def run(self, rate: float, n: int):
        """One DES run of n requests at ``rate``: (verdict, metrics, failing)."""
        w = replace(self.specs.workload, num_requests=int(n), rate_rps=float(rate))
        span = (n - 1) / rate
        des = self.specs.des.with_(clients=dict(warmup_s=self.rule.warmup_fraction * span, exclude_drain=False),
                                   outputs=dict(progress="off", record_iterations=False))
        res = simulate(replace(self.specs, workload=w, des=des), des).result
        self.runs += 1
        arr = res.table["arrival_s"].to_numpy()
        start = (float(np.nanmin(arr)) if arr.size else 0.0) + des.clients.warmup_s
        out = _measure(res.table, res.summary, self.slo, self.rule.confidence, start)
        t = res.table
        keep = (arr >= start) & np.isfinite(t["completion_s"].to_numpy())
        e2e = float(np.mean(t["e2e_ms"].to_numpy()[keep])) / 1e3 if keep.any() else float("inf")
        span_s = float(np.nanmax(arr) - start) if arr.size else 0.0
        out[1].update(span_s=span_s, e2e_mean_s=e2e)
        if np.isfinite(e2e):
            self.e2e_hint = e2e
        if out[0] == "pass" and span_s < self.rule.min_span_e2e * e2e:
            out = ("unsure", out[1], out[2])   # too short to show a slowly growing queue
        if self.on_run is not None:
            self.on_run(rate, n, out[0])
        return out

    def first_requests(self, rate: float) -> int:
        """Requests of the first run at ``rate``: ``rule.requests`` doubled until the measured
        span would reach min_span_e2e x the mean E2E of the last run (its residence time is the
        best guess for a nearby rate), at most ``max_requests``; saves the runs the span rule
        would reject. Never fewer than a previous decisive run of this search needed
        (``n_floor``): a longer run sees more of a trace, so verdicts from shorter runs than one
        already needed are not comparable (the rate would not be monotone in them)."""
        n, r = max(self.rule.requests, self.n_floor), self.rule
        if self.e2e_hint is None:
            return n
        need = rate * r.min_span_e2e * self.e2e_hint / (1.0 - r.warmup_fraction) + 1
        while n < need and n * 2 <= r.max_requests:
            n *= 2
        return n

    def __call__(self, rate: float) -> Trial:
        key = round(float(rate), 12)
        if key in self.cache and self.cache[key].requests >= self.n_floor:
            return self.cache[key]
        n, runs = self.first_requests(rate), 0
        while True:
            v, m, failing = self.run(rate, n)
            runs += 1
            if v != "unsure":
                t = Trial(rate, v, "ci", n, runs, m, failing)
                break
            if n * 2 > self.rule.max_requests:
                ok = all(m[f"{c.replace('_ms', '')}_ms_q"] <= thr for c, thr in self.slo.thresholds().items())
                if self.slo.goodput_fraction:
                    ok = ok and m["goodput_fraction"] >= self.slo.goodput_fraction
                t = Trial(rate, "pass" if ok else "fail", "point", n, runs, m, "" if ok else failing)
                break
            n *= 2
        self.n_floor = max(self.n_floor, t.requests)
        self.cache[key] = t
        return t
