"""Coverage of the shipped error model's method, measured on held-out validation rows.

The rows are the residuals the shipped table was fitted on (engine/uncertainty/data/
intervals.residuals.csv: one row per predicted validation row of simllm-validate over
../shared/data/reference/measured_dev.csv; the provenance in intervals.json names the CSVs). They are split in two halves
(numpy default_rng(0)); a model fitted on the first half gives each row of the second half an
interval at 80 % and 95 %; the count of held-out rows inside their interval is checked against
the binomial band of a method that covers with probability exactly the level: the central
99 % of Binomial(n, level) from scipy.stats.binom (the band is not derived from the data)."""

import numpy as np
import pytest
from scipy import stats

from engine.uncertainty import covered, fit, halves
from engine.uncertainty.residuals import read


@pytest.mark.parametrize("level", [0.8, 0.95])
def test_held_out_half_covers_at_nominal_level(level):
    ids, regs, res = read()
    assert len(ids) >= 60, "the shipped residuals cover the dev rows"
    a, b = halves(len(ids), seed=0)
    model = fit([regs[i] for i in a], [res[i] for i in a])
    hit = covered(model, [regs[i] for i in b], [res[i] for i in b], level)
    got = hit[np.isfinite(hit)]
    n, k = got.size, int(got.sum())
    # a 95 % interval needs a regime of >= 19 rows: on a half of the rows some metrics have none
    assert n >= 15, f"only {n} of {len(b)} held-out rows had an interval"
    lo, hi = stats.binom.ppf(0.005, n, level), stats.binom.isf(0.005, n, level)
    assert lo <= k <= hi, f"{k} of {n} held-out rows covered at {level:.0%}; binomial 99 % band {lo:.0f}-{hi:.0f}"
