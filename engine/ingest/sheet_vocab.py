"""The vocabulary of spec sheets: which params exist, what each measures, its unit and limits.

``PARAMS`` maps a canonical param to its HardwareSchema field and kind; ``ALIASES`` the names sheets
use for them (``tensor_peak_compute``, ``l2_cache``, ``scaleup_bw_bidirectional`` ...); peak-compute
rows name their precision in the param (``peak_bf16_tflops``) or the precision column.
"""

import re
from dataclasses import MISSING, dataclass

from engine.ingest.units import registry
from engine.spec.hardware import HardwareSpec
from engine.spec.meta import config_fields

PRECISIONS = ("bf16", "fp16", "fp8", "int8", "fp4", "tf32")


@dataclass(frozen=True)
class Kind:
    """What a param measures: the SI unit pint converts to, the unit written in the YAML, and the
    largest value that is a chip rather than a unit slip."""

    si: str
    display: str
    limit: float
    what: str


KINDS = {
    "compute": Kind("FLOP / second", "TFLOPS", 1e18, "a compute rate (TFLOPS, TOPS, PFLOPS)"),
    "bandwidth": Kind("byte / second", "GB/s", 100e12, "a bandwidth (GB/s, TB/s, Gb/s)"),
    "hbm_bandwidth": Kind("byte / second", "TB/s", 100e12, "a bandwidth (GB/s, TB/s, Gb/s)"),
    "capacity": Kind("byte", "GB", 10e12, "a size (GB, GiB, TB)"),
    "sram": Kind("byte", "MB", 100e9, "a size (MB, MiB, GB)"),
    "latency": Kind("second", "us", 1e-2, "a time (us, ns, ms)"),
    "power": Kind("watt", "W", 1e5, "a power (W, kW)"),
    "count": Kind("dimensionless", "", 1e6, "a count"),
    "factor": Kind("dimensionless", "", 1.0, "a fraction in (0, 1]"),
}

#: Canonical params: param -> (HardwareSchema field or None for informational rows, kind).
PARAMS = {
    "peak_compute": (None, "compute"),          # field from the precision column
    "hbm_bandwidth": ("hbm_bandwidth", "hbm_bandwidth"),
    "hbm_capacity": ("hbm_capacity", "capacity"),
    "hbm_visible": (None, "capacity"),          # -> hbm_visible_fraction (hwcsv._assemble)
    "sram_capacity": ("sram", "sram"),
    "scaleup_bandwidth": ("scaleup_bandwidth", "bandwidth"),
    "scaleup_latency": ("scaleup_latency", "latency"),
    "scaleout_bandwidth": ("scaleout_bandwidth", "bandwidth"),
    "scaleout_latency": ("scaleout_latency", "latency"),
    "devices_per_node": ("devices_per_node", "count"),
    "tdp": ("tdp", "power"),
    "host_bandwidth": ("host_bandwidth", "bandwidth"),
    "hbm_stacks": (None, "count"),
    "dies": (None, "count"),
    # informational rows of collected spec tables: checked for units, not used by the engine
    "vector_peak_compute": (None, "compute"),
    "nic_total_bw_bidirectional": (None, "bandwidth"),
    "sparse_to_dense_factor": ("sparse_to_dense_factor", "factor"),
}

#: Names sheets use for the canonical params: alias -> (param, implied precision, implied direction).
ALIASES = {
    "tensor_peak_compute": ("peak_compute", None, None),
    "memory_bandwidth": ("hbm_bandwidth", None, None),
    "memory_capacity": ("hbm_capacity", None, None),
    "memory_visible": ("hbm_visible", None, None),
    "cuda_total_memory": ("hbm_visible", None, None),
    "sram": ("sram_capacity", None, None),
    "onchip_sram": ("sram_capacity", None, None),
    "l2_cache": ("sram_capacity", None, None),
    "last_level_cache": ("sram_capacity", None, None),
    "interconnect_bandwidth": ("scaleup_bandwidth", None, None),
    "scaleup_bw_per_direction": ("scaleup_bandwidth", None, "per_direction"),
    "scaleup_bw_bidirectional": ("scaleup_bandwidth", None, "bidirectional"),
    "scaleout_bw_per_direction": ("scaleout_bandwidth", None, "per_direction"),
    "scaleout_bw_bidirectional": ("scaleout_bandwidth", None, "bidirectional"),
    "nic_bandwidth": ("scaleout_bandwidth", None, None),
    "scaleup_domain_size": ("devices_per_node", None, None),
    "power": ("tdp", None, None),
    "pcie_bandwidth": ("host_bandwidth", None, None),
    "host_bw_per_direction": ("host_bandwidth", None, "per_direction"),
    "host_bw_bidirectional": ("host_bandwidth", None, "bidirectional"),
    "hbm_count": ("hbm_stacks", None, None),
}
PEAK_RE = re.compile(r"^(?:peak|compute)_(?:tflops_|tops_)?(bf16|fp16|fp8|int8|fp4|tf32)(?:_tflops|_tops|_pflops)?$")

MULTIPLY = {"stack", "die", "chiplet", "link", "port", "xcd", "core", "tile"}
DIVIDE = {"system", "rack", "node", "board", "pod", "server", "tray"}
CHIP = {"", "chip", "device", "gpu", "package", "accelerator", "card"}

#: The hardware config fields by key, from HardwareSpec's field metadata (engine.spec.meta): the
#: unit a figure is written in, its plausible range, whether the config must give it.
FIELDS = {md["key"]: (f, md) for f, md in config_fields(HardwareSpec) if md["key"] != "name"}
REQUIRED_FIELDS = tuple(k for k, (f, md) in FIELDS.items()
                        if f.default is MISSING and f.default_factory is MISSING)
#: Order of the fields in the written YAML (every field of HardwareSpec; a test checks it).
FIELD_ORDER = ("peak_bf16", "peak_fp8", "peak_int8", "peak_fp4", "compute_figures_sparse",
               "sparse_to_dense_factor", "hbm_capacity", "hbm_visible_fraction", "hbm_bandwidth", "sram",
               "scaleup_bandwidth", "scaleup_latency", "scaleout_bandwidth", "scaleout_latency",
               "devices_per_node", "tdp", "host_bandwidth", "price_per_hour", "kernel_tables")
assert set(FIELD_ORDER) == set(FIELDS), "FIELD_ORDER must list every HardwareSpec config key"


def limit(kind: str, field_name: str | None) -> float:
    """The largest value that is a chip rather than a unit slip: the field's plausible range
    (HardwareSpec metadata), else the kind's."""
    md = FIELDS[field_name][1] if field_name in FIELDS else {}
    return md["range"][1] if md.get("range") else KINDS[kind].limit

def fmt(x: float) -> str:
    s = f"{x:.10g}"
    return s


def display(kind: str, si: float, field_name: str = "") -> str:
    """SI value -> the YAML text in the kind's display unit ("989.4 TFLOPS", "3.35 TB/s")."""
    k = KINDS[kind]
    if kind == "count":
        return str(int(round(si)))
    if kind == "factor":
        return fmt(si)
    unit = (FIELDS[field_name][1]["unit"] if field_name in FIELDS else None) or k.display
    q = registry().Quantity(si, k.si).to("FLOPS" if unit == "TOPS" else unit)
    scale = 1e12 if unit == "TOPS" else 1.0
    return f"{fmt(q.magnitude / scale)} {unit}"


def resolve(param: str, precision: str, err):
    """param name (+ precision column) -> (canonical param, field, kind, precision, direction)."""
    p = param.strip().lower()
    direction = None
    implied = None
    if p in ALIASES:
        p, implied, direction = ALIASES[p]
    m = PEAK_RE.match(p)
    if m:
        implied, p = m.group(1), "peak_compute"
    if p not in PARAMS:
        known = sorted(set(PARAMS) | set(ALIASES) | {"peak_<precision>[_tflops]"})
        err(f"unknown param {param!r} (known: {', '.join(known)})")
    fld, kind = PARAMS[p]
    prec = precision.strip().lower()
    if p == "peak_compute":
        if implied and prec and prec != implied:
            err(f"param {param!r} is a {implied} figure but the precision column says {prec!r}")
        prec = implied or prec
        if prec not in PRECISIONS:
            err(f"a compute figure needs a precision, one of {', '.join(PRECISIONS)} (got {prec!r})")
        fld = f"peak_{prec}"
    return p, fld, kind, prec, direction


def same_text(a: str, b: str) -> bool:
    """'8.0 TB/s' and '8 TB/s' are the same figure written twice."""
    (va, _, ua), (vb, _, ub) = a.partition(" "), b.partition(" ")
    try:
        return ua == ub and float(va) == float(vb)
    except ValueError:
        return a == b


