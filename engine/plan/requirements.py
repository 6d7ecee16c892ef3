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

Deployment space (``SpaceOracle``, ``enumerate_deployments``): instead of one deployment, a set
of them (the plan's candidate enumeration, engine.plan.space, with the base chip as the hardware:
TP x PP x replicas x EP, per framework profile); the verdict at a spec point is the OR of the
deployments' verdicts, the best passing one (fewest devices) named. Monotone per deployment, hence
monotone as an OR: ``minimise`` and ``frontier`` run on it unchanged, and the least passing index
is the least of the per-deployment ones (the deployment named there is the binding one). Cost:
every deployment's analytical checks first, then DES verification best first, stopping at the
first pass (at most ``des_candidates``; the class docstring says what truncating changes).

Frontier of three axes (``frontier3``): x and z on coarse lists, y on the fine grid; the least
passing y at every (x, z) cell by the same staircase over the cells (``monotone_search``): cells
best first, each starting above the y that failed at a cell at least as good in x and z, a pass
at (x, z, y) also settling every better cell from y up. Non-dominated points: the (x, z, y*(x, z))
with no worse neighbour cell at the same y*. Checked against the DES at every (x, z, y) grid
point (``grid_frontier3``).

Waves (``monotone_search``, ``minimise_waves``, ``frontier_waves``): the same searches reading w
DES verdicts at a time (one executor call, e.g. one Hydra launcher multirun; ``DesJob``,
``execute``): galloping with w points at once until a pass, then a (w + 1)-ary split of the
bracket, the undecided cells of a frontier sharing a wave best first. With monotone verdicts the
least passing index is the same for every w; a grid of n values takes about log_(w+1) n waves.

DES capacity elasticity (``des_capacity_elasticities``): d ln(capacity at the SLOs) / d ln(spec)
from two rate searches (engine.plan.search.find_max_rate) at spec x (1 +- h), common random
numbers, with the bisection's precision carried into bounds on the elasticity and h chosen from
the analytical elasticity so that the difference exceeds that precision (``capacity_step``).

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
    deployment: str = ""          # the deployment this verdict is of (SpaceOracle: the passing one named)

    @property
    def bound(self) -> str:
        return (self.trial.metrics.get("bound") or "") if self.trial is not None else ""


class Oracle:
    """Spec point -> Verdict at ``rate_rps`` (module docstring), cached per point; counts DES runs.
    ``des_only``: skip the analytical pruning (the brute-force reference)."""

    def __init__(self, specs: Specs, slo: SloSpec, rule: RuleSpec, rate_rps: float, lengths: bound.Lengths,
                 bound_slack: float = 1.25, des_only: bool = False, on_verdict=None, on_run=None, name: str = "",
                 executor=None):
        self.name = name
        self.specs, self.slo, self.rule, self.rate = specs, slo, rule, float(rate_rps)
        self.lengths, self.slack, self.des_only = lengths, float(bound_slack), des_only
        self.on_verdict, self.on_run = on_verdict, on_run
        self.executor = executor
        self.cache: dict = {}
        self.des_runs = 0
        self.des_points = 0

    def _key(self, values: dict):
        return tuple(sorted((k, round(float(v), 9)) for k, v in values.items()))

    def verified(self) -> list:
        """The DES verdicts so far (a child MLflow run each)."""
        return [v for v in self.cache.values() if v.by in ("des", "error")]

    def analytical(self, values: dict) -> Verdict:
        s = at(self.specs, values)
        q = self.slo.percentile / 100.0
        e = bound.estimate(s, self.lengths, q, self.slo.ttft_ms, self.slo.tpot_ms)
        if not e.fits or e.reason:
            return Verdict(dict(values), False, "analytical", e.reason or "does not fit", e, deployment=self.name)
        rate = deployment_rate(s, e)
        if rate * self.slack < self.rate:
            return Verdict(dict(values), False, "analytical",
                           f"capacity estimate {rate:.3g} req/s x {self.slack:g} < {self.rate:g} req/s "
                           f"(limit {e.limit})", e, deployment=self.name)
        return Verdict(dict(values), True, "analytical", "", e, deployment=self.name)

    def __call__(self, values: dict) -> Verdict:
        return self.many([values])[0]

    def many(self, points: list) -> list:
        """The verdicts at several spec points: the analytical checks of each, then the DES of the
        survivors in one call of the executor (one launcher wave), cached per point."""
        pend = self._pending(points)
        if pend:
            self._absorb(pend, execute(self.executor, self._jobs(pend), self.on_run))
        return [self.cache[self._key(v)] for v in points]

    def _pending(self, points: list) -> list:
        """(key, values, analytical verdict | None) of the points that need a DES verdict, each
        once; the analytical failures are cached (verdict final)."""
        out, seen = [], set()
        for values in points:
            key = self._key(values)
            if key in self.cache or key in seen:
                continue
            v = None if self.des_only else self.analytical(values)
            if v is None or v.passed:
                out.append((key, dict(values), v))
                seen.add(key)
            else:
                self._store(key, v)
        return out

    def _jobs(self, pend: list) -> list:
        return [DesJob(self.specs, values, self.slo, self.rule, self.rate) for _, values, _ in pend]

    def _absorb(self, pend: list, trials: list) -> None:
        """Cache the DES outcome of each pending point: a Trial, or a JobFailed (the point then
        fails, ``by`` = "error", the error kept as its reason: reported, not lost)."""
        for (key, values, a), t in zip(pend, trials):
            est = a.estimate if a is not None else None
            self.des_points += 1
            if isinstance(t, JobFailed):
                v = Verdict(values, False, "error", f"job failed: {t.message}", est, None, self.name)
            else:
                self.des_runs += t.runs
                v = Verdict(values, t.verdict == "pass", "des", t.failing if t.verdict != "pass" else "", est, t,
                            self.name)
            self._store(key, v)

    def _store(self, key, v: Verdict) -> None:
        self.cache[key] = v
        if self.on_verdict is not None:
            self.on_verdict(v)


# ----------------------------------------------------------------------------- DES verification jobs

@dataclass(frozen=True)
class DesJob:
    """One DES verification: the deployment ``specs`` (base chip) at spec point ``values``
    (field -> SI), judged at ``rate_rps`` under ``slo`` and the stability ``rule``. Picklable:
    a launcher job (runner.tools.requirements) runs ``verify`` on it in another process."""

    specs: Specs
    values: dict
    slo: SloSpec
    rule: RuleSpec
    rate_rps: float


@dataclass(frozen=True)
class JobFailed:
    """A verification job that raised or returned nothing (its error message)."""

    message: str


def verify(job: DesJob, on_run=None):
    """The DES verdict of one job (engine.plan.probe.Probe at the job's rate on the what-if chip,
    a fresh probe per point: the same seeded stream, so a point's verdict does not depend on
    which process or in which order it is verified) -> Trial."""
    return Probe(at(job.specs, job.values), job.slo, job.rule, on_run=on_run)(job.rate_rps)


def execute(executor, jobs: list, on_run=None) -> list:
    """Trials (or JobFailed) of ``jobs``: through ``executor(jobs)`` (e.g. one Hydra launcher wave)
    when given, else in this process one after the other."""
    if not jobs:
        return []
    if executor is not None:
        return list(executor(jobs))
    return [verify(j, on_run) for j in jobs]


def deployment_rate(specs: Specs, e) -> float:
    """The analytical capacity estimate of a whole deployment: ``bound.estimate`` prices one
    co-located replica (a disaggregated estimate already covers its pools), so a deployment of
    r co-located replicas behind the router is estimated at r x that (the router spreads the
    stream; the DES verdict decides)."""
    c = specs.des.cluster
    return e.rate_rps * (1 if c.prefill_replicas else (c.replicas or 1))


# ----------------------------------------------------------------------------- deployment space

@dataclass(frozen=True)
class Deployment:
    """One candidate deployment of the requirements question: a name (its layout), its specs
    (partition, replicas, framework profile, resolved DES settings; the hardware is the base
    chip, replaced per spec point by ``at``) and its device count."""

    name: str
    specs: Specs
    devices: int


def enumerate_deployments(space, specs: Specs, replicas=(1,), ep=(1,)):
    """(candidates, dropped) of a requirements deployment space, by the plan's own enumeration
    (engine.plan.space.enumerate_candidates over ``space``: a SpaceSpec whose hardware is the base
    chip's name, colocated mode): every (tp, pp) the model takes with tp x pp <= max_devices, x
    ``replicas`` (tp x pp x replicas <= ``space.max_devices``) x ``ep`` (checked by
    engine.analytical.parallel.invalid_reasons). Candidates are (Candidate, ep); dropped are
    (layout, reason)."""
    from engine.analytical import parallel
    from engine.plan.space import enumerate_candidates

    # every (tp, pp) the model takes, whatever its size (the plan's enumeration skips the ones over
    # max_devices silently); the device limit is applied below, with the replicas, and stated
    wide = replace(space, max_devices=max(space.tp) * max(space.pp), modes=("colocated",))
    cands, dropped0 = enumerate_candidates(wide, specs)
    dropped = [(f"TP{tp}" + (f"PP{pp}" if pp > 1 else ""), why) for _, tp, pp, why in dropped0]
    out = []
    for c in cands:
        for e in sorted(set(ep)):
            bad = [why for why, m in parallel.invalid_reasons(specs, np.array([c.tp]), np.array([c.pp]),
                                                              np.array([e]), np.array([1])).items()
                   if bool(np.asarray(m).reshape(-1)[0])]
            if bad:
                dropped.append((c.layout + f" EP{e}", bad[0]))
                continue
            for r in sorted(set(replicas)):
                cr = replace(c, replicas=int(r))
                if cr.devices > space.max_devices:
                    dropped.append((c.layout + (f" x{r}" if r > 1 else ""), f"{cr.devices} devices > max_devices {space.max_devices}"))
                    continue
                out.append((cr, int(e)))
    return out, dropped


class SpaceOracle:
    """Spec point -> "some deployment of the space serves ``rate_rps`` within the SLOs", the
    best one named: the OR over deployments of each one's ``Oracle`` verdict.

    Cost: per point, every deployment's analytical checks first (memory fit, zero-load SLOs, the
    capacity estimate x ``bound_slack``, as ``Oracle.analytical``); the ones left are DES-verified
    best first - fewest devices, then highest capacity estimate (the plan's ``gpus`` objective at
    a fixed rate) - stopping at the first pass, which is the deployment named; at most
    ``des_candidates`` of them (0 = all). Verdicts are cached per (deployment, point), so the
    frontier and the axes share them.

    Monotonicity: each deployment's verdict is monotone in the spec (module docstring), so their
    OR is too: if some deployment passes at spec v, the same deployment passes at any better v',
    and so does the OR. Galloping and bisection (``minimise``, ``frontier``) therefore stay valid
    on the OR, and the least passing index of the OR is the least over the deployments of each
    one's least passing index; the deployment named there is the binding one. With
    ``des_candidates`` > 0 the OR runs over the first ``des_candidates`` analytical survivors
    only: a better spec can let a new, smaller deployment through the analytical checks ahead of
    the one that passed, and if the DES fails it the truncated OR may fail where the full one
    passes; ``des_candidates: 0`` is the exact OR."""

    def __init__(self, deployments, slo: SloSpec, rule: RuleSpec, rate_rps: float, lengths: bound.Lengths,
                 bound_slack: float = 1.25, des_only: bool = False, des_candidates: int = 0, on_run=None,
                 executor=None):
        deployments = list(deployments)
        if not deployments:
            raise SpecError("plan.requirements.space", [], "at least one deployment (the space is empty)")
        if not (isinstance(des_candidates, int) and des_candidates >= 0):
            raise SpecError("plan.requirements.space.des_candidates", des_candidates, "an integer >= 0 (0 = all)")
        self.deployments = deployments
        self.des_only, self.des_candidates, self.rate = des_only, des_candidates, float(rate_rps)
        self.oracles = [Oracle(d.specs, slo, rule, rate_rps, lengths, bound_slack, des_only, on_run=on_run,
                               name=d.name, executor=executor) for d in deployments]
        self.executor, self.on_run = executor, on_run
        self.cache: dict = {}
        self._an: dict = {}

    @property
    def des_runs(self) -> int:
        return sum(o.des_runs for o in self.oracles)

    @property
    def des_points(self) -> int:
        return sum(o.des_points for o in self.oracles)

    def verified(self) -> list:
        """Every DES verdict of every deployment (a child MLflow run each)."""
        return [v for o in self.oracles for v in o.cache.values() if v.by in ("des", "error")]

    def _order(self, verdicts) -> list:
        """Indices of analytically passing deployments, best first (fewest devices, then highest
        capacity estimate)."""
        idx = [i for i, v in enumerate(verdicts) if v is None or v.passed]

        def est(i):
            v = verdicts[i]
            return deployment_rate(self.deployments[i].specs, v.estimate) if v is not None and v.estimate else 0.0
        return sorted(idx, key=lambda i: (self.deployments[i].devices, -est(i), i))

    def _analytical_all(self, values: dict) -> list:
        key = self.oracles[0]._key(values)
        if key not in self._an:
            self._an[key] = [None if self.des_only else o.analytical(values) for o in self.oracles]
        return self._an[key]

    @staticmethod
    def _summary(verdicts) -> str:
        return "; ".join(f"{v.deployment}: {v.reason or 'not verified'}" for v in verdicts if v is not None)

    def analytical(self, values: dict) -> Verdict:
        vs = self._analytical_all(values)
        order = self._order(vs)
        if order:
            v = vs[order[0]]
            return Verdict(dict(values), True, "analytical", "", v.estimate if v else None,
                           deployment=self.deployments[order[0]].name)
        return Verdict(dict(values), False, "analytical", self._summary(vs), None)

    def __call__(self, values: dict) -> Verdict:
        return self.many([values])[0]

    def many(self, points: list) -> list:
        """The OR verdicts at several spec points, in rounds: each round DES-verifies, for every
        point still undecided, its next deployment in the best-first order, all of them in one
        executor call (one launcher wave); a point is decided at its first pass or when its
        order is exhausted. Per point the deployments are tried in the same order as one at a
        time, so the verdicts are the same."""
        keys = [self.oracles[0]._key(v) for v in points]
        state = {}
        for key, values in zip(keys, points):
            if key in self.cache or key in state:
                continue
            vs = self._analytical_all(values)
            order = self._order(vs)
            full = len(order)
            if self.des_candidates:
                order = order[:self.des_candidates]
            if not order:        # every deployment failed the analytical checks
                self.cache[key] = Verdict(dict(values), False, "analytical", self._summary(vs), None)
                continue
            state[key] = {"values": dict(values), "vs": vs, "order": order, "skipped": full - len(order), "tried": []}
        while state:
            reqs = []
            for key, st in state.items():
                i = st["order"][len(st["tried"])]
                reqs.append((key, i, self.oracles[i]._pending([st["values"]])))
            trials = execute(self.executor, [j for _, i, p in reqs for j in self.oracles[i]._jobs(p)], self.on_run)
            pos = 0
            for key, i, p in reqs:
                self.oracles[i]._absorb(p, trials[pos:pos + len(p)])
                pos += len(p)
                st = state[key]
                v = self.oracles[i](st["values"])          # cached now
                st["tried"].append(v)
                if v.passed:
                    self.cache[key] = v
                elif len(st["tried"]) == len(st["order"]):
                    self.cache[key] = self._failed(st)
                else:
                    continue
                del state[key]
        return [self.cache[k] for k in keys]

    def _failed(self, st: dict) -> Verdict:
        tried, vs = st["tried"], st["vs"]
        reasons = {id(v): v for v in tried}
        rest = [v for v in vs if v is not None and id(v) not in reasons and not v.passed]
        return Verdict(st["values"], False, tried[0].by if all(v.by == "error" for v in tried) else "des",
                       self._summary(tried + rest)
                       + (f"; {st['skipped']} more not DES-verified (des_candidates)" if st["skipped"] else ""),
                       tried[0].estimate, tried[0].trial, "")


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
    deployment: str = ""          # the deployment that passes at (x, y*) (SpaceOracle: the best one named)


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
                                 top.bound if top is not None else "", False,
                                 top.deployment if top is not None else ""))
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


# ----------------------------------------------------------------------------- batched monotone search

@dataclass
class Cell:
    """One cell of a monotone search: indices on the outer axes (``index``), the least passing
    index of the searched axis (``least``; None: even its best value fails), the analytical
    bound, the verdicts measured at this cell and the ones that decided its bracket."""

    index: tuple
    least: int | None = None
    analytical_index: int | None = None
    verdicts: list = field(default_factory=list)   # (y index, Verdict) measured at this cell
    below: Verdict | None = None                    # the failing evidence at least - 1
    top: Verdict | None = None                      # the passing evidence at least
    dominated: bool = False


def _probes(lo: int, hi: int, n: int, step: int, width: int) -> tuple[list, int]:
    """(indices to verify, next gallop step) of one cell with ``lo`` failing (-1: none) and ``hi``
    passing (``n``: none yet): no pass yet - gallop up from lo (lo + step, then increments
    doubling), ``width`` points at most; else ``width`` points spread evenly inside (lo, hi)
    (a (width + 1)-ary split; width 1 is bisection)."""
    if hi >= n:
        out, j, s = [], lo, step
        while len(out) < width and j < n - 1:
            j = min(j + s, n - 1)
            out.append(j)
            s *= 2
        return out, s
    inner = list(range(lo + 1, hi))
    if len(inner) <= width:
        return inner, step
    return sorted({lo + max(1, min(hi - lo - 1, round((hi - lo) * k / (width + 1)))) for k in range(1, width + 1)}), step


def monotone_search(oracle, outer: list, yaxis: Axis, cells: list, width: int = 1, fixed: dict | None = None) -> dict:
    """The least passing index of ``yaxis`` at every cell (a tuple of indices, one per axis of
    ``outer``), with ``width`` DES verdicts per wave (one ``oracle.many`` call: one launcher wave).

    Monotonicity (module docstring) makes the verdict at (cell, j) non-decreasing in j and in each
    outer index, so one verdict decides others: a pass at (c, j) passes at every cell at least as
    good as c (componentwise) from j up, a fail at (c, j) fails at every cell no better than c from
    j down. Each cell keeps a bracket (lo failing, hi passing) that both rules tighten. Per wave,
    the undecided cells best first (a better cell's failures bound the worse ones from below, the
    staircase) each offer their next probes (``_probes``: galloping until a pass, then a
    (width + 1)-ary split), taken round-robin up to ``width``. With width 1 this is the staircase
    walk one verdict at a time; with width w each wave cuts a bracket w + 1 ways, so a cell of n
    grid points takes about log_(w+1) n waves instead of log2 n. The answer is the same for every
    width where the verdicts are monotone (the least passing index is a property of the verdicts,
    not of the order they are read in). Analytical pruning first: per cell the least index the
    analytical checks allow (galloping from the bound carried by better cells), all below failing
    without a DES run. ``fixed``: other fields held (field -> SI). Returns {"cells": {index: Cell},
    "waves": int, "violations": int} (violations: brackets crossed, i.e. verdicts that were not
    monotone; the cell's measured pass is kept)."""
    fixed = dict(fixed or {})
    n = len(yaxis.values)
    order = sorted(set(map(tuple, cells)), key=lambda c: tuple(-i for i in c))   # best first

    def pt(c, j):
        return {**fixed, **{a.field: a.values[i] for a, i in zip(outer, c)}, yaxis.field: yaxis.values[j]}

    def geq(a, b):
        return all(x >= y for x, y in zip(a, b))

    out = {c: Cell(c) for c in order}
    lo, hi, lo_v, hi_v, step = {}, {}, {}, {}, {}
    for c in order:                               # analytical bound, carried from better cells
        better = [out[b] for b in order if b != c and geq(b, c) and b in lo]
        if any(b.analytical_index is None for b in better):
            ka = None
        elif oracle.des_only:
            ka = 0
        else:
            start = max([b.analytical_index - 1 for b in better] + [-1])
            ka = _least(lambda j: oracle.analytical(pt(c, j)).passed, start, n - 1)
        out[c].analytical_index = ka
        lo[c], hi[c], step[c] = (n - 1 if ka is None else ka - 1), n, 1
        lo_v[c] = hi_v[c] = None
    waves = violations = 0

    def open_(c):
        return hi[c] - lo[c] > 1 and lo[c] < n - 1

    while True:
        active = [c for c in order if open_(c)]
        if not active:
            break
        offers = {}
        for c in active:
            offers[c], step[c] = _probes(lo[c], hi[c], n, step[c], width)
        probes = []
        while len(probes) < width and any(offers[c] for c in active):
            for c in active:
                if offers[c] and len(probes) < width:
                    probes.append((c, offers[c].pop(0)))
        verdicts = oracle.many([pt(c, j) for c, j in probes])
        waves += 1
        for (c, j), v in zip(probes, verdicts):
            out[c].verdicts.append((j, v))
            for b in order:
                if v.passed and geq(b, c) and j < hi[b]:
                    hi[b], hi_v[b] = j, v
                elif not v.passed and geq(c, b) and j > lo[b]:
                    lo[b], lo_v[b] = j, v
    for c in order:
        cell = out[c]
        if lo[c] >= hi[c]:
            violations += 1
        if hi[c] >= n:
            continue
        cell.least, cell.top = hi[c], hi_v[c]
        k = hi[c] - 1
        if k < 0:
            continue
        if lo_v[c] is not None and lo[c] == k:
            cell.below = lo_v[c]
            if tuple(cell.below.values.get(a.field) for a in outer) != tuple(a.values[i] for a, i in zip(outer, c)):
                cell.below = Verdict(cell.below.values, False, "monotone", cell.below.reason
                                     + " (at a better value of another axis; monotone)", cell.below.estimate)
        elif cell.analytical_index is not None and k < cell.analytical_index:
            cell.below = oracle.analytical(pt(c, k))
    for c in order:                                # non-dominated: no worse neighbour needs the same y
        out[c].dominated = out[c].least is None     # (no passing y: no frontier point)
        for d in range(len(c)):
            w = c[:d] + (c[d] - 1,) + c[d + 1:]
            if w in out and out[w].least is not None and out[w].least == out[c].least:
                out[c].dominated = True
    return {"cells": out, "waves": waves, "violations": violations}


def minimise_waves(oracle, axis: Axis, width: int) -> tuple[AxisResult, int]:
    """``minimise`` in waves of ``width`` DES verdicts (``monotone_search`` on one cell): the same
    least index where the verdicts are monotone -> (AxisResult, waves)."""
    r = monotone_search(oracle, [], axis, [()], width)
    c = r["cells"][()]
    return AxisResult(axis, c.least, c.analytical_index, c.verdicts, c.below), r["waves"]


def frontier_waves(oracle, xaxis: Axis, yaxis: Axis, xs=None, width: int = 1) -> tuple[list, list, int]:
    """``frontier`` in waves of ``width`` DES verdicts -> (frontier points, per-x least y index
    (x ascending) or None, waves)."""
    xs = sorted(range(len(xaxis.values)) if xs is None else xs)
    r = monotone_search(oracle, [xaxis], yaxis, [(i,) for i in xs], width)
    cells = r["cells"]
    pts = []
    for i in sorted(xs, reverse=True):
        c = cells[(i,)]
        if c.least is None:
            continue
        pts.append(FrontierPoint(xaxis.values[i], yaxis.values[c.least],
                                 yaxis.values[c.least - 1] if c.least > 0 else None,
                                 c.below.reason if c.below is not None else "axis minimum",
                                 c.top.bound if c.top is not None else "", c.dominated,
                                 c.top.deployment if c.top is not None else ""))
    return pts, [cells[(i,)].least for i in xs], r["waves"]


def frontier3(oracle, xaxis: Axis, zaxis: Axis, yaxis: Axis, xs=None, zs=None, width: int = 1) -> dict:
    """The frontier of three axes: for every (x, z) of the coarse values ``xs`` x ``zs`` (indices)
    the least passing y (``monotone_search``: a staircase over the (x, z) grid, bisecting y, each
    verdict bounding the cells it dominates or is dominated by). Non-dominated points: the
    (x, z, y*) with no worse (x, z) neighbour at the same y*. -> {"least": {(i, k): j | None},
    "cells", "waves", "violations"}."""
    xs = sorted(range(len(xaxis.values)) if xs is None else xs)
    zs = sorted(range(len(zaxis.values)) if zs is None else zs)
    r = monotone_search(oracle, [xaxis, zaxis], yaxis, [(i, k) for i in xs for k in zs], width)
    return {**r, "least": {c: cell.least for c, cell in r["cells"].items()}}


def grid_frontier3(oracle, xaxis: Axis, zaxis: Axis, yaxis: Axis, xs=None, zs=None) -> tuple[dict, dict]:
    """The brute-force reference of ``frontier3``: the verdict at every (x, z, y) grid point ->
    ({(i, k): least passing j | None}, {(i, k): [passed per j]})."""
    xs = sorted(range(len(xaxis.values)) if xs is None else xs)
    zs = sorted(range(len(zaxis.values)) if zs is None else zs)
    least, matrix = {}, {}
    for i in xs:
        for k in zs:
            row = [oracle({xaxis.field: xaxis.values[i], zaxis.field: zaxis.values[k], yaxis.field: y}).passed
                   for y in yaxis.values]
            matrix[(i, k)] = row
            least[(i, k)] = next((j for j, ok in enumerate(row) if ok), None)
    return least, matrix


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


def _priced_fields(specs: Specs, keys):
    """(key, HardwareSpec field, base value) for each elasticity key the base chip states
    (a missing or zero figure has no log-derivative: skipped); an unknown key is a SpecError
    naming ``plan.requirements.elasticity.fields``."""
    fields = axis_fields()
    for key in keys:
        if key not in fields:
            raise SpecError("plan.requirements.elasticity.fields", key, "a hardware key among " + ", ".join(_AXIS_KEYS))
        name = fields[key][0]
        v0 = getattr(specs.hardware, name)
        if v0 is not None and v0 != 0:
            yield key, name, v0


def elasticities(metric_fn, specs: Specs, keys, h: float = 0.05, optimistic: float = 0.10,
                 grid_fn=None) -> list[dict]:
    """Per hardware key (present on the base chip): the metrics at the base, at spec x (1 +- h)
    and at the ``optimistic`` what-if (``optimistic_factor``), every metric's elasticity and its
    change if the figure is that optimistic. ``metric_fn(specs) -> dict``; every point is priced
    as a what-if chip (``at``), the base included, so all differences are of one cost model. ``grid_fn(specs, key, values) -> [metrics] | None``:
    the three what-if points of one key in one vectorised call where it can (None: point by point);
    each row says which (``vectorised``)."""
    base_vals = metric_fn(at(specs, {}))
    rows = []
    for key, name, v0 in _priced_fields(specs, keys):
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


# ----------------------------------------------------------------------------- DES capacity elasticity

def capacity_step(prior: float, precision: float, step: float, h_max: float = 0.3, margin: float = 4.0) -> float:
    """The relative step h of a DES capacity elasticity. Each capacity search (engine.plan.search.
    find_max_rate) brackets the capacity C within [lo, hi), hi / lo <= 1 + p, so the bracket of
    ln C+ - ln C- is about 2 ln(1 + p) wide and that of the elasticity 2 ln(1 + p) / D(h), with
    D(h) = ln((1 + h) / (1 - h)). h is the least of ``step`` and above at which the expected
    difference |prior| D(h) is ``margin`` x ln(1 + p) (the bracket then half the expected value):
    h = tanh(margin ln(1 + p) / (2 |prior|)), capped at ``h_max``; ``prior`` (the analytical
    capacity elasticity) 0 or NaN -> ``h_max``."""
    if not (isinstance(prior, (int, float)) and math.isfinite(prior) and prior != 0.0):
        return h_max
    need = margin * math.log1p(precision)
    return min(h_max, max(step, math.tanh(need / abs(prior) / 2.0)))


def des_capacity(specs: Specs, slo: SloSpec, rule: RuleSpec, search, guess: float, on_run=None):
    """The DES capacity at the SLOs of ``specs`` (the what-if chip as given): the plan's rate
    search (engine.plan.search.find_max_rate over an engine.plan.probe.Probe with the workload's
    own seeded stream, so every spec point sees the same requests rescaled: common random
    numbers), from ``guess``, to ``search.precision`` -> SearchResult. It bisects to that
    precision even where both bracket ends were decided by a percentile's point estimate (no
    ``resolution`` stop, find_max_rate's stop_at_resolution=False): what is wanted is a
    difference between spec points, and with the same requests at every point a point estimate's
    noise is common to them, while a bracket left wide would swamp the difference."""
    from engine.plan.search import find_max_rate

    probe = Probe(specs, slo, rule, on_run=on_run)
    return find_max_rate(probe, guess, search.precision, search.step, search.min_rate, search.max_rate,
                         stop_at_resolution=False)


def des_capacity_elasticities(specs: Specs, slo: SloSpec, rule: RuleSpec, search, keys, step: float = 0.05,
                              optimistic: float = 0.10, prior: dict | None = None, base=None,
                              base_guess: float = 1.0, on_run=None) -> list[dict]:
    """d ln(capacity at the SLOs) / d ln(spec) by the DES, per hardware key: the capacity C at
    spec x (1 - h) and x (1 + h) by two rate searches (``des_capacity``, each from the base
    capacity C0 as its first probe, same seeded stream), e = (ln C+ - ln C-) / D(h) with
    D(h) = ln((1 + h) / (1 - h)) (``elasticity``), h by ``capacity_step`` from the analytical
    elasticity ``prior[key]``.

    Precision: each search reports lo (measured to pass) with the true capacity in [lo, hi);
    hence the true elasticity lies in [(ln lo+ - ln hi-) / D, (ln hi+ - ln lo-) / D]
    (``e_capacity_rps_lo`` .. ``_hi``); ``resolved`` is False when that interval holds 0 (the
    difference did not exceed the searches' precision: the sign is not known). The
    ``optimistic`` what-if is a third search; its change vs C0 is bracketed the same way
    (``opt_capacity_rps_pct_lo`` .. ``_hi``); ``achieved_precision`` is the widest bracket of the
    four searches (hi / lo - 1).
    ``base``: the base chip's SearchResult when already searched (else searched here from
    ``base_guess``)."""
    prior = dict(prior or {})
    runs = 0
    if base is None:
        base = des_capacity(at(specs, {}), slo, rule, search, base_guess, on_run)
        runs += base.runs
    c0 = base.rate
    rows = []
    for key, name, v0 in _priced_fields(specs, keys):
        h = capacity_step(prior.get(key, float("nan")), search.precision, step)
        row = {"key": key, "base_value": v0, "h": h, "capacity_rps": c0, "precision": search.precision}
        if c0 <= 0:
            rows.append({**row, "e_capacity_rps": float("nan"), "e_capacity_rps_lo": float("nan"),
                         "e_capacity_rps_hi": float("nan"), "resolved": False, "opt_capacity_rps_pct": float("nan"),
                         "note": "the base chip serves no rate within the SLOs", "des_runs": 0})
            continue
        got, n = {}, 0
        for tag, f in (("minus", 1 - h), ("plus", 1 + h), ("opt", optimistic_factor(key, optimistic))):
            r = des_capacity(at(specs, {name: v0 * f}), slo, rule, search, c0, on_run)
            got[tag] = r
            n += r.runs
        lo_m, hi_m, lo_p, hi_p = got["minus"].rate, got["minus"].hi, got["plus"].rate, got["plus"].hi
        d = math.log1p(h) - math.log1p(-h)
        e = elasticity(lo_m, lo_p, h)
        ok = lo_m > 0 and lo_p > 0 and math.isfinite(hi_m) and math.isfinite(hi_p)
        e_lo = (math.log(lo_p) - math.log(hi_m)) / d if ok else float("nan")
        e_hi = (math.log(hi_p) - math.log(lo_m)) / d if ok else float("nan")
        op = got["opt"]
        brackets = [r.hi / r.rate - 1.0 for r in (base, got["minus"], got["plus"], got["opt"])
                    if r.rate > 0 and math.isfinite(r.hi)]
        rows.append({**row, "achieved_precision": max(brackets) if brackets else float("nan"),
                     "opt_capacity_rps_pct_lo": ((op.rate / base.hi - 1.0) * 100.0 if math.isfinite(base.hi)
                                                 else float("nan")),
                     "opt_capacity_rps_pct_hi": ((op.hi / c0 - 1.0) * 100.0 if math.isfinite(op.hi) else float("nan")), "capacity_rps_minus": lo_m, "capacity_rps_minus_fail": hi_m, "capacity_rps_plus": lo_p,
                     "capacity_rps_plus_fail": hi_p, "capacity_rps_opt": op.rate,
                     "e_capacity_rps": e, "e_capacity_rps_lo": e_lo, "e_capacity_rps_hi": e_hi,
                     "resolved": bool(ok and (e_lo > 0 or e_hi < 0)),
                     "opt_capacity_rps_pct": (op.rate / c0 - 1.0) * 100.0,
                     "status": ",".join(sorted({got[t].status for t in got})),
                     "note": "" if ok else "a search found no bracket (infeasible or unbounded)", "des_runs": n})
        runs += n
    for r in rows:
        r["base_des_runs"] = base.runs
    return rows
