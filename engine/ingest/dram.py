"""HBM / 3D-stacked DRAM bandwidth from the interface physics.

Interface form (HBM and other wide parallel interfaces)::

    bandwidth [B/s] = stacks x bus width per stack [bit] x data rate per pin [Gb/s] x 1e9 / 8

e.g. H100 SXM: 5 stacks x 1024 bit x 5.2 Gb/s / 8 = 3.328 TB/s (datasheet 3.35 TB/s).

Area form (3D-stacked / hybrid-bonded memory, where the interface is a field of bumps)::

    bumps      = area [mm^2] / cell [mm^2],  cell = pitch^2 (square grid) or pitch^2 x sqrt(3)/2 (hex)
    data pins  = bumps x data-pin fraction        (the rest: power, ground, command, address, spare)
    bandwidth  = data pins x data rate per pin [Gb/s] x 1e9 / 8

Nominal per-pin rates and widths of the JEDEC generations are in ``GENERATIONS``; shipped parts
often run below them (H100's HBM3 at 5.2 of 6.4 Gb/s), so a product's own rate should be used
when known.
"""

import csv
import io
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Generation:
    """A memory generation's interface per stack: width in bits, top data rate per pin in Gb/s."""

    name: str
    bus_width_bits: int
    max_gbps_per_pin: float
    source: str


#: Nominal interface of each HBM generation (per stack).
GENERATIONS = {
    "hbm2": Generation("HBM2", 1024, 2.4, "JEDEC JESD235B (HBM2, up to 2.4 Gb/s per pin)"),
    "hbm2e": Generation("HBM2E", 1024, 3.6, "JEDEC JESD235C (3.2 Gb/s); vendor HBM2E parts 3.6 Gb/s"),
    "hbm3": Generation("HBM3", 1024, 6.4, "JEDEC JESD238 (HBM3, 6.4 Gb/s per pin)"),
    "hbm3e": Generation("HBM3E", 1024, 9.6, "vendor HBM3E parts 9.2-9.8 Gb/s per pin (no separate JEDEC number)"),
    "hbm4": Generation("HBM4", 2048, 8.0, "JEDEC JESD270-4 (HBM4, 2048-bit, 8 Gb/s per pin)"),
}


@dataclass
class Derivation:
    """A bandwidth with the steps that produced it (for the CLI and for a sheet row's source)."""

    bytes_s: float
    steps: list = field(default_factory=list)

    @property
    def tb_s(self) -> float:
        return self.bytes_s / 1e12

    def sheet_row(self, source: str = "") -> str:
        """A spec-sheet CSV row (param,value,unit,precision,source) carrying the derivation."""
        src = "derived: " + "; ".join(self.steps) + (f" ({source})" if source else "")
        buf = io.StringIO()
        csv.writer(buf, lineterminator="").writerow(["hbm_bandwidth", f"{self.tb_s:.6g}", "TB/s", "", src])
        return buf.getvalue()


def _positive(name: str, v: float) -> None:
    if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
        raise ValueError(f"{name} = {v!r}: expected a finite number > 0")


def interface_bandwidth(stacks: int, bus_width_bits: int, gbps_per_pin: float) -> Derivation:
    """stacks x bus width [bit] x data rate per pin [Gb/s] / 8 -> bytes/s."""
    for n, v in (("stacks", stacks), ("bus_width_bits", bus_width_bits), ("gbps_per_pin", gbps_per_pin)):
        _positive(n, v)
    bits_s = stacks * bus_width_bits * gbps_per_pin * 1e9
    per_stack = bus_width_bits * gbps_per_pin / 8
    return Derivation(bits_s / 8, [
        f"{stacks} stacks x {bus_width_bits} bit x {gbps_per_pin:g} Gb/s per pin / 8 bit per byte",
        f"= {per_stack:g} GB/s per stack x {stacks} = {bits_s / 8 / 1e12:.4g} TB/s",
    ])


def generation_bandwidth(generation: str, stacks: int, gbps_per_pin: float | None = None) -> Derivation:
    """A JEDEC generation's width, at its nominal top pin rate unless ``gbps_per_pin`` is given."""
    key = generation.lower().replace("-", "").replace(" ", "")
    if key not in GENERATIONS:
        raise ValueError(f"generation {generation!r}: expected one of {', '.join(GENERATIONS)}")
    g = GENERATIONS[key]
    rate = gbps_per_pin if gbps_per_pin is not None else g.max_gbps_per_pin
    d = interface_bandwidth(stacks, g.bus_width_bits, rate)
    d.steps.insert(0, f"{g.name}: {g.bus_width_bits}-bit per stack"
                      + ("" if gbps_per_pin is not None else f", nominal {rate:g} Gb/s per pin ({g.source})"))
    return d


def bumps_in_area(area_mm2: float, bump_pitch_um: float, grid: str = "square") -> float:
    """Number of bumps of pitch ``bump_pitch_um`` in ``area_mm2`` (square or hexagonal grid)."""
    _positive("area_mm2", area_mm2)
    _positive("bump_pitch_um", bump_pitch_um)
    cell_um2 = bump_pitch_um ** 2 * (1.0 if grid == "square" else math.sqrt(3) / 2)
    if grid not in ("square", "hex"):
        raise ValueError(f"grid {grid!r}: expected square or hex")
    return area_mm2 * 1e6 / cell_um2


def area_bandwidth(area_mm2: float, bump_pitch_um: float, data_pin_fraction: float,
                   gbps_per_pin: float, stacks: int = 1, grid: str = "square") -> Derivation:
    """3D-stacked memory: bumps in the interface area x data fraction x pin rate / 8, x stacks."""
    if not (0 < data_pin_fraction <= 1):
        raise ValueError(f"data_pin_fraction = {data_pin_fraction!r}: expected a fraction in (0, 1]")
    _positive("gbps_per_pin", gbps_per_pin)
    _positive("stacks", stacks)
    bumps = bumps_in_area(area_mm2, bump_pitch_um, grid)
    data = bumps * data_pin_fraction
    bytes_s = stacks * data * gbps_per_pin * 1e9 / 8
    return Derivation(bytes_s, [
        f"{area_mm2:g} mm^2 / ({bump_pitch_um:g} um pitch, {grid} grid) = {bumps:.0f} bumps",
        f"x {data_pin_fraction:g} data fraction = {data:.0f} data pins",
        f"x {gbps_per_pin:g} Gb/s / 8 x {stacks} stack(s) = {bytes_s / 1e12:.4g} TB/s",
    ])
