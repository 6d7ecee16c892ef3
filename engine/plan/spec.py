"""PlanSpec: what ``simllm-plan`` searches and how (defaults in ``conf/plan/default.yaml``).

SloSpec      the service-level objectives: a percentile ``percentile`` of TTFT, TPOT and E2E over
             measured requests under thresholds (0 = not constrained), and optionally a goodput
             fraction (share of requests meeting every threshold at once; 0 = off).
RuleSpec     one DES measurement at one arrival rate (the stability rule, ``probe``): start with
             ``requests`` requests, drop the ones arriving in the first ``warmup_fraction`` of the
             stream, decide pass/fail when the ``confidence`` binomial interval of the fraction of
             requests meeting each threshold lies entirely on one side of the percentile, and a
             pass also needs the measured span to last ``min_span_e2e`` x the mean E2E latency of
             the measured requests (a queue that grows slowly past capacity shows only in runs
             long against a request's residence time); otherwise double the requests up to
             ``max_requests``, then decide on the point estimate (flagged).
SearchSpec   the root-finder: bisection on log(rate) until hi / lo <= 1 + precision; the first
             probe at the analytical estimate x ``initial_ratio`` (later waves: x the median
             found / estimate ratio of the candidates already searched), brackets grown or shrunk
             by ``step`` (squared after each further step); rates outside [min_rate, max_rate]
             are not probed.
SpaceSpec    candidates: every hardware option x (tp, pp) from the lists with tp x pp <=
             max_devices that the model allows, x modes: ``colocated`` (one replica per unit)
             and ``disagg`` (each (prefill, decode) replica pair in ``disagg_pools`` is a unit),
             x ``schedulers`` x ``token_budgets`` (empty: the framework profile's).
PlanSpec     + target_rps (GPUs needed for this rate, verified by a DES of the replicated unit),
             device_budget (units bigger than this are dropped; 0 = none), objective (gpus |
             cost | energy), prices (USD per device-hour by hardware name; the hardware config's
             price_per_hour otherwise), prune (skip a candidate whose analytical estimate per
             objective unit x bound_slack cannot beat the best verified one), wave (candidates
             per launched multirun).
"""

from dataclasses import dataclass, field, fields

from engine.errors import SpecError

OBJECTIVES = ("gpus", "cost", "energy")
MODES = ("colocated", "disagg")


def _pos(key, v, integer=False, zero=False):
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and (v >= 0 if zero else v > 0)
    if integer:
        ok = ok and float(v) == int(v)
    if not ok:
        raise SpecError(key, v, ("a non-negative" if zero else "a positive")
                        + (" integer" if integer else " number"))


@dataclass(frozen=True)
class SloSpec:
    percentile: float = 99.0
    ttft_ms: float = 500.0
    tpot_ms: float = 50.0
    e2e_ms: float = 0.0
    goodput_fraction: float = 0.0

    def check(self, g="plan.slo"):
        if not (isinstance(self.percentile, (int, float)) and 50.0 <= self.percentile < 100.0):
            raise SpecError(f"{g}.percentile", self.percentile, "a percentile in [50, 100)")
        for k in ("ttft_ms", "tpot_ms", "e2e_ms"):
            _pos(f"{g}.{k}", getattr(self, k), zero=True)
        if not (isinstance(self.goodput_fraction, (int, float)) and 0.0 <= self.goodput_fraction < 1.0):
            raise SpecError(f"{g}.goodput_fraction", self.goodput_fraction, "a fraction in [0, 1)")
        if not (self.ttft_ms or self.tpot_ms or self.e2e_ms):
            raise SpecError(f"{g}.ttft_ms", self.ttft_ms, "at least one of ttft_ms, tpot_ms, e2e_ms > 0")

    def thresholds(self) -> dict:
        """metric column -> threshold [ms] of the constrained metrics."""
        return {k: v for k, v in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms),
                                  ("e2e_ms", self.e2e_ms)) if v > 0}


@dataclass(frozen=True)
class RuleSpec:
    requests: int = 1000
    max_requests: int = 8000
    warmup_fraction: float = 0.1
    confidence: float = 0.95
    min_span_e2e: float = 10.0

    def check(self, g="plan.rule"):
        _pos(f"{g}.requests", self.requests, integer=True)
        if self.requests < 50:
            raise SpecError(f"{g}.requests", self.requests, "at least 50 requests per DES run")
        _pos(f"{g}.max_requests", self.max_requests, integer=True)
        if self.max_requests < self.requests:
            raise SpecError(f"{g}.max_requests", self.max_requests, f">= requests={self.requests}")
        if not (isinstance(self.warmup_fraction, (int, float)) and 0.0 <= self.warmup_fraction < 0.9):
            raise SpecError(f"{g}.warmup_fraction", self.warmup_fraction, "a fraction in [0, 0.9)")
        if not (isinstance(self.confidence, (int, float)) and 0.5 <= self.confidence < 1.0):
            raise SpecError(f"{g}.confidence", self.confidence, "a probability in [0.5, 1)")
        _pos(f"{g}.min_span_e2e", self.min_span_e2e, zero=True)


@dataclass(frozen=True)
class SearchSpec:
    precision: float = 0.02
    initial_ratio: float = 0.8
    step: float = 1.25
    min_rate: float = 0.05
    max_rate: float = 1e5

    def check(self, g="plan.search"):
        if not (isinstance(self.precision, (int, float)) and 0.001 <= self.precision <= 0.5):
            raise SpecError(f"{g}.precision", self.precision, "a relative precision in [0.001, 0.5]")
        _pos(f"{g}.initial_ratio", self.initial_ratio)
        if not (isinstance(self.step, (int, float)) and self.step > 1.0 + self.precision):
            raise SpecError(f"{g}.step", self.step, f"a factor > 1 + precision = {1 + self.precision:g}")
        _pos(f"{g}.min_rate", self.min_rate)
        if not (isinstance(self.max_rate, (int, float)) and self.max_rate > self.min_rate):
            raise SpecError(f"{g}.max_rate", self.max_rate, f"> min_rate = {self.min_rate:g}")


@dataclass(frozen=True)
class SpaceSpec:
    hardware: tuple = ("h100_sxm",)
    tp: tuple = (1, 2, 4, 8)
    pp: tuple = (1,)
    max_devices: int = 8
    modes: tuple = ("colocated",)
    disagg_pools: tuple = ((1, 1),)
    schedulers: tuple = ()
    token_budgets: tuple = ()

    def check(self, g="plan.space"):
        if not self.hardware or not all(isinstance(h, str) and h for h in self.hardware):
            raise SpecError(f"{g}.hardware", list(self.hardware), "a non-empty list of hardware option names")
        for k in ("tp", "pp"):
            vals = getattr(self, k)
            if not vals:
                raise SpecError(f"{g}.{k}", list(vals), "a non-empty list of positive integers")
            for v in vals:
                _pos(f"{g}.{k}", v, integer=True)
        _pos(f"{g}.max_devices", self.max_devices, integer=True)
        for m in self.modes:
            if m not in MODES:
                raise SpecError(f"{g}.modes", m, "colocated or disagg")
        if not self.modes:
            raise SpecError(f"{g}.modes", [], "at least one of colocated, disagg")
        from engine.spec.des import SCHEDULERS
        for sc in self.schedulers:
            if sc not in SCHEDULERS:
                raise SpecError(f"{g}.schedulers", sc, "one of " + ", ".join(SCHEDULERS))
        for b in self.token_budgets:
            _pos(f"{g}.token_budgets", b, integer=True)
        for pair in self.disagg_pools:
            if len(pair) != 2 or any(not isinstance(x, int) or x < 1 for x in pair):
                raise SpecError(f"{g}.disagg_pools", list(pair), "pairs [prefill replicas >= 1, decode replicas >= 1]")


@dataclass(frozen=True)
class PlanSpec:
    slo: SloSpec = field(default_factory=SloSpec)
    rule: RuleSpec = field(default_factory=RuleSpec)
    search: SearchSpec = field(default_factory=SearchSpec)
    space: SpaceSpec = field(default_factory=SpaceSpec)
    target_rps: float = 0.0
    device_budget: int = 0
    objective: str = "gpus"
    prices: dict = field(default_factory=dict)
    prune: bool = True
    bound_slack: float = 1.25
    wave: int = 0
    #: > 0: also the rate met with probability >= confidence under the model's error
    #: (engine.plan.confidence; runner.tools.plan); 0 = point rates only
    confidence: float = 0.0

    def __post_init__(self):
        for f, cls in (("slo", SloSpec), ("rule", RuleSpec), ("search", SearchSpec), ("space", SpaceSpec)):
            v = getattr(self, f)
            if isinstance(v, dict):
                object.__setattr__(self, f, _build(cls, v, f"plan.{f}"))
        self.slo.check()
        self.rule.check()
        self.search.check()
        self.space.check()
        _pos("plan.target_rps", self.target_rps, zero=True)
        _pos("plan.device_budget", self.device_budget, integer=True, zero=True)
        if self.objective not in OBJECTIVES:
            raise SpecError("plan.objective", self.objective, "one of " + ", ".join(OBJECTIVES))
        for k, v in dict(self.prices).items():
            _pos(f"plan.prices.{k}", v, zero=True)
        if not isinstance(self.prune, bool):
            raise SpecError("plan.prune", self.prune, "true or false")
        if not (isinstance(self.bound_slack, (int, float)) and self.bound_slack >= 1.0):
            raise SpecError("plan.bound_slack", self.bound_slack, "a factor >= 1")
        _pos("plan.wave", self.wave, integer=True, zero=True)
        if not (isinstance(self.confidence, (int, float)) and 0.0 <= self.confidence < 1.0):
            raise SpecError("plan.confidence", self.confidence, "0 (off) or a probability below 1, e.g. 0.9")


def _tuples(v):
    if isinstance(v, list):
        return tuple(_tuples(x) for x in v)
    return v


def _build(cls, d: dict, group: str):
    known = {f.name for f in fields(cls)}
    for k in d:
        if k not in known:
            raise SpecError(f"{group}.{k}", d[k], f"a known key of {group} ({', '.join(sorted(known))})")
    return cls(**{k: _tuples(v) for k, v in d.items()})


def plan_spec(d: dict) -> PlanSpec:
    """PlanSpec from a plain mapping (the composed ``plan`` node); ``name`` and ``requirements``
    (the spec-requirements question, checked by runner.tools.requirements) ignored; unknown
    keys are errors naming them."""
    d = {k: v for k, v in dict(d).items() if k not in ("name", "requirements")}   # requirements: runner.tools.requirements
    known = {f.name for f in fields(PlanSpec)}
    for k in d:
        if k not in known:
            raise SpecError(f"plan.{k}", d[k], f"a known key of plan ({', '.join(sorted(known))})")
    if "prices" in d:
        d["prices"] = dict(d["prices"] or {})
    return PlanSpec(**d)
