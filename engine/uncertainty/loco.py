"""The transfer backend's leave-one-chip-out (LOCO) error, and the widening of an interval by it.

A chip with no measured kernel tables is priced by the transfer backend (``engine.cost.transfer``):
curves fitted on the measured chips applied to its spec sheet. The validation rows that the
regime's interval rests on are (almost all) measured chips, so their error does not contain the
transfer curves' error on an unseen chip. ``engine.cost.loco`` measures it: per held-out chip and
operator class, r = ln(t_transfer / t_measured) on every measured grid point, the curves refitted
without that chip. This module turns those residuals into quantiles and widens intervals.

**Scores and quantiles.** The LOCO score of a point is s = |r| (not centred: the transfer curves'
bias on an unseen chip is unknown, and the held-out chips' own biases, of either sign, are part of
the spread). Per framework and group of operator classes with n points, at level L the quantile
is the split-conformal order statistic

    q_loco(L) = s_(k),   k = ceil((n + 1) L)          (dimensionless, log scale)

(``conformal.conformal_rank``). The table stores q_loco at the levels ``LEVELS`` (0.01 steps and
0.995, 0.999); a level between two stored ones takes the next stored level up, whose quantile is
at least as large (q is non-decreasing in L), so the interval is never narrower than the exact one.

**Widening.** A job priced by the transfer backend gets, on the log scale, the half-width

    q_total = sqrt(q_regime^2 + q_loco^2)

at the same level, the regime's centre c unchanged: measured in [p exp(-(c + q_total)),
p exp(-(c - q_total))]. Derivation: the log error of such a job is the regime's error (the model
given kernel times, as on the validation rows) plus the kernel times' transfer error on an unseen
chip; taking the two independent and each normal on the log scale with zero-centred quantiles
q = z sigma at a common level, their sum has sigma = sqrt(sigma_a^2 + sigma_b^2), hence
q_total = z sqrt(sigma_a^2 + sigma_b^2) = sqrt(q_a^2 + q_b^2). For other shapes it is an
approximation, always between max(q_a, q_b) and the worst case q_a + q_b (the two errors at
their bounds with the same sign).

**Which classes.** ``GROUP`` (``"gemm+attention"``): every GEMM class and the attention cores
(MHA/GQA and MLA, prefill and decode) of the job's kernel-table framework, pooled point by point:
the operators that dominate a forward pass's time. MoE and collectives are stored per class for
reference but not pooled (see docs/uncertainty.md, Limits).

Pure numpy; no Hydra, no MLflow.
"""

import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from engine.cost.transfer import GEMM_CLASSES
from engine.uncertainty.conformal import Interval, conformal_rank

#: The shipped LOCO table (``simllm-kernels --loco`` writes it).
SHIPPED = Path(__file__).parent / "data" / "transfer_loco.json"

#: Levels at which quantiles are stored: 0.01 .. 0.99 in 0.01 steps, then 0.995 and 0.999.
LEVELS = tuple(round(i / 100, 2) for i in range(1, 100)) + (0.995, 0.999)

#: The pooled group used for widening, and the operator classes it pools.
GROUP = "gemm+attention"
GROUP_CLASSES = GEMM_CLASSES + ("attn_prefill", "attn_decode", "mla_prefill", "mla_decode")

FORMAT = 1


def combine(q_regime: float, q_loco: float) -> float:
    """q_total = sqrt(q_regime^2 + q_loco^2): two independent log-scale errors' half-widths at one
    level (module docstring); dimensionless. Raises ValueError for a negative or non-finite one."""
    for name, q in (("q_regime", q_regime), ("q_loco", q_loco)):
        if not (isinstance(q, (int, float)) and math.isfinite(q) and q >= 0):
            raise ValueError(f"{name} {q!r}: expected a finite half-width >= 0 (log scale)")
    return math.hypot(q_regime, q_loco)


def widen(iv: Interval, q_loco: float) -> Interval:
    """``iv`` with half-width ``combine(iv.q, q_loco)`` about the same centre: factors
    exp(-(c + q_total)) and exp(-(c - q_total)) (measured / predicted)."""
    q = combine(iv.q, q_loco)
    return replace(iv, lo_factor=math.exp(-(iv.center + q)), hi_factor=math.exp(-(iv.center - q)), q=q)


def quantiles(scores, levels=LEVELS) -> list:
    """s_(k), k = ceil((n + 1) L), of the sorted ``scores`` at each level L (None where k > n)."""
    s = np.sort(np.asarray(scores, dtype=float))
    n = s.size
    out = []
    for lv in levels:
        k = conformal_rank(n, lv)
        out.append(round(float(s[k - 1]), 6) if k <= n else None)
    return out


def group_stats(per_chip: dict, classes) -> dict | None:
    """{n, chips, median, q} of the pooled residuals of ``classes`` over held-out chips
    (``per_chip``: {chip: {class: r array}}); None when none of them has a point."""
    parts = {c: np.concatenate([np.asarray(d[k], float) for k in classes if k in d])
             for c, d in per_chip.items() if any(k in d for k in classes)}
    parts = {c: r[np.isfinite(r)] for c, r in parts.items()}
    parts = {c: r for c, r in parts.items() if r.size}
    if not parts:
        return None
    r = np.concatenate(list(parts.values()))
    return {"n": int(r.size), "chips": {c: int(v.size) for c, v in parts.items()},
            "median": round(float(np.median(r)), 6), "q": quantiles(np.abs(r))}


def build(residuals: dict, provenance: dict) -> dict:
    """The LOCO table of ``residuals`` = {framework: {held-out chip: {class: r array}}}: per
    framework, ``GROUP`` pooled and every class alone (``group_stats``), with ``provenance``."""
    fws = {}
    for fw, per_chip in residuals.items():
        groups = {}
        pooled = group_stats(per_chip, GROUP_CLASSES)
        if pooled is not None:
            groups[GROUP] = pooled
        for cls in sorted({k for d in per_chip.values() for k in d}):
            groups[cls] = group_stats(per_chip, (cls,))
        fws[fw] = groups
    return {"format": FORMAT, "levels": list(LEVELS), "group": GROUP, "group_classes": list(GROUP_CLASSES),
            "score": "|ln(t_transfer / t_measured)| per measured grid point of the held-out chip, curves "
                     "refitted without it; q = s_(ceil((n+1) level))",
            "provenance": provenance, "frameworks": fws}


@dataclass(frozen=True)
class LocoQuantile:
    """q_loco of one framework's group at ``level`` (the stored level >= the one asked for)."""

    q: float
    level: float
    n: int
    chips: tuple
    group: str
    framework: str


@dataclass
class LocoTable:
    """A LOCO table (``build``) read back: ``quantile(framework, level)``."""

    frameworks: dict
    levels: tuple
    provenance: dict = field(default_factory=dict)

    def quantile(self, framework: str, level: float, group: str = GROUP) -> LocoQuantile | None:
        """q_loco of ``framework``'s ``group`` at the smallest stored level >= ``level``; None when
        no stored level is that high or its rank exceeds the points. Raises ValueError for a level
        outside (0, 1) or a framework / group the table lacks (naming those it has)."""
        if not 0.0 < level < 1.0:
            raise ValueError(f"level {level}: expected a probability strictly between 0 and 1")
        if framework not in self.frameworks:
            raise ValueError(f"transfer LOCO table has no framework '{framework}' "
                             f"(it has {', '.join(sorted(self.frameworks))}); regenerate with simllm-kernels --loco")
        g = self.frameworks[framework].get(group)
        if g is None:
            raise ValueError(f"transfer LOCO table: framework '{framework}' has no group '{group}'")
        i = next((j for j, lv in enumerate(self.levels) if lv >= level - 1e-12), None)
        if i is None or g["q"][i] is None:
            return None
        return LocoQuantile(float(g["q"][i]), float(self.levels[i]), int(g["n"]), tuple(sorted(g["chips"])),
                            group, framework)

    @classmethod
    def load(cls, path: Path | str | None = None) -> "LocoTable":
        p = Path(path) if path else SHIPPED
        if not p.is_file():
            raise FileNotFoundError(f"uncertainty.loco_table: {p} does not exist (expected a transfer LOCO "
                                    "table written by simllm-kernels --loco)")
        try:
            d = json.loads(p.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"uncertainty.loco_table: {p} is not JSON ({e})") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT or "frameworks" not in d or "levels" not in d:
            raise ValueError(f"uncertainty.loco_table: {p} is not a transfer LOCO table (format {FORMAT} with "
                             "'levels' and 'frameworks')")
        return cls(d["frameworks"], tuple(float(x) for x in d["levels"]), d.get("provenance", {}))


def to_json(table: dict) -> str:
    """The table as JSON: one line per quantile list (compact), keys sorted."""
    text = json.dumps(table, indent=1, sort_keys=True)
    # lists of numbers (and null) on one line each: the 101 stored levels and quantiles
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text) + "\n"


def save(table: dict, path: Path | str | None = None) -> Path:
    """Write ``table`` to ``path`` (default: the shipped file) atomically."""
    p = Path(path) if path else SHIPPED
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(to_json(table))
    tmp.replace(p)
    return p


def summary(table: LocoTable, levels=(0.5, 0.8, 0.9, 0.95)) -> list[str]:
    """Printable lines: per framework and group, the points, held-out chips, median r and q_loco at
    ``levels`` (each the stored level >= the one named)."""
    lines = [f"{'framework':9} {'group':15} {'points':>8} {'chips':>5} {'median r':>9} "
             + " ".join(f"{'q ' + format(lv, 'g'):>7}" for lv in levels)]
    for fw in sorted(table.frameworks):
        groups = table.frameworks[fw]
        for name in [GROUP] + sorted(g for g in groups if g != GROUP):
            g = groups[name]
            qs = [table.quantile(fw, lv, name) for lv in levels]
            lines.append(f"{fw:9} {name:15} {g['n']:>8,} {len(g['chips']):>5} {g['median']:>+9.3f} "
                         + " ".join(f"{q.q:>7.3f}" if q else f"{'-':>7}" for q in qs))
    return lines


if __name__ == "__main__":   # python -m engine.uncertainty.loco [TABLE]: the shipped table's quantiles
    import sys

    t = LocoTable.load(sys.argv[1] if len(sys.argv) > 1 else None)
    print("\n".join(summary(t)))
    p = t.provenance
    print(f"({p.get('command')} at {p.get('git_commit', '?')[:12]}, {p.get('date')}, tables "
          f"{p.get('tables', {}).get('path')} sha256 {p.get('tables', {}).get('sha256', '?')[:12]}, "
          f"{p.get('cpu_s', '?')} CPU-s)")
