"""The engine rules simllm-validate uses: ``engine.plan.auto_tp`` (TP not stated) and
``engine.plan.search.bisect`` (MLPerf server rows: 12 halvings of the rate from 0)."""

from engine.plan.auto_tp import auto_tp
from engine.plan.search import bisect, midpoint


def test_auto_tp_smallest_power_of_two_leaving_half_of_hbm():
    # 140 GB of weights on 80 GB GPUs: 140/1 and 140/2 > 40, 140/4 = 35 <= 40 -> TP4
    assert auto_tp(140e9, 80e9, 64, 8) == 4
    assert auto_tp(16e9, 80e9, 32, 8) == 1              # fits on one GPU with room for KV
    assert auto_tp(140e9, 80e9, 64, 2) == 2             # at most the row's GPUs
    assert auto_tp(34e9, 80e9, 12, 8) == 1              # 34 <= 40: TP1
    assert auto_tp(100e9, 80e9, 12, 8) == 4             # 100/2 = 50 > 40; 100/4 fits, 4 divides 12
    assert auto_tp(100e9, 80e9, 6, 8) == 8              # 4 does not divide 6 heads: TP8 (the cap)


def test_bisect_on_the_rate_from_zero_fixed_steps():
    probes = []

    def passes(r):
        probes.append(r)
        return r <= 3.3

    lo, hi = bisect(passes, 0.0, 10.0, midpoint, steps=12)
    assert len(probes) == 12 and probes[0] == 5.0 and probes[1] == 2.5
    assert lo <= 3.3 < hi and hi - lo == 10.0 / 2 ** 12


def test_bisect_until():
    lo, hi = bisect(lambda r: r <= 4.0, 1.0, 16.0, until=lambda a, b: b / a <= 1.1)
    assert lo <= 4.0 < hi and hi / lo <= 1.1
