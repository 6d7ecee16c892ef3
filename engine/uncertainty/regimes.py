"""The regime keys an error is pooled by, and the summary keys that get an interval.

A regime is a dict of seven fields, each a short string:

    metric     ttft | tpot | e2e | throughput   (ITL goes with TPOT, request and total
               throughput with throughput: the groups of simllm-validate's report)
    stat       center (mean, median) | tail (p90 and above)
    load       static (analytical lock-step batch) | offline (every request at t=0) |
               open (Poisson or trace arrivals) | closed (closed-loop clients) |
               server (MLPerf server: the highest rate meeting p99 constraints)
    band       the load relative to capacity, from the run's own prediction (``load_band``):
               light | moderate | heavy for a DES run, none for a static job, unknown where
               it cannot be computed
    framework  the conf/framework profile
    precision  16-bit | fp8 | int8 | int4 | fp4
    backend    the kernel-cost backend the job priced with: roofline | measured | transfer | anchored

The load band. A DES run's queue share

    share = queueing_ms_mean / ttft_ms_mean

is the part of the mean TTFT a request spends between arrival and its first admission to the
running batch (its path through the API server - per-request overhead and that server's FIFO
queue - then the wait for a batch slot, KV blocks, the token budget behind other prefills, the
iteration boundary) rather than in its own prefill: both means are over the
measured requests of the run's summary (``engine.des.metrics``), so a validation row and a
user's job compute it the same way from their own prediction, at no cost. Bands:

    light      share < 0.6
    moderate   0.6 <= share < 0.7
    heavy      share >= 0.7   (most of the first token's wait is the queue)

The thresholds are the terciles of the share over the 714 closed-loop rows of
serving_dev.csv (0.605 and 0.711 as predicted at the time), rounded to one decimal; they
are fixed here, not refitted with the error model. Evidence (10 random half-splits x 2
directions of the 791 validation residuals, each candidate cut at its own terciles; mean log
half-width of the held-out closed-loop rows' intervals, 80 % / 95 %, at the same coverage):
no band 0.247 / 0.509; this share 0.223 / 0.465 at 0.6 / 0.7 (0.226 / 0.479 at its exact
terciles); the mean running batch relative to
max_num_seqs (running / concurrency on those rows) 0.252 / 0.546; the mean KV-pool occupancy
0.254 / 0.597; the requests in the system per running one 0.251 / 0.566; the scheduler's wait
alone as a share of wait + prefill (``ttft_queue_ms_mean / (ttft_queue_ms_mean +
ttft_prefill_ms_mean)``, engine.des.ttft_parts) 0.217 / 0.487 (0.224 / 0.500 at 0.55 / 0.65),
but it misses a saturated API
server (poisson_chat at 128 req/s: 0.32 where this share is 0.92), whose queue is in the
request's path. The share's limit: the path's fixed part (per-request overhead, half the client
round trip) counts as waiting, so a lightly loaded job whose fixed overhead is large beside its
prefill lands in moderate (poisson_chat at 1 req/s on the default deployment: 0.605).

A static (analytical) job has no queue: band none. Offline runs queue every request at t = 0
and land in heavy.

``HIERARCHY`` lists the key tuples from the finest to the coarsest; a prediction takes the
finest regime that has enough rows (``ErrorModel.min_rows`` and the conformal rank <= n), else
the next coarser one. The order says what drives error most (from the dev-set report: the
metric and the load kind first, then tail vs centre, then the band, then the framework's host
model, then the precision's kernels, then the backend): the band is dropped after the
framework and before the statistic, so a thin (band, framework) regime first pools over the
frameworks of its band.
"""

import math

FIELDS = ("metric", "stat", "load", "band", "framework", "precision", "backend")

#: Regime key tuples, finest first; the last (metric alone) is the pool of every row of a metric.
#: The band is dropped after the framework and before the statistic and the load kind.
HIERARCHY: tuple[tuple[str, ...], ...] = (
    ("metric", "load", "band", "stat", "framework", "precision", "backend"),
    ("metric", "load", "band", "stat", "framework", "precision"),
    ("metric", "load", "band", "stat", "framework"),
    ("metric", "load", "band", "stat"),
    ("metric", "load", "stat"),
    ("metric", "load"),
    ("metric",),
)

LOAD_KINDS = ("static", "offline", "open", "closed", "server")

#: Load bands: ``none`` for a static (analytical) job, ``unknown`` where the band cannot be
#: computed (a summary without the keys it needs; rows of residual files written before it).
BANDS = ("light", "moderate", "heavy", "none", "unknown")

#: (band, upper edge of the queue share, exclusive), in order (module docstring).
BAND_EDGES = (("light", 0.6), ("moderate", 0.7), ("heavy", math.inf))

#: Headline summary keys that get ``*_lo`` / ``*_hi``.
HEADLINE = ("ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99", "e2e_ms_p50",
            "throughput_tok_s", "throughput_tok_s_per_gpu")

_GROUP = {"ttft": "ttft", "tpot": "tpot", "itl": "tpot", "e2e": "e2e", "throughput": "throughput",
          "total_throughput": "throughput", "request_throughput": "throughput"}


def metric_of(key: str) -> tuple[str, str]:
    """(metric group, stat) of a summary key: ``ttft_ms_p99`` -> (ttft, tail),
    ``tpot_ms_mean`` -> (tpot, center), ``throughput_tok_s_per_gpu`` -> (throughput, center)."""
    if "throughput" in key:
        return "throughput", "center"
    head, _, stat = key.partition("_ms_")
    if head not in _GROUP:
        raise ValueError(f"summary key '{key}': not a latency or throughput metric")
    tail = stat.startswith("p") and stat[1:].replace(".", "", 1).isdigit() and float(stat[1:]) >= 90
    return _GROUP[head], "tail" if tail else "center"


def queue_share(summary: dict | None) -> float:
    """queueing_ms_mean / ttft_ms_mean of a DES summary (dimensionless, 0..1); NaN when either
    is missing, not finite or the TTFT mean is not positive."""
    s = summary or {}
    q, t = s.get("queueing_ms_mean"), s.get("ttft_ms_mean")
    if isinstance(q, bool) or isinstance(t, bool) or not isinstance(q, (int, float)) or not isinstance(t, (int, float)):
        return math.nan
    if not (math.isfinite(q) and math.isfinite(t)) or t <= 0:
        return math.nan
    return float(q) / float(t)


def load_band(load: str, summary: dict | None) -> str:
    """The load band of a run (module docstring): ``none`` for a static load; else the band of
    the summary's queue share (``queue_share``), ``unknown`` when it has none."""
    if load == "static":
        return "none"
    share = queue_share(summary)
    if not math.isfinite(share):
        return "unknown"
    return next(name for name, upper in BAND_EDGES if share < upper)


def regime_of(key: str, load: str, framework: str, precision: str, backend: str, band: str | None = None) -> dict:
    """The regime dict of summary key ``key`` under the given load kind, profile, precision and
    backend, and load band (None: ``complete``'s, none for static and unknown otherwise)."""
    if load not in LOAD_KINDS:
        raise ValueError(f"load kind '{load}': expected one of {', '.join(LOAD_KINDS)}")
    if band is not None and band not in BANDS:
        raise ValueError(f"load band '{band}': expected one of {', '.join(BANDS)}")
    metric, stat = metric_of(key)
    return complete({"metric": metric, "stat": stat, "load": load, "band": band, "framework": framework,
                     "precision": precision, "backend": backend})


def precision_class(weight_dtype: str, activation_dtype: str = "") -> str:
    """The precision group of a model's dtypes (the groups of simllm-validate's report):
    int4 / int8 weight-only, fp4, fp8, else 16-bit."""
    w = (weight_dtype or "").lower()
    for p in ("int4", "int8", "fp4", "fp8"):
        if p in w:
            return p
    return "16-bit"


def complete(regime: dict) -> dict:
    """``regime`` with a ``band`` where it has none (a caller or a residual file from before the
    load band): ``none`` for a static load, else ``unknown`` - which no fitted row carries unless
    old rows were fitted, so the lookup pools to (metric, load, stat) and coarser."""
    if regime.get("band"):
        return regime
    return {**regime, "band": "none" if regime.get("load") == "static" else "unknown"}
