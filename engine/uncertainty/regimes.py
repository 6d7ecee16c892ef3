"""The regime keys an error is pooled by, and the summary keys that get an interval.

A regime is a dict of six fields, each a short string:

    metric     ttft | tpot | e2e | throughput   (ITL goes with TPOT, request and total
               throughput with throughput: the groups of simllm-validate's report)
    stat       center (mean, median) | tail (p90 and above)
    load       static (analytical lock-step batch) | offline (every request at t=0) |
               open (Poisson or trace arrivals) | closed (closed-loop clients) |
               server (MLPerf server: the highest rate meeting p99 constraints)
    framework  the conf/framework profile
    precision  16-bit | fp8 | int8 | int4 | fp4
    backend    the kernel-cost backend the job priced with: roofline | measured | transfer | anchored

``HIERARCHY`` lists the key tuples from the finest to the coarsest; a prediction takes the
finest regime that has enough rows (``ErrorModel.min_rows`` and the conformal rank <= n), else
the next coarser one. The order says what drives error most (from the dev-set report: the
metric and the load kind first, then tail vs centre, then the framework's host model, then the
precision's kernels, then the backend).
"""

FIELDS = ("metric", "stat", "load", "framework", "precision", "backend")

#: Regime key tuples, finest first; the last (metric alone) is the pool of every row of a metric.
HIERARCHY: tuple[tuple[str, ...], ...] = (
    ("metric", "load", "stat", "framework", "precision", "backend"),
    ("metric", "load", "stat", "framework", "precision"),
    ("metric", "load", "stat", "framework"),
    ("metric", "load", "stat"),
    ("metric", "load"),
    ("metric",),
)

LOAD_KINDS = ("static", "offline", "open", "closed", "server")

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


def regime_of(key: str, load: str, framework: str, precision: str, backend: str) -> dict:
    """The regime dict of summary key ``key`` under the given load kind, profile, precision and backend."""
    if load not in LOAD_KINDS:
        raise ValueError(f"load kind '{load}': expected one of {', '.join(LOAD_KINDS)}")
    metric, stat = metric_of(key)
    return {"metric": metric, "stat": stat, "load": load, "framework": framework,
            "precision": precision, "backend": backend}


def precision_class(weight_dtype: str, activation_dtype: str = "") -> str:
    """The precision group of a model's dtypes (the groups of simllm-validate's report):
    int4 / int8 weight-only, fp4, fp8, else 16-bit."""
    w = (weight_dtype or "").lower()
    for p in ("int4", "int8", "fp4", "fp8"):
        if p in w:
            return p
    return "16-bit"
