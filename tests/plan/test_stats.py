"""The stability rule's statistics: binomial verdicts and the order-statistic interval.

Hand numbers: with n = 100 requests and q = 0.99, Binomial(100, 0.99) has P(K <= 96) = 0.0184 and
P(K <= 97) = 0.0794 (sum of C(100, k) 0.99^k 0.01^(100-k)), so at 95 % the 1-based lower order
statistic is l = 97 (the smallest k with P(K <= k) >= 0.025) and u = 100 + 1 = 101 > n: the
interval of the p99 of 100 samples has no finite upper end.
"""

import math

import numpy as np
import pytest
from scipy import stats as st

from engine.plan.stats import clopper_pearson, combine, order_stat_ci, verdict


def test_order_statistic_indices_by_hand():
    x = np.arange(1, 101, dtype=float)          # X_(k) = k
    point, lo, hi = order_stat_ci(x, 0.99, 0.95)
    assert lo == 97.0 and math.isinf(hi)
    assert point == pytest.approx(np.percentile(x, 99))
    # hand check of the binomial tail the index comes from
    cdf = lambda k: sum(math.comb(100, j) * 0.99 ** j * 0.01 ** (100 - j) for j in range(k + 1))  # noqa: E731
    assert cdf(96) < 0.025 <= cdf(97)


def test_clopper_pearson_edges_and_a_hand_value():
    assert clopper_pearson(0, 10, 0.95)[0] == 0.0
    assert clopper_pearson(10, 10, 0.95)[1] == 1.0
    # all 10 succeed: the exact lower bound solves p^10 = 0.025 -> p = 0.025^(1/10)
    assert clopper_pearson(10, 10, 0.95)[0] == pytest.approx(0.025 ** 0.1, rel=1e-9)


@pytest.mark.parametrize("n", [200, 1000, 3000])
def test_verdict_is_the_order_statistic_interval_read_the_other_way(n):
    """Unsure exactly when the threshold lies inside [X_(l), X_(u)] (module docstring of stats)."""
    rng = np.random.default_rng(n)
    x = rng.lognormal(0, 1, n)
    _, lo, hi = order_stat_ci(x, 0.99, 0.95)
    for thr in np.quantile(x, [0.95, 0.98, 0.985, 0.99, 0.993, 0.996, 0.999]):
        v = verdict(x <= thr, 0.99, 0.95)[0]
        assert v == ("pass" if thr >= hi else "fail" if thr < lo else "unsure"), (thr, lo, hi)


def test_combine():
    assert combine(["pass", "pass"]) == "pass"
    assert combine(["pass", "unsure"]) == "unsure"
    assert combine(["unsure", "fail"]) == "fail"


def test_scipy_beta_matches_the_binomial_tail():
    """Clopper-Pearson's lower bound lo satisfies P(Binomial(n, lo) >= k) = a / 2."""
    lo, _ = clopper_pearson(990, 1000, 0.95)
    assert st.binom.sf(989, 1000, lo) == pytest.approx(0.025, rel=1e-6)
