"""Workload transforms of the cluster features: traffic shapes, multi-turn sessions, reasoning
outputs (``DesSpec`` traffic_*, session_*, reasoning_*; all off by default).

Inter-arrival law (arrival_dist, arrival_cv): the open-loop gaps are drawn again (Poisson, gamma,
Weibull) at the stream's mean rate (``redraw_gaps``), before the traffic shape warps them.

Each takes a RequestStream and returns a new one (the caller's is untouched), drawing from
``des.seed`` sub-streams (so switching one on does not move the workload's own draws).

Traffic shape (time warp). A stationary open-loop stream of mean rate R has expected arrivals
Lambda_R(a) = R a by time a. With a relative rate profile f(t) (mean 1 over a diurnal period) the
wanted process has Lambda(t) = R int_0^t f; the time change a -> Lambda^-1(R a) maps each arrival
of the stationary stream onto the shaped one (the same construction as ``ramp_arrivals``). Lambda
is integrated numerically (trapezoid on a grid of at least 200,000 points, the profile's break
points on the grid) and inverted by linear interpolation. Profiles, with r = traffic_peak_ratio,
t0 = traffic_start_s, L = traffic_len_s:
    diurnal  f = 1 + A sin(2 pi (t - t0) / period - pi / 2), A = (r - 1) / (r + 1), so the
             trough (t = t0) is (1 - A) and the peak (half a period later) (1 + A): ratio r
    spike    f = r inside [t0, t0 + L), 1 outside
    ramp     f = 1 / r before t0, rising linearly to 1 over [t0, t0 + L), 1 after
    drain    f = 1 before t0, falling linearly to 0 over [t0, t0 + L), 0 after: arrivals the
             shaped process never reaches (R a > Lambda(inf)) are dropped from the stream

Request classes (``classes``, engine.spec.des.RequestClass). Each request of the one stream (its
arrivals from engine.des.workload.arrivals, or the trace's) gets a class: first the classes with a
filter take the requests whose lengths (or a trace's other numeric columns) match it (in declared order), then the rest are split by
share (independent draws, P(class) = share / sum of the share classes' shares). Marking a Poisson
stream of rate R independently this way gives each class a Poisson stream of rate share x R (the
thinning theorem), so the classes need no arrival process of their own. A class with prompt_len
(output_len) > 0 draws its members' lengths from its own LengthDist located there
(engine.des.workload.sample_lengths); its priority becomes the request's priority. Applied before
reasoning outputs, the traffic shape and sessions (a session turn keeps the class of the request it
was made from).

Multi-turn sessions. The stream's requests, in arrival order, are cut into sessions of K turns
(K geometric with mean ``session_turns``, >= 1). A session starts at its first request's arrival;
turn j + 1 is sent an exponential think time (mean ``session_think_s``) after turn j completes
(the event loop sends it: ``RequestStream.next_turn`` / ``think_s``; its arrival is NaN until
then). The request's own prompt is the new user message u_j; the turn's prompt is the session so
far: S (``session_system_tokens``, shared by all sessions) + sum_{i<j} (u_i + o_i) + u_j. Prefix
hash blocks (``block_tokens`` each) cover the turn's full blocks: blocks entirely inside the
system prompt carry shared ids, the rest ids unique to the session, so turn j + 1 hits the cached
blocks of turn j's prompt (the DES caches prompt blocks at prefill; the answer's tokens are
prefilled again in the next turn, as a prefix cache that does not keep decode blocks would).
"""

from dataclasses import replace

import numpy as np

from engine.des.workload.stream import RequestStream

#: hash-id offset between sessions (ids of session s: (s + 1) x this + block)
_SESSION_STRIDE = 1 << 24
_GRID = 200_000


def rate_profile(des, t: np.ndarray) -> np.ndarray:
    """Relative arrival rate f(t) of ``des.cluster.traffic_shape`` (see the module docstring)."""
    r, t0, L = des.cluster.traffic_peak_ratio, des.cluster.traffic_start_s, des.cluster.traffic_len_s
    shape = des.cluster.traffic_shape
    if shape == "diurnal":
        A = (r - 1.0) / (r + 1.0)
        return 1.0 + A * np.sin(2.0 * np.pi * (t - t0) / des.cluster.traffic_period_s - np.pi / 2.0)
    if shape == "spike":
        return np.where((t >= t0) & (t < t0 + L), r, 1.0)
    if shape == "ramp":
        x = np.clip((t - t0) / L, 0.0, 1.0)
        return 1.0 / r + (1.0 - 1.0 / r) * x
    if shape == "drain":
        return 1.0 - np.clip((t - t0) / L, 0.0, 1.0)
    return np.ones_like(t)


def shape_arrivals(arrival_s: np.ndarray, des) -> np.ndarray:
    """Open-loop arrivals time-warped to the rate profile: t = Lambda^-1(R a), R = the stream's
    mean rate (n - 1) / span. NaN for arrivals a drain never reaches. Times from the first arrival."""
    a = np.asarray(arrival_s, dtype=np.float64)
    if des.cluster.traffic_shape == "none" or a.size < 2:
        return a
    t_first = float(np.nanmin(a))
    x = a - t_first
    span = float(np.nanmax(x))
    if span <= 0:
        return a
    # horizon: f >= f_min on the stream's reach, so t <= span / f_min; drains stop at t0 + L
    r, t0, L = des.cluster.traffic_peak_ratio, des.cluster.traffic_start_s, des.cluster.traffic_len_s
    if des.cluster.traffic_shape == "drain":
        horizon = t0 + L
    else:
        f_min = {"diurnal": 1.0 - (r - 1.0) / (r + 1.0), "ramp": 1.0 / r}.get(des.cluster.traffic_shape, 1.0)
        horizon = span / f_min + des.cluster.traffic_period_s / 100.0
    breaks = [b for b in (t0, t0 + L) if 0.0 < b < horizon]
    grid = np.unique(np.concatenate([np.linspace(0.0, horizon, _GRID), breaks]))
    f = rate_profile(des, grid)
    # Lambda(t) / R = cum(t); the stationary stream reached a at R a expected arrivals: cum(t) = a
    cum = np.concatenate([[0.0], np.cumsum(0.5 * (f[1:] + f[:-1]) * np.diff(grid))])
    out = np.interp(x, cum, grid, right=np.nan)
    if des.cluster.traffic_shape != "drain":
        beyond = x > cum[-1]
        out[beyond] = grid[-1] + (x[beyond] - cum[-1])   # f = 1 beyond the horizon (not reached)
    return out + t_first


def redraw_gaps(arrival_s: np.ndarray, des, rng: np.random.Generator) -> np.ndarray:
    """The open-loop arrivals with their gaps drawn again from ``des.clients.arrival_dist`` at the same
    mean rate (n - 1) / span and coefficient of variation ``des.clients.arrival_cv`` (the project's one
    arrivals generator, engine.des.workload.arrivals), in the original order of the requests."""
    from engine.des.workload.arrivals import arrivals

    a = np.asarray(arrival_s, dtype=np.float64)
    order = np.argsort(a, kind="stable")
    span = float(a[order[-1]] - a[order[0]])
    rate = (len(a) - 1) / span if span > 0 else 1.0
    out = np.empty_like(a)
    out[order] = a[order[0]] + arrivals(des.clients.arrival_dist, len(a), rate, des.clients.arrival_cv, rng=rng)
    return out


def apply_reasoning(stream: RequestStream, des, rng: np.random.Generator) -> RequestStream:
    """``reasoning_fraction`` of the requests get outputs x ``reasoning_output_scale``."""
    if not des.clients.reasoning_fraction or des.clients.reasoning_output_scale == 1:
        return stream
    pick = rng.random(len(stream)) < des.clients.reasoning_fraction
    out = stream.output.copy()
    out[pick] = np.rint(out[pick] * des.clients.reasoning_output_scale).astype(np.int64)
    return replace(stream, output=out)


def sessionize(stream: RequestStream, des, rng: np.random.Generator) -> RequestStream:
    """Cut the stream into multi-turn sessions (module docstring). Sets ``next_turn`` (request id
    of the session's next turn, -1 at the last), ``think_s`` (think time before this turn) and
    ``session`` (session id); follow-up turns' arrivals are NaN until the loop sends them."""
    n = len(stream)
    if not des.clients.session_turns or n == 0:
        return stream
    order = np.argsort(stream.arrival_s, kind="stable")
    # geometric turns per session with mean session_turns (support 1, 2, ...)
    p = 1.0 / des.clients.session_turns
    k = rng.geometric(p, size=n)
    starts = np.concatenate([[0], np.cumsum(k)])
    starts = starts[starts < n]
    sess_of_pos = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
    turn_of_pos = np.arange(n) - starts[sess_of_pos]
    u = stream.prompt[order].astype(np.int64)
    o = stream.output[order].astype(np.int64)
    S = int(des.clients.session_system_tokens)
    # history before each turn: S + sum over earlier turns of the session (u + o)
    uo = u + o
    csum = np.cumsum(uo) - uo          # exclusive cumulative sum over the whole order
    hist = csum - csum[starts[sess_of_pos]] + S
    prompt_pos = hist + u
    bt = stream.block_tokens
    n_shared = S // bt
    hashes_pos = []
    for i in range(n):
        nb = int(prompt_pos[i]) // bt
        base = (int(sess_of_pos[i]) + 1) * _SESSION_STRIDE
        h = np.arange(nb, dtype=np.int64)
        h[n_shared:] += base
        hashes_pos.append(h)
    # back to request ids: request order[i] is position i
    prompt = np.empty(n, np.int64)
    prompt[order] = prompt_pos
    hashes = [None] * n
    for i in range(n):
        hashes[order[i]] = hashes_pos[i]
    next_turn = np.full(n, -1, np.int64)
    last_of_sess = np.append(starts[1:], n) - 1
    is_last = np.zeros(n, bool)
    is_last[last_of_sess] = True
    nxt_pos = np.flatnonzero(~is_last)
    next_turn[order[nxt_pos]] = order[nxt_pos + 1]
    think = np.zeros(n)
    follow = turn_of_pos > 0
    if des.clients.session_think_s > 0:
        think[order[follow]] = rng.exponential(des.clients.session_think_s, size=int(follow.sum()))
    arrival = stream.arrival_s.copy()
    arrival[order[follow]] = np.nan
    session = np.empty(n, np.int64)
    session[order] = sess_of_pos
    return replace(stream, arrival_s=arrival, prompt=prompt, hashes=hashes, next_turn=next_turn,
                   think_s=think, session=session, source=f"{stream.source} as sessions")


def _matches(c, stream: RequestStream) -> np.ndarray:
    """Requests that satisfy class ``c``'s filter (every term): prompt_len, output_len or one of
    the trace's other numeric columns (``RequestStream.columns``)."""
    import operator as op

    from engine.errors import SpecError
    ops = {"<": op.lt, "<=": op.le, ">": op.gt, ">=": op.ge, "==": op.eq, "!=": op.ne}
    cols = {"prompt_len": stream.prompt, "output_len": stream.output, **(stream.columns or {})}
    m = np.ones(len(stream), bool)
    for col, o, v in c.terms():
        if col not in cols:
            raise SpecError("engine.des.clients.classes.filter", c.filter,
                            f"columns among {sorted(cols)} (the stream has no {col!r})")
        m &= ops[o](cols[col], v)
    return m


def apply_classes(stream: RequestStream, des) -> RequestStream:
    """Request classes of ``des.clients.classes`` (module docstring): sets ``klass``, ``priority`` and
    the lengths of classes with their own distributions. Identity without classes."""
    from engine.des.workload.lengths import sample_lengths
    from engine.errors import SpecError

    classes = des.clients.classes
    n = len(stream)
    if not classes or not n:
        return stream
    if len(np.unique(stream.priority)) > 1:
        raise SpecError("workload.priority_fraction", "> 0",
                        "0 when engine.des.clients.classes declares the classes (their priority field)")
    r_pick, r_len = (np.random.default_rng(s) for s in np.random.SeedSequence([des.seed, 23]).spawn(2))
    klass = np.full(n, -1, np.int16)
    for i, c in enumerate(classes):
        if c.filter:
            klass[(klass < 0) & _matches(c, stream)] = i
    share_ids = [i for i, c in enumerate(classes) if not c.filter]
    rest = np.flatnonzero(klass < 0)
    if rest.size:
        if not share_ids:
            raise SpecError("engine.des.clients.classes", [c.filter for c in classes],
                            f"filters covering every request ({rest.size} of {n} match none; "
                            "add a class with a share to take the rest)")
        p = np.array([classes[i].share for i in share_ids], dtype=np.float64)
        klass[rest] = np.asarray(share_ids, np.int16)[rng_choice(r_pick, len(share_ids), rest.size, p / p.sum())]
    prompt, output = stream.prompt, stream.output
    priority = np.zeros(n, np.int8)
    for i, c in enumerate(classes):
        m = klass == i
        priority[m] = c.priority
        k = int(m.sum())
        if c.prompt_len and k:
            prompt = prompt.copy() if prompt is stream.prompt else prompt
            prompt[m] = sample_lengths(c.prompt_dist, c.prompt_len, k, r_len)
        if c.output_len and k:
            output = output.copy() if output is stream.output else output
            output[m] = sample_lengths(c.output_dist, c.output_len, k, r_len)
    hashes = stream.hashes
    if hashes is not None and prompt is not stream.prompt:
        bt = stream.block_tokens      # a redrawn prompt keeps only the blocks it still covers
        hashes = [h[:int(p) // bt] if h is not None else None for h, p in zip(hashes, prompt)]
    return replace(stream, prompt=prompt, output=output, priority=priority, klass=klass, hashes=hashes)


def rng_choice(rng: np.random.Generator, k: int, size: int, p: np.ndarray) -> np.ndarray:
    """``size`` indices in [0, k) with probabilities ``p`` (one uniform each, inverse CDF)."""
    return np.minimum(np.searchsorted(np.cumsum(p), rng.random(size), side="right"), k - 1)


def transform(stream: RequestStream, des) -> RequestStream:
    """All workload transforms of ``des`` in order: reasoning outputs, traffic shape (on the
    session starts, i.e. the open-loop arrivals), sessions. Identity when all are off."""
    if des.clients.classes:
        stream = apply_classes(stream, des)
    if not (des.clients.reasoning_fraction or des.cluster.traffic_shape != "none" or des.clients.session_turns
            or des.clients.arrival_dist != "none"):
        return stream
    if stream.users and (des.clients.session_turns or des.cluster.traffic_shape != "none"):
        from engine.errors import SpecError
        key = "engine.des.clients.session_turns" if des.clients.session_turns else "engine.des.cluster.traffic_shape"
        raise SpecError(key, des.clients.session_turns or des.cluster.traffic_shape,
                        "an open-loop workload (sessions and traffic shapes warp arrival times; "
                        "workload.arrival=closed_loop has none)")
    r_reason, r_sess, r_gap = (np.random.default_rng(s)
                               for s in np.random.SeedSequence([des.seed, 17]).spawn(3))
    stream = apply_reasoning(stream, des, r_reason)
    if des.clients.arrival_dist != "none" and len(stream) > 1:
        stream = replace(stream, arrival_s=redraw_gaps(stream.arrival_s, des, r_gap))
    if des.cluster.traffic_shape != "none":
        arr = shape_arrivals(stream.arrival_s, des)
        keep = np.isfinite(arr)
        stream = replace(stream, arrival_s=arr)
        if not keep.all():
            idx = np.flatnonzero(keep)
            stream = replace(stream, arrival_s=arr[idx], prompt=stream.prompt[idx],
                             output=stream.output[idx], priority=stream.priority[idx],
                             klass=stream.klass[idx] if stream.klass is not None else None,
                             columns={k: v[idx] for k, v in stream.columns.items()} if stream.columns else None,
                             hashes=[stream.hashes[i] for i in idx] if stream.hashes is not None else None)
    return sessionize(stream, des, r_sess)


__all__ = ["rate_profile", "shape_arrivals", "sessionize", "apply_reasoning", "redraw_gaps", "transform",
           "apply_classes"]
