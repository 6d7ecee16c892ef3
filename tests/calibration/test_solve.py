"""The one fitter (engine.calibration.solve): solution and confidence ranges.

Expected numbers are textbook closed forms, not outputs of the code: for a straight line
y = a + b t fitted by least squares, SE(b) = s / sqrt(sum (t - tbar)^2) and
SE(a) = s sqrt(1/m + tbar^2 / sum (t - tbar)^2), s^2 = RSS / (m - 2); and the exact least-squares
line from the normal equations' closed form b = cov(t, y) / var(t), a = ybar - b tbar.
"""

import numpy as np
import pytest

from engine.calibration.solve import Z95, least_squares_fit


def _line():
    t = np.linspace(0.0, 10.0, 41)
    rng = np.random.default_rng(5)
    y = 2.0 + 0.5 * t + rng.normal(0.0, 0.1, t.size)
    return t, y


def test_line_fit_and_its_standard_errors():
    t, y = _line()
    fit = least_squares_fit(lambda x: x[0] + x[1] * t - y, ["a", "b"], [-10, -10], [10, 10], [0.0, 0.0])
    b = np.cov(t, y, bias=True)[0, 1] / np.var(t)
    a = y.mean() - b * t.mean()
    assert fit.x == pytest.approx([a, b], abs=1e-6)
    s = np.sqrt(np.sum((a + b * t - y) ** 2) / (t.size - 2))
    sxx = np.sum((t - t.mean()) ** 2)
    assert fit.sigma[1] == pytest.approx(s / np.sqrt(sxx), rel=1e-3)
    assert fit.sigma[0] == pytest.approx(s * np.sqrt(1 / t.size + t.mean() ** 2 / sxx), rel=1e-3)
    assert fit.hi95[1] - fit.x[1] == pytest.approx(Z95 * fit.sigma[1], rel=1e-9)
    assert fit.identifiable.all()
    r = fit.ranges(lambda k, v: 2 * v)
    assert r["b"][0] == pytest.approx(2 * b, abs=1e-6) and r["b"][3]


def test_a_parameter_the_data_cannot_see_is_flagged():
    """Residuals depend on x0 + x1 only: J^T J is singular, neither can be pinned; a third
    coordinate that the data do see stays identified."""
    t, y = _line()
    fit = least_squares_fit(lambda x: (x[0] + x[1]) + x[2] * t - y, ["p", "q", "b"],
                            [-10] * 3, [10] * 3, [1.0, 0.0, 0.0])
    assert list(fit.identifiable) == [False, False, True]
    assert np.isinf(fit.sigma[:2]).all()


def test_nelder_mead_gives_the_same_line_and_ranges():
    t, y = _line()
    ls = least_squares_fit(lambda x: x[0] + x[1] * t - y, ["a", "b"], [-10, -10], [10, 10], [1.0, 0.2])
    nm = least_squares_fit(lambda x: x[0] + x[1] * t - y, ["a", "b"], [-10, -10], [10, 10], [1.0, 0.2],
                           method="nelder-mead", max_nfev=2000, xatol=1e-8, fatol=1e-12, diff_step=0.1)
    assert nm.x == pytest.approx(ls.x, abs=1e-4)
    assert nm.sigma == pytest.approx(ls.sigma, rel=1e-3)   # linear: central differences are exact


def test_a_wide_range_is_flagged():
    """One noisy point per unit of x: half-range 1.96 sigma above max_halfwidth -> not pinned."""
    t, y = _line()
    fit = least_squares_fit(lambda x: x[0] + x[1] * t - y, ["a", "b"], [-10, -10], [10, 10], [0.0, 0.0],
                            max_halfwidth=[1e-3, 1.0])
    assert list(fit.identifiable) == [False, True]


def test_a_fit_stopped_short_reports_a_range_reaching_the_minimum():
    """Nelder-Mead stopped after 8 evaluations far from the line: its 1.96-sigma range alone would
    sit around the wrong point; the reported range reaches the Gauss-Newton step to the
    linear model's minimum (plus 1.96 sigma), which for a line is the exact least-squares solution
(closed form)."""
    t, y = _line()
    fit = least_squares_fit(lambda x: x[0] + x[1] * t - y, ["a", "b"], [-10, -10], [10, 10], [5.0, -1.0],
                            method="nelder-mead", max_nfev=8, diff_step=0.1)
    b = np.cov(t, y, bias=True)[0, 1] / np.var(t)
    a = y.mean() - b * t.mean()
    assert abs(fit.x[1] - b) > Z95 * fit.sigma[1]             # 1.96 sigma alone misses the minimum
    assert fit.lo95[0] < a < fit.hi95[0] and fit.lo95[1] < b < fit.hi95[1]
