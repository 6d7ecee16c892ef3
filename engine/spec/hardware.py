"""HardwareSpec: one accelerator as its spec sheet describes it, in SI units."""

from dataclasses import dataclass

from engine.errors import SpecError
from engine.spec._check import fraction, non_negative, positive, positive_int
from engine.spec.meta import param

#: The runtime's total per byte of the sheet's capacity a device may have (hbm_visible_fraction):
#: beyond it the two figures are not the same memory (GB vs GiB slips, per-node totals).
VISIBLE_FRACTION_RANGE = (0.5, 1.2)

#: Math precisions a sheet gives peaks for. fp16 shares the bf16 figure on every current chip.
PRECISIONS = ("bf16", "fp16", "fp8", "int8", "fp4")


@dataclass(frozen=True)
class HardwareSpec:
    """One device (GPU / accelerator) of a scale-up domain.

    Compute peaks are the figures as printed on the sheet, in FLOP/s (or OP/s for int8). When the
    sheet printed 2:4-sparse figures (``compute_figures_sparse``), the dense peak the engine uses is
    ``figure * sparse_to_dense_factor`` (0.5 for 2:4 structured sparsity); see ``peak_flops``.

    Bandwidths are per direction, in bytes/s. ``scaleup_*`` is the intra-node fabric (NVLink,
    xGMI, ICI), ``scaleout_*`` the per-device network to other nodes.
    """

    name: str
    peak_flops_bf16: float = param(key="peak_bf16", unit="TFLOPS", range=(1e12, 1e18))
    hbm_capacity_bytes: float = param(key="hbm_capacity", unit="GB", range=(1e9, 10e12))
    hbm_bandwidth_bytes_s: float = param(key="hbm_bandwidth", unit="TB/s", range=(1e10, 100e12))
    #: Device memory the CUDA/ROCm runtime reports as the device's total (``cudaMemGetInfo``'s
    #: total, what vLLM logs as ``total_gpu_memory``) per byte of ``hbm_capacity``: the memory
    #: serving frameworks size their KV cache against is ``hbm_capacity x hbm_visible_fraction``.
    #: Sheets print HBM in binary-sized stacks ("80 GB" is 80 GiB of DRAM, less what ECC and the
    #: driver keep), so the runtime's total differs from the SI figure (H100 SXM5: 79.15 GiB =
    #: 84.99e9 bytes against 80e9, 1.0623). A sheet gives it as an ``hbm_visible`` row (the total
    #: itself); a ratio, so a sweep over ``hbm_capacity`` scales the visible memory with it.
    #: 1 = not known (the SI figure stands for it).
    hbm_visible_fraction: float = param(1.0, range=VISIBLE_FRACTION_RANGE)
    peak_flops_fp8: float | None = param(None, key="peak_fp8", unit="TFLOPS", range=(1e12, 1e18))
    peak_flops_int8: float | None = param(None, key="peak_int8", unit="TOPS", range=(1e12, 1e18))
    peak_flops_fp4: float | None = param(None, key="peak_fp4", unit="TFLOPS", range=(1e12, 1e18))
    compute_figures_sparse: bool = False
    sparse_to_dense_factor: float = param(0.5, range=(0.0, 1.0))
    sram_bytes: float = param(0.0, key="sram", unit="MB", zero=True, range=(0.0, 100e9))
    scaleup_bandwidth_bytes_s: float | None = param(None, key="scaleup_bandwidth", unit="GB/s",
                                                    range=(1e9, 100e12))
    scaleup_latency_s: float = param(0.0, key="scaleup_latency", unit="us", zero=True, range=(0.0, 1e-2))
    scaleout_bandwidth_bytes_s: float | None = param(None, key="scaleout_bandwidth", unit="GB/s",
                                                     range=(1e8, 100e12))
    scaleout_latency_s: float = param(0.0, key="scaleout_latency", unit="us", zero=True, range=(0.0, 1e-2))
    devices_per_node: int = param(1, range=(1, 1e6))
    tdp_w: float | None = param(None, key="tdp", unit="W", range=(1.0, 1e5))
    #: Host link per direction (PCIe, NVLink-C2C) between this device and its host DRAM: the path
    #: KV blocks take when offloaded to / fetched from a host tier. None = not given.
    host_bandwidth_bytes_s: float | None = param(None, key="host_bandwidth", unit="GB/s", range=(1e9, 10e12))
    #: Price of one device for one hour in USD (cloud list price or amortised cost); None = not
    #: given. Not a spec-sheet figure: set it in the YAML or on the command line.
    price_per_hour: float | None = param(None, range=(0.0, 1e4))
    #: Which measured per-kernel tables (engine/cost/data) describe this chip, e.g. "h100_sxm";
    #: "" = none (the cost model then transfers curves learned on the measured chips).
    kernel_tables: str = ""

    #: Config-only keys (conf/hardware/*.yaml): not used by the engine.
    CONFIG_EXTRA = (("description", str, ""), ("assumptions", list, []))

    _group = "hardware"

    def __post_init__(self):
        g = self._group
        if not self.name:
            raise SpecError(f"{g}.name", self.name, "a non-empty device name")
        positive(g, "peak_bf16", self.peak_flops_bf16, unit="FLOP/s")
        for p in ("fp8", "int8", "fp4"):
            positive(g, f"peak_{p}", getattr(self, f"peak_flops_{p}"), allow_none=True, unit="FLOP/s")
        fraction(g, "sparse_to_dense_factor", self.sparse_to_dense_factor)
        positive(g, "hbm_capacity", self.hbm_capacity_bytes, unit="bytes")
        positive(g, "hbm_bandwidth", self.hbm_bandwidth_bytes_s, unit="bytes/s")
        # One HBM-equipped chip above 100 TB/s or 10 TB capacity is a unit slip, not a chip.
        if self.hbm_bandwidth_bytes_s > 100e12:
            raise SpecError(f"{g}.hbm_bandwidth", f"{self.hbm_bandwidth_bytes_s / 1e12:g} TB/s",
                            "at most 100 TB/s for one device (check TB/s vs Tb/s, per-stack vs total)")
        if self.hbm_capacity_bytes > 10e12:
            raise SpecError(f"{g}.hbm_capacity", f"{self.hbm_capacity_bytes / 1e9:g} GB",
                            "at most 10 TB for one device")
        lo, hi = VISIBLE_FRACTION_RANGE
        if not lo <= self.hbm_visible_fraction <= hi:
            raise SpecError(f"{g}.hbm_visible_fraction", self.hbm_visible_fraction,
                            f"the runtime's total per byte of hbm_capacity, within {lo:g}-{hi:g} (1.0623 for "
                            "79.15 GiB seen of 80 GB; check GB vs GiB, per-device vs per-node)")
        non_negative(g, "sram", self.sram_bytes, unit="bytes")
        positive(g, "scaleup_bandwidth", self.scaleup_bandwidth_bytes_s, allow_none=True, unit="bytes/s")
        positive(g, "scaleout_bandwidth", self.scaleout_bandwidth_bytes_s, allow_none=True, unit="bytes/s")
        non_negative(g, "scaleup_latency", self.scaleup_latency_s, unit="s")
        non_negative(g, "scaleout_latency", self.scaleout_latency_s, unit="s")
        positive_int(g, "devices_per_node", self.devices_per_node)
        positive(g, "tdp", self.tdp_w, allow_none=True, unit="W")
        positive(g, "host_bandwidth", self.host_bandwidth_bytes_s, allow_none=True, unit="bytes/s")
        if self.price_per_hour is not None:
            non_negative(g, "price_per_hour", self.price_per_hour, unit="USD per device-hour")
        if not isinstance(self.kernel_tables, str):
            raise SpecError(f"{g}.kernel_tables", self.kernel_tables,
                            'a string naming a kernel-table set (e.g. "h100_sxm"), or "" for none')

    @property
    def visible_bytes(self) -> float:
        """Device memory as the runtime reports it [bytes]: ``hbm_capacity x hbm_visible_fraction``."""
        return self.hbm_capacity_bytes * self.hbm_visible_fraction

    def peak_flops(self, precision: str) -> float:
        """Dense peak in FLOP/s for a math precision (``bf16``, ``fp16``, ``fp8``, ``int8``, ``fp4``).

        dense = sheet figure x sparse_to_dense_factor when the sheet's figures were sparse, else the
        figure itself. A precision the chip lacks raises SpecError naming the field.
        """
        key = "bf16" if precision == "fp16" else precision
        if key not in PRECISIONS:
            raise SpecError("model.compute_dtype", precision, "one of " + ", ".join(PRECISIONS))
        figure = getattr(self, f"peak_flops_{key}")
        if figure is None:
            raise SpecError(f"hardware.peak_{key}", None,
                            f"a {key} peak for {self.name} (the model computes in {precision})")
        return figure * (self.sparse_to_dense_factor if self.compute_figures_sparse else 1.0)
