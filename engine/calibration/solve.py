"""The one fitting routine of the project: bounded nonlinear least squares with confidence ranges.

``simllm-calibrate`` (``engine.calibration.fit`` stages 1 and 2) and ``simllm-validate --fit``
(``runner.tools.validate.fit_calibration``) both pass their objective in as a residual function
of a coordinate vector (their own encoding: logs of efficiencies, overheads in ms, ...) and get
back the solution plus, per coordinate, a standard error and a flag saying whether the data pin it.

Why ranges: a fit always returns numbers; a user needs to see when a number is not determined by
the data (e.g. compute efficiency from decode-only data). The linearised (Gauss-Newton) covariance
at the solution is the cheap, standard answer: with J the Jacobian of the residuals r (m of them,
n coordinates) at the solution and s^2 = sum(rho(r_i)) / (m - n) the residual variance (rho: the
loss, so 2 * cost; m - n at least 1),

    Cov(x) = s^2 (J^T J)^-1,   sigma_k = sqrt(Cov_kk),   95 % range x_k +- 1.96 sigma_k.

(J^T J)^-1 is taken by SVD; directions with singular value below ``rcond`` times the largest
are the ones the data cannot move: a coordinate with weight in such a direction gets sigma = inf.

Stopped short of the minimum: the covariance describes the spread around a minimum. Where the
optimiser stopped elsewhere (a kink in the objective, the evaluation budget), the linearised
model still sees a step dx = -(J^T J)^+ g to its minimum (g: the cost's gradient there; for a
robust loss scipy's loss-scaled J and gradient). The half-range of each coordinate is then
1.96 sigma + |dx| (the range around the linearised minimum, reaching back to the point
reported; dx ~ 0 at a converged fit), so a fit that stalled does not report a range that excludes
where its own linearisation says the minimum is (live round-trip fits once stalled on a kink of a replayed trace
and reported +-0.1 % around values 40-110 % off).
A coordinate is flagged not identifiable when its sigma is infinite or its 95 % half-range
exceeds ``max_halfwidth`` (default a quarter of its box, hi - lo; a callable of x may
give it relative to the solution). Caveat: it is a local,
linear estimate; with a robust loss scipy returns J already rescaled by the loss's weights, so
outliers count as the loss counts them.

``method="nelder-mead"`` minimises the same 0.5 * sum(r^2) with a simplex (for objectives that are
piecewise constant in the parameters, such as finite-sample percentiles, where finite-difference
gradients mislead the trust region); the Jacobian for the ranges is then taken by central
differences of step ``diff_step`` (in coordinates) at the solution, 2n extra evaluations.
"""

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

#: 95 % two-sided normal quantile.
Z95 = 1.959963984540054


@dataclass
class SolveResult:
    """Solution of ``least_squares_fit`` in the caller's coordinates.

    x: solution; sigma: standard error per coordinate (inf: not determined); lo95/hi95: x -+ 1.96
    sigma clipped to the box; identifiable: per coordinate, False when the data cannot pin it;
    cost: 0.5 * sum(rho(r)) at x; nfev: objective evaluations; jac: the Jacobian used for the
    ranges; sol: the optimiser's own result (scipy OptimizeResult)."""

    names: list
    x: np.ndarray
    sigma: np.ndarray
    lo95: np.ndarray
    hi95: np.ndarray
    identifiable: np.ndarray
    cost: float
    nfev: int
    jac: np.ndarray
    sol: object

    def ranges(self, decode: Callable[[str, float], float] | None = None) -> dict:
        """{name: (value, low, high, identifiable)}, each coordinate mapped through
        ``decode(name, coordinate)`` (e.g. exp for a log coordinate; default identity)."""
        d = decode or (lambda _k, v: float(v))
        return {k: (d(k, self.x[i]), d(k, self.lo95[i]), d(k, self.hi95[i]), bool(self.identifiable[i]))
                for i, k in enumerate(self.names)}


def confidence(jac: np.ndarray, cost: float, lo, hi, x, max_halfwidth=None, rcond: float = 1e-8,
               grad=None):
    """(sigma, lo95, hi95, identifiable) from the Jacobian ``jac`` (m x n) at ``x`` and the cost
    0.5 * sum(rho(r)): Cov = s^2 (J^T J)^-1 with s^2 = 2 cost / max(m - n, 1), inverted by SVD;
    a direction with singular value < rcond * largest is unidentified (sigma inf for every
    coordinate with weight > 1e-6 in it). With the cost's gradient ``grad`` at ``x``, each
    half-range grows by the Gauss-Newton step's |dx| (module docstring)."""
    J = np.atleast_2d(np.asarray(jac, dtype=float))
    m, n = J.shape
    lo, hi, x = (np.broadcast_to(np.asarray(a, dtype=float), (n,)) for a in (lo, hi, x))
    s2 = 2.0 * float(cost) / max(m - n, 1)
    sigma = np.full(n, np.inf)
    if np.all(np.isfinite(J)):
        _, sv, vt = np.linalg.svd(J, full_matrices=False)
        big = sv.max() if sv.size else 0.0
        good = sv > rcond * big if big > 0 else np.zeros_like(sv, bool)
        var = (vt[good].T ** 2 / sv[good] ** 2).sum(axis=1) * s2
        dead = (np.abs(vt[~good]) > 1e-6).any(axis=0) if (~good).any() else np.zeros(n, bool)
        sigma = np.where(dead, np.inf, np.sqrt(var))
    half = Z95 * sigma
    if grad is not None and np.all(np.isfinite(J)) and np.all(np.isfinite(grad)):
        _, sv, vt = np.linalg.svd(J, full_matrices=False)
        good = sv > rcond * sv.max() if sv.size and sv.max() > 0 else np.zeros_like(sv, bool)
        dx = -(vt[good].T / sv[good] ** 2) @ (vt[good] @ np.asarray(grad, float))
        free = ~(((x <= lo) & (dx < 0)) | ((x >= hi) & (dx > 0)))     # a bound stops the step
        half = np.where(free, half + np.abs(dx), half)
    if callable(max_halfwidth):
        max_halfwidth = max_halfwidth(x)
    width = 0.25 * (hi - lo) if max_halfwidth is None else np.broadcast_to(np.asarray(max_halfwidth, float), (n,))
    ident = np.isfinite(half) & (half <= width)
    return sigma, np.clip(x - half, lo, hi), np.clip(x + half, lo, hi), ident


def fd_jacobian(residuals, x, lo, hi, step, forward: bool = False, r0=None) -> np.ndarray:
    """Finite differences of ``residuals`` at ``x``, absolute step per coordinate: central
    (one-sided at a bound), or ``forward`` (backward where x + step passes the upper bound), the
    latter reusing ``r0`` = residuals(x) when given (n evaluations instead of 2n)."""
    step = np.broadcast_to(np.asarray(step, dtype=float), x.shape)
    r0 = np.asarray(residuals(x) if r0 is None else r0, dtype=float)
    cols = []
    for i in range(x.size):
        a, b = x.copy(), x.copy()
        if forward:
            a[i] = x[i] + step[i] if x[i] + step[i] <= hi[i] else max(x[i] - step[i], lo[i])
        else:
            a[i] = min(x[i] + step[i], hi[i])
            b[i] = max(x[i] - step[i], lo[i])
        if a[i] == b[i]:
            cols.append(np.zeros_like(r0))
            continue
        ra = np.asarray(residuals(a), float) if a[i] != x[i] else r0
        rb = np.asarray(residuals(b), float) if b[i] != x[i] else r0
        cols.append((ra - rb) / (a[i] - b[i]))
    return np.column_stack(cols)


def forward_jacobian(residuals, lo, hi, step):
    """(residual function, Jacobian function) for scipy's least_squares with forward differences
    of *absolute* steps ``step`` per coordinate (``fd_jacobian(forward=True)``).

    scipy's own ``diff_step`` is relative: its step is diff_step x |x|, so a coordinate at or near
    0 (a host term that starts at 0) is probed by a step of ~0, which a stochastic objective
    (a DES) cannot resolve, and the coordinate never leaves 0. The residual function remembers its
    last point, so the Jacobian at the point scipy just evaluated costs n evaluations, as scipy's
    2-point scheme does."""
    last: dict = {}

    def fun(x):
        r = np.asarray(residuals(x), dtype=float)
        last["x"], last["r"] = np.array(x, dtype=float), r
        return r

    def jac(x, *_):
        x = np.asarray(x, dtype=float)
        r0 = last["r"] if "x" in last and np.array_equal(last["x"], x) else None
        last.clear()
        return fd_jacobian(residuals, x, lo, hi, step, forward=True, r0=r0)

    return fun, jac


def least_squares_fit(residuals: Callable[[np.ndarray], np.ndarray], names: Sequence[str], lo, hi, x0,
                      loss: str = "linear", f_scale: float = 1.0, max_nfev: int | None = None,
                      diff_step=None, x_scale=None, method: str = "trf", simplex_step=0.15,
                      xatol: float = 0.01, fatol: float = 1e-3, max_halfwidth=None,
                      abs_step=None) -> SolveResult:
    """Minimise 0.5 * sum(rho(residuals(x))) over lo <= x <= hi from ``x0`` and return the
    solution with confidence ranges (module docstring).

    method ``trf``: scipy.optimize.least_squares (trust-region reflective; ``loss``, ``f_scale``,
    ``diff_step``, ``x_scale``, ``max_nfev`` passed through unchanged, so a caller switching to
    this routine gets the same iterates). method ``nelder-mead``: scipy.optimize.minimize on
    0.5 * sum(r^2) of the clipped x, initial simplex x0 + ``simplex_step`` e_i, ``max_nfev`` as
    maxfev, tolerances ``xatol``/``fatol``; Jacobian for the ranges by central differences of
    ``diff_step`` (default 0.05). ``abs_step`` (trf only; per coordinate, in coordinates): forward
    differences of these absolute steps instead of scipy's relative ``diff_step``
    (``forward_jacobian``)."""
    lo = np.asarray(lo, dtype=float)
    hi = np.asarray(hi, dtype=float)
    x0 = np.asarray(x0, dtype=float)
    names = list(names)
    if method == "trf":
        from scipy.optimize import least_squares

        extra = {} if x_scale is None else {"x_scale": x_scale}   # None: scipy's own default
        fun = residuals
        if abs_step is not None:
            fun, extra["jac"] = forward_jacobian(residuals, lo, hi, abs_step)
        else:
            extra["diff_step"] = diff_step
        sol = least_squares(fun, x0, bounds=(lo, hi), loss=loss, f_scale=f_scale,
                            max_nfev=max_nfev, **extra)
        x, cost, jac, nfev, grad = sol.x, float(sol.cost), sol.jac, int(sol.nfev), sol.grad
    elif method == "nelder-mead":
        from scipy.optimize import minimize

        def cost_of(u):
            return 0.5 * float(np.sum(np.asarray(residuals(np.clip(u, lo, hi))) ** 2))

        steps = np.broadcast_to(np.asarray(simplex_step, float), x0.shape)
        simplex = np.vstack([x0] + [x0 + steps[i] * np.eye(x0.size)[i] for i in range(x0.size)])
        sol = minimize(cost_of, x0, method="Nelder-Mead",
                       options={"initial_simplex": simplex, "xatol": xatol, "fatol": fatol, "maxfev": max_nfev})
        x = np.clip(sol.x, lo, hi)
        sol.cost = sol.fun
        cost, nfev = float(sol.fun), int(sol.nfev)
        jac = fd_jacobian(residuals, x, lo, hi, 0.05 if diff_step is None else diff_step)
        nfev += 2 * x.size + 1
        grad = jac.T @ np.asarray(residuals(x), float)
        nfev += 1
    else:
        raise ValueError(f"method {method!r}: trf or nelder-mead")
    sigma, lo95, hi95, ident = confidence(jac, cost, lo, hi, x, max_halfwidth, grad=grad)
    return SolveResult(names=names, x=np.asarray(x, float), sigma=sigma, lo95=lo95, hi95=hi95,
                       identifiable=ident, cost=cost, nfev=nfev, jac=jac, sol=sol)


__all__ = ["least_squares_fit", "confidence", "fd_jacobian", "forward_jacobian", "SolveResult", "Z95"]
