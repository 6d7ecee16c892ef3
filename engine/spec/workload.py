"""WorkloadSpec: what is asked of the system.

Two views share one spec. The analytical engine reads ``prompt_len``, ``output_len`` and
``batch_size`` (one static batch decoding in lock-step). The discrete-event engine (``engine.des``)
reads a request *stream*: how many requests, when they arrive (``arrival``), how long their
prompts and outputs are (``prompt_dist`` / ``output_dist`` around ``prompt_len`` / ``output_len``,
or the rows of a ``trace``), all drawn from ``seed``.
"""

import math
from dataclasses import dataclass, field, fields

from engine.errors import SpecError
from engine.spec._check import non_negative, one_of, positive, positive_int
from engine.spec.meta import param

ARRIVALS = ("batch", "poisson", "gamma", "closed_loop", "trace")
LENGTH_KINDS = ("fixed", "uniform", "lognormal", "zipf", "empirical")
TIME_UNITS = ("auto", "s", "ms", "us", "datetime")
TRACE_FORMATS = ("auto", "csv", "json", "jsonl", "parquet")
#: Benchmark-client profiles (engine.des.workload.clients.PROFILES; none = the engine.des settings).
CLIENTS = ("none", "vllm_bench", "sglang_bench", "aiperf", "guidellm", "inference_perf")
#: Whether requests stream their tokens (``WorkloadSpec.streaming``).
STREAMING = ("auto", "always", "never")


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution whose location is the workload's ``prompt_len``/``output_len``.

    fixed: always the mean; uniform: integers in [low, high] (high = 0: 2*mean - low);
    lognormal: mean ``mean`` and log-space std ``sigma`` (mu = ln(mean) - sigma^2/2);
    zipf: low + rank - 1 with P(rank) ~ rank^-zipf_a over ranks 1..(high - low + 1);
    empirical: drawn uniformly from ``values``. Every draw is clipped to [low, high] (high = 0: no cap).
    """

    kind: str = "fixed"
    low: int = 1
    high: int = 0
    sigma: float = 0.5
    zipf_a: float = 1.2
    values: tuple = param((), config_type=list)

    def longest(self, mean: int) -> float:
        """The largest length a draw can take when located at ``mean`` (inf: unbounded, a
        lognormal with no ``high``); ``engine.des.workload.build`` holds it to the context."""
        top = {"fixed": mean, "uniform": self.high or max(2 * mean - self.low, self.low),
               "lognormal": self.high or math.inf, "zipf": self.high,
               "empirical": max(self.values, default=0)}[self.kind]
        return max(min(top, self.high or math.inf), self.low)

    def check(self, group: str) -> None:
        one_of(group, "kind", self.kind, LENGTH_KINDS)
        positive_int(group, "low", self.low)
        positive_int(group, "high", self.high, minimum=0)
        if self.high and self.high < self.low:
            raise SpecError(f"{group}.high", self.high, f"0 or >= low={self.low}")
        positive(group, "sigma", self.sigma)
        positive(group, "zipf_a", self.zipf_a)
        if self.kind == "empirical" and not self.values:
            raise SpecError(f"{group}.values", list(self.values), "a non-empty list for kind=empirical")
        if self.kind == "zipf" and not self.high:
            raise SpecError(f"{group}.high", self.high, "an upper bound > 0 for kind=zipf")


@dataclass(frozen=True)
class TraceSpec:
    """A request trace file and how to read it.

    ``path``: CSV, JSON, JSON Lines or Parquet ('' = no trace). Columns: ``arrival_column`` (time of
    arrival; '' = none, lengths only), ``prompt_column``, ``output_column``, ``hash_column`` (prefix
    block hashes, one per ``block_tokens`` prompt tokens); all '' = detect the known layouts
    (Azure 2023, Vidur, Mooncake). ``time_unit``: s | ms | us | datetime | auto.
    """

    path: str = ""
    format: str = "auto"
    arrival_column: str = ""
    prompt_column: str = ""
    output_column: str = ""
    hash_column: str = ""
    time_unit: str = "auto"
    block_tokens: int = 512

    def check(self, group: str) -> None:
        one_of(group, "format", self.format, TRACE_FORMATS)
        one_of(group, "time_unit", self.time_unit, TIME_UNITS)
        positive_int(group, "block_tokens", self.block_tokens)


def _coerce(cls, value):
    """A nested spec given as a dict (from a config) -> the dataclass; lists -> tuples."""
    if isinstance(value, cls):
        return value
    if value is None:
        return cls()
    known = {f.name for f in fields(cls)}
    d = {k: (tuple(v) if isinstance(v, list) else v) for k, v in dict(value).items() if k in known}
    return cls(**d)


@dataclass(frozen=True)
class WorkloadSpec:
    """``batch_size`` requests of ``prompt_len`` prompt tokens each generating ``output_len`` tokens.

    The analytical engine treats the batch as arriving together and decoding in lock-step (the
    lower bound with no queueing). ``output_len`` counts every generated token, the first included
    (the first comes out of prefill).

    Request stream (discrete-event engine):
    num_requests: how many requests (0: ``batch_size``, or every row of the trace);
    arrival: batch (all at t=0) | poisson (rate ``rate_rps``) | gamma (rate ``rate_rps``,
        inter-arrival coefficient of variation ``arrival_cv``; > 1 is bursty) | closed_loop
        (``concurrency`` users, each sending its next request ``think_time_s`` after the previous
        one completes) | trace (the trace's timestamps; ``rate_rps`` > 0 rescales them to that mean
        rate);
    prompt_dist / output_dist: length distributions (ignored for columns a trace provides);
    priority_fraction: share of requests in the high-priority SLO class (class 0; others 1);
    seed: every random draw of the stream;
    client: the benchmark tool that sends the stream (engine.des.workload.clients: its start-up,
        warm-up, run length when num_requests is 0, exact lengths and TPOT definition set the
        engine.des client fields); none = those engine.des settings as configured;
    streaming: whether each request streams its tokens back as they come (an OpenAI-style
        ``stream: true`` request, every serving benchmark client) or gets its whole answer at the
        end (offline runs: trtllm-bench, vLLM's and SGLang's offline engines): always | never |
        auto (every arrival process but ``batch`` streams). A streamed request costs the engine
        host work in every iteration it emits a token (``framework.per_streamed_token_overhead``).
    """

    prompt_len: int
    output_len: int
    batch_size: int = 1
    name: str = "workload"
    num_requests: int = 0
    arrival: str = "batch"
    rate_rps: float = 0.0
    arrival_cv: float = 1.0
    concurrency: int = 0
    think_time_s: float = 0.0
    prompt_dist: LengthDist = field(default_factory=LengthDist)
    output_dist: LengthDist = field(default_factory=LengthDist)
    trace: TraceSpec = field(default_factory=TraceSpec)
    priority_fraction: float = 0.0
    seed: int = 0
    client: str = "none"
    streaming: str = "auto"

    _group = "workload"

    def streams(self) -> bool:
        """Whether the requests stream their tokens (``streaming``; auto: all arrivals but batch)."""
        return self.streaming == "always" or (self.streaming == "auto" and self.arrival != "batch")

    def __post_init__(self):
        g = self._group
        object.__setattr__(self, "prompt_dist", _coerce(LengthDist, self.prompt_dist))
        object.__setattr__(self, "output_dist", _coerce(LengthDist, self.output_dist))
        object.__setattr__(self, "trace", _coerce(TraceSpec, self.trace))
        positive_int(g, "prompt_len", self.prompt_len)
        positive_int(g, "output_len", self.output_len)
        positive_int(g, "batch_size", self.batch_size)
        positive_int(g, "num_requests", self.num_requests, minimum=0)
        one_of(g, "arrival", self.arrival, ARRIVALS)
        non_negative(g, "rate_rps", self.rate_rps)
        positive(g, "arrival_cv", self.arrival_cv)
        positive_int(g, "concurrency", self.concurrency, minimum=0)
        non_negative(g, "think_time_s", self.think_time_s)
        if not 0 <= self.priority_fraction <= 1:
            raise SpecError(f"{g}.priority_fraction", self.priority_fraction, "a fraction in [0, 1]")
        positive_int(g, "seed", self.seed, minimum=0)
        one_of(g, "client", self.client, CLIENTS)
        one_of(g, "streaming", self.streaming, STREAMING)
        self.prompt_dist.check(f"{g}.prompt_dist")
        self.output_dist.check(f"{g}.output_dist")
        self.trace.check(f"{g}.trace")
        if self.arrival in ("poisson", "gamma") and self.rate_rps <= 0:
            raise SpecError(f"{g}.rate_rps", self.rate_rps, f"a rate > 0 for arrival={self.arrival}")
        if self.arrival == "closed_loop" and self.concurrency < 1:
            raise SpecError(f"{g}.concurrency", self.concurrency, "an integer >= 1 for arrival=closed_loop")
        if self.arrival == "trace" and not self.trace.path:
            raise SpecError(f"{g}.trace.path", self.trace.path, "a trace file for arrival=trace")
