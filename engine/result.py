"""The result contract shared by every engine: summary, table, assumptions."""

from dataclasses import dataclass, field

import polars as pl


@dataclass(frozen=True)
class Assumption:
    """One modelling choice that changed a number: what, the value used, and why."""

    name: str
    value: str
    why: str


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
