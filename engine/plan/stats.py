"""Is a percentile of a latency under its threshold, given n measured requests? With what certainty?

A percentile statement "p_q(X) <= x" is the same as "the fraction F of requests with X <= x is at
least q". With n measured requests of which k meet the threshold, k ~ Binomial(n, F) (requests
taken as independent draws), and the exact (Clopper-Pearson) interval of F at confidence c is

    lo = Beta^-1(a/2; k, n - k + 1),   hi = Beta^-1(1 - a/2; k + 1, n - k),   a = 1 - c

(lo = 0 when k = 0, hi = 1 when k = n). Verdict: pass when lo >= q, fail when hi < q, unsure
otherwise (the threshold lies inside the percentile's confidence interval). This is the
order-statistic interval of the percentile read the other way round: the c interval of p_q is
[X_(l), X_(u)] with l = B^-1(a/2; n, q) and u = B^-1(1 - a/2; n, q) + 1 (1-based order
statistics, B the binomial quantile), and the threshold lies inside it exactly when the verdict
is unsure (``order_stat_ci``; the test checks the two agree).

Caveat (stated with every result): latencies of one simulated run are correlated through the
queue, so the effective sample is smaller than n and the interval narrower than the truth; the
warm-up cut and the doubling of n while unsure are what the rule does about it.
"""

import math

import numpy as np
from scipy import stats as _st


def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """Exact binomial interval (lo, hi) of a proportion with k successes out of n."""
    if n <= 0:
        return 0.0, 1.0
    a = 1.0 - confidence
    lo = 0.0 if k <= 0 else float(_st.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k >= n else float(_st.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def order_stat_ci(values, q: float, confidence: float) -> tuple[float, float, float]:
    """(point, lo, hi) of the q-quantile (q in (0, 1)) of ``values`` (NaN = never completed =
    +inf): the numpy linear-interpolation percentile and the distribution-free order-statistic
    interval [X_(l), X_(u)] (module docstring); hi = +inf when n is too small for it."""
    x = np.sort(np.where(np.isnan(values), np.inf, np.asarray(values, dtype=float)))
    n = x.size
    if n == 0:
        return math.inf, math.inf, math.inf
    a = 1.0 - confidence
    l = int(_st.binom.ppf(a / 2, n, q))           # 1-based
    u = int(_st.binom.ppf(1 - a / 2, n, q)) + 1   # 1-based
    finite = x[np.isfinite(x)]
    point = float(np.percentile(x, q * 100.0)) if finite.size == n else (
        float(x[min(n - 1, int(math.ceil(q * n)) - 1)]))
    lo = float(x[l - 1]) if l >= 1 else -math.inf
    hi = float(x[u - 1]) if u <= n else math.inf
    return point, lo, hi


def verdict(ok: np.ndarray, q: float, confidence: float) -> tuple[str, float, float, float]:
    """(verdict, fraction, lo, hi) for the requirement "fraction of True in ``ok`` >= q":
    'pass', 'fail' or 'unsure' (module docstring)."""
    ok = np.asarray(ok, dtype=bool)
    n, k = ok.size, int(ok.sum())
    lo, hi = clopper_pearson(k, n, confidence)
    frac = k / n if n else float("nan")
    v = "pass" if lo >= q else ("fail" if hi < q else "unsure")
    return v, frac, lo, hi


def combine(verdicts) -> str:
    """All requirements together: fail if any fails, pass if all pass, else unsure."""
    verdicts = list(verdicts)
    if "fail" in verdicts:
        return "fail"
    return "pass" if all(v == "pass" for v in verdicts) else "unsure"
