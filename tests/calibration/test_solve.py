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


def test_absolute_steps_move_a_coordinate_that_starts_at_zero():
    """A residual that is flat below a resolution of 0.01 (as a simulator's output is rough from
    one evaluation to the next) with its minimum at h = 0.3 (the closed form: r = q(h) - 0.3 with
    q h rounded down to 0.01), from h = 1e-9 inside [0, 1], beside a smooth coordinate g (minimum
    at 2, from 1; it also gives the trust region its size, as the other parameters of a real fit
    do): scipy's relative steps (1 % of 1e-9) see a zero derivative in h and leave it where it
    started; absolute steps of 0.05 reach 0.3 within the resolution."""
    def r(x):
        return np.array([np.floor(x[0] * 100.0) / 100.0 - 0.3, x[1] - 2.0])

    rel = least_squares_fit(r, ["h", "g"], [0.0, 0.0], [1.0, 5.0], [1e-9, 1.0], diff_step=0.01, max_nfev=20)
    assert rel.x[0] == pytest.approx(1e-9, abs=1e-12) and rel.x[1] == pytest.approx(2.0, abs=1e-6)
    ab = least_squares_fit(r, ["h", "g"], [0.0, 0.0], [1.0, 5.0], [1e-9, 1.0], abs_step=[0.05, 0.05], max_nfev=20)
    assert ab.x[0] == pytest.approx(0.3, abs=0.011) and ab.x[1] == pytest.approx(2.0, abs=1e-6)


def test_absolute_steps_give_the_same_line():
    """Forward differences of a linear residual are exact: the same line as scipy's own scheme,
    the steps taken backwards at the upper bound."""
    t, y = _line()
    fit = least_squares_fit(lambda x: x[0] + x[1] * t - y, ["a", "b"], [-10, -10], [10, 10], [0.0, 0.0],
                            abs_step=[0.1, 0.1])
    b = np.cov(t, y, bias=True)[0, 1] / np.var(t)
    assert fit.x == pytest.approx([y.mean() - b * t.mean(), b], abs=1e-6)
    edge = least_squares_fit(lambda x: x[0] + x[1] * t - y, ["a", "b"], [-10, -10], [10, b], [0.0, 0.0],
                             abs_step=[0.1, 0.1])
    assert edge.x[1] == pytest.approx(b, abs=1e-4)     # trf stays strictly inside its box
