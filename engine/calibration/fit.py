"""Two-stage calibration of the DES to one measurement (seed document 000, sec. 6.3).

Stage 1 (the regular state) fits compute efficiency, memory-bandwidth efficiency and the per-step
overhead so that the simulated requests match the measured ones: residuals are per-request
log(sim / measured) of TTFT and TPOT (robust soft-L1 loss, so rare stalls do not pull the body)
plus the two log p50 ratios weighted by sqrt(N), so that p50 TTFT and p50 TPOT are matched first.
TTFT across prompt lengths separates compute (slope) from overhead (intercept); TPOT then gives the
bandwidth. The request stream is the measured one (lengths, arrivals or concurrency), replayed.

Stage 2 (the tail) holds those and fits the jump diffusion of ``engine.des.noise`` (jitter
sigma, jump rate lambda, mean jump size J; the jump distribution is the configured one) to log
ratios of the p90/p99/p99.9 of TTFT, TPOT and (when measured) ITL, plus the ITL p50.

Jumps add lambda*J per second of work on average, so a tail fitted after a noiseless stage 1 would
raise p50 TPOT: the two stages alternate (``rounds``, default 2), stage 1 re-fitting with the
current tail switched on, so that fitting the tail leaves the p50s where stage 1 put them.

Stage 1 in the first round fits the ITL p50 (the regular step: jitter is median-preserving, jumps
touch a few per cent of the iterations) instead of TPOT; stage 2 starts from a closed-form
(method-of-moments) estimate of the tail and weights each percentile by its sampling error.

With each request's ITLs in the file (``Measurement.itl_p50_ms``), stage 1's decode side is, in
every round, each request's median ITL against the simulated request's (a run with token times):
at one user that step is overhead + (weights + KV of the request's context) / (bandwidth x
efficiency), so requests of different context lengths separate the bandwidth efficiency from
the step overhead; and the per-request overhead (``REQUEST_OVERHEAD``) becomes a fourth stage-1
parameter, the constant that TTFT carries beyond the step overhead (client, HTTP path,
tokenisation; left out, it is read as a larger step overhead).

Loaded data (requests sharing batches: ``shares_batches``), and data without an ITL column,
take another path: stage 1 fits
the p50s of TTFT and TPOT per prompt-length quartile (``stage1_medians``; per-request residuals
under load are batching noise to a finite difference), the tail held at zero in the first round;
stage 2 then fits the TPOT percentiles and TTFT p50/p90 from the held start with a wide simplex;
round 2 repeats both with the tail on. The reported ranges there come from one joint Jacobian
of all six parameters (``joint_ranges``), so the trade-off between the jumps' mean stall and the
bandwidth efficiency shows in both. On such data the tail terms and often the step overhead are
flagged as not pinned: the round trips (tests/calibration/test_roundtrip.py) recover the
efficiencies within 10 % and the tail only from ITLs.

Every stage solves through ``engine.calibration.solve.least_squares_fit`` (the project's one
fitter, shared with ``simllm-validate --fit``), which also returns each parameter's 95 % range
(``FitResult.ranges``) and whether the data pin it.

Optimisers (scipy.optimize, no grid): stage 1 least_squares (trust-region reflective, soft-L1
loss, bounds in log space); stage 2 Nelder-Mead on log parameters (finite-sample percentiles move
in small steps as jump counts change, which misleads finite-difference gradients). Simulations use
common random numbers (one noise seed, ``engine.des.seed``), so each objective is deterministic.
"""

from dataclasses import dataclass, field, replace

import numpy as np

from engine.calibration.measurements import Measurement, itl_quantiles_ms, request_stream
from engine.calibration.solve import confidence, fd_jacobian, least_squares_fit
from engine.errors import SpecError
from engine.spec import NoiseSpec, Specs

STAGE1 = ("compute_efficiency", "memory_bandwidth_efficiency", "step_overhead_s")
#: The optional fourth stage-1 parameter (``calibrate(request_overhead=...)``): a constant per
#: request (client, HTTP, tokenisation, admission) that delays the first token and nothing else.
REQUEST_OVERHEAD = "per_request_overhead_s"
STAGE2 = ("jitter_sigma", "jump_rate_per_s", "jump_mean_s")
PARAMS = STAGE1 + STAGE2
#: Percentiles compared in the error table: (metric, percentile).
TARGETS = tuple((m, q) for m in ("ttft_ms", "tpot_ms", "itl_ms") for q in (50.0, 90.0, 99.0, 99.9))
_SUMMARY_Q = {50.0: "p50", 90.0: "p90", 99.0: "p99", 99.9: "p99_9"}
#: (low, high) of each parameter (the optimiser works on logs except the overhead, in ms).
BOUNDS = {"compute_efficiency": (0.02, 1.0), "memory_bandwidth_efficiency": (0.02, 1.0),
          "step_overhead_s": (0.0, 0.1), "jitter_sigma": (1e-3, 1.0),
          "jump_rate_per_s": (1e-3, 1e3), "jump_mean_s": (1e-5, 10.0),
          REQUEST_OVERHEAD: (0.0, 1.0)}
#: 95 % half-range (in the optimiser's coordinates) beyond which a parameter counts as not pinned
#: by the data: efficiencies +-0.2 in log (about +-20 %), the step overhead +-20 % of its value
#: or 50 us if more (stage 1, coordinate in ms); the tail terms +-0.5 in log (a factor 1.6 either
#: way: tails are sampled from few events).
def _PIN1(u):
    """(the per-request overhead, when fitted, as the step overhead: +-20 % or 50 us)"""
    return np.array([0.2, 0.2] + [max(0.2 * abs(v), 0.05) for v in u[2:]])


_PIN2 = np.array([0.5, 0.5, 0.5])
#: Which symptom each parameter is meant to explain (seed document 000, sec. 6.3 table).
SYMPTOMS = {
    "compute_efficiency": "p50 TTFT high -> compute efficiency",
    "memory_bandwidth_efficiency": "p50 TPOT high -> bandwidth efficiency",
    "step_overhead_s": "TTFT and TPOT high by a constant -> per-step overhead",
    REQUEST_OVERHEAD: "TTFT high by a constant, decode steps not -> per-request overhead",
    "jitter_sigma": "p90 spread of ITL/TTFT -> jitter sigma",
    "jump_rate_per_s": "sporadic p99 spikes -> jump rate",
    "jump_mean_s": "size of p99/p99.9 spikes -> jump size",
}


def params_of(specs: Specs) -> dict:
    """The six fitted parameters as they stand in ``specs.calibration``."""
    c = specs.calibration
    return {"compute_efficiency": c.compute_efficiency,
            "memory_bandwidth_efficiency": c.memory_bandwidth_efficiency,
            "step_overhead_s": c.step_overhead_s, "jitter_sigma": c.noise.jitter_sigma,
            "jump_rate_per_s": c.noise.jump_rate_per_s, "jump_mean_s": c.noise.jump_mean_s}


def with_params(specs: Specs, p: dict, noise: bool = True) -> Specs:
    """``specs`` with the calibration's parameters replaced by ``p`` (noise off if not ``noise``;
    the per-request overhead only when ``p`` has it, i.e. when it is fitted)."""
    c = specs.calibration
    n = replace(c.noise, jitter_sigma=p["jitter_sigma"], jump_rate_per_s=p["jump_rate_per_s"],
                jump_mean_s=p["jump_mean_s"]) if noise else NoiseSpec(jump_dist=c.noise.jump_dist)
    extra = {REQUEST_OVERHEAD: float(p[REQUEST_OVERHEAD])} if REQUEST_OVERHEAD in p else {}
    cal = replace(c, compute_efficiency=float(p["compute_efficiency"]),
                  memory_bandwidth_efficiency=float(p["memory_bandwidth_efficiency"]),
                  step_overhead_s=float(p["step_overhead_s"]), noise=n, **extra)
    return replace(specs, calibration=cal)


class Problem:
    """One measurement and the deployment to re-simulate it on (specs, DesSpec)."""

    def __init__(self, specs: Specs, des, m: Measurement, stream_seed: int = 0):
        from engine.des import simulate

        self._simulate = simulate
        self.specs, self.des, self.m = specs, des, m
        self.stream, order = request_stream(m, seed=stream_seed)
        t = m.table
        self.meas_ttft = t["ttft_ms"].to_numpy()[order].astype(float)
        self.meas_tpot = t["tpot_ms"].fill_null(np.nan).to_numpy()[order].astype(float)
        self.targets = {k: m.quantile(k[0], k[1]) for k in TARGETS}
        self.calls = 0
        self.on_simulation = None     # called with the count before each simulation (progress)
        #: each request's median inter-token gap [ms] (stream order; NaN where unknown), when the
        #: measurement has per-request gaps for at least 5 requests; else None
        itl50 = None if m.itl_p50_ms is None else np.asarray(m.itl_p50_ms, float)[order]
        ok = None if itl50 is None else np.isfinite(itl50) & (itl50 > 0)
        self.meas_itl50 = itl50 if ok is not None and ok.sum() >= 5 else None
        self._des_tt = des.with_(outputs=dict(token_times=True)) if self.meas_itl50 is not None else None

    def simulate(self, p: dict, noise: bool = True, token_times: bool = False):
        """SimResult of the measured stream under parameters ``p`` (with per-token times if
        ``token_times`` and the measurement has per-request gaps)."""
        self.calls += 1
        if self.on_simulation is not None:
            self.on_simulation(self.calls)
        des = self._des_tt if token_times and self._des_tt is not None else self.des
        return self._simulate(with_params(self.specs, p, noise), des, stream=self.stream)

    @staticmethod
    def sim_itl50(sim) -> np.ndarray:
        """Each simulated request's median inter-token gap [ms] (a run with token times)."""
        import polars as pl

        return sim.result.table.select(pl.col("itl_ms").list.median()).to_series() \
            .fill_null(np.nan).to_numpy().astype(float)

    def quantiles(self, sim, keys=None) -> dict:
        """{(metric, percentile): value} of a SimResult (ITL from the DES's ITL histogram)."""
        keys = keys or list(TARGETS)
        t = sim.result.table
        out = {}
        itl_q = sorted({q for m, q in keys if m == "itl_ms"})
        itl = dict(zip(itl_q, itl_quantiles_ms(sim.state, itl_q))) if itl_q else {}
        for m, q in keys:
            if m == "itl_ms":
                out[(m, q)] = itl[q]
            else:
                v = t[m].to_numpy().astype(float)
                v = v[np.isfinite(v)]
                out[(m, q)] = float(np.percentile(v, q)) if v.size else float("nan")
        return out

    def target(self, key) -> float:
        if key not in self.targets:
            self.targets[key] = self.m.quantile(*key)
        return self.targets[key]

    def errors(self, sim) -> dict:
        """Signed relative error sim/measured - 1 of every TARGETS percentile the data has."""
        q = self.quantiles(sim)
        return {k: q[k] / self.targets[k] - 1.0 for k in TARGETS
                if np.isfinite(self.targets[k]) and self.targets[k] > 0}


# ------------------------------------------------------------------------------ stage 1
def _enc1(p, request_overhead: bool = False):
    """Stage-1 coordinates: log efficiencies, the step overhead in ms (and, when fitted, the
    per-request overhead in ms)."""
    u = [np.log(p["compute_efficiency"]), np.log(p["memory_bandwidth_efficiency"]), p["step_overhead_s"] * 1e3]
    return np.array(u + ([p.get(REQUEST_OVERHEAD, 0.0) * 1e3] if request_overhead else []))


def _dec1(u, p):
    out = {**p, "compute_efficiency": float(np.exp(u[0])),
           "memory_bandwidth_efficiency": float(np.exp(u[1])), "step_overhead_s": float(u[2] * 1e-3)}
    if len(u) > 3:
        out[REQUEST_OVERHEAD] = float(u[3] * 1e-3)
    return out


def _box1(request_overhead: bool = False):
    """(lo, hi) of the stage-1 coordinates."""
    lo = [np.log(BOUNDS["compute_efficiency"][0]), np.log(BOUNDS["memory_bandwidth_efficiency"][0]),
          BOUNDS["step_overhead_s"][0] * 1e3]
    hi = [0.0, 0.0, BOUNDS["step_overhead_s"][1] * 1e3]
    if request_overhead:
        lo.append(BOUNDS[REQUEST_OVERHEAD][0] * 1e3)
        hi.append(BOUNDS[REQUEST_OVERHEAD][1] * 1e3)
    return np.array(lo), np.array(hi)


#: Prompt-length bins of the binned-median stage 1 (quartiles of the measured prompts).
MEDIAN_BINS = 4


def _binned_medians(prob: Problem):
    """A function (simulated table -> log ratios simulated / measured of the p50 TTFT and TPOT
    in each prompt-length quartile of the measured stream; bins of fewer than 5 requests left out)."""
    prompt = prob.stream.prompt
    edges = np.quantile(prompt, np.linspace(0, 1, MEDIAN_BINS + 1)[1:-1])
    b = np.digitize(prompt, edges)
    bins = [b == i for i in range(MEDIAN_BINS) if (b == i).sum() >= 5]
    meas = [(np.nanmedian(prob.meas_ttft[k]), np.nanmedian(prob.meas_tpot[k])) for k in bins]

    def resid(t):
        st = t["ttft_ms"].to_numpy().astype(float)
        sp = t["tpot_ms"].to_numpy().astype(float)
        out = [np.log(np.nanmedian(x[k]) / m[j]) for k, m in zip(bins, meas)
               for j, x in enumerate((st, sp))]
        return np.nan_to_num(np.array(out), nan=5.0, posinf=5.0, neginf=-5.0)
    return resid


def joint_ranges(prob: Problem, p: dict, floor: float = 0.03) -> dict:
    """95 % ranges of all six parameters from one joint Jacobian at the final ``p`` (tail on):
    residuals are the binned p50s of ``stage1_medians`` and the LOADED_STAGE2_TARGETS, each log
    ratio divided by its standard error (``log_quantile_se``, floor ``floor``; the binned p50s by
    ``floor``), central differences of +-0.1 (log efficiencies), +-0.3 ms and +-0.3 (log tail).

    Why joint: each stage's own range is conditional on the other stage's parameters held. On
    loaded data without ITLs the jumps' mean stall (lambda J per busy second) and the bandwidth
    efficiency both lengthen the decode step, so a wrong tail shows up as a biased efficiency
    whose stage-1 range is narrow; the joint covariance carries that trade-off into both ranges.
    13 extra simulations."""
    binned = _binned_medians(prob)
    keys = [k for k in LOADED_STAGE2_TARGETS if np.isfinite(prob.target(k)) and prob.target(k) > 0]
    meas = np.array([prob.target(k) for k in keys])
    weight = 1.0 / np.array([log_quantile_se(prob, k, floor) for k in keys])

    def resid(u):
        sim = prob.simulate(_dec2(u[3:], _dec1(u[:3], p)))
        q = prob.quantiles(sim, keys)
        r2 = weight * np.log(np.array([q[k] for k in keys]) / meas)
        return np.concatenate([binned(sim.result.table) / floor,
                               np.nan_to_num(r2, nan=50.0, posinf=50.0, neginf=-50.0)])

    lo1, hi1 = _box1()
    lo = np.concatenate([lo1, np.log([BOUNDS[k][0] for k in STAGE2])])
    hi = np.concatenate([hi1, np.log([BOUNDS[k][1] for k in STAGE2])])
    u = np.clip(np.concatenate([_enc1(p), _enc2(p)]), lo, hi)
    r0 = resid(u)
    jac = fd_jacobian(resid, u, lo, hi, np.array([0.1, 0.1, 0.3, 0.3, 0.3, 0.3]))
    sigma, lo95, hi95, ident = confidence(jac, 0.5 * float(np.sum(r0 ** 2)), lo, hi, u,
                                          np.concatenate([_PIN1(u[:3]), _PIN2]))
    return {k: (_decode(k, u[i]), _decode(k, lo95[i]), _decode(k, hi95[i]), bool(ident[i]))
            for i, k in enumerate(PARAMS)}


def stage1_medians(prob: Problem, p0: dict, noise: bool = False, max_nfev: int = 80) -> tuple[dict, object]:
    """Stage 1 for loaded serving data without an ITL column: fit STAGE1 to the p50s of TTFT and
    of TPOT within each prompt-length quartile (log ratios simulated / measured; 8 residuals for
    3 parameters; the tail parameters held, on only if ``noise``).

    Why not the per-request residuals of ``stage1``: under load a request's TTFT depends on which
    batch it lands in, so a 0.1 % change of an efficiency reorders batches and moves single
    requests (and even the overall p50) by several per cent; a finite-difference Jacobian of step
    1e-3 is then noise and the trust region never leaves the start (the efficiencies stayed at
    their start of 0.688 on a Poisson run at 8 req/s). Medians per bin are robust to the tail
    (jitter is median-preserving, jumps touch few requests' TTFT), the bins keep TTFT's slope
    against prompt length (compute efficiency vs the constant per-step overhead) and TPOT gives
    the bandwidth. Nelder-Mead (simplex steps of 0.15 in log efficiency, 0.3 ms) steps over the
    batching noise; the ranges come from central differences of +-10 % (efficiencies) and
    +-0.3 ms (overhead) at the solution, wide enough to measure the trend, not the batching noise."""
    binned = _binned_medians(prob)

    def resid(u):
        return binned(prob.simulate(_dec1(u, p0), noise).result.table)

    lo, hi = _box1()
    u0 = np.clip(_enc1(p0), lo + 1e-9, hi - 1e-9)
    fit = least_squares_fit(resid, STAGE1, lo, hi, u0, method="nelder-mead",
                            simplex_step=np.array([0.15, 0.15, 0.3]), xatol=0.005, fatol=1e-5,
                            max_nfev=max_nfev, diff_step=np.array([0.1, 0.1, 0.3]), max_halfwidth=_PIN1)
    return _dec1(fit.x, p0), fit


def stage1(prob: Problem, p0: dict, noise: bool = False, max_nfev: int = 60,
           diff_step: float | None = None, request_overhead: bool = False) -> tuple[dict, object]:
    """Fit STAGE1 parameters from ``p0`` (the tail parameters held; on only if ``noise``), and
    the per-request overhead too if ``request_overhead``.

    Residuals: per request, log(simulated / measured) TTFT; per request, the decode side (below);
    and the log p50 ratios of TTFT and of the decode side weighted by sqrt(N).

    Decode side with per-request gaps (``Problem.meas_itl50``: the file has each request's
    ITLs): each request's median ITL against the simulated request's median ITL (a run with
    token times), in every round. At one user a request's decode step is
    overhead + (weights + KV(context)) / (bandwidth x efficiency): the steps of requests of
    different context lengths give the slope KV / (bandwidth x efficiency) and hence the
    bandwidth efficiency apart from the constant step overhead; one global ITL p50 gives only
    their sum. The median is the regular step (jitter is median-preserving, jumps touch a few per
    cent of the steps), so the tail does not bias it. TTFT holds, at one user, the per-request
    overhead + the step overhead + the prefill (slope in prompt length: compute efficiency), so
    once the decode steps pin the step overhead, TTFT's remaining constant is the per-request
    overhead (``request_overhead``: client, HTTP and tokenisation time, which otherwise biases
    the step overhead; measured 0.1-0.3 ms of TTFT lateness moved it by +0.3-2 ms).

    Without per-request gaps: with the tail off (the first round) and measured ITLs, the decode
    side is the ITL p50 (the regular step: jitter is median-preserving and jumps touch a few
    per cent of the iterations, so the median ITL is the regular step time while TPOT carries
    the jumps' mean lambda J that the tail will add back in stage 2); else per-request TPOT and
    the TPOT p50."""
    ok_ttft = np.isfinite(prob.meas_ttft) & (prob.meas_ttft > 0)
    ok_tpot = np.isfinite(prob.meas_tpot) & (prob.meas_tpot > 0)
    w = np.sqrt(ok_ttft.sum())
    itl50 = prob.target(("itl_ms", 50.0))
    use_itl = not noise and np.isfinite(itl50) and itl50 > 0
    per_req = prob.meas_itl50 is not None
    p50 = (prob.target(("ttft_ms", 50.0)), itl50 if use_itl else prob.target(("tpot_ms", 50.0)))
    if per_req:
        ok_tpot = np.isfinite(prob.meas_itl50) & (prob.meas_itl50 > 0)
        meas_dec = prob.meas_itl50
    else:
        meas_dec = prob.meas_tpot
        if use_itl:
            ok_tpot = np.zeros_like(ok_tpot)

    def resid(u):
        sim = prob.simulate(_dec1(u, p0), noise, token_times=per_req)
        t = sim.result.table
        st = t["ttft_ms"].to_numpy().astype(float)
        sp = prob.sim_itl50(sim) if per_req else t["tpot_ms"].to_numpy().astype(float)
        a = np.log(np.where(ok_ttft & (st > 0), st, 1.0) / np.where(ok_ttft, prob.meas_ttft, 1.0))
        b = np.log(np.where(ok_tpot & (sp > 0), sp, 1.0) / np.where(ok_tpot, meas_dec, 1.0))
        dec = itl_quantiles_ms(sim.state, [50.0])[0] if use_itl else sim.result.summary["tpot_ms_p50"]
        c = [w * np.log(sim.result.summary["ttft_ms_p50"] / p50[0]), w * np.log(dec / p50[1])]
        out = np.concatenate([a[ok_ttft], b[ok_tpot], c])
        return np.nan_to_num(out, nan=5.0, posinf=5.0, neginf=-5.0)

    lo, hi = _box1(request_overhead)
    u0 = np.clip(_enc1(p0, request_overhead), lo + 1e-9, hi - 1e-9)
    if diff_step is None:
        # per-request gaps: steps of 0.2 % (the per-request medians are smooth in the parameters
        # of a one-user replay; on exact data of 80 requests from the spec sheet, 0.2 % steps
        # reach the hidden point in 31 evaluations, 2 % steps need the whole budget of 60 to
        # get within 1e-5 along the narrow valley between bandwidth efficiency and step overhead)
        diff_step = 2e-3 if per_req else (0.02 if use_itl else 1e-3)
    names = STAGE1 + ((REQUEST_OVERHEAD,) if request_overhead else ())
    fit = least_squares_fit(resid, names, lo, hi, u0, loss="soft_l1", f_scale=0.05,
                            diff_step=diff_step, x_scale=np.array([0.1, 0.1, 0.5, 0.5][:len(names)]),
                            max_nfev=max_nfev, max_halfwidth=_PIN1)
    return _dec1(fit.x, p0), fit


# ------------------------------------------------------------------------------ stage 2
def _enc2(p):
    return np.log([max(p["jitter_sigma"], BOUNDS["jitter_sigma"][0]),
                   max(p["jump_rate_per_s"], BOUNDS["jump_rate_per_s"][0]),
                   max(p["jump_mean_s"], BOUNDS["jump_mean_s"][0])])


def _dec2(u, p):
    return {**p, "jitter_sigma": float(np.exp(u[0])), "jump_rate_per_s": float(np.exp(u[1])),
            "jump_mean_s": float(np.exp(u[2]))}


#: Percentiles stage 2 fits: TTFT and TPOT p90/p99/p99.9; ITL p50 up to p99.9 (the ITL
#: percentiles between p95 and p99.9 locate the fraction of iterations that hold a jump); and the
#: TPOT p50, which carries the jumps' mean lambda*J (so the tail keeps the p50 where it is).
STAGE2_TARGETS = tuple([(m, q) for m in ("ttft_ms", "tpot_ms") for q in (90.0, 99.0, 99.9)]
                       + [("tpot_ms", 50.0)]
                       + [("itl_ms", q) for q in (50.0, 90.0, 95.0, 98.0, 99.0, 99.5, 99.9)])


def stage2_targets(prob: Problem) -> list:
    """The STAGE2_TARGETS the measurement has."""
    return [k for k in STAGE2_TARGETS if np.isfinite(prob.target(k)) and prob.target(k) > 0]


def moments_start(prob: Problem, p: dict, dist: str) -> dict:
    """Closed-form (method-of-moments) estimate of the tail from per-request data, the start of
    stage 2. With x_i the noiseless simulated TPOT of request i and n_i its output tokens:
      jitter: sigma = 1.4826 MAD(log(measured TTFT_i / noiseless TTFT_i))  (robust to jumps);
      TPOT_i = x_i e^{s^2/2} (1 + lambda J) on average  =>  lambda J = mean(TPOT_i / (x_i e^{s^2/2})) - 1;
      the jumps' share of request i's variance: Var(excess_i) = lambda x_i E[J^2] / (n_i - 1),
      E[J^2] = c J^2 (c = 1 fixed, 2 exponential, e^{s_J^2} lognormal)  =>  J = mean((n_i - 1)
      excess_i^2 / x_i) / (c lambda J), lambda = (lambda J) / J.
    Falls back to ``p``'s values where the data cannot tell (no jumps seen)."""
    quiet = prob.simulate(p, noise=False).result.table
    x_ttft = quiet["ttft_ms"].to_numpy().astype(float)
    x = quiet["tpot_ms"].to_numpy().astype(float) * 1e-3
    n = quiet["output_len"].to_numpy().astype(float)
    lr = np.log(prob.meas_ttft / x_ttft)
    lr = lr[np.isfinite(lr)]
    sigma = float(1.4826 * np.median(np.abs(lr - np.median(lr)))) if lr.size else p["jitter_sigma"]
    sigma = float(np.clip(sigma, BOUNDS["jitter_sigma"][0], 0.5))
    y = prob.meas_tpot * 1e-3
    ok = np.isfinite(y) & np.isfinite(x) & (x > 0) & (n > 1)
    if ok.sum() < 5:
        return {**p, "jitter_sigma": sigma}
    base = x[ok] * np.exp(sigma ** 2 / 2)
    lam_j = float(np.mean(y[ok] / base) - 1.0)
    c = {"fixed": 1.0, "exponential": 2.0}.get(dist, float(np.exp(prob.specs.calibration.noise.jump_sigma ** 2)))
    exc = y[ok] - base * (1.0 + max(lam_j, 0.0))
    jitter_var = x[ok] ** 2 * (np.exp(sigma ** 2) - 1) * np.exp(sigma ** 2) / (n[ok] - 1)
    m2 = float(np.mean(np.maximum((exc ** 2 - jitter_var) * (n[ok] - 1) / base, 0.0)))
    if lam_j <= 1e-4 or m2 <= 0:
        return {**p, "jitter_sigma": sigma}
    J = m2 / (c * lam_j)
    lo, hi = BOUNDS["jump_mean_s"], BOUNDS["jump_rate_per_s"]
    J = float(np.clip(J, *lo))
    return {**p, "jitter_sigma": sigma, "jump_mean_s": J,
            "jump_rate_per_s": float(np.clip(lam_j / J, *hi))}


def log_quantile_se(prob: Problem, key, floor: float = 0.01) -> float:
    """Standard error of the log of a measured percentile: sqrt(p (1 - p) / n) d(log x)/dp
    (asymptotic order statistic; the slope from the measurement's own percentiles at p +- d),
    combined with ``floor`` (a model-error floor, so no target is trusted beyond 1 %)."""
    metric, q = key
    m = prob.m
    if metric == "itl_ms":
        n = float(m.itl_ms.size) if m.itl_ms is not None else m.itl_count
    else:
        v = m.table[metric].drop_nulls().to_numpy()
        n = float(np.isfinite(v).sum())
    if n < 2:
        return 1.0
    d = min(0.25 * (100.0 - q), 2.0, 0.25 * q)
    lo, hi = m.quantile(metric, q - d), m.quantile(metric, q + d)
    slope = (np.log(hi) - np.log(lo)) / (2 * d / 100.0) if lo > 0 and hi > 0 else 0.0
    p = q / 100.0
    se = np.sqrt(p * (1 - p) / n) * slope
    return float(np.sqrt(2 * se ** 2 + floor ** 2))   # measured and simulated sample: 2 se^2


#: Stage-2 targets on loaded data without ITLs: the TPOT percentiles (a request's TPOT averages
#: its share of the jumps, so their spread sizes them) and TTFT p50/p90. The TTFT p99/p99.9 of a
#: loaded run are left out: they depend on which burst a stall hits, and re-simulating at the
#: hidden parameters with another noise seed moved a 400-request run's TTFT p99 by 47 %.
LOADED_STAGE2_TARGETS = (("tpot_ms", 50.0), ("tpot_ms", 90.0), ("tpot_ms", 99.0), ("tpot_ms", 99.9),
                         ("ttft_ms", 50.0), ("ttft_ms", 90.0))


def stage2(prob: Problem, p0: dict, max_nfev: int = 60, closed_form_start: bool = True,
           simplex_step: float = 0.15, loaded: bool = False) -> tuple[dict, object]:
    """Fit STAGE2 parameters holding the STAGE1 ones: start at the closed-form estimate
    (``moments_start``; else ``p0``), then least squares on the log ratios of the tail
    percentiles (``stage2_targets``), each divided by its standard error (``log_quantile_se``)
    so that a p99.9 of a few hundred requests weighs less than an ITL percentile of 50,000 gaps."""
    keys = stage2_targets(prob)
    floor = 0.01
    if loaded:   # see LOADED_STAGE2_TARGETS; a 3 % floor: seed-to-seed spread of a loaded run's p50s
        keys = [k for k in LOADED_STAGE2_TARGETS if np.isfinite(prob.target(k)) and prob.target(k) > 0]
        floor = 0.03
    meas = np.array([prob.target(k) for k in keys])
    weight = 1.0 / np.array([log_quantile_se(prob, k, floor) for k in keys])
    if closed_form_start:
        p0 = moments_start(prob, p0, prob.specs.calibration.noise.jump_dist)

    def resid(u):
        sim = prob.quantiles(prob.simulate(_dec2(u, p0)), keys)
        v = np.array([sim[k] for k in keys])
        return np.nan_to_num(weight * np.log(v / meas), nan=50.0, posinf=50.0, neginf=-50.0)

    lo = np.log([BOUNDS[k][0] for k in STAGE2])
    hi = np.log([BOUNDS[k][1] for k in STAGE2])
    u0 = np.clip(_enc2(p0), lo + 1e-9, hi - 1e-9)

    # Nelder-Mead: the percentiles of a finite sample move in small steps as the jump count
    # changes, which misleads finite-difference gradients; a simplex of +-15 % steps does not.
    # The ranges come from central differences of +-0.3 in log at the solution: a finite sample's
    # percentiles are a step function, so a small step measures the steps (steep, noisy slopes
    # and overconfident ranges), a wide one the trend.
    fit = least_squares_fit(resid, STAGE2, lo, hi, u0, method="nelder-mead", simplex_step=simplex_step,
                            xatol=0.01, fatol=1e-3, max_nfev=max_nfev, diff_step=0.3,
                            max_halfwidth=_PIN2)
    return _dec2(fit.x, p0), fit


# ------------------------------------------------------------------------------ both
@dataclass
class FitResult:
    """Fitted parameters, the start, error tables and the diagnosis (see ``calibrate``)."""

    params: dict
    start: dict
    errors_before: dict
    errors_after: dict
    errors_after_stage1: dict
    diagnosis: list
    history: list = field(default_factory=list)
    simulations: int = 0
    #: {parameter: (fitted, low, high, identifiable)}: the 95 % range of each parameter from the
    #: last stage that fitted it (``engine.calibration.solve``: Jacobian at the solution);
    #: identifiable False means the data cannot pin it (range too wide or a flat direction).
    ranges: dict = field(default_factory=dict)


def diagnose(prob: Problem, fitted: dict, start: dict, errors_after: dict) -> list:
    """Which symptom each parameter explains, from the fit: for each parameter, the error of
    every target when that parameter alone goes back to its start value (the others fitted)."""
    rows = []
    for k in PARAMS + ((REQUEST_OVERHEAD,) if REQUEST_OVERHEAD in fitted else ()):
        if np.isclose(fitted[k], start[k]):
            continue
        e = prob.errors(prob.simulate({**fitted, k: start[k]}))
        moved = sorted(e, key=lambda t: -abs(e[t] - errors_after.get(t, 0.0)))[:2]
        rows.append({"parameter": k, "symptom": SYMPTOMS[k], "start": start[k], "fitted": fitted[k],
                     "explains": ", ".join(f"{m.split('_')[0]} p{q:g}: {e[(m, q)]:+.1%} -> "
                                           f"{errors_after.get((m, q), float('nan')):+.1%}"
                                           for m, q in moved)})
    # queueing/scheduler: what the noiseless DES (length mix + queueing, no noise) gives of the
    # measured p99 - p50 TTFT gap, and the simulated queueing p99
    sim = prob.simulate(fitted, noise=False)
    quiet = prob.quantiles(sim)
    gap = prob.targets[("ttft_ms", 99.0)] - prob.targets[("ttft_ms", 50.0)]
    share = (quiet[("ttft_ms", 99.0)] - quiet[("ttft_ms", 50.0)]) / gap if gap > 0 else float("nan")
    qp99 = sim.result.summary.get("queueing_ms_p99", float("nan"))
    rows.append({"parameter": "(scheduler: no parameter)", "symptom":
                 "p99 worsening with concurrency -> queueing/scheduler", "start": float("nan"),
                 "fitted": float("nan"),
                 "explains": f"noiseless DES gives {share:.0%} of the measured p99 - p50 TTFT gap "
                             f"(length mix + queueing; queueing p99 {qp99:.1f} ms)"})
    return rows


def shares_batches(prob: Problem, threshold: float = 0.05) -> bool:
    """Whether the measured requests ran side by side: a closed loop of more than one user, or
    (open loop) more than ``threshold`` of the requests arriving before an earlier one ended
    (end = arrival + TTFT + TPOT (output - 1) as measured).

    Such requests share batches, and the per-request residuals of ``stage1`` then move in steps
    as a parameter change reorders the batches (a 0.1 % change of an efficiency moved single
    requests by several per cent): on exact Poisson data at 8 req/s with ITLs they stopped at
    0.89 / 0.95 / 1.4 ms for 0.5 / 0.6 / 2 ms and reported +-0.02 %. ``calibrate`` fits such data
    with the binned medians (``stage1_medians``) instead, ITLs or not."""
    st = prob.stream
    if st.users:
        return st.users > 1
    n = len(st)
    if n < 2:
        return False
    a = np.asarray(st.arrival_s, float)
    tpot = np.nan_to_num(prob.meas_tpot, nan=0.0)
    end = a + (np.nan_to_num(prob.meas_ttft, nan=0.0) + tpot * np.maximum(st.output - 1, 0)) * 1e-3
    overlap = a[1:] < np.maximum.accumulate(end)[:-1]
    return bool(overlap.mean() > threshold)


def calibrate(specs: Specs, des, m: Measurement, start: dict | None = None, rounds: int = 2,
              max_nfev: int = 60, request_overhead: str | bool = "auto",
              on_simulation=None) -> FitResult:
    """Two-stage fit of ``PARAMS`` to measurement ``m`` on the deployment (specs, des), starting
    from ``start`` (default: the parameters in ``specs``).

    ``request_overhead``: also fit the per-request overhead (``REQUEST_OVERHEAD``, a fourth
    stage-1 parameter) - True, False, or "auto": when the measurement has each request's ITLs
    (``stage1``: the decode steps then pin the step overhead, and the constant left in TTFT is
    the per-request one). Not fitted, it stays at the deployment's value and is not reported.
    ``on_simulation(n)``, if given, is called before the n-th DES run (a progress bar)."""
    prob = Problem(specs, des, m)
    prob.on_simulation = on_simulation
    p0 = dict(start or params_of(specs))
    itl50 = prob.target(("itl_ms", 50.0))
    medians = not (np.isfinite(itl50) and itl50 > 0) or shares_batches(prob)
    if request_overhead == "auto":
        request_overhead = prob.meas_itl50 is not None and not medians
    elif request_overhead not in (True, False):
        raise SpecError("request_overhead", request_overhead, "auto, True or False")
    if request_overhead and medians:
        raise SpecError("request_overhead", request_overhead, "False on data without ITLs or "
                        "of requests sharing batches (the binned-median fit cannot tell it from "
                        "the step overhead)")
    if request_overhead:
        p0.setdefault(REQUEST_OVERHEAD, specs.calibration.per_request_overhead_s)
    before = prob.errors(prob.simulate(p0))
    p = dict(p0)
    history, after1 = [], None
    for r in range(rounds):
        if medians:   # no ITL column: binned p50s (stage1_medians), tail held at zero in round 0
            p, s1 = stage1_medians(prob, p, noise=r > 0, max_nfev=max(max_nfev, 80))
        else:
            p, s1 = stage1(prob, p, noise=r > 0, max_nfev=max_nfev,
                           request_overhead=bool(request_overhead))
        e1 = prob.errors(prob.simulate(p, noise=r > 0))
        after1 = after1 or prob.errors(prob.simulate(p, noise=False))
        history.append({"round": r, "stage": 1, **p, "cost": float(s1.cost)})
        # the closed-form start reads jitter off per-request TTFT ratios: under load those carry the
        # batching noise of a different schedule, not jitter, so loaded data start from p
        # (and without the closed form's good start the simplex must be wide: factor 2 steps)
        p, s2 = stage2(prob, p, max_nfev=max(max_nfev, 100) if medians else max_nfev,
                       closed_form_start=not medians, simplex_step=0.7 if medians else 0.15,
                       loaded=medians)
        history.append({"round": r, "stage": 2, **p, "cost": float(s2.cost),
                        "p50_after_stage1": {k: v for k, v in e1.items() if k[1] == 50.0}})
    after = prob.errors(prob.simulate(p))
    diag = diagnose(prob, p, p0, after)
    if medians:
        ranges = valley_check(prob, p, joint_ranges(prob, p), history, max_nfev=max_nfev)
    else:
        ranges = {**s1.ranges(_decode), **s2.ranges(_decode)}
    return FitResult(params=p, start=p0, errors_before=before, errors_after=after,
                     errors_after_stage1=after1, diagnosis=diag, history=history,
                     simulations=prob.calls, ranges=ranges)


def valley_check(prob: Problem, p: dict, ranges: dict, history: list, max_nfev: int = 80) -> dict:
    """Widen the binned-median fit's ranges to every restart that fits as well (tail held at
    ``p``'s). The decode step is step overhead + bytes / (bandwidth x efficiency), so bandwidth
    efficiency and step overhead trade along a valley; with requests sharing batches the binned
    p50s carry about 0.5 % of batching noise, and on exact Poisson data (8 req/s, 0.5 / 0.6 /
    2 ms) the simplex stopped at 0.50 / 0.56 / 1.5 ms (cost 2e-4; 0 at the hidden point) with
    ranges that excluded the hidden point. Restarts: the efficiency x 1.25 with the overhead
    raised by 0.2 d, and / 1.25 with it lowered by 0.25 d (d: measured TPOT p50 - overhead, the
    byte time, which keeps the step time); a restart counts when its cost is within the 95 %
    profile-likelihood bound of the fit's own, cost <= cost_fit (1 + 3.84 / (m - 3)) (m binned
    residuals; the residual variance estimated from the fit, as ``solve.confidence`` does). The
    ranges of the three stage-1 parameters then reach its values, and a parameter is pinned only
    while the widened half-range stays within the pinning limits (``_PIN1``). On the calibration
    round trips at 50 % and 80 % load (no ITLs) a restart at bandwidth efficiency 0.41 fitted
    better than the fit at 0.49 (hidden 0.5), so that efficiency is not pinned there. Two extra
    stage-1 fits; each is noted in ``history``."""
    binned = _binned_medians(prob)
    r0 = binned(prob.simulate(p).result.table)
    base = 0.5 * float(np.sum(r0 ** 2))
    bound = base * (1.0 + 3.84 / max(r0.size - 3, 1))
    d = max(prob.target(("tpot_ms", 50.0)) * 1e-3 - p["step_overhead_s"], 0.0)
    e, ovh = p["memory_bandwidth_efficiency"], p["step_overhead_s"]
    out = dict(ranges)
    for f, dov in ((1.25, 0.2 * d), (1 / 1.25, -0.25 * d)):
        start = {**p, "memory_bandwidth_efficiency": float(min(e * f, 1.0)),
                 "step_overhead_s": float(max(ovh + dov, 0.0))}
        q, fit = stage1_medians(prob, start, noise=True, max_nfev=max_nfev)
        history.append({"round": "valley check", "stage": 1, **q, "cost": float(fit.cost)})
        if fit.cost > bound:
            continue
        for k in STAGE1:
            v, lo, hi, _ = out[k]
            out[k] = (v, min(lo, q[k]), max(hi, q[k]), True)
    u = _enc1(p)
    pin = _PIN1(u)
    for i, k in enumerate(STAGE1):
        v, lo, hi, ok = out[k]
        half = (np.log(hi) - np.log(lo)) / 2 if i < 2 else (hi - lo) / 2 * 1e3
        out[k] = (v, lo, hi, bool(ok and ranges[k][3] and half <= pin[i]))
    return out


def _decode(name: str, u: float) -> float:
    """A stage's coordinate back to the parameter: the overheads are in ms, the rest in log."""
    return float(u) * 1e-3 if name in ("step_overhead_s", REQUEST_OVERHEAD) else float(np.exp(u))


__all__ = ["calibrate", "stage1", "stage2", "Problem", "FitResult", "with_params", "params_of",
           "PARAMS", "STAGE1", "STAGE2", "TARGETS", "SYMPTOMS", "REQUEST_OVERHEAD"]
