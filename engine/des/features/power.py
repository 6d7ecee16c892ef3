"""Device power, energy per iteration and the TDP-driven throttle of the discrete-event engine.

Power of one device during an iteration of time x whose roofline-busy part is b (the pass's
``StepModel`` roof: the sum of the operators' max(compute, memory), without the exposed
communication, host overheads or stalls), at nominal clock:
    P = P_idle + dP x b / x,   P_idle = idle x TDP,   dP = (peak_power_ratio - idle) x TDP
(``idle`` = engine.analytical.idle_power_fraction). With peak_power_ratio = 1 this is the
analytical engine's P = TDP (idle + (1 - idle) u), u = b / x (engine.analytical.energy), so the
two engines' joules agree at low load. An iteration's energy is devices x (P_idle x + dP b); it
is shared among the iteration's tokens (a prefill chunk's tokens, one per decoding sequence), so
each request carries its prefill and decode joules.

Throttle (``DesSpec.power.throttle``; the SimLLM seed: TDP is the threshold of sustained load above
which the chip lowers its clock, which shows in the p99 tail): the limiter watches the power
averaged over ``throttle_time_constant_s`` (exponential moving average E of the drawn power; idle gaps
decay it towards P_idle). While E > TDP an iteration whose nominal power exceeds TDP runs at the
clock f that brings its average power to TDP: the busy part stretches to b / f and the dynamic
energy dP b stays (same work, same energy per operation at fixed voltage):
    P_idle + dP b / (x - b + b / f) = TDP   ->   b / f = dP b / (TDP - P_idle) - (x - b)
f is kept >= throttle_min_clock. The whole busy part stretches (memory-bound steps included: a first-order
model; HBM clocks are not modelled separately). Each replica's devices have their own limiter.
"""

import numpy as np


def roof_s(sm, T, n, LPp, LRp, LPd, Bd):
    """Roofline-busy seconds of one pass (``StepModel.pass_time``'s roof, no comm or overheads)."""
    att = sm.attention(LPp, LRp, T - Bd, LPd, Bd, T)
    Tg = sm.graph_tokens(T, Bd)
    return sm.roof(sm.operators(Tg, n + (Tg - T), *att))


def roof_functions(sm, one_roof=None):
    """(one-iteration roof, decode-run roofs, decode-run roof line) with the step functions'
    signatures (engine.des.pricing.step_functions): memoised per batch composition (``one_roof``,
    the step functions' ``.roof``, when given: the roof the iteration's time was priced with, from
    the same memo, instead of a second evaluation of the pass); a decode run's
    roofs from a line in the attended positions when the probes prove it linear (convex
    piecewise-linear). ``line(B, p0, k)`` gives (a, b, p0, B) - step j's roof is a + b (p0 + B j),
    summed in closed form by ``busy_total`` - or the array of k roofs where no line holds."""
    memo: dict = {}

    def one(T, n, chunks, nd, dctx):
        key = (T, n, chunks, nd, dctx)
        v = memo.get(key)
        if v is None:
            if len(memo) > 1_000_000:
                memo.clear()
            LPp = LRp = 0.0
            for c, k in chunks:
                p, r = sm.chunk_positions(c, k)
                LPp += p
                LRp += r
            v = memo[key] = float(roof_s(sm, float(T), float(n), LPp, LRp,
                                         sm.decode_positions(nd, float(dctx)), float(nd)))
        return v

    def at(B, P):
        B = float(B)
        return np.asarray(roof_s(sm, B, B, 0.0, 0.0, sm.decode_positions(B, P), B), dtype=np.float64)

    from engine.des.pricing import line_memo
    # the roof's line of every batch size, a block at a time (B and P flat arrays)
    fit = line_memo(lambda B, P: roof_s(sm, B, B, 0.0, 0.0, sm.decode_positions(B, P), B))

    def run(B, P):
        line = fit(B)
        if line is not None and P[-1] <= line[2]:
            return line[0] + line[1] * P
        return at(B, P)

    def line_of(B, p0, k):
        line = fit(B)
        if line is not None and p0 + float(B) * (k - 1) <= line[2]:
            return (line[0], line[1], float(p0), float(B))
        return at(B, p0 + float(B) * np.arange(k, dtype=np.float64))

    return (one_roof if one_roof is not None else one), run, line_of


def busy_total(busy, j: int) -> float:
    """Roofline-busy seconds of the first j steps of a decode run: ``busy`` an array of step
    roofs or a line (a, b, p0, B): sum_{i<j} a + b (p0 + B i) = j a + b (j p0 + B j (j-1) / 2)."""
    if busy.__class__ is tuple:
        a, b, p0, B = busy
        return j * a + b * (j * p0 + B * j * (j - 1) / 2.0)
    return float(busy[:j].sum())


class Power:
    """One replica's devices: energy and the power limiter (module docstring)."""

    def __init__(self, des, tdp_w: float, idle_fraction: float, devices: int, roofs=None):
        #: (one-iteration roof, decode-run roofs, decode-run roof line): ``roof_functions``
        self.roof_one, self.roof_run, self.roof_line = roofs if roofs is not None else (None, None, None)
        self.devices = devices
        self.tdp = tdp_w
        self.p_idle = idle_fraction * tdp_w
        self.dp = (des.power.peak_power_ratio - idle_fraction) * tdp_w
        self.throttle = des.power.throttle and des.power.peak_power_ratio > 1.0
        self.tau = des.power.throttle_time_constant_s
        self.min_clock = des.power.throttle_min_clock
        self.ema = self.p_idle          # averaged power of one device [W]
        self.t_last = 0.0
        # run totals
        self.energy_j = 0.0
        self.busy_s = 0.0
        self.stretch_s = 0.0            # time added by the limiter
        self.throttled_s = 0.0          # iteration time spent below nominal clock
        self.ema_max = self.p_idle
        self.run_s = 0.0                # time spent in iterations

    # ---- the replica's power slot (engine.des.features.base.NoPower is the null one)
    def busy_one(self, T, logits, pieces, nd, pd) -> float:
        """Roofline-busy seconds of one iteration (``roof_functions``' one)."""
        return self.roof_one(T, logits, pieces, nd, pd)

    def price_one(self, t, dt, busy):
        """One iteration of nominal ``dt`` [s] from ``t``: (time, energy, limiter state)."""
        if not self.throttle:
            return dt, None, None
        x, energy, pstate = self.price(t, np.array([dt]), np.array([busy]))
        return float(x[0]), energy, pstate

    def price_run(self, t, x, n, p0, k):
        """k decode steps of n sequences from ``t`` (attending p0 + n j positions at step j) of
        nominal times ``x``: (times, busy parts - an array, or a line summed in closed form when
        the run ends -, energy per step, limiter state)."""
        if self.throttle:
            busy = self.roof_run(n, p0 + float(n) * np.arange(k, dtype=np.float64))
            x, energy, pstate = self.price(t, x, busy)
            return x, busy, energy, pstate
        return x, self.roof_line(n, p0, k), None, None

    def price_steps(self, t, x, busy):
        """Steps of nominal times ``x`` and busy parts ``busy``: (times, energy, state), the
        limiter's only when it throttles."""
        if not self.throttle:
            return x, None, None
        return self.price(t, x, busy)

    def charge_run(self, rep, run, t) -> None:
        """A decode run ended at ``t``: its joules shared by the running sequences."""
        n = rep.n
        if run.energy is None:        # ``account`` of a run the limiter did not price
            e = self.spent(run.cum.item(-1), busy_total(run.busy, run.k), t)
        else:
            e = self.account(run, True, t)
        rep.st.energy_decode_j[rep.rid[:n]] += e / n

    def charge_iteration(self, rep, run, t, q) -> None:
        """A mixed iteration ended at ``t``: its joules shared by its tokens (a prompt chunk's
        tokens, q per verifying decode: 1 without speculation). An iteration that moved no token
        (a disaggregated pool's KV hand-off step) keeps its energy in the device total only."""
        st, nd, chunks = rep.st, run.nd, run.chunks
        e_it = self.spent(run.dur, run.busy, t) if run.energy is None else self.account(run, False, t)
        pre = 0
        for _, c in chunks:
            pre += c
        n_tok = nd * q + pre
        e_tok = e_it / n_tok if n_tok > 0 else 0.0
        rid = rep.rid
        if nd:
            didx = run.didx     # usually the first nd slots: a slice (a view) reads them cheaper
            st.energy_decode_j[rid[:nd] if didx[-1] == nd - 1 else rid[didx]] += e_tok * q
        epf = st.energy_prefill_j
        for s, c in chunks:
            epf[rid[s]] += e_tok * c

    def price(self, t0: float, x: np.ndarray, busy: np.ndarray):
        """Iterations back to back from ``t0`` with nominal times ``x`` and busy parts ``busy``
        [s] -> (times after the limiter, energy per iteration [J], limiter state per iteration
        or None). Changes nothing: ``commit`` applies the iterations actually run."""
        b = np.minimum(busy, x)
        if not self.throttle:
            return x, self.devices * (self.p_idle * x + self.dp * b), None
        tdp, pi, dp, tau, fmin = self.tdp, self.p_idle, self.dp, self.tau, self.min_clock
        e = self.p_idle + (self.ema - self.p_idle) * np.exp(-max(t0 - self.t_last, 0.0) / tau)
        xs = np.array(x, dtype=np.float64)
        ema = np.empty_like(xs)
        xl, bl = xs.tolist(), b.tolist()
        for i in range(len(xl)):
            xi, bi = xl[i], bl[i]
            if e > tdp and bi > 0 and pi + dp * bi / xi > tdp:
                slow = dp * bi / (tdp - pi) - (xi - bi)        # b / f at the capped power
                xi = xi - bi + min(slow, bi / fmin)
                xs[i] = xi
            p = pi + dp * bi / xi if xi > 0 else pi
            e = p + (e - p) * np.exp(-xi / tau)
            ema[i] = e
        return xs, self.devices * (pi * xs + dp * b), (ema, xs - x)

    def account(self, run, decode: bool, t_end: float) -> float:
        """Joules of a finished iteration or decode run (all devices of the replica), added to the
        totals. Limiter-priced runs carry their energy; otherwise P_idle x time + dP x busy."""
        if run.energy is not None:
            steps = run.steps if decode else np.array([run.dur])
            busy = run.busy if decode else np.array([run.busy])
            self.commit(len(steps), t_end, steps, run.energy, busy, run.pstate)
            return float(run.energy[:len(steps)].sum())
        if decode:
            return self.spent(float(run.cum[-1]), busy_total(run.busy, run.k), t_end)
        return self.spent(run.dur, run.busy, t_end)

    def spent(self, dur: float, b: float, t_end: float) -> float:
        """Joules of ``dur`` seconds of iterations, ``b`` of them roofline-busy (at most ``dur``),
        at nominal clock ending at ``t_end``: devices x (P_idle dur + dP b), added to the totals."""
        if b > dur:
            b = dur
        e = self.devices * (self.p_idle * dur + self.dp * b)
        self.energy_j += e
        self.run_s += dur
        self.busy_s += b
        self.t_last = t_end
        return e

    def commit(self, j: int, t_end: float, x: np.ndarray, energy: np.ndarray, busy: np.ndarray, state) -> None:
        """The first ``j`` priced iterations ran, ending at ``t_end``."""
        self.energy_j += float(energy[:j].sum())
        self.run_s += float(x[:j].sum())
        self.busy_s += float(np.minimum(busy[:j], x[:j]).sum())
        self.t_last = t_end
        if state is not None:
            ema, stretch = state
            self.ema = float(ema[j - 1])
            self.ema_max = max(self.ema_max, float(ema[:j].max()))
            s = stretch[:j]
            self.stretch_s += float(s.sum())
            self.throttled_s += float(x[:j][s > 0].sum())


def summary(powers: list, st, span_s: float, devices: int) -> dict:
    """Run-wide energy figures: J per prefill token, per decode token, per request (means over
    completed requests of their attributed joules), idle joules between iterations, mean power
    per device, and what the limiter did."""
    busy_e = sum(p.energy_j for p in powers)
    idle_e = 0.0
    for p in powers:       # devices idle at P_idle whenever the replica runs no iteration
        idle_e += p.devices * p.p_idle * max(span_s - p.run_s, 0.0)
    done = np.isfinite(st.completion)
    epf, edc = st.energy_prefill_j, st.energy_decode_j
    pf_tok = st.prefill_tokens
    per_req = (epf + edc)[done]
    out = dict(
        energy_total_j=busy_e + idle_e,
        energy_idle_j=idle_e,
        energy_prefill_j_per_token=float(epf.sum()) / pf_tok if pf_tok else float("nan"),
        energy_decode_j_per_token=(float(edc.sum()) / st.decode_tokens if st.decode_tokens
                                   else float("nan")),
        energy_j_per_request=float(per_req.mean()) if per_req.size else float("nan"),
        energy_prefill_j_per_request=float(epf[done].mean()) if done.any() else float("nan"),
        energy_decode_j_per_request=float(edc[done].mean()) if done.any() else float("nan"),
        energy_j_per_output_token=busy_e / st.tokens_out if st.tokens_out else float("nan"),
        power_w_per_gpu=(busy_e + idle_e) / span_s / devices if span_s > 0 else float("nan"),
    )
    out["energy_j_per_token"] = out["energy_decode_j_per_token"]
    if any(p.throttle for p in powers):
        ran = sum(p.run_s for p in powers)
        out.update(throttle_stretch_s=sum(p.stretch_s for p in powers),
                   throttled_fraction=sum(p.throttled_s for p in powers) / ran if ran else 0.0,
                   power_ema_max_w=max(p.ema_max for p in powers))
    return out


__all__ = ["Power", "busy_total", "roof_functions", "roof_s", "summary"]
