"""Bracketing + log bisection against a verdict with a known threshold (hand answers)."""

import math

import pytest

from engine.plan.probe import Trial
from engine.plan.search import brute_force, find_max_rate, geometric_grid, grid_size


def step_probe(cap, calls=None):
    def probe(r):
        if calls is not None:
            calls.append(r)
        return Trial(r, "pass" if r <= cap else "fail", "ci", 100, 1)
    return probe


@pytest.mark.parametrize("cap,guess", [(10.0, 8.0), (10.0, 30.0), (10.0, 1.0), (0.3, 50.0), (123.4, 123.4)])
def test_found_rate_is_within_precision_below_the_threshold(cap, guess):
    res = find_max_rate(step_probe(cap), guess, 0.02, step=1.25, min_rate=0.05, max_rate=1e5)
    assert res.status == "ok"
    assert res.rate <= cap < res.hi and res.hi / res.rate <= 1.02 + 1e-12


def test_probe_count_from_a_good_guess():
    """From g = 0.9 cap: g passes, g x 1.25 fails -> bracket ratio 1.25, then
    ceil(log2(ln 1.25 / ln 1.02)) = ceil(log2(11.27)) = 4 bisections: 6 probes in all."""
    calls = []
    find_max_rate(step_probe(10.0, calls), 9.0, 0.02, step=1.25)
    assert len(calls) == 2 + math.ceil(math.log2(math.log(1.25) / math.log(1.02)))


def test_infeasible_and_unbounded():
    assert find_max_rate(step_probe(0.01), 5.0, 0.02, min_rate=0.05).status == "infeasible"
    res = find_max_rate(step_probe(1e9), 5.0, 0.02, max_rate=100.0)
    assert res.status == "unbounded" and res.rate == 100.0


def test_brute_force_agrees_within_one_step():
    grid = geometric_grid(1.0, 50.0, 0.02)
    assert len(grid) == grid_size(1.0, 50.0, 0.02)
    assert grid[-1] >= 50.0 and grid[-2] < 50.0
    b = brute_force(step_probe(17.3), grid)
    s = find_max_rate(step_probe(17.3), 4.0, 0.02)
    assert abs(b.rate - s.rate) <= 0.02 * b.rate


def test_a_pass_from_a_shorter_run_is_measured_again():
    """A verdict that gets harsher with the run length (cap 10 at 1000 requests, 8 at 4000): once
    the probe needs 4000 requests (its floor rises after the first fail), the earlier pass at 9.5
    is re-measured, fails, and the answer lands below 8, the long runs' threshold."""
    class P:
        n_floor = 1000

        def __call__(self, r):
            n = self.n_floor
            cap = 10.0 if n < 4000 else 8.0
            t = Trial(r, "pass" if r <= cap else "fail", "ci", n, 1)
            if t.verdict == "fail":
                self.n_floor = 4000
            return t

    res = find_max_rate(P(), 9.5, 0.02, step=1.25)
    assert res.status == "ok" and res.rate <= 8.0 < res.hi and res.hi / res.rate <= 1.02 + 1e-12
    assert [t.requests for t in res.trials if t.rate == 9.5] == [1000, 4000]
