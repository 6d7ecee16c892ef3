"""The result contract shared by every engine: summary, table, assumptions; and the registry of
reported metrics (``METRICS``) that every consumer reads.

Every key of ``RunResult.summary`` reaches the job files and MLflow (numbers as metrics, text as
``summary.<name>`` tags) with no list to extend. ``METRICS`` says how a metric is shown: its unit,
its column label, whether the per-job printed row of an engine shows it, whether simllm-report's
sensitivity table has a column for it. Adding a metric: the engine line that computes it, plus
one ``Metric(...)`` line here if a table should show it.
"""

from dataclasses import dataclass, field

import polars as pl


@dataclass(frozen=True)
class Assumption:
    """One modelling choice that changed a number: what, the value used, and why."""

    name: str
    value: str
    why: str


@dataclass(frozen=True)
class Metric:
    """A reported metric: ``summary[name]`` in ``unit``, shown as ``label``.

    row: engines whose printed per-job row shows it ("analytical", "des"); report: a column of
    simllm-report's sensitivity table (shown where some run has it); digits: decimals printed;
    text: a string result (MLflow keeps it as the tag ``summary.<name>``).
    """

    name: str
    unit: str
    label: str
    row: tuple = ()
    report: bool = False
    digits: int = 2
    text: bool = False


_BOTH = ("analytical", "des")

#: The reported metrics, in the order tables show them.
METRICS: tuple[Metric, ...] = (
    Metric("num_requests", "requests", "requests", row=("des",), digits=0),
    Metric("ttft_ms_p50", "ms", "TTFT ms", row=_BOTH, report=True),
    Metric("ttft_ms_p99", "ms", "TTFT p99 ms", row=("des",), report=True),
    Metric("tpot_ms_p50", "ms", "TPOT ms", row=_BOTH, report=True),
    Metric("tpot_ms_p99", "ms", "TPOT p99 ms", row=("des",), report=True),
    Metric("e2e_ms_p50", "ms", "E2E ms"),
    Metric("throughput_tok_s", "tok/s", "tok/s", row=_BOTH, report=True, digits=0),
    Metric("throughput_tok_s_per_gpu", "tok/s/GPU", "tok/s/GPU", row=_BOTH, report=True, digits=0),
    Metric("interactivity_tok_s_per_user", "tok/s/user", "tok/s/user", report=True),
    # runs of the analytical Pareto sweep (engine.analytical.pareto.enabled): its extremes
    Metric("max_throughput_tok_s_per_gpu", "tok/s/GPU", "max tok/s/GPU", report=True),
    Metric("max_interactivity_tok_s_per_user", "tok/s/user", "max tok/s/user", report=True),
    Metric("max_throughput_partition", "", "best partition", report=True, text=True),
    Metric("bound", "", "bound", row=_BOTH, report=True, text=True),
    Metric("fits_in_memory", "", "fits", row=_BOTH),
    Metric("weights_gb", "GB", "weights GB"),
    Metric("kv_cache_gb", "GB", "KV cache GB"),
)

_BY_NAME = {m.name: m for m in METRICS}

#: Unit of a metric from its name (names say the unit: DESIGN.md), for metrics not registered.
_SUFFIX_UNITS = (("_tok_s_per_gpu", "tok/s/GPU"), ("_tok_s_per_user", "tok/s/user"), ("_tok_s", "tok/s"),
                 ("_rps", "requests/s"), ("_gb", "GB"), ("_j_per_token", "J/token"),
                 ("_j_per_request", "J/request"), ("_j", "J"), ("_w_per_gpu", "W"), ("_w", "W"),
                 ("_flop_per_byte", "FLOP/byte"), ("_s", "s"), ("_ms", "ms"))


def metric(name: str) -> Metric | None:
    """The registered metric ``name``, or None."""
    return _BY_NAME.get(name)


def unit_of(name: str) -> str:
    """The unit of summary key ``name``: the registry's, else the one its name states
    (``ttft_ms_p90`` -> ms, ``kv_capacity_gb`` -> GB), else ""."""
    if name in _BY_NAME:
        return _BY_NAME[name].unit
    if "_ms_" in name or name.endswith("_ms"):
        return "ms"
    return next((u for suffix, u in _SUFFIX_UNITS if name.endswith(suffix)), "")


def row_metrics(engine: str) -> list[Metric]:
    """The metrics the printed per-job row of ``engine`` shows, in order."""
    return [m for m in METRICS if engine in m.row]


def report_metrics() -> list[Metric]:
    """The columns of simllm-report's sensitivity table, in order."""
    return [m for m in METRICS if m.report]


@dataclass
class RunResult:
    """What ``engine.<name>.run(specs)`` returns.

    summary: flat scalar metrics, units in the names (``ttft_ms_p50``, ``throughput_tok_s`` ...);
    table: one row per request (DES) or per grid point (analytical);
    assumptions: every modelling choice that changed a number.
    """

    summary: dict
    table: pl.DataFrame
    assumptions: list[Assumption] = field(default_factory=list)

    def assumptions_markdown(self) -> str:
        """The assumptions as a Markdown table (written to ``assumptions.md``)."""
        lines = ["| assumption | value | why |", "|---|---|---|"]
        for a in self.assumptions:
            cells = (str(c).replace("|", "\\|").replace("\n", " ") for c in (a.name, a.value, a.why))
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"
