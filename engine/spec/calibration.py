"""CalibrationSpec: the fitted factors between spec-sheet peaks and what software attains."""

from dataclasses import dataclass

from engine.spec._check import fraction, non_negative


@dataclass(frozen=True)
class CalibrationSpec:
    """Efficiencies (fractions of peak) and memory-accounting factors.

    effective compute = peak x compute_efficiency; effective bandwidth = HBM bandwidth x
    memory_bandwidth_efficiency; effective link bandwidth = link x comm_efficiency.
    KV capacity = (HBM - weights - activations - memory_reserve_bytes) x kv_usable_fraction.

    Framework overheads (seconds), added to the roofline time:
    step_overhead_s: per forward pass / iteration (scheduler, input prep, kernel launches or
        CUDA-graph replay);
    per_token_overhead_s: per sequence per step that emits a token (sampling, detokenisation);
    per_request_overhead_s: once per request (tokenisation, admission, response).
    Defaults live in ``conf/calibration/``, never here.
    """

    compute_efficiency: float
    memory_bandwidth_efficiency: float
    comm_efficiency: float
    memory_reserve_bytes: float
    kv_usable_fraction: float
    step_overhead_s: float = 0.0
    per_token_overhead_s: float = 0.0
    per_request_overhead_s: float = 0.0
    name: str = "calibration"

    _group = "calibration"

    def __post_init__(self):
        g = self._group
        fraction(g, "compute_efficiency", self.compute_efficiency)
        fraction(g, "memory_bandwidth_efficiency", self.memory_bandwidth_efficiency)
        fraction(g, "comm_efficiency", self.comm_efficiency)
        non_negative(g, "memory_reserve", self.memory_reserve_bytes, unit="bytes")
        fraction(g, "kv_usable_fraction", self.kv_usable_fraction)
        non_negative(g, "step_overhead", self.step_overhead_s, unit="s")
        non_negative(g, "per_token_overhead", self.per_token_overhead_s, unit="s")
        non_negative(g, "per_request_overhead", self.per_request_overhead_s, unit="s")
