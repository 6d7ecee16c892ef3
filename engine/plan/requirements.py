"""From the SLO back to the spec sheet: the smallest hardware figures that serve a target rate.

Question: a deployment (model, partition, replicas, framework profile) on a chip that does not
exist yet must serve ``rate_rps`` of a workload within the plan's SLOs. Which value of a spec-sheet
field (HBM bandwidth, peak FLOP/s, HBM capacity, link bandwidth or latency, host bandwidth) is the
least that still does, the other fields at a base chip's figures? Where do two fields trade off?

Axes. An axis is one ``HardwareSpec`` field and a range [lo, hi] (SI units) or an explicit list
of values. A range becomes a geometric grid of ratio 1 + ``precision`` from lo to hi (the last
point is hi), so an answer "v_k" means: v_k passes and v_(k-1) = v_k / (1 + p) fails, i.e. the
true minimum lies in (v_k / (1 + p), v_k] - within a relative ``precision``. Every axis is
ordered by goodness: more is better for bandwidths, peaks and capacity; less is better for
latencies (``better``).

Monotonicity (the assumption every shortcut here rests on): improving one spec never makes a
passing deployment fail. It holds for the pass price (each operator's time is non-increasing
in the peaks and bandwidths, and the collectives' in link bandwidth, non-decreasing in latency)
and for the KV cache (more HBM, more blocks). Where it does not hold exactly:
- HBM capacity acts in steps: the KV pool is a whole number of blocks, so the verdict changes at
  a block boundary, not continuously (bisection still finds the lowest passing grid point);
- near the SLO a verdict can be decided by the point estimate of a percentile (the stability
  rule's last resort), which is noisy in the spec as it is in the rate;
- the scheduler's batch composition can change discretely with the pass price.
The brute-force grid (``grid_frontier``) is the check of these assumptions on a small space.

Verdict at one spec point (``Oracle``), cheapest evidence first:
1. analytical (engine.plan.bound.estimate on the point's specs): memory fit, zero-load SLO, and the
   fluid-model capacity estimate; the point fails when it does not fit, misses an SLO at zero
   load, or its capacity estimate x ``bound_slack`` is below the target rate (the estimate is
   optimistic, so with slack it prunes without a DES run);
2. DES at the target rate under the plan's stability rule (engine.plan.probe.Probe: warm-up cut,
   binomial interval of each percentile, request count doubled while unsure).

Search per axis (``minimise``): analytical bisection first (cheap: the lowest index the estimate
allows, k_a; all lower indices fail without a DES run), then DES probes galloping up from k_a
(k_a, k_a + 1, k_a + 3, k_a + 7 ...) until one passes, then bisection between the last failing
and the first passing index: about log2(k_d - k_a + 1) + 1 DES verdicts instead of one per grid
point.

Frontier of two axes (``frontier``): x on a coarse list of values, y on the fine grid. For each x,
best to worst, the least passing y index y*(x). Monotonicity makes it a staircase walk: at a
worse x, every y that failed at a better x fails too (y*(x) >= y*(x_better)), so the search at x
starts above the failing index carried from the previous x and gallops/bisects from there; once
the best y fails at some x, every worse x is infeasible and the walk stops. Non-dominated points
are the (x, y*(x)) not matched by a worse x at the same y. Cost about one DES verdict per x plus
log2 of each step of the staircase, against nx x ny for the grid.

Binding bound at a frontier point: the requirement that failed just below it (the DES trial's
failing SLO, or the analytical reason) and the DES's own binding bound at the point
(compute | memory | comm | queueing).
"""

import math
from dataclasses import dataclass, field, replace

import numpy as np

from engine.errors import SpecError
from engine.plan import bound
from engine.plan.probe import Probe
from engine.plan.search import bisect
from engine.plan.spec import RuleSpec, SloSpec
from engine.spec import Specs
from engine.spec.hardware import HardwareSpec
from engine.spec.meta import config_fields

#: Hardware config keys that may be an axis (spec-sheet figures), -> HardwareSpec field name.
_AXIS_KEYS = ("peak_bf16", "peak_fp8", "peak_int8", "peak_fp4", "hbm_capacity", "hbm_bandwidth",
              "sram", "scaleup_bandwidth", "scaleup_latency", "scaleout_bandwidth", "scaleout_latency",
              "host_bandwidth")


def axis_fields() -> dict:
    """Config key -> (HardwareSpec field name, the key's config unit) for every axis key."""
    out = {}
    for f, md in config_fields(HardwareSpec):
        if md["key"] in _AXIS_KEYS:
            out[md["key"]] = (f.name, md["unit"])
    return out


def better(key: str) -> int:
    """+1 when more of the field is better (bandwidths, peaks, capacity), -1 when less is
    (latencies)."""
    return -1 if key.endswith("latency") else 1


@dataclass(frozen=True)
class Axis:
    """One spec axis: ``key`` (hardware config key), its values in SI units ordered worst to
    best (``values``)."""

    key: str
    values: tuple

    @property
    def field(self) -> str:
        return axis_fields()[self.key][0]

    @property
    def unit(self) -> str:
        return axis_fields()[self.key][1]


def geometric_axis(key: str, lo: float, hi: float, precision: float) -> Axis:
    """Grid lo, lo (1 + p), ... up to hi (hi included, the last step may be shorter), ordered
    worst to best (descending for a less-is-better key)."""
    if key not in axis_fields():
        raise SpecError("plan.requirements.axes", key, "a hardware key among " + ", ".join(_AXIS_KEYS))
    if not (lo > 0 and hi > lo):
        raise SpecError(f"plan.requirements.axes.{key}", [lo, hi], "0 < lo < hi")
    n = max(1, math.ceil(math.log(hi / lo) / math.log1p(precision) - 1e-9))
    v = [lo * (1.0 + precision) ** k for k in range(n)] + [hi]
    return Axis(key, tuple(v if better(key) > 0 else v[::-1]))


def list_axis(key: str, values) -> Axis:
    if key not in axis_fields():
        raise SpecError("plan.requirements.axes", key, "a hardware key among " + ", ".join(_AXIS_KEYS))
    v = sorted(float(x) for x in values)
    if not v or v[0] <= 0 or len(set(v)) != len(v):
        raise SpecError(f"plan.requirements.axes.{key}.values", list(values), "distinct positive values")
    return Axis(key, tuple(v if better(key) > 0 else v[::-1]))


def at(specs: Specs, values: dict) -> Specs:
    """``specs`` with hardware fields (field name -> SI value) replaced; the chip is a what-if
    chip: priced by the transfer backend (no measured tables)."""
    hw = replace(specs.hardware, kernel_tables="", **values)
    return replace(specs, hardware=hw)


@dataclass
class Verdict:
    """The verdict at one spec point and its evidence."""

    values: dict                  # field -> SI value
    passed: bool
    by: str                       # analytical | des
    reason: str = ""              # why it failed ('' when passed): the SLO(s) or the analytical check
    estimate: object = None       # bound.Estimate
    trial: object = None          # probe.Trial (DES) or None

    @property
    def bound(self) -> str:
        return (self.trial.metrics.get("bound") or "") if self.trial is not None else ""


class Oracle:
    """Spec point -> Verdict at ``rate_rps`` (module docstring), cached per point; counts DES runs.
    ``des_only``: skip the analytical pruning (the brute-force reference)."""

    def __init__(self, specs: Specs, slo: SloSpec, rule: RuleSpec, rate_rps: float, lengths: bound.Lengths,
                 bound_slack: float = 1.25, des_only: bool = False, on_verdict=None, on_run=None):
        self.specs, self.slo, self.rule, self.rate = specs, slo, rule, float(rate_rps)
        self.lengths, self.slack, self.des_only = lengths, float(bound_slack), des_only
        self.on_verdict, self.on_run = on_verdict, on_run
        self.cache: dict = {}
        self.des_runs = 0
        self.des_points = 0

    def _key(self, values: dict):
        return tuple(sorted((k, round(float(v), 9)) for k, v in values.items()))

    def analytical(self, values: dict) -> Verdict:
        s = at(self.specs, values)
        q = self.slo.percentile / 100.0
        e = bound.estimate(s, self.lengths, q, self.slo.ttft_ms, self.slo.tpot_ms)
        if not e.fits or e.reason:
            return Verdict(dict(values), False, "analytical", e.reason or "does not fit", e)
        if e.rate_rps * self.slack < self.rate:
            return Verdict(dict(values), False, "analytical",
                           f"capacity estimate {e.rate_rps:.3g} req/s x {self.slack:g} < {self.rate:g} req/s "
                           f"(limit {e.limit})", e)
        return Verdict(dict(values), True, "analytical", "", e)

    def __call__(self, values: dict) -> Verdict:
        key = self._key(values)
        if key in self.cache:
            return self.cache[key]
        v = None if self.des_only else self.analytical(values)
        if v is None or v.passed:
            s = at(self.specs, values)
            probe = Probe(s, self.slo, self.rule, on_run=self.on_run)
            t = probe(self.rate)
            self.des_runs += t.runs
            self.des_points += 1
            v = Verdict(dict(values), t.verdict == "pass", "des", t.failing if t.verdict != "pass" else "",
                        v.estimate if v is not None else None, t)
        self.cache[key] = v
        if self.on_verdict is not None:
            self.on_verdict(v)
        return v


@dataclass
class AxisResult:
    """The least passing value of one axis (others fixed)."""

    axis: Axis
    index: int | None             # least passing index (None: even the best value fails)
    analytical_index: int | None  # least index the analytical checks allow
    verdicts: list = field(default_factory=list)   # Verdict per DES-verified index, probe order
    below: Verdict | None = None  # the verdict just below the answer (the binding requirement)

    @property
    def value(self) -> float | None:
        return None if self.index is None else self.axis.values[self.index]

    @property
    def lower(self) -> float | None:
        """The failing neighbour value (the true minimum lies between it and ``value``)."""
        if self.index is None or self.index == 0:
            return None
        return self.axis.values[self.index - 1]


def _least(passes, lo: int, hi: int):
    """Least index in (lo, hi] that passes, given ``lo`` fails (or is -1) and ``passes`` monotone;
    None when ``hi`` fails. Gallops up from lo + 1 (steps 1, 2, 4 ...), then bisects (search.bisect
    on indices)."""
    if hi <= lo:
        return None
    step, k = 1, lo + 1
    while True:
        k = min(k, hi)
        if passes(k):
            break
        if k == hi:
            return None
        lo, k, step = k, k + step, step * 2
    if k - lo <= 1:
        return k
    _, least = bisect(lambda i: not passes(i), lo, k, mid=lambda a, b: (a + b) // 2,
                      until=lambda a, b: b - a <= 1)
    return least


def minimise(oracle: Oracle, axis: Axis, fixed: dict | None = None, start_fail: int = -1) -> AxisResult:
    """Least passing index of ``axis`` with the ``fixed`` fields (field -> SI) at their values and
    everything else at the base chip's (module docstring); ``start_fail``: an index known to fail
    already (the staircase's carried bound)."""
    fixed = dict(fixed or {})
    n = len(axis.values)

    def pt(i):
        return {**fixed, axis.field: axis.values[i]}

    # 1. analytical: the least index the estimate allows (monotone too), by the same galloping search
    if oracle.des_only:
        ka = start_fail + 1
    else:
        ka = _least(lambda i: oracle.analytical(pt(i)).passed, start_fail, n - 1)
    if ka is None:
        return AxisResult(axis, None, None, [], oracle.analytical(pt(n - 1)))
    verdicts = []

    def des(i):
        v = oracle(pt(i))
        verdicts.append((i, v))
        return v.passed

    # 2. DES from the analytical bound up
    k = _least(des, ka - 1, n - 1)
    res = AxisResult(axis, k, ka, verdicts)
    if k is not None and k > 0:
        res.below = oracle(pt(k - 1)) if (k - 1) >= ka else oracle.analytical(pt(k - 1))
        if res.below.passed:      # k - 1 = the carried index: failed at a better value of another axis
            res.below = Verdict(res.below.values, False, "monotone",
                                "fails at a better value of the other axis (monotone)", res.below.estimate)
    return res


@dataclass
class FrontierPoint:
    x: float
    y: float
    y_lower: float | None         # the failing y just below (None: y at the axis's worst value)
    binding: str                  # the requirement that failed just below y*
    bound: str                    # the DES's binding bound at (x, y*)
    dominated: bool = False


def frontier(oracle: Oracle, xaxis: Axis, yaxis: Axis, xs=None) -> tuple[list, list]:
    """The staircase walk (module docstring): ``xs`` indices of ``xaxis`` (default all), best to
    worst; returns (frontier points, per-x least y index or None)."""
    xs = list(range(len(xaxis.values))) if xs is None else list(xs)
    xs = sorted(xs, reverse=True)
    carried = -1                   # y index known to fail at every x from here on (worse x)
    least, pts = {}, []
    for i in xs:
        r = minimise(oracle, yaxis, {xaxis.field: xaxis.values[i]}, start_fail=carried)
        least[i] = r.index
        if r.index is None:
            for j in xs[xs.index(i) + 1:]:       # worse x: infeasible too (monotone)
                least[j] = None
            break
        carried = r.index - 1
        b = r.below
        top = next((v for k, v in r.verdicts if k == r.index), None)
        pts.append(FrontierPoint(xaxis.values[i], yaxis.values[r.index], r.lower,
                                 (b.reason if b is not None else "axis minimum"),
                                 top.bound if top is not None else ""))
    # non-dominated: the same y reached with a worse x dominates the better x
    for a in pts:
        a.dominated = any(b is not a and b.y == a.y and _worse(xaxis.key, b.x, a.x) for b in pts)
    return pts, [least[i] for i in sorted(least)]


def _worse(key: str, a: float, b: float) -> bool:
    return a < b if better(key) > 0 else a > b


def grid_frontier(oracle: Oracle, xaxis: Axis, yaxis: Axis, xs=None) -> list:
    """The brute-force reference: the verdict at every (x, y) grid point; per x index (ascending)
    the least passing y index (None when none) and the full verdict matrix."""
    xs = list(range(len(xaxis.values))) if xs is None else list(xs)
    out, matrix = [], []
    for i in sorted(xs):
        row = [oracle({xaxis.field: xaxis.values[i], yaxis.field: y}).passed for y in yaxis.values]
        matrix.append(row)
        out.append(next((j for j, ok in enumerate(row) if ok), None))
    return out, matrix


# ----------------------------------------------------------------------------- elasticities

def elasticity(f_minus: float, f_plus: float, h: float) -> float:
    """d log(metric) / d log(spec) by central differences: the metric at spec (1 - h) and at
    spec (1 + h):  e = (ln f+ - ln f-) / (ln (1 + h) - ln (1 - h)). Second-order accurate in h
    (the ln f curvature cancels); NaN when a value is not positive and finite."""
    if not (f_minus > 0 and f_plus > 0 and math.isfinite(f_minus) and math.isfinite(f_plus)):
        return float("nan")
    return (math.log(f_plus) - math.log(f_minus)) / (math.log1p(h) - math.log1p(-h))


def optimistic_factor(key: str, fraction: float) -> float:
    """The factor a spec-sheet figure is wrong by when it is ``fraction`` optimistic: the real
    chip has (1 - fraction) of a printed peak or bandwidth, (1 + fraction) of a printed latency."""
    return 1.0 - fraction if better(key) > 0 else 1.0 + fraction


def analytical_metrics(specs: Specs, lengths: bound.Lengths, slo: SloSpec) -> dict:
    """The analytical engine's metrics at ``specs`` and the fluid-model capacity at the SLO:
    ttft/tpot p50/p99 (engine.analytical.run: the workload's mean request at its batch) and
    ``capacity_rps`` (engine.plan.bound.estimate; 0 when infeasible)."""
    from engine.analytical.run import run

    s = run(specs).summary
    e = bound.estimate(specs, lengths, slo.percentile / 100.0, slo.ttft_ms, slo.tpot_ms)
    return {"ttft_ms_p50": s["ttft_ms_p50"], "ttft_ms_p99": s["ttft_ms_p99"], "tpot_ms_p50": s["tpot_ms_p50"],
            "tpot_ms_p99": s["tpot_ms_p99"], "throughput_tok_s": s["throughput_tok_s"],
            "capacity_rps": e.rate_rps}


#: HardwareSpec fields the analytical pipeline sweeps as arrays (engine.analytical.pipeline.GRID_AXES).
_GRID_FIELDS = {"hbm_bandwidth_bytes_s": "hbm_bandwidth_bytes_s", "hbm_capacity_bytes": "hbm_capacity_bytes"}


def analytical_metrics_grid(specs: Specs, lengths: bound.Lengths, slo: SloSpec, key: str, values) -> list | None:
    """``analytical_metrics`` at every value of hardware ``key`` in one vectorised pass of the
    analytical pipeline (engine.analytical.pipeline.evaluate with the field as an array axis),
    where the pipeline allows it: roofline pricing (measured/transfer kernels describe one chip
    as it is) and a field it sweeps (HBM bandwidth, HBM capacity, the model's math-precision
    peak). The swept axis value is the base one x value / base value, so a sheet's sparse -> dense
    factor stays applied. The capacity estimate (bound.estimate) is evaluated per value. None when
    not vectorisable (the caller then runs point by point)."""
    from engine.analytical.kernels import backend
    from engine.analytical.pipeline import evaluate
    from engine.cost import resolve

    s0 = at(specs, {})
    if resolve(backend(s0), s0.framework.kernel_tables, s0.hardware) != "roofline":
        return None
    name = axis_fields()[key][0]
    hw = s0.hardware
    v0 = getattr(hw, name)
    ratios = np.asarray(values, dtype=float) / v0
    if name in _GRID_FIELDS:
        kw = {_GRID_FIELDS[name]: v0 * ratios}
    elif name == f"peak_flops_{s0.model.math_dtype}":
        kw = {"peak_flops_s": hw.peak_flops(s0.model.math_dtype) * ratios}
    else:
        return None
    r = evaluate(s0, **kw)
    out = []
    for i, v in enumerate(values):
        e = bound.estimate(at(specs, {name: float(v)}), lengths, slo.percentile / 100.0, slo.ttft_ms, slo.tpot_ms)
        g = {k: float(np.asarray(r[k], dtype=float).reshape(-1)[i]) for k in ("ttft_ms", "tpot_ms", "throughput_tok_s")}
        out.append({"ttft_ms_p50": g["ttft_ms"], "ttft_ms_p99": g["ttft_ms"], "tpot_ms_p50": g["tpot_ms"],
                    "tpot_ms_p99": g["tpot_ms"], "throughput_tok_s": g["throughput_tok_s"],
                    "capacity_rps": e.rate_rps})
    return out


def des_metrics(specs: Specs, rate_rps: float, requests: int, warmup_fraction: float) -> dict:
    """p50/p99 TTFT and TPOT of one DES run at ``rate_rps`` over the measured requests (the first
    ``warmup_fraction`` of the span cut). The stream is the workload's own, drawn with its seed:
    every call with the same workload sees the same requests (common random numbers)."""
    from engine.des.run import simulate

    w = replace(specs.workload, num_requests=int(requests), rate_rps=float(rate_rps))
    span = (requests - 1) / rate_rps
    d = specs.des.with_(clients=dict(warmup_s=warmup_fraction * span, exclude_drain=False),
                        outputs=dict(progress="off", record_iterations=False))
    t = simulate(replace(specs, workload=w, des=d), d).result.table
    arr = t["arrival_s"].to_numpy()
    keep = arr >= float(np.nanmin(arr)) + d.clients.warmup_s
    out = {}
    for col in ("ttft_ms", "tpot_ms"):
        x = t[col].to_numpy()[keep].astype(float)
        if col == "tpot_ms":
            x = x[t["output_len"].to_numpy()[keep] > 1]
        x = np.where(np.isnan(x), np.inf, x)
        for q in (50, 99):
            out[f"{col}_p{q}"] = float(np.percentile(x, q)) if x.size else float("nan")
    return out


def elasticities(metric_fn, specs: Specs, keys, h: float = 0.05, optimistic: float = 0.10,
                 grid_fn=None) -> list[dict]:
    """Per hardware key (present on the base chip): the metrics at the base, at spec x (1 +- h)
    and at the ``optimistic`` what-if (``optimistic_factor``), every metric's elasticity and its
    change if the figure is that optimistic. ``metric_fn(specs) -> dict``; every point is priced
    as a what-if chip (``at``), the base included, so all differences are of one cost model. ``grid_fn(specs, key, values) -> [metrics] | None``:
    the three what-if points of one key in one vectorised call where it can (None: point by point);
    each row says which (``vectorised``)."""
    fields = axis_fields()
    base_vals = metric_fn(at(specs, {}))
    rows = []
    for key in keys:
        if key not in fields:
            raise SpecError("plan.requirements.elasticity.fields", key, "a hardware key among " + ", ".join(_AXIS_KEYS))
        name = fields[key][0]
        v0 = getattr(specs.hardware, name)
        if v0 is None or v0 == 0:
            continue
        vals = [v0 * (1 - h), v0 * (1 + h), v0 * optimistic_factor(key, optimistic)]
        got = grid_fn(specs, key, vals) if grid_fn is not None else None
        lo, hi, op = got if got is not None else [metric_fn(at(specs, {name: v})) for v in vals]
        row = {"key": key, "base_value": v0, "vectorised": got is not None}
        for m, b in base_vals.items():
            row[f"{m}"] = b
            row[f"e_{m}"] = elasticity(lo[m], hi[m], h)
            row[f"opt_{m}_pct"] = (op[m] / b - 1.0) * 100.0 if b else float("nan")
        rows.append(row)
    return rows
