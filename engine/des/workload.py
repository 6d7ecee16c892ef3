"""Request stream: arrival times, prompt/output lengths, priority classes and prefix hashes.

Everything is drawn from ``WorkloadSpec.seed`` with independent sub-streams (lengths, arrivals,
priorities), so changing the arrival process does not change the lengths. Arrays, not objects:
one numpy array per attribute, indexed by request id.
"""

from dataclasses import dataclass

import numpy as np

from engine.des.trace import Trace, load_trace
from engine.errors import SpecError
from engine.spec.workload import LengthDist, WorkloadSpec


@dataclass
class RequestStream:
    """The requests of one simulation.

    arrival_s: float64 seconds; NaN for closed-loop requests whose time is set when the user's
    previous request completes. users > 0 marks a closed loop of that many users.
    hashes: per request, the prefix block hashes (``block_tokens`` prompt tokens each) or None.
    """

    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    priority: np.ndarray
    hashes: list | None = None
    block_tokens: int = 512
    users: int = 0
    think_time_s: float = 0.0
    source: str = "synthetic"
    #: multi-turn sessions (engine.des.sessions): next turn's request id (-1: last), think time
    #: before each turn [s], session id; None without sessions
    next_turn: np.ndarray | None = None
    think_s: np.ndarray | None = None
    session: np.ndarray | None = None
    #: request classes (DesSpec.classes; engine.des.sessions.apply_classes): class index per
    #: request; None = one class
    klass: np.ndarray | None = None
    #: a trace's other numeric columns per request (engine.des.trace.Trace.columns) or None
    columns: dict | None = None

    def __len__(self) -> int:
        return len(self.prompt)


def sample_lengths(dist: LengthDist, mean: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` integer lengths from ``dist`` located at ``mean`` (see LengthDist), clipped to [low, high]."""
    hi = dist.high if dist.high else np.iinfo(np.int64).max
    if dist.kind == "fixed":
        x = np.full(n, mean, dtype=np.float64)
    elif dist.kind == "uniform":
        top = dist.high if dist.high else max(2 * mean - dist.low, dist.low)
        x = rng.integers(dist.low, top, size=n, endpoint=True).astype(np.float64)
    elif dist.kind == "lognormal":
        mu = np.log(mean) - dist.sigma ** 2 / 2.0
        x = np.rint(rng.lognormal(mu, dist.sigma, size=n))
    elif dist.kind == "zipf":
        ranks = np.arange(1, dist.high - dist.low + 2, dtype=np.float64)
        p = ranks ** -dist.zipf_a
        x = dist.low - 1 + rng.choice(ranks, size=n, p=p / p.sum())
    else:  # empirical
        x = rng.choice(np.asarray(dist.values, dtype=np.float64), size=n)
    return np.clip(x, dist.low, hi).astype(np.int64)


def arrivals(kind: str, n: int, rate: float = 0.0, cv: float = 1.0, users: int = 0,
             rng: np.random.Generator | int = 0) -> np.ndarray:
    """Arrival times [s] of ``n`` requests: the one arrivals generator of the project (the
    WorkloadSpec streams, measurement replays and ``simllm-validate``'s dataset rows all call it,
    so a process means the same draws everywhere).

    kind ``batch``: all at 0. ``closed_loop``: the first ``min(users, n)`` at 0, the rest NaN (the
    DES sets each when that user's previous request completes). ``poisson``: exponential gaps of
    mean 1/rate. ``gamma``: gamma gaps of shape 1/cv^2 and scale 1/(rate shape), so the mean gap is
    1/rate and the gaps' coefficient of variation is cv (cv > 1 is burstier than Poisson).
    ``weibull`` (engine.des.arrival_dist): Weibull gaps of shape k with cv^2 = G(1 + 2/k) /
    G(1 + 1/k)^2 - 1 (``weibull_shape``) and scale 1/(rate G(1 + 1/k)): mean 1/rate. Open-loop
    streams start at 0 (the first gap is dropped). ``rng``: a Generator (consumed: n draws) or an
    integer seed for ``np.random.default_rng``.
    """
    if kind == "batch":
        return np.zeros(n)
    if kind == "closed_loop":
        arr = np.full(n, np.nan)
        arr[:min(users, n)] = 0.0
        return arr
    if kind not in ("poisson", "gamma", "weibull"):
        raise SpecError("workload.arrival", kind, "batch, closed_loop, poisson or gamma")
    if not rate > 0:
        raise SpecError("workload.rate_rps", rate, f"a positive rate for {kind} arrivals")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if kind == "poisson":
        gaps = rng.exponential(1.0 / rate, size=n)
    elif kind == "weibull":
        k = weibull_shape(cv)
        from scipy.special import gamma as G
        gaps = rng.weibull(k, size=n) / (rate * G(1.0 + 1.0 / k))
    else:
        shape = 1.0 / cv ** 2
        gaps = rng.gamma(shape, 1.0 / (rate * shape), size=n)
    if n:
        gaps[0] = 0.0
    return np.cumsum(gaps)


def weibull_shape(cv: float) -> float:
    """Weibull shape k whose gaps have coefficient of variation ``cv``: the root of
    G(1 + 2/k) / G(1 + 1/k)^2 - 1 = cv^2 (k = 1 at cv = 1: exponential), by Brent's method on
    log k in [log 0.05, log 50] (cv from about 0.03 to 1e4)."""
    from scipy.optimize import brentq
    from scipy.special import gammaln

    def f(lk):
        k = np.exp(lk)
        return np.exp(gammaln(1 + 2 / k) - 2 * gammaln(1 + 1 / k)) - 1 - cv * cv
    return float(np.exp(brentq(f, np.log(0.05), np.log(50.0), xtol=1e-12)))


def synthetic_arrivals(spec: WorkloadSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    """Open-loop arrival times [s] of a WorkloadSpec (batch, poisson or gamma): ``arrivals``."""
    return arrivals(spec.arrival, n, spec.rate_rps, spec.arrival_cv, rng=rng)


def _tile(trace: Trace, n: int):
    """The trace's rows repeated to ``n`` requests; each repeat starts one mean gap after the
    previous one ends, and its prefix hashes are shifted so repeats do not share cache blocks."""
    rows = len(trace)
    idx = np.arange(n) % rows
    cycle = np.arange(n) // rows
    prompt, output = trace.prompt[idx], trace.output[idx]
    arrival = None
    if trace.arrival_s is not None:
        span = float(trace.arrival_s[-1])
        gap = span / (rows - 1) if rows > 1 and span > 0 else 1.0
        arrival = trace.arrival_s[idx] + cycle * (span + gap)
    hashes = None
    if trace.hashes is not None:
        top = 1 + max((int(h.max()) for h in trace.hashes if len(h)), default=0)
        hashes = [trace.hashes[i] + c * top if c else trace.hashes[i] for i, c in zip(idx, cycle)]
    return arrival, prompt, output, hashes


def _tile_columns(trace: Trace, n: int):
    """The trace's extra columns repeated as ``_tile`` repeats its rows."""
    if not trace.columns:
        return None
    idx = np.arange(n) % len(trace)
    return {c: v[idx] for c, v in trace.columns.items()}


def build_stream(spec: WorkloadSpec) -> RequestStream:
    """The request stream a WorkloadSpec describes (trace rows or synthetic draws), seeded."""
    ss = np.random.SeedSequence(spec.seed)
    r_len, r_arr, r_pri = (np.random.default_rng(s) for s in ss.spawn(3))
    trace = load_trace(spec.trace) if spec.trace.path else None
    if spec.num_requests:
        n = spec.num_requests
    elif trace is not None:
        n = len(trace)
    elif spec.arrival == "closed_loop":
        n = spec.concurrency * max(spec.batch_size, 1)
    else:
        n = spec.batch_size
    hashes, t_arr = None, None
    if trace is not None:
        t_arr, prompt, output, hashes = _tile(trace, n)
    else:
        prompt = sample_lengths(spec.prompt_dist, spec.prompt_len, n, r_len)
        output = sample_lengths(spec.output_dist, spec.output_len, n, r_len)
    users = 0
    if spec.arrival == "trace":
        if t_arr is None:
            raise SpecError("workload.arrival", "trace", f"a synthetic process (poisson, gamma, "
                            f"closed_loop, batch): {spec.trace.path} has no arrival times")
        arrival = t_arr
        if spec.rate_rps > 0 and n > 1 and arrival[-1] > 0:
            arrival = arrival * ((n - 1) / arrival[-1]) / spec.rate_rps
    elif spec.arrival == "closed_loop":
        users = spec.concurrency
        arrival = arrivals("closed_loop", n, users=users)
    else:
        arrival = synthetic_arrivals(spec, n, r_arr)
    priority = (r_pri.random(n) >= spec.priority_fraction).astype(np.int8)
    return RequestStream(arrival_s=np.asarray(arrival, dtype=np.float64), prompt=prompt, output=output,
                         priority=priority, hashes=hashes, block_tokens=spec.trace.block_tokens,
                         users=users, think_time_s=spec.think_time_s,
                         source=trace.path if trace is not None else "synthetic",
                         columns=_tile_columns(trace, n) if trace is not None else None)


def ramp_arrivals(arrival_s: np.ndarray, ramp_s: float) -> np.ndarray:
    """Open-loop arrivals under a linear ramp of the rate from 0 to R over ``ramp_s`` seconds.

    With rate r(t) = R t / W for t < W and R after, the expected arrivals by t are
    Lambda(t) = R t^2 / (2 W) (t < W), R (t - W / 2) (t >= W). A stream drawn at the constant
    rate R has Lambda_R(a) = R a, so the time change a -> Lambda^-1(R a) gives the ramped stream:
    t = sqrt(2 W a) for a < W / 2, t = a + W / 2 otherwise (continuous at a = W / 2, t = W).
    Times are measured from the first arrival (vLLM ``benchmark_serving --ramp-up-strategy
    linear`` ramps the request rate the same way).
    """
    a = np.asarray(arrival_s, dtype=np.float64)
    if ramp_s <= 0 or not a.size:
        return a
    t0 = a[0]
    x = a - t0
    return t0 + np.where(x < ramp_s / 2, np.sqrt(2.0 * ramp_s * np.maximum(x, 0.0)), x + ramp_s / 2)


def apply_clients(st, des, users: int) -> np.random.Generator:
    """Client behaviour of ``des`` (DesSpec: ramp_up_s, length_jitter) applied to the state's
    request arrays before the loop runs (copies; the caller's stream is untouched). Returns the
    generator the loop draws exponential think times from. Seeded from ``des.seed``
    (sub-streams 1: lengths, 2: think times), so turning a client option on does not move the
    request stream (workload.seed)."""
    ss = np.random.SeedSequence([des.seed, 12])
    r_len, r_think = (np.random.default_rng(s) for s in ss.spawn(2))
    j = des.length_jitter
    if j > 0:
        n = st.n
        f = r_len.uniform(1.0 - j, 1.0 + j, size=(2, n))
        st.prompt = np.maximum(1, np.rint(st.prompt * f[0])).astype(np.int64)
        st.output = np.maximum(1, np.rint(st.output * f[1])).astype(np.int64)
    if des.ramp_up_s > 0 and not users:
        order = np.argsort(st.arrival, kind="stable")
        arr = st.arrival.copy()
        arr[order] = ramp_arrivals(st.arrival[order], des.ramp_up_s)
        st.arrival = arr
    return r_think
