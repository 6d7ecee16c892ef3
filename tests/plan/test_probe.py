"""One run's verdict from its request table (engine.plan.probe._measure), on hand-made tables.

1000 measured requests, TTFT 100 ms except ``bad`` of them at 1000 ms (threshold 500 ms, p99):
the share under the threshold is (1000 - bad) / 1000 and the exact 95 % interval decides:
bad = 1 -> Clopper-Pearson lower bound 0.99444 >= 0.99: pass; bad = 10 -> 0.99 inside
[0.9817, 0.9952]: unsure; bad = 25 -> upper bound 0.9838 < 0.99: fail.
(Bounds: scipy.stats.beta.ppf(0.025, k, n - k + 1) and beta.ppf(0.975, k + 1, n - k).)
"""

import numpy as np
import polars as pl
import pytest

from engine.plan.probe import _measure
from engine.plan.spec import SloSpec


def table(bad: int, n: int = 1000, lost: int = 0, early: int = 0):
    ttft = np.full(n + early, 100.0)
    ttft[early:early + bad] = 1000.0
    done = np.arange(n + early, dtype=float) + 1.0
    done[early + bad:early + bad + lost] = np.nan         # never completed: count as missing
    arr = np.concatenate([np.zeros(early), np.linspace(10.0, 100.0, n)])
    return pl.DataFrame({"arrival_s": arr, "completion_s": done, "ttft_ms": ttft,
                         "tpot_ms": np.full(n + early, 20.0), "e2e_ms": np.full(n + early, 2000.0),
                         "output_len": np.full(n + early, 100)})


@pytest.mark.parametrize("bad,expected", [(1, "pass"), (10, "unsure"), (25, "fail")])
def test_p99_verdict_by_hand(bad, expected):
    v, m, failing = _measure(table(bad), {}, SloSpec(ttft_ms=500, tpot_ms=50), 0.95, start_s=10.0)
    assert v == expected
    assert m["ttft_ok_fraction"] == pytest.approx((1000 - bad) / 1000)
    assert m["measured_requests"] == 1000
    assert ("ttft" in failing) == (expected == "fail")


def test_requests_before_the_window_and_lost_ones():
    """200 early requests all at 1000 ms are outside the window (arrival < start); 20 requests
    that never complete count as missing the threshold even with a fine TTFT: 20 / 1000 -> fail."""
    v, m, _ = _measure(table(0, lost=20, early=200), {}, SloSpec(ttft_ms=500, tpot_ms=50), 0.95, start_s=10.0)
    assert m["measured_requests"] == 1000 and v == "fail"
    assert m["ttft_ok_fraction"] == pytest.approx(0.98)


def test_goodput_fraction():
    """Goodput 0.95: 975 of 1000 meet both thresholds; the p99 TTFT fails, the goodput passes
    (lower bound of 975/1000 = 0.9633 >= 0.95)."""
    v, m, failing = _measure(table(25), {}, SloSpec(ttft_ms=500, tpot_ms=50, goodput_fraction=0.95),
                             0.95, start_s=10.0)
    assert m["goodput_fraction"] == pytest.approx(0.975)
    assert v == "fail" and failing == "ttft"
    v, m, failing = _measure(table(25), {}, SloSpec(percentile=95.0, ttft_ms=500, tpot_ms=50,
                                                     goodput_fraction=0.95), 0.95, start_s=10.0)
    assert v == "pass" and failing == ""
