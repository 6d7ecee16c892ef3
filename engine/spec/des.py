"""DesSpec: the serving system the discrete-event engine simulates (scheduler, KV cache, cluster).

Defaults live in ``conf/engine/des.yaml``; the values here only make the dataclass usable from a
notebook and mirror that file. The scheduler settings a serving framework fixes (scheduler,
max_num_seqs, max_num_batched_tokens, chunk_size, block_size, watermark, preemption) are ``None``
by default: ``resolve(framework)`` fills each None from ``Specs.framework`` (engine.spec.framework),
so their defaults live in the framework profile only; a value set here overrides the profile.
"""

import re
from dataclasses import dataclass, field, fields, replace

from engine.errors import SpecError
from engine.spec._check import non_negative, one_of, positive, positive_int
from engine.spec.framework import FrameworkSpec
from engine.spec.scheduling import scheduler_names, scheduler_traits
from engine.spec.meta import param
from engine.spec.workload import LengthDist, _coerce
OUTPUT_FORMATS = ("parquet", "csv")



def __getattr__(name):
    if name == "SCHEDULERS":      # the DES policies (engine.spec.scheduling)
        return scheduler_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: DesSpec fields whose None means "the framework profile's value" (same name on FrameworkSpec).
FROM_FRAMEWORK = ("scheduler", "max_num_seqs", "max_num_batched_tokens", "chunk_size", "block_size",
                  "watermark", "preemption")
QUEUE_POLICIES = ("fcfs", "priority", "sjf")
ADMISSIONS = ("always", "token_bucket")
ROUTERS = ("round_robin", "least_outstanding", "least_kv", "prefix_affinity", "weighted")
PROGRESS = ("auto", "on", "off")
PREFIX_INDEX = ("routed", "events", "lru")
TRAFFIC_SHAPES = ("none", "diurnal", "spike", "ramp", "drain")
AUTOSCALE = ("none", "utilisation", "queue")


_FILTER_TERM = r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|!=|<|>)\s*(-?\d+(?:\.\d*)?)\s*"


@dataclass(frozen=True)
class RequestClass:
    """One request class of ``DesSpec.classes`` (engine.des.workload.sessions.apply_classes).

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
    deadline_s: its end-to-end deadline (0 = engine.des.deadline_s).
    """

    name: str = ""
    share: float = 0.0
    filter: str = ""
    prompt_len: int = 0
    output_len: int = 0
    prompt_dist: LengthDist = field(default_factory=LengthDist)
    output_dist: LengthDist = field(default_factory=LengthDist)
    priority: int = 0
    slo_ttft_ms: float = 0.0
    slo_tpot_ms: float = 0.0
    deadline_s: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "prompt_dist", _coerce(LengthDist, self.prompt_dist))
        object.__setattr__(self, "output_dist", _coerce(LengthDist, self.output_dist))

    def check(self, group: str) -> None:
        if not (isinstance(self.name, str) and re.fullmatch(r"[A-Za-z0-9_]*", self.name)):
            raise SpecError(f"{group}.name", self.name, "letters, digits and _ (a metric-name part)")
        if not (isinstance(self.share, (int, float)) and 0 <= self.share <= 1):
            raise SpecError(f"{group}.share", self.share, "a fraction in [0, 1]")
        if self.filter:
            self.terms()
            if self.share:
                raise SpecError(f"{group}.share", self.share, "0 for a class with a filter "
                                "(its members are the requests the filter matches)")
        elif not self.share > 0:
            raise SpecError(f"{group}.share", self.share, "a share > 0 (or a filter)")
        positive_int(group, "prompt_len", self.prompt_len, minimum=0)
        positive_int(group, "output_len", self.output_len, minimum=0)
        positive_int(group, "priority", self.priority, minimum=0)
        for f in ("slo_ttft_ms", "slo_tpot_ms", "deadline_s"):
            non_negative(group, f, getattr(self, f))
        self.prompt_dist.check(f"{group}.prompt_dist")
        self.output_dist.check(f"{group}.output_dist")

    def terms(self) -> list:
        """The filter as [(column, operator, value)]; SpecError naming the filter if it does not parse."""
        out = []
        for part in self.filter.split("&"):
            m = re.fullmatch(_FILTER_TERM, part)
            if m is None:
                raise SpecError("engine.des.classes.filter", self.filter,
                                "terms like 'prompt_len >= 2048' (a column: prompt_len, output_len or a "
                                "trace column; < <= > >= == !=; a number) joined by &")
            out.append((m.group(1), m.group(2), float(m.group(3))))
        return out


@dataclass(frozen=True)
class DesSpec:
    """Scheduler, KV-cache and cluster settings of a simulated deployment.

    Settings a framework profile supplies when None (``FROM_FRAMEWORK``; see engine.spec.framework):
    scheduler: vllm (prefill-prioritised continuous batching: an iteration is either whole
        prompts or decodes; vLLM V0), sarathi (chunked prefill: decodes first, then prompt chunks
        up to the token budget; vLLM V1), orca (iteration-level: decodes plus whole prompts; KV for
        prompt + output reserved on admission, so never preempts; TensorRT-LLM
        GUARANTEED_NO_EVICT), sglang (prefill-first with chunked prompts; SGLang);
    max_num_seqs, max_num_batched_tokens (token budget of one iteration);
    chunk_size: prompt tokens of one sequence per iteration when chunking (0 = the budget);
    block_size: tokens per KV page; watermark: fraction of KV blocks kept free when admitting;
    preemption: recompute (drop the KV, prefill again) | swap (a decoding sequence's KV to host
        memory and back over a host link of swap_bandwidth_gb_s per device; host memory
        unbounded) | none (only with scheduler=orca, whose reservation never preempts);

    Settings of the simulation itself:
    queue_policy: fcfs | priority (SLO class, then arrival) | sjf (shortest prompt first);
    num_kv_blocks: 0 = from the memory model;
    admission: always | token_bucket (bucket_rate_rps refill, bucket_size burst; rejects counted);
    replicas: data-parallel replicas (0 = partition.dp) behind ``router``;
    prefill_replicas: > 0 disaggregates: that many of the replicas only prefill and hand each
        prompt's KV to one of the others, which only decode (hand-off time from
        engine.analytical.disagg with the engine.analytical.disagg link); 0 = co-located;
    prefix_caching: reuse KV of shared prefix blocks (requests with hash ids), LRU eviction;
    slo_ttft_ms / slo_tpot_ms: goodput counts requests meeting both;
    max_decode_run: most decode iterations advanced in one event (closed-form series);
    seed: engine-side randomness: the step-time noise callable built from calibration.noise and
        the client draws below (the request stream draws from ``WorkloadSpec.seed``).

    Clients as benchmark tools run them (engine.des.workload.apply_clients; all off by default):
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
        by workload.client (engine.des.workload.clients).

    Cluster scale (engine.des.cluster, engine.des.kv.tiers, engine.des.workload.sessions; all off by default):
    arrival_dist: none | poisson | gamma | weibull: the open-loop stream's gaps drawn again from
        that law with the stream's mean gap and coefficient of variation arrival_cv
        (engine.des.workload.arrivals), before the traffic shape;
    traffic_shape: none | diurnal (rate x 1 + a sin(2 pi (t - start) / period - pi/2), a from
        traffic_peak_ratio = peak / trough) | spike (rate x peak_ratio during [start, start + len))
        | ramp (rate rises linearly from 1/peak_ratio to 1 x over [start, start + len)) | drain
        (rate falls linearly to 0 over [start, start + len), none after): the open-loop arrivals are
        time-warped so the mean rate over the stream keeps its value;
    session_turns: mean turns of a multi-turn session (geometric, >= 1; 0 = no sessions): the
        stream's requests become session turns; turn j's prompt is the session so far (system
        prompt, earlier messages and answers) plus the request's own prompt as the new message;
        turn j + 1 is sent session_think_s (exponential mean) after turn j completes;
        session_system_tokens: a system prompt all sessions share (prefix blocks shared);
    reasoning_fraction / reasoning_output_scale: that share of requests (drawn from seed) has its
        output length x the scale (reasoning-style long outputs);
    max_model_len: prompt + output above it is rejected (0 = no guard); client_rtt_ms: network
        round trip between client and gateway (half before the queue, half after each token);
    timeout_s: a request not scheduled within this many seconds of its arrival is cancelled
        (leaves the queue; counted in cancelled; 0 = never);
    kv_host_gb / kv_disk_gb: per-replica host-DRAM and local-disk tiers below HBM for prefix-cache
        blocks (LRU eviction down the tiers); kv_host_bandwidth_gb_s (0 = hardware.host_bandwidth x
        devices of the replica), kv_disk_bandwidth_gb_s: transfer rate of a hit served from there;
    router=weighted: score = w_prefix x prefix share - w_queue x queue / max - w_kv x KV use -
        w_tokens x in-flight tokens / max; signal_delay_s: the gateway sees load signals as they
        were that long ago (scraped metrics);
    shed_outstanding: when outstanding requests per active replica exceed it, arrivals of
        priority class >= shed_priority are rejected (0 = never);
    autoscale: none | utilisation (busy fraction) | queue (outstanding per replica) against
        autoscale_target, every autoscale_interval_s, between autoscale_min and autoscale_max
        replicas; a new replica serves after provision_delay_s; scale-down drains a replica, to
        the highest recommendation of the last autoscale_stabilization_s (Kubernetes HPA's
        scale-down stabilization window, default 300 s there too; 0 = none);
        price_per_hour: USD per device-hour (0 = hardware.price_per_hour);
    timeseries_s: window of the load/queue/KV/replica time series (0 = none; frames["timeseries"]);
    class_slo_ttft_ms / class_slo_tpot_ms: per priority class SLOs (empty = slo_*_ms);
    record_decisions: keep every routing/admission/preemption decision (route, shed, reject_max_len,
        expire, abort_queued, abort_running, preempt, scaling) with the signals it saw
        (frames["decisions"]; engine.des.cluster.autoscaler);
    counterfactual: "key=value,..." engine.des settings of a second run on the same arrivals;
        per-request regret in frames["regret"], cf_* in the summary (engine.des.cluster.counterfactual);
    classes: request classes (a list of RequestClass mappings: name, share or filter, their own
        length distributions, priority, SLOs, deadline); empty = one class as before (the
        workload's priority_fraction); per-class results ``class_<name>_*``;
    deadline_s: end-to-end deadline: a request not complete this long after its arrival is
        aborted wherever it is (queue or running batch; its KV blocks freed as a preemption frees
        them) and counted in cancelled (0 = never);
    prefix_index: what the weighted router's gateway index of prefix blocks knows: routed (every
        block it routed, never forgotten), events (blocks the replica stored, forgotten when the
        replica evicts them: KV events), lru (routed blocks, at most as many per replica as its
        prefix cache holds blocks, least recently routed forgotten first).
    """

    scheduler: str | None = None
    queue_policy: str = "fcfs"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    chunk_size: int | None = None
    block_size: int | None = None
    num_kv_blocks: int = 0
    watermark: float | None = None
    preemption: str | None = None
    swap_bandwidth_gb_s: float = 50.0
    admission: str = "always"
    bucket_rate_rps: float = 0.0
    bucket_size: float = 0.0
    replicas: int = 0
    prefill_replicas: int = 0
    router: str = "round_robin"
    prefix_caching: bool = False
    slo_ttft_ms: float = 1000.0
    slo_tpot_ms: float = 100.0
    max_decode_run: int = 4096
    record_iterations: bool = False
    progress: str = "auto"
    seed: int = 0
    ramp_up_s: float = 0.0
    length_jitter: float = 0.0
    think_time_dist: str = "fixed"
    warmup_s: float = 0.0
    exclude_drain: bool = False
    # --- benchmark clients (engine.des.workload.clients): how the client defines TPOT
    tpot_definition: str = "decode"
    arrival_dist: str = "none"
    arrival_cv: float = 1.0
    traffic_shape: str = "none"
    traffic_period_s: float = 86400.0
    traffic_peak_ratio: float = 1.0
    traffic_start_s: float = 0.0
    traffic_len_s: float = 0.0
    session_turns: float = 0.0
    session_think_s: float = 0.0
    session_system_tokens: int = 0
    reasoning_fraction: float = 0.0
    reasoning_output_scale: float = 1.0
    max_model_len: int = 0
    client_rtt_ms: float = 0.0
    timeout_s: float = 0.0
    kv_host_gb: float = 0.0
    kv_host_bandwidth_gb_s: float = 0.0
    kv_disk_gb: float = 0.0
    kv_disk_bandwidth_gb_s: float = 5.0
    w_prefix: float = 1.0
    w_queue: float = 1.0
    w_kv: float = 0.0
    w_tokens: float = 0.0
    signal_delay_s: float = 0.0
    shed_outstanding: float = 0.0
    shed_priority: int = 1
    autoscale: str = "none"
    autoscale_min: int = 1
    autoscale_max: int = 0
    autoscale_target: float = 0.7
    autoscale_interval_s: float = 30.0
    provision_delay_s: float = 180.0
    autoscale_stabilization_s: float = 300.0
    price_per_hour: float = 0.0
    timeseries_s: float = 0.0
    class_slo_ttft_ms: tuple = param((), config_type=list)
    class_slo_tpot_ms: tuple = param((), config_type=list)
    record_decisions: bool = False
    counterfactual: str = ""
    classes: tuple = param((), config_type=list)
    deadline_s: float = 0.0
    prefix_index: str = "routed"
    # outputs (engine.des.features.report): the per-request table as parquet | csv (table.csv like the
    # SimLLM seed's results/q512.csv); per-token timestamps (token_times_s, itl_ms list columns)
    output_format: str = "parquet"
    token_times: bool = False
    # device power and the TDP-driven throttle (engine.des.features.power):
    # peak_power_ratio: unthrottled draw at full roofline utilisation / hardware.tdp (1 = TDP only
    #     at u = 1, the analytical energy model; > 1 lets a busy chip ask for more than TDP);
    # throttle: cap the sustained power at TDP: while the power averaged over
    #     throttle_time_constant_s exceeds TDP the clock drops (>= throttle_min_clock of nominal)
    #     so an iteration's power equals TDP; off (default) changes no step time
    throttle: bool = False
    peak_power_ratio: float = 1.0
    throttle_time_constant_s: float = 5.0
    throttle_min_clock: float = 0.5
    #: the profile the None fields were filled from (set by ``resolve``; None = not resolved)
    framework: FrameworkSpec | None = param(None, config=False)

    _group = "engine.des"

    def __post_init__(self):
        g = self._group
        one_of(g, "output_format", self.output_format, OUTPUT_FORMATS)
        for f in ("token_times", "throttle"):
            if not isinstance(getattr(self, f), bool):
                raise SpecError(f"{g}.{f}", getattr(self, f), "true or false")
        if not (isinstance(self.peak_power_ratio, (int, float)) and 1.0 <= self.peak_power_ratio <= 10.0):
            raise SpecError(f"{g}.peak_power_ratio", self.peak_power_ratio, "a ratio in [1, 10]")
        positive(g, "throttle_time_constant_s", self.throttle_time_constant_s)
        if not (isinstance(self.throttle_min_clock, (int, float)) and 0.05 <= self.throttle_min_clock <= 1.0):
            raise SpecError(f"{g}.throttle_min_clock", self.throttle_min_clock, "a fraction in [0.05, 1]")
        if self.scheduler is not None:
            one_of(g, "scheduler", self.scheduler, scheduler_names())
        if self.preemption is not None:
            one_of(g, "preemption", self.preemption, ("recompute", "swap", "none"))
        one_of(g, "queue_policy", self.queue_policy, QUEUE_POLICIES)
        one_of(g, "admission", self.admission, ADMISSIONS)
        positive(g, "swap_bandwidth_gb_s", self.swap_bandwidth_gb_s)
        one_of(g, "router", self.router, ROUTERS)
        one_of(g, "progress", self.progress, PROGRESS)
        for f in ("max_num_seqs", "max_num_batched_tokens", "block_size"):
            if getattr(self, f) is not None:
                positive_int(g, f, getattr(self, f))
        if self.chunk_size is not None:
            positive_int(g, "chunk_size", self.chunk_size, minimum=0)
        positive_int(g, "max_decode_run", self.max_decode_run)
        positive_int(g, "num_kv_blocks", self.num_kv_blocks, minimum=0)
        positive_int(g, "replicas", self.replicas, minimum=0)
        positive_int(g, "prefill_replicas", self.prefill_replicas, minimum=0)
        positive_int(g, "seed", self.seed, minimum=0)
        non_negative(g, "ramp_up_s", self.ramp_up_s)
        non_negative(g, "warmup_s", self.warmup_s)
        if not (isinstance(self.length_jitter, (int, float)) and 0 <= self.length_jitter < 1):
            raise SpecError(f"{g}.length_jitter", self.length_jitter, "a fraction in [0, 1)")
        one_of(g, "think_time_dist", self.think_time_dist, ("fixed", "exponential"))
        if not isinstance(self.exclude_drain, bool):
            raise SpecError(f"{g}.exclude_drain", self.exclude_drain, "true or false")
        one_of(g, "tpot_definition", self.tpot_definition, ("decode", "per_output_token"))
        one_of(g, "traffic_shape", self.traffic_shape, TRAFFIC_SHAPES)
        one_of(g, "arrival_dist", self.arrival_dist, ("none", "poisson", "gamma", "weibull"))
        positive(g, "arrival_cv", self.arrival_cv)
        one_of(g, "autoscale", self.autoscale, AUTOSCALE)
        positive(g, "traffic_period_s", self.traffic_period_s)
        if not self.traffic_peak_ratio >= 1:
            raise SpecError(f"{g}.traffic_peak_ratio", self.traffic_peak_ratio, "a ratio >= 1")
        for f in ("traffic_start_s", "traffic_len_s", "session_think_s", "client_rtt_ms", "timeout_s",
                  "kv_host_gb", "kv_host_bandwidth_gb_s", "kv_disk_gb", "w_prefix", "w_queue", "w_kv",
                  "w_tokens", "signal_delay_s", "shed_outstanding", "autoscale_interval_s",
                  "provision_delay_s", "autoscale_stabilization_s", "price_per_hour", "timeseries_s"):
            non_negative(g, f, getattr(self, f))
        positive(g, "kv_disk_bandwidth_gb_s", self.kv_disk_bandwidth_gb_s)
        if self.traffic_shape in ("spike", "ramp", "drain") and self.traffic_len_s <= 0:
            raise SpecError(f"{g}.traffic_len_s", self.traffic_len_s,
                            f"a length > 0 s for traffic_shape={self.traffic_shape}")
        if self.session_turns and self.session_turns < 1:
            raise SpecError(f"{g}.session_turns", self.session_turns, "0 (no sessions) or a mean >= 1")
        positive_int(g, "session_system_tokens", self.session_system_tokens, minimum=0)
        if not (isinstance(self.reasoning_fraction, (int, float)) and 0 <= self.reasoning_fraction <= 1):
            raise SpecError(f"{g}.reasoning_fraction", self.reasoning_fraction, "a fraction in [0, 1]")
        if not self.reasoning_output_scale >= 1:
            raise SpecError(f"{g}.reasoning_output_scale", self.reasoning_output_scale, "a factor >= 1")
        positive_int(g, "max_model_len", self.max_model_len, minimum=0)
        positive_int(g, "shed_priority", self.shed_priority, minimum=0)
        positive_int(g, "autoscale_min", self.autoscale_min)
        positive_int(g, "autoscale_max", self.autoscale_max, minimum=0)
        if self.autoscale != "none":
            positive(g, "autoscale_target", self.autoscale_target)
            positive(g, "autoscale_interval_s", self.autoscale_interval_s)
        for f in ("class_slo_ttft_ms", "class_slo_tpot_ms"):
            v = getattr(self, f)
            if not all(isinstance(x, (int, float)) and x > 0 for x in v):
                raise SpecError(f"{g}.{f}", list(v), "a list of positive milliseconds, one per priority class")
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
        non_negative(g, "deadline_s", self.deadline_s)
        one_of(g, "prefix_index", self.prefix_index, PREFIX_INDEX)
        if not isinstance(self.record_decisions, bool):
            raise SpecError(f"{g}.record_decisions", self.record_decisions, "true or false")
        if self.watermark is not None and not (isinstance(self.watermark, (int, float))
                                               and 0 <= self.watermark < 1):
            raise SpecError(f"{g}.watermark", self.watermark, "a fraction in [0, 1)")
        non_negative(g, "bucket_rate_rps", self.bucket_rate_rps)
        non_negative(g, "bucket_size", self.bucket_size)
        if self.admission == "token_bucket" and (self.bucket_rate_rps <= 0 or self.bucket_size < 1):
            raise SpecError(f"{g}.bucket_rate_rps", self.bucket_rate_rps,
                            "bucket_rate_rps > 0 and bucket_size >= 1 for admission=token_bucket")
        positive(g, "slo_ttft_ms", self.slo_ttft_ms)
        positive(g, "slo_tpot_ms", self.slo_tpot_ms)
        if self.framework is not None:
            if self.preemption == "none" and not scheduler_traits(self.scheduler).reserves_output:
                raise SpecError(f"{g}.preemption", "none",
                                f"recompute or swap for scheduler={self.scheduler} (only a policy "
                                "that reserves prompt + output KV at admission, such as orca, never "
                                "preempts)")

    def resolve(self, framework: FrameworkSpec) -> "DesSpec":
        """This spec with every None of ``FROM_FRAMEWORK`` taken from ``framework`` (a value set
        here wins). Idempotent; the result remembers the profile in ``framework``."""
        if self.framework is not None:
            return self
        fill = {f: getattr(framework, f) for f in FROM_FRAMEWORK if getattr(self, f) is None}
        return replace(self, **fill, framework=framework)

    @property
    def resolved(self) -> "DesSpec":
        """Resolved against the neutral ``generic`` profile when not resolved yet."""
        return self.resolve(FrameworkSpec()) if self.framework is None else self

    @property
    def token_budget(self) -> int:
        """Tokens one iteration may process: max_num_batched_tokens; a policy with the
        ``budget_is_chunk`` trait (engine.spec.scheduling: sarathi, sglang) min(that, chunk_size) when chunk_size > 0 (SGLang: the prefill batch
        stops at chunked_prefill_size; sarathi: the pre-profile chunk budget)."""
        d = self.resolved
        if scheduler_traits(d.scheduler).budget_is_chunk and d.chunk_size:
            return min(d.max_num_batched_tokens, d.chunk_size)
        return d.max_num_batched_tokens


    @property
    def cluster_features(self) -> bool:
        """Any of the cluster-scale features on (engine.des.cluster.Fleet runs the extra bookkeeping)."""
        return bool(self.traffic_shape != "none" or self.arrival_dist != "none" or self.session_turns or self.reasoning_fraction
                    or self.max_model_len or self.client_rtt_ms or self.timeout_s or self.kv_host_gb
                    or self.kv_disk_gb or self.router == "weighted" or self.signal_delay_s
                    or self.shed_outstanding or self.autoscale != "none" or self.timeseries_s
                    or self.class_slo_ttft_ms or self.class_slo_tpot_ms or self.record_decisions
                    or self.counterfactual or self.classes or self.deadline_s
                    or self.prefix_index != "routed")


def _request_class(d, i: int) -> RequestClass:
    """A RequestClass from a config mapping; SpecError naming unknown keys."""
    if not isinstance(d, dict):
        raise SpecError(f"engine.des.classes[{i}]", d, "a mapping of RequestClass fields")
    known = {f.name for f in fields(RequestClass)}
    extra = sorted(set(d) - known)
    if extra:
        raise SpecError(f"engine.des.classes[{i}]", extra, f"fields among {sorted(known)}")
    return RequestClass(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})


__all__ = ["DesSpec", "RequestClass", "PREFIX_INDEX", "FROM_FRAMEWORK", "SCHEDULERS", "QUEUE_POLICIES", "ADMISSIONS", "ROUTERS",
           "TRAFFIC_SHAPES", "AUTOSCALE"]
