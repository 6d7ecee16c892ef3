"""Split-conformal intervals on log ratios, per regime, with pooling of thin regimes.

Residual of one validation row (dimensionless):

    r = ln(predicted / measured)

Per regime R (``engine.uncertainty.regimes``) with residuals r_1 .. r_n:

    c     = median(r_i)                         the regime's bias (log scale)
    s_i   = |r_i - c|                           nonconformity scores, sorted s_(1) <= .. <= s_(n)
    k     = ceil((n + 1) * level)               the finite-sample conformal rank
    q     = s_(k)            (k <= n; k > n: the regime cannot give this level: pool coarser)

For a new prediction p in R, the measurement m satisfies r = ln(p / m) in [c - q, c + q], i.e.

    m in [p * exp(-(c + q)),  p * exp(-(c - q))]

Split-conformal prediction (Vovk et al. 2005; Lei et al. 2018, "Distribution-free predictive
inference for regression", JASA 113:1094, Theorem 2.2): when the calibration rows and the new
point are exchangeable and the score function is fixed, P(s_new <= s_(k)) >= level, with k the
rank above. Here c is the median of the same rows, so the scores are not built from a fixed
function; the median moves by O(1/sqrt(n)) and the guarantee is approximate, which is why
coverage is measured on held-out rows (tests/engine/test_uncertainty_coverage.py) rather than
claimed.

Pooling: ``interval`` walks the regime hierarchy from the finest key tuple to the coarsest and
takes the first regime with n >= ``min_rows`` and k <= n; the result names the regime and n.
Units: ``bounds`` returns the unit of the point it is given (ms, tok/s ...).
"""

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.uncertainty.regimes import HIERARCHY, complete

#: The shipped error model (refit with ``simllm-calibrate intervals``).
SHIPPED = Path(__file__).parent / "data" / "intervals.json"


def residual(predicted, measured):
    """ln(predicted / measured), elementwise (dimensionless; NaN where either is not positive)."""
    p, m = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((p > 0) & (m > 0), np.log(p / m), np.nan)


def conformal_rank(n: int, level: float) -> int:
    """k = ceil((n + 1) * level), the 1-based rank of the score that bounds a new point with
    probability >= level among n exchangeable calibration points (> n: no finite bound)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level {level}: expected a probability strictly between 0 and 1")
    # the small epsilon keeps ceil((n + 1) * 0.8) exact where the product is an integer in binary noise
    return int(math.ceil((n + 1) * level - 1e-9))


def key_of(regime: dict, fields: tuple[str, ...]) -> str:
    """The table key of ``regime`` at the key tuple ``fields``: 'metric=ttft|load=open'."""
    return "|".join(f"{f}={regime[f]}" for f in fields)


@dataclass(frozen=True)
class Interval:
    """An interval factor: measured / predicted lies in [lo_factor, hi_factor] with probability
    >= level. ``regime``: the pooled key it rests on; ``n``: its rows; ``center``/``q``: log scale."""

    level: float
    lo_factor: float
    hi_factor: float
    regime: str
    n: int
    center: float
    q: float

    def bounds(self, point: float) -> tuple[float, float]:
        """(lo, hi) of the measurement for a prediction ``point`` (same unit as ``point``)."""
        return point * self.lo_factor, point * self.hi_factor

    @property
    def half_width(self) -> float:
        """Relative half-width (hi - lo) / 2 of a prediction of 1 (dimensionless)."""
        return (self.hi_factor - self.lo_factor) / 2.0


def _regime_stats(r: np.ndarray) -> dict:
    c = float(np.median(r))
    return {"n": int(r.size), "center": round(c, 6),
            "scores": [round(float(s), 6) for s in np.sort(np.abs(r - c))]}


def fit(regimes: list[dict], residuals, min_rows: int = 8, provenance: dict | None = None) -> "ErrorModel":
    """The error model of rows (``regimes[i]`` a dict of ``regimes.FIELDS``, ``residuals[i]`` =
    ln(predicted / measured)); non-finite residuals are dropped; a regime without ``band`` gets
    ``regimes.complete``'s (none for static, else unknown). Every regime at every level of
    ``HIERARCHY`` is stored with its sorted scores, so any level can be asked for later."""
    r = np.asarray(residuals, dtype=float)
    if len(regimes) != r.size:
        raise ValueError(f"{len(regimes)} regimes for {r.size} residuals")
    ok = np.isfinite(r)
    regimes = [complete(g) for g in regimes]
    table: dict = {}
    for fields in HIERARCHY:
        groups: dict[str, list[float]] = {}
        for reg, x, good in zip(regimes, r, ok):
            if good:
                groups.setdefault(key_of(reg, fields), []).append(float(x))
        for k, xs in groups.items():
            table[k] = _regime_stats(np.array(xs))
    return ErrorModel(table, min_rows, provenance or {})


@dataclass
class ErrorModel:
    """Per-regime conformal scores (``fit``), looked up with pooling (``interval``).
    ``hierarchy``: the key tuples the table was fitted with (a table written before the load
    band keeps its own six-field hierarchy and is looked up with it)."""

    regimes: dict
    min_rows: int = 8
    provenance: dict = field(default_factory=dict)
    hierarchy: tuple = HIERARCHY

    def interval(self, regime: dict, level: float) -> Interval | None:
        """The interval at ``level`` from the finest regime of ``regime`` with n >= min_rows and
        rank k <= n (module docstring); None when even the metric's pool is too thin. A regime
        without ``band`` is completed (``regimes.complete``)."""
        regime = complete(regime)
        missing = sorted({f for fields in self.hierarchy for f in fields if f not in regime})
        if missing:
            raise ValueError(f"regime lacks {', '.join(missing)}")
        for fields in self.hierarchy:
            k_str = key_of(regime, fields)
            st = self.regimes.get(k_str)
            if not st or st["n"] < self.min_rows:
                continue
            k = conformal_rank(st["n"], level)
            if k > st["n"]:
                continue
            q = float(st["scores"][k - 1])
            c = float(st["center"])
            return Interval(level, math.exp(-(c + q)), math.exp(-(c - q)), k_str, int(st["n"]), c, q)
        return None

    def to_json(self) -> str:
        return json.dumps({"format": 1, "method": "split-conformal |ln(pred/meas) - median| per regime, "
                           "rank ceil((n+1) level), finest regime with n >= min_rows",
                           "hierarchy": [list(h) for h in self.hierarchy], "min_rows": self.min_rows,
                           "provenance": self.provenance, "regimes": self.regimes}, indent=1, sort_keys=True)

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.to_json())
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: Path | str | None = None) -> "ErrorModel":
        p = Path(path) if path else SHIPPED
        if not p.is_file():
            raise FileNotFoundError(f"uncertainty.table: {p} does not exist (expected an error model "
                                    "written by simllm-calibrate intervals)")
        d = json.loads(p.read_text())
        if d.get("format") != 1 or "regimes" not in d:
            raise ValueError(f"uncertainty.table: {p} is not an error model (format 1 with 'regimes')")
        hier = tuple(tuple(h) for h in d["hierarchy"]) if d.get("hierarchy") else HIERARCHY
        return cls(d["regimes"], int(d.get("min_rows", 8)), d.get("provenance", {}), hier)


def covered(model: ErrorModel, regimes: list[dict], residuals, level: float) -> np.ndarray:
    """Per row: 1.0 where ln(predicted / measured) lies in its interval [c - q, c + q] at
    ``level``, 0.0 where outside, NaN where the model gives no interval."""
    out = np.full(len(regimes), np.nan)
    for i, (reg, r) in enumerate(zip(regimes, np.asarray(residuals, dtype=float))):
        iv = model.interval(reg, level)
        if iv is not None and math.isfinite(r):
            out[i] = float(iv.center - iv.q <= r <= iv.center + iv.q)
    return out


def halves(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A random split of row indices 0..n-1 into two halves (numpy default_rng(seed))."""
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2:])
