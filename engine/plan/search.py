"""The highest arrival rate meeting the SLOs: bracket, then bisect on log(rate); and the brute
force it is checked against.

Assumption: pass/fail is monotone in the rate (more load never lowers a percentile of the same
rescaled stream). Then with lo passing and hi failing the answer lies in [lo, hi); bisection at
the geometric mean sqrt(lo hi) halves log(hi / lo) per probe and stops when hi / lo <= 1 + p.
The reported rate is ``lo`` (a rate that was measured to pass), within a relative ``p`` of the
true maximum: after a bracket of ratio s, about log2(ln s / ln(1 + p)) probes (s = 1.25,
p = 2 %: 4 probes). Bracketing starts at the guess g: pass -> probe g s, g s^2, g s^4 ... until
one fails; fail -> g / s, g / s^2 ... until one passes (or ``min_rate`` fails: infeasible).

A probe may raise the request count it needs as the search goes (``Probe.n_floor``): a pass
measured with fewer requests is then measured again before it bounds the bracket, and the bracket
moves down from it if it fails.

Near the answer a percentile's confidence interval can hold its threshold even at the largest
run: the verdict there is the point estimate's, which is not monotone in the rate. When both ends
of the bracket are such verdicts the search stops (``resolution``) and reports the bracket as is.

``bisect`` is the bisection step itself, shared with ``simllm-validate``'s MLPerf server rows
(which halve the rate itself from 0, a fixed number of times).

The brute force evaluates every rate of a geometric grid of ratio 1 + p and takes the highest
passing one: with a monotone verdict both agree within one grid step (p).
"""

import math
from dataclasses import dataclass, field


@dataclass
class SearchResult:
    rate: float                   # highest rate measured to pass (0 when none)
    hi: float                     # lowest rate measured to fail above it (inf when none)
    status: str                   # ok | resolution (stopped at the statistical resolution, see
                                  # find_max_rate) | infeasible (min_rate fails) | unbounded
    trials: list = field(default_factory=list)   # Trial per probed rate, in probe order

    @property
    def runs(self) -> int:
        return sum(t.runs for t in self.trials)

    @property
    def best(self):
        """The passing trial at ``rate`` (None when infeasible)."""
        for t in self.trials:
            if t.verdict == "pass" and t.rate == self.rate:
                return t
        return None

    @property
    def precision(self) -> float:
        return self.hi / self.rate - 1.0 if self.rate > 0 and math.isfinite(self.hi) else math.inf


def find_max_rate(probe, guess: float, precision: float, step: float = 1.25,
                  min_rate: float = 0.05, max_rate: float = 1e5,
                  stop_at_resolution: bool = True) -> SearchResult:
    """Bracket from ``guess`` and bisect (module docstring); ``probe(rate)`` -> Trial.
    ``stop_at_resolution``: stop (status ``resolution``) once both ends of the bracket were
    decided by the point estimate at the largest run (the percentile's confidence interval
    still held the threshold): bisecting further would split noise; the reported precision is
    then the bracket's, hi / lo - 1, wider than asked."""
    trials = []

    def p(r):
        t = probe(r)
        trials.append(t)
        return t.verdict == "pass"

    def down(hi):
        """From a failing ``hi``, step down (factor squared after each step) to the first pass:
        the bracket (lo, hi), or (0, min(hi, min_rate)) when even ``min_rate`` fails."""
        f = step
        while True:
            r = hi / f
            if r < min_rate:
                if hi > min_rate and p(min_rate):
                    return min_rate, hi
                return 0.0, min(hi, min_rate)
            if p(r):
                return r, hi
            hi, f = r, f * f

    g = min(max(guess, min_rate), max_rate)
    lo, hi = 0.0, math.inf
    if p(g):
        lo, f = g, step
        while True:
            r = lo * f
            if r > max_rate:
                if lo < max_rate and not p(max_rate):
                    hi = max_rate
                    break
                return SearchResult(max(lo, max_rate) if lo < max_rate else lo, math.inf,
                                    "unbounded", trials)
            if p(r):
                lo, f = r, f * f
            else:
                hi = r
                break
    else:
        lo, hi = down(g)
        if lo == 0.0:
            return SearchResult(0.0, hi, "infeasible", trials)
    def narrow(lo, hi) -> bool:
        return hi / lo <= 1.0 + precision

    def at_resolution(lo, hi) -> bool:
        return stop_at_resolution and _by_point(trials, lo) and _by_point(trials, hi)

    while True:
        # a pass measured with fewer requests than the probe now needs is re-measured; if it
        # fails now, the bracket moves down from it
        while _stale(probe, trials, lo):
            if p(lo):
                break
            lo, hi = down(lo)
            if lo == 0.0:
                return SearchResult(0.0, hi, "infeasible", trials)
        if narrow(lo, hi):
            return SearchResult(lo, hi, "ok", trials)
        if at_resolution(lo, hi):
            return SearchResult(lo, hi, "resolution", trials)
        lo, hi = bisect(p, lo, hi, geometric_mean,
                        until=lambda a, b: _stale(probe, trials, a) or narrow(a, b) or at_resolution(a, b))


def geometric_mean(lo: float, hi: float) -> float:
    """The bisection point on log(rate): sqrt(lo hi)."""
    return math.sqrt(lo * hi)


def midpoint(lo: float, hi: float) -> float:
    """The bisection point on the rate itself: (lo + hi) / 2 (also from lo = 0)."""
    return 0.5 * (lo + hi)


def bisect(passes, lo: float, hi: float, mid=geometric_mean, until=None, steps: int | None = None):
    """The project's one bisection: with ``lo`` passing (or 0) and ``hi`` failing, probe
    ``mid(lo, hi)`` and keep the half that still has a pass below and a fail above; stop after
    ``steps`` probes or once ``until(lo, hi)`` holds after a probe. ``passes(rate) -> bool``.
    Returns the bracket (lo, hi). ``find_max_rate`` bisects on log(rate) until its precision;
    ``simllm-validate``'s MLPerf server rows bisect on the rate from 0 for a fixed 12 probes."""
    n = 0
    while steps is None or n < steps:
        m = mid(lo, hi)
        if passes(m):
            lo = m
        else:
            hi = m
        n += 1
        if until is not None and until(lo, hi):
            break
    return lo, hi


def _stale(probe, trials, rate) -> bool:
    """Is the latest verdict at ``rate`` a pass from a shorter run than the probe's floor
    (``probe.n_floor``: the requests an earlier decisive run of this search needed)?"""
    floor = getattr(probe, "n_floor", 0)
    last = next((t for t in reversed(trials) if t.rate == rate), None)
    return last is not None and last.verdict == "pass" and last.requests < floor


def _by_point(trials, rate) -> bool:
    """Was the verdict at ``rate`` decided by the point estimate (the interval never cleared)?"""
    return any(t.rate == rate and t.decided_by == "point" for t in trials)


def geometric_grid(lo: float, hi: float, precision: float) -> list[float]:
    """Rates lo, lo (1 + p), lo (1 + p)^2 ... up to and including the first >= hi."""
    n = max(1, math.ceil(math.log(hi / lo) / math.log1p(precision)))
    return [lo * (1.0 + precision) ** k for k in range(n + 1)]


def brute_force(probe, grid) -> SearchResult:
    """Every rate of ``grid`` (ascending): the highest passing one, and the lowest failing one
    above it."""
    trials = [probe(r) for r in grid]
    passing = [t.rate for t in trials if t.verdict == "pass"]
    if not passing:
        return SearchResult(0.0, grid[0], "infeasible", trials)
    best = max(passing)
    above = [t.rate for t in trials if t.verdict != "pass" and t.rate > best]
    return SearchResult(best, min(above) if above else math.inf,
                        "ok" if above else "unbounded", trials)


def grid_size(lo: float, hi: float, precision: float) -> int:
    """Points of ``geometric_grid(lo, hi, precision)``."""
    return max(1, math.ceil(math.log(hi / lo) / math.log1p(precision))) + 1
