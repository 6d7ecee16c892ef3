"""DesSpec: the serving system the discrete-event engine simulates, one sub-spec per concern.

    DesSpec                  engine.des: the goodput SLOs, the engine seed, the counterfactual
      scheduling  SchedulingSpec   engine.des.scheduling: batching policy, budgets, queue, preemption, admission
      kv          KvSpec           engine.des.kv: KV pages, capacity, prefix cache and its tiers
      clients     ClientsSpec      engine.des.clients: how the benchmark client sends and measures
      cluster     ClusterSpec      engine.des.cluster: replicas, router, gateway, shedding, deadlines,
                                   autoscaling, traffic shape
      power       PowerSpec        engine.des.power: device power and the TDP throttle
      outputs     OutputsSpec      engine.des.outputs: tables, timelines, progress

Defaults live in ``conf/engine/des.yaml``; the values here only make the dataclasses usable from a
notebook and mirror that file. A sub-spec may be given as a mapping of its fields
(``DesSpec(kv={"num_kv_blocks": 600})``); ``des.with_(kv={"block_size": 32})`` changes some fields
of some sub-specs. Each field declares its own validity rule (``param(check=...)``, run by
``engine.spec._check.check_fields``, errors naming ``engine.des.<sub>.<field>``); only the checks
that tie fields together are code. The settings a serving framework fixes (``FROM_FRAMEWORK``:
scheduler, max_num_seqs, max_num_batched_tokens, chunk_size, preemption of ``scheduling``;
block_size, watermark of ``kv``) are ``None`` by default: ``resolve(framework)`` fills each None
from ``Specs.framework`` (engine.spec.framework), so their defaults live in the framework profile
only; a value set here overrides the profile.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

from engine.errors import SpecError
from engine.spec._check import (BOOL, NON_NEGATIVE, POSITIVE, EachPositive, IntAtLeast, OneOf, Within,
                                check_fields, positive)
from engine.spec.framework import FrameworkSpec
from engine.spec.meta import param
from engine.spec.scheduling import scheduler_names, scheduler_traits
from engine.spec.workload import LengthDist, _coerce

OUTPUT_FORMATS = ("parquet", "csv")


def __getattr__(name):
    if name == "SCHEDULERS":      # the DES policies (engine.spec.scheduling)
        return scheduler_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: DesSpec fields whose None means "the framework profile's value" (same name on FrameworkSpec),
#: with the sub-spec each lives in.
FROM_FRAMEWORK = {"scheduler": "scheduling", "max_num_seqs": "scheduling",
                  "max_num_batched_tokens": "scheduling", "chunk_size": "scheduling",
                  "block_size": "kv", "watermark": "kv", "preemption": "scheduling"}
QUEUE_POLICIES = ("fcfs", "priority", "sjf")
ADMISSIONS = ("always", "token_bucket")
ROUTERS = ("round_robin", "least_outstanding", "least_kv", "prefix_affinity", "weighted")
PROGRESS = ("auto", "on", "off")
PREFIX_INDEX = ("routed", "events", "lru")
TRAFFIC_SHAPES = ("none", "diurnal", "spike", "ramp", "drain")
AUTOSCALE = ("none", "utilisation", "queue")
PREEMPTIONS = ("recompute", "swap", "none")
ARRIVAL_DISTS = ("none", "poisson", "gamma", "weibull")
THINK_TIME_DISTS = ("fixed", "exponential")
TPOT_DEFINITIONS = ("decode", "per_output_token")


_FILTER_TERM = r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|!=|<|>)\s*(-?\d+(?:\.\d*)?)\s*"

#: Field rules used by many fields.
_INT0, _INT1, _POS, _NONNEG, _BOOL = IntAtLeast(0), IntAtLeast(1), POSITIVE, NON_NEGATIVE, BOOL


@dataclass(frozen=True)
class RequestClass:
    """One request class of ``DesSpec.clients.classes`` (engine.des.workload.sessions.apply_classes).

    name: label of its results (``class_<name>_*``; '' = its index: ``class<i>_*``);
    share: fraction of the stream's requests it takes (classes without a filter; they sum to 1);
    filter: instead of a share, the requests that match "prompt_len >= 2048 & output_len < 100"
        (terms ``column  < <= > >= == !=  number`` joined by &; columns: prompt_len, output_len
        and a trace's other numeric columns, e.g. ``client == 3`` on a ServeGen import; a request
        goes to the first class, in order, whose filter it matches; the rest are split between
        the share classes); meant for traces, whose rows keep their lengths;
    prompt_len / output_len: > 0 draws the class's lengths from prompt_dist / output_dist
        located there (the workload's LengthDist; 0 = the stream's own lengths);
    priority: its SLO / queue class (queue_policy=priority serves lower first; shedding);
    slo_ttft_ms / slo_tpot_ms: its SLOs (0 = engine.des.slo_*_ms);
    deadline_s: its end-to-end deadline (0 = engine.des.cluster.deadline_s).
    """

    name: str = ""
    share: float = param(0.0, check=Within(0, 1, "a fraction in [0, 1]"))
    filter: str = ""
    prompt_len: int = param(0, check=_INT0)
    output_len: int = param(0, check=_INT0)
    prompt_dist: LengthDist = field(default_factory=LengthDist)
    output_dist: LengthDist = field(default_factory=LengthDist)
    priority: int = param(0, check=_INT0)
    slo_ttft_ms: float = param(0.0, check=_NONNEG)
    slo_tpot_ms: float = param(0.0, check=_NONNEG)
    deadline_s: float = param(0.0, check=_NONNEG)

    def __post_init__(self):
        object.__setattr__(self, "prompt_dist", _coerce(LengthDist, self.prompt_dist))
        object.__setattr__(self, "output_dist", _coerce(LengthDist, self.output_dist))

    def check(self, group: str) -> None:
        if not (isinstance(self.name, str) and re.fullmatch(r"[A-Za-z0-9_]*", self.name)):
            raise SpecError(f"{group}.name", self.name, "letters, digits and _ (a metric-name part)")
        check_fields(self, group)
        if self.filter:
            self.terms()
            if self.share:
                raise SpecError(f"{group}.share", self.share, "0 for a class with a filter "
                                "(its members are the requests the filter matches)")
        elif not self.share > 0:
            raise SpecError(f"{group}.share", self.share, "a share > 0 (or a filter)")
        self.prompt_dist.check(f"{group}.prompt_dist")
        self.output_dist.check(f"{group}.output_dist")

    def terms(self) -> list:
        """The filter as [(column, operator, value)]; SpecError naming the filter if it does not parse."""
        out = []
        for part in self.filter.split("&"):
            m = re.fullmatch(_FILTER_TERM, part)
            if m is None:
                raise SpecError("engine.des.clients.classes.filter", self.filter,
                                "terms like 'prompt_len >= 2048' (a column: prompt_len, output_len or a "
                                "trace column; < <= > >= == !=; a number) joined by &")
            out.append((m.group(1), m.group(2), float(m.group(3))))
        return out


class _Checked:
    """A sub-spec whose field rules (``param(check=...)``) run at construction, errors named
    ``<_group>.<field>``; ``_cross`` holds the checks that tie its fields together."""

    _group = "engine.des"

    def __post_init__(self):
        check_fields(self, self._group)
        self._cross()

    def _cross(self) -> None:
        """No cross-field checks."""


@dataclass(frozen=True)
class SchedulingSpec(_Checked):
    """How one replica forms its batches (engine.des.schedulers, engine.des.admission).

    Settings a framework profile supplies when None (``FROM_FRAMEWORK``; see engine.spec.framework):
    scheduler: vllm (prefill-prioritised continuous batching: an iteration is either whole
        prompts or decodes; vLLM V0), sarathi (chunked prefill: decodes first, then prompt chunks
        up to the token budget; vLLM V1), orca (iteration-level: decodes plus whole prompts; KV for
        prompt + output reserved on admission, so never preempts; TensorRT-LLM
        GUARANTEED_NO_EVICT), sglang (prefill-first with chunked prompts; SGLang);
    max_num_seqs, max_num_batched_tokens (token budget of one iteration);
    chunk_size: prompt tokens of one sequence per iteration when chunking (0 = the budget);
    preemption: recompute (drop the KV, prefill again) | swap (a decoding sequence's KV to host
        memory and back over a host link of swap_bandwidth_gb_s per device; host memory
        unbounded) | none (only with a policy that reserves output KV, such as orca);

    queue_policy: fcfs | priority (SLO class, then arrival) | sjf (shortest prompt first);
    admission: always | token_bucket (bucket_rate_rps refill, bucket_size burst; rejects counted).
    """

    scheduler: str | None = param(None, check=OneOf(scheduler_names))
    queue_policy: str = param("fcfs", check=OneOf(QUEUE_POLICIES))
    max_num_seqs: int | None = param(None, check=_INT1)
    max_num_batched_tokens: int | None = param(None, check=_INT1)
    chunk_size: int | None = param(None, check=_INT0)
    preemption: str | None = param(None, check=OneOf(PREEMPTIONS))
    swap_bandwidth_gb_s: float = param(50.0, check=_POS)
    admission: str = param("always", check=OneOf(ADMISSIONS))
    bucket_rate_rps: float = param(0.0, check=_NONNEG)
    bucket_size: float = param(0.0, check=_NONNEG)

    _group = "engine.des.scheduling"

    def _cross(self):
        if self.admission == "token_bucket" and (self.bucket_rate_rps <= 0 or self.bucket_size < 1):
            raise SpecError(f"{self._group}.bucket_rate_rps", self.bucket_rate_rps,
                            "bucket_rate_rps > 0 and bucket_size >= 1 for admission=token_bucket")


@dataclass(frozen=True)
class KvSpec(_Checked):
    """The paged KV cache of a replica (engine.des.kv) and its prefix cache.

    block_size: tokens per KV page; watermark: fraction of KV blocks kept free when admitting
        (both None = the framework profile's);
    num_kv_blocks: 0 = from the memory model;
    prefix_caching: reuse KV of shared prefix blocks (requests with hash ids), LRU eviction;
    kv_host_gb / kv_disk_gb: per-replica host-DRAM and local-disk tiers below HBM for prefix-cache
        blocks (LRU eviction down the tiers; engine.des.kv.tiers); kv_host_bandwidth_gb_s (0 =
        hardware.host_bandwidth x devices of the replica), kv_disk_bandwidth_gb_s: transfer rate
        of a hit served from there.
    """

    block_size: int | None = param(None, check=_INT1)
    num_kv_blocks: int = param(0, check=_INT0)
    watermark: float | None = param(None, check=Within(0, 1, "a fraction in [0, 1)", high_open=True))
    prefix_caching: bool = param(False, check=_BOOL)
    kv_host_gb: float = param(0.0, check=_NONNEG)
    kv_host_bandwidth_gb_s: float = param(0.0, check=_NONNEG)
    kv_disk_gb: float = param(0.0, check=_NONNEG)
    kv_disk_bandwidth_gb_s: float = param(5.0, check=_POS)

    _group = "engine.des.kv"


@dataclass(frozen=True)
class ClientsSpec(_Checked):
    """The benchmark client: how requests are sent and measured (engine.des.workload; all off by
    default).

    ramp_up_s: closed loop: user i (0-based) of N sends its first request at i x ramp_up_s / N;
        open loop: the arrival rate rises linearly from 0 to the workload's rate over ramp_up_s
        (arrival times warped: a -> sqrt(2 W a) for a < W/2, a + W/2 after);
    length_jitter: each request's prompt and output lengths x U[1 - j, 1 + j], rounded, >= 1
        (vLLM ``benchmark_serving`` --random-range-ratio);
    think_time_dist: fixed | exponential (mean workload.think_time_s) between a closed-loop user's
        completion and its next request;
    warmup_s / exclude_drain: measurement window: the summary covers requests arriving at or after
        first arrival + warmup_s and, with exclude_drain, completing by the last arrival (after it
        the load drains); throughput counts the completions inside that window over its length.
        The per-request table keeps every request (column ``measured`` marks the window).
    tpot_definition: decode = (completion - first token) / (output - 1) per request (vLLM bench,
        SGLang bench, AIPerf, inference-perf) | per_output_token = (completion - arrival) / output,
        the first token included (GuideLLM's time_per_output_token, inference-perf's NTPOT); set
        by workload.client (engine.des.workload.clients);
    arrival_dist: none | poisson | gamma | weibull: the open-loop stream's gaps drawn again from
        that law with the stream's mean gap and coefficient of variation arrival_cv
        (engine.des.workload.arrivals), before the traffic shape;
    session_turns: mean turns of a multi-turn session (geometric, >= 1; 0 = no sessions): the
        stream's requests become session turns; turn j's prompt is the session so far (system
        prompt, earlier messages and answers) plus the request's own prompt as the new message;
        turn j + 1 is sent session_think_s (exponential mean) after turn j completes;
        session_system_tokens: a system prompt all sessions share (prefix blocks shared);
    reasoning_fraction / reasoning_output_scale: that share of requests (drawn from seed) has its
        output length x the scale (reasoning-style long outputs);
    client_rtt_ms: network round trip between client and gateway (half before the queue, half
        after each token);
    classes: request classes (a list of RequestClass mappings: name, share or filter, their own
        length distributions, priority, SLOs, deadline); empty = one class as before (the
        workload's priority_fraction); per-class results ``class_<name>_*``.
    """

    ramp_up_s: float = param(0.0, check=_NONNEG)
    length_jitter: float = param(0.0, check=Within(0, 1, "a fraction in [0, 1)", high_open=True))
    think_time_dist: str = param("fixed", check=OneOf(THINK_TIME_DISTS))
    warmup_s: float = param(0.0, check=_NONNEG)
    exclude_drain: bool = param(False, check=_BOOL)
    tpot_definition: str = param("decode", check=OneOf(TPOT_DEFINITIONS))
    arrival_dist: str = param("none", check=OneOf(ARRIVAL_DISTS))
    arrival_cv: float = param(1.0, check=_POS)
    session_turns: float = param(0.0, check=Within(1, float("inf"), "0 (no sessions) or a mean >= 1", zero=True))
    session_think_s: float = param(0.0, check=_NONNEG)
    session_system_tokens: int = param(0, check=_INT0)
    reasoning_fraction: float = param(0.0, check=Within(0, 1, "a fraction in [0, 1]"))
    reasoning_output_scale: float = param(1.0, check=Within(1, float("inf"), "a factor >= 1"))
    client_rtt_ms: float = param(0.0, check=_NONNEG)
    classes: tuple = param((), config_type=list)

    _group = "engine.des.clients"

    def _cross(self):
        g = self._group
        object.__setattr__(self, "classes", tuple(
            c if isinstance(c, RequestClass) else _request_class(c, i) for i, c in enumerate(self.classes)))
        for i, c in enumerate(self.classes):
            c.check(f"{g}.classes[{i}]")
        if self.classes:
            names = [c.name or str(i) for i, c in enumerate(self.classes)]
            if len(set(names)) < len(names):
                raise SpecError(f"{g}.classes", names, "distinct class names")
            shares = [c.share for c in self.classes if not c.filter]
            if not any(c.filter for c in self.classes) and abs(sum(shares) - 1.0) > 1e-6:
                raise SpecError(f"{g}.classes", [c.share for c in self.classes], "shares summing to 1")


@dataclass(frozen=True)
class ClusterSpec(_Checked):
    """Replicas behind a gateway (engine.des.cluster; all beyond replicas and router off by default).

    replicas: data-parallel replicas (0 = partition.dp) behind ``router``;
    prefill_replicas: > 0 disaggregates: that many of the replicas only prefill and hand each
        prompt's KV to one of the others, which only decode (hand-off time from
        engine.analytical.disagg with the engine.analytical.disagg link); 0 = co-located;
    router=weighted: score = w_prefix x prefix share - w_queue x queue / max - w_kv x KV use -
        w_tokens x in-flight tokens / max; signal_delay_s: the gateway sees load signals as they
        were that long ago (scraped metrics);
    prefix_index: what the weighted router's gateway index of prefix blocks knows: routed (every
        block it routed, never forgotten), events (blocks the replica stored, forgotten when the
        replica evicts them: KV events), lru (routed blocks, at most as many per replica as its
        prefix cache holds blocks, least recently routed forgotten first);
    max_model_len: prompt + output above it is rejected (0 = no guard);
    timeout_s: a request not scheduled within this many seconds of its arrival is cancelled
        (leaves the queue; counted in cancelled; 0 = never);
    deadline_s: end-to-end deadline: a request not complete this long after its arrival is
        aborted wherever it is (queue or running batch; its KV blocks freed as a preemption frees
        them) and counted in cancelled (0 = never);
    shed_outstanding: when outstanding requests per active replica exceed it, arrivals of
        priority class >= shed_priority are rejected (0 = never);
    autoscale: none | utilisation (busy fraction) | queue (outstanding per replica) against
        autoscale_target, every autoscale_interval_s, between autoscale_min and autoscale_max
        replicas; a new replica serves after provision_delay_s; scale-down drains a replica, to
        the highest recommendation of the last autoscale_stabilization_s (Kubernetes HPA's
        scale-down stabilization window, default 300 s there too; 0 = none);
        price_per_hour: USD per device-hour (0 = hardware.price_per_hour);
    traffic_shape: none | diurnal (rate x 1 + a sin(2 pi (t - start) / period - pi/2), a from
        traffic_peak_ratio = peak / trough) | spike (rate x peak_ratio during [start, start + len))
        | ramp (rate rises linearly from 1/peak_ratio to 1 x over [start, start + len)) | drain
        (rate falls linearly to 0 over [start, start + len), none after): the open-loop arrivals are
        time-warped so the mean rate over the stream keeps its value.
    """

    replicas: int = param(0, check=_INT0)
    prefill_replicas: int = param(0, check=_INT0)
    router: str = param("round_robin", check=OneOf(ROUTERS))
    w_prefix: float = param(1.0, check=_NONNEG)
    w_queue: float = param(1.0, check=_NONNEG)
    w_kv: float = param(0.0, check=_NONNEG)
    w_tokens: float = param(0.0, check=_NONNEG)
    signal_delay_s: float = param(0.0, check=_NONNEG)
    prefix_index: str = param("routed", check=OneOf(PREFIX_INDEX))
    max_model_len: int = param(0, check=_INT0)
    timeout_s: float = param(0.0, check=_NONNEG)
    deadline_s: float = param(0.0, check=_NONNEG)
    shed_outstanding: float = param(0.0, check=_NONNEG)
    shed_priority: int = param(1, check=_INT0)
    autoscale: str = param("none", check=OneOf(AUTOSCALE))
    autoscale_min: int = param(1, check=_INT1)
    autoscale_max: int = param(0, check=_INT0)
    autoscale_target: float = 0.7
    autoscale_interval_s: float = param(30.0, check=_NONNEG)
    provision_delay_s: float = param(180.0, check=_NONNEG)
    autoscale_stabilization_s: float = param(300.0, check=_NONNEG)
    price_per_hour: float = param(0.0, check=_NONNEG)
    traffic_shape: str = param("none", check=OneOf(TRAFFIC_SHAPES))
    traffic_period_s: float = param(86400.0, check=_POS)
    traffic_peak_ratio: float = param(1.0, check=Within(1, float("inf"), "a ratio >= 1"))
    traffic_start_s: float = param(0.0, check=_NONNEG)
    traffic_len_s: float = param(0.0, check=_NONNEG)

    _group = "engine.des.cluster"

    def _cross(self):
        g = self._group
        if self.traffic_shape in ("spike", "ramp", "drain") and self.traffic_len_s <= 0:
            raise SpecError(f"{g}.traffic_len_s", self.traffic_len_s,
                            f"a length > 0 s for traffic_shape={self.traffic_shape}")
        if self.autoscale != "none":
            positive(g, "autoscale_target", self.autoscale_target)
            positive(g, "autoscale_interval_s", self.autoscale_interval_s)


@dataclass(frozen=True)
class PowerSpec(_Checked):
    """Device power and the TDP-driven throttle (engine.des.features.power).

    peak_power_ratio: unthrottled draw at full roofline utilisation / hardware.tdp (1 = TDP only
        at u = 1, the analytical energy model; > 1 lets a busy chip ask for more than TDP);
    throttle: cap the sustained power at TDP: while the power averaged over
        throttle_time_constant_s exceeds TDP the clock drops (>= throttle_min_clock of nominal)
        so an iteration's power equals TDP; off (default) changes no step time.
    """

    throttle: bool = param(False, check=_BOOL)
    peak_power_ratio: float = param(1.0, check=Within(1.0, 10.0, "a ratio in [1, 10]"))
    throttle_time_constant_s: float = param(5.0, check=_POS)
    throttle_min_clock: float = param(0.5, check=Within(0.05, 1.0, "a fraction in [0.05, 1]"))

    _group = "engine.des.power"


@dataclass(frozen=True)
class OutputsSpec(_Checked):
    """What a run writes beside its summary (engine.des.metrics, engine.des.features.report).

    output_format: the per-request table as parquet | csv (table.csv);
    token_times: per-token timestamps (token_times_s, itl_ms list columns);
    record_iterations: keep the per-iteration timeline (simulate() only);
    record_decisions: keep every routing/admission/preemption decision (route, shed, reject_max_len,
        expire, abort_queued, abort_running, preempt, scaling) with the signals it saw
        (frames["decisions"]; engine.des.cluster.autoscaler);
    timeseries_s: window of the load/queue/KV/replica time series (0 = none; frames["timeseries"]);
    progress: a progress bar on stderr: auto | on | off.
    """

    output_format: str = param("parquet", check=OneOf(OUTPUT_FORMATS))
    token_times: bool = param(False, check=_BOOL)
    record_iterations: bool = param(False, check=_BOOL)
    record_decisions: bool = param(False, check=_BOOL)
    timeseries_s: float = param(0.0, check=_NONNEG)
    progress: str = param("auto", check=OneOf(PROGRESS))

    _group = "engine.des.outputs"


#: The sub-specs of DesSpec, by field name.
SUBSPECS = {"scheduling": SchedulingSpec, "kv": KvSpec, "clients": ClientsSpec, "cluster": ClusterSpec,
            "power": PowerSpec, "outputs": OutputsSpec}
#: Each sub-spec field's sub-spec (field names are unique across the sub-specs).
_SUB_OF = {f.name: sub for sub, cls in SUBSPECS.items() for f in fields(cls)}


@dataclass(frozen=True)
class DesSpec:
    """Scheduler, KV-cache and cluster settings of a simulated deployment, by concern (the
    sub-specs above); here the settings of the simulation as a whole:

    slo_ttft_ms / slo_tpot_ms: goodput counts requests meeting both;
    class_slo_ttft_ms / class_slo_tpot_ms: per priority class SLOs (empty = slo_*_ms);
    max_decode_run: most decode iterations advanced in one event (closed-form series);
    seed: engine-side randomness: the step-time noise callable built from calibration.noise and
        the client draws (the request stream draws from ``WorkloadSpec.seed``);
    counterfactual: "key=value,..." engine.des settings (``scheduling.queue_policy=priority``) of
        a second run on the same arrivals; per-request regret in frames["regret"], cf_* in the
        summary (engine.des.cluster.counterfactual).
    """

    scheduling: SchedulingSpec = param(default_factory=SchedulingSpec)
    kv: KvSpec = param(default_factory=KvSpec)
    clients: ClientsSpec = param(default_factory=ClientsSpec)
    cluster: ClusterSpec = param(default_factory=ClusterSpec)
    power: PowerSpec = param(default_factory=PowerSpec)
    outputs: OutputsSpec = param(default_factory=OutputsSpec)
    slo_ttft_ms: float = param(1000.0, check=_POS)
    slo_tpot_ms: float = param(100.0, check=_POS)
    class_slo_ttft_ms: tuple = param((), config_type=list, check=EachPositive(
        "a list of positive milliseconds, one per priority class"))
    class_slo_tpot_ms: tuple = param((), config_type=list, check=EachPositive(
        "a list of positive milliseconds, one per priority class"))
    max_decode_run: int = param(4096, check=_INT1)
    seed: int = param(0, check=_INT0)
    counterfactual: str = ""
    #: the profile the None fields were filled from (set by ``resolve``; None = not resolved)
    framework: FrameworkSpec | None = param(None, config=False)

    _group = "engine.des"

    def __post_init__(self):
        g = self._group
        for name, cls in SUBSPECS.items():
            object.__setattr__(self, name, _subspec(cls, getattr(self, name), f"{g}.{name}"))
        check_fields(self, g)
        s = self.scheduling
        if self.framework is not None:
            if s.preemption == "none" and not scheduler_traits(s.scheduler).reserves_output:
                raise SpecError(f"{s._group}.preemption", "none",
                                f"recompute or swap for scheduler={s.scheduler} (only a policy "
                                "that reserves prompt + output KV at admission, such as orca, never "
                                "preempts)")

    def __getattr__(self, name):
        """Only for names not found: a setting of a sub-spec asked for at the top says where it is."""
        sub = _SUB_OF.get(name)
        if sub is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise AttributeError(f"DesSpec has no attribute {name!r}: it is des.{sub}.{name}")

    def with_(self, **subs) -> "DesSpec":
        """This spec with some fields changed: a sub-spec name with a mapping changes those fields
        of that sub-spec (``with_(kv={"block_size": 32}, outputs={"progress": "off"})``); any
        other keyword replaces a field of DesSpec itself (``seed=3``, ``kv=KvSpec(...)``)."""
        kw = {}
        for name, value in subs.items():
            if name in SUBSPECS and isinstance(value, Mapping):
                cur = getattr(self, name)
                unknown = sorted(set(value) - {f.name for f in fields(cur)})
                if unknown:
                    raise SpecError(f"{self._group}.{name}", unknown,
                                    f"fields of {type(cur).__name__} ({', '.join(f.name for f in fields(cur))})")
                kw[name] = replace(cur, **value)
            else:
                kw[name] = value
        return replace(self, **kw)

    def resolve(self, framework: FrameworkSpec) -> "DesSpec":
        """This spec with every None of ``FROM_FRAMEWORK`` taken from ``framework`` (a value set
        here wins). Idempotent; the result remembers the profile in ``framework``."""
        if self.framework is not None:
            return self
        fill = {}
        for f, sub in FROM_FRAMEWORK.items():
            if getattr(getattr(self, sub), f) is None:
                fill.setdefault(sub, {})[f] = getattr(framework, f)
        return self.with_(**fill, framework=framework)

    @property
    def resolved(self) -> "DesSpec":
        """Resolved against the neutral ``generic`` profile when not resolved yet."""
        return self.resolve(FrameworkSpec()) if self.framework is None else self

    @property
    def token_budget(self) -> int:
        """Tokens one iteration may process: max_num_batched_tokens; a policy with the
        ``budget_is_chunk`` trait (engine.spec.scheduling: sarathi, sglang) min(that, chunk_size) when chunk_size > 0 (SGLang: the prefill batch
        stops at chunked_prefill_size; sarathi: the pre-profile chunk budget)."""
        s = self.resolved.scheduling
        if scheduler_traits(s.scheduler).budget_is_chunk and s.chunk_size:
            return min(s.max_num_batched_tokens, s.chunk_size)
        return s.max_num_batched_tokens

    @property
    def cluster_features(self) -> bool:
        """Any of the cluster-scale features on (engine.des.cluster.Fleet runs the extra bookkeeping)."""
        c, k, cl, o = self.clients, self.kv, self.cluster, self.outputs
        return bool(cl.traffic_shape != "none" or c.arrival_dist != "none" or c.session_turns
                    or c.reasoning_fraction or cl.max_model_len or c.client_rtt_ms or cl.timeout_s
                    or k.kv_host_gb or k.kv_disk_gb or cl.router == "weighted" or cl.signal_delay_s
                    or cl.shed_outstanding or cl.autoscale != "none" or o.timeseries_s
                    or self.class_slo_ttft_ms or self.class_slo_tpot_ms or o.record_decisions
                    or self.counterfactual or c.classes or cl.deadline_s
                    or cl.prefix_index != "routed")


def _subspec(cls, value, group: str):
    """A sub-spec from itself, None (its defaults) or a mapping of its fields (lists to tuples);
    SpecError naming ``group`` and the unknown keys."""
    if isinstance(value, cls):
        return value
    if value is None:
        return cls()
    if not isinstance(value, Mapping):
        raise SpecError(group, value, f"a {cls.__name__} or a mapping of its fields")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise SpecError(group, unknown, f"fields of {cls.__name__} ({', '.join(sorted(known))})")
    return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in value.items()})


def _request_class(d, i: int) -> RequestClass:
    """A RequestClass from a config mapping; SpecError naming unknown keys."""
    if not isinstance(d, dict):
        raise SpecError(f"engine.des.clients.classes[{i}]", d, "a mapping of RequestClass fields")
    known = {f.name for f in fields(RequestClass)}
    extra = sorted(set(d) - known)
    if extra:
        raise SpecError(f"engine.des.clients.classes[{i}]", extra, f"fields among {sorted(known)}")
    return RequestClass(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})


__all__ = ["DesSpec", "SchedulingSpec", "KvSpec", "ClientsSpec", "ClusterSpec", "PowerSpec", "OutputsSpec",
           "SUBSPECS", "RequestClass", "PREFIX_INDEX", "FROM_FRAMEWORK", "SCHEDULERS", "QUEUE_POLICIES",
           "ADMISSIONS", "ROUTERS", "TRAFFIC_SHAPES", "AUTOSCALE"]
