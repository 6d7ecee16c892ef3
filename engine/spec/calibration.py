"""CalibrationSpec: the fitted factors between spec-sheet peaks and what software attains."""

from dataclasses import dataclass

from engine.spec._check import fraction, non_negative


@dataclass(frozen=True)
class CalibrationSpec:
    """Efficiencies (fractions of peak) and memory-accounting factors.

    effective compute = peak x compute_efficiency; effective bandwidth = HBM bandwidth x
    memory_bandwidth_efficiency; effective link bandwidth = link x comm_efficiency.
    KV capacity = (HBM - weights - activations - memory_reserve_bytes) x kv_usable_fraction.
    Defaults live in ``conf/calibration/``, never here.
    """

    compute_efficiency: float
    memory_bandwidth_efficiency: float
    comm_efficiency: float
    memory_reserve_bytes: float
    kv_usable_fraction: float
    name: str = "calibration"

    _group = "calibration"

    def __post_init__(self):
        g = self._group
        fraction(g, "compute_efficiency", self.compute_efficiency)
        fraction(g, "memory_bandwidth_efficiency", self.memory_bandwidth_efficiency)
        fraction(g, "comm_efficiency", self.comm_efficiency)
        non_negative(g, "memory_reserve", self.memory_reserve_bytes, unit="bytes")
        fraction(g, "kv_usable_fraction", self.kv_usable_fraction)
