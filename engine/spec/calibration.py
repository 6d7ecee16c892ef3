"""CalibrationSpec: the fitted factors between spec-sheet peaks and what software attains."""

from dataclasses import dataclass, field
from typing import Any, Optional

from engine.spec._check import fraction, non_negative, one_of
from engine.spec.meta import param

JUMP_DISTS = ("fixed", "exponential", "lognormal")
#: Operator-cost backends (``CostSpec.backend``; engine.cost.registry.BACKENDS holds one factory each).
KERNEL_BACKENDS = ("roofline", "measured", "transfer", "anchored", "auto")


@dataclass(frozen=True)
class NoiseSpec:
    """Step-time noise of the discrete-event engine (``engine.des.noise``): a Merton-style
    jump diffusion on each iteration time x.

    x' = x * exp(jitter_sigma * Z)            (log-normal jitter, median-preserving;
                                                mean multiplier exp(sigma^2 / 2))
         + sum of N stalls, N ~ Poisson(jump_rate_per_s * x * exp(sigma Z))
                                               (jumps per second of busy time)
    stall sizes: fixed (= jump_mean_s), exponential (mean jump_mean_s) or lognormal (mean
    jump_mean_s, log-space std jump_sigma);
    power/TDP throttle: after throttle_after_s seconds of cumulative busy time, every iteration
    takes 1 / throttle_factor longer (clocks at throttle_factor of nominal); throttle_after_s = 0 or
    throttle_factor = 1: off. All zero: no noise (the DES is deterministic as without a hook).
    Defaults (all off) live in ``conf/calibration/noise/none.yaml``.
    """

    jitter_sigma: float = param(0.0, range=(0.0, 2.0))
    jump_rate_per_s: float = param(0.0, key="jump_rate", range=(0.0, 1e3))   # per second of busy time
    jump_dist: str = "fixed"
    jump_mean_s: float = param(0.0, key="jump_size", unit="ms", zero=True, range=(0.0, 60.0))
    jump_sigma: float = param(0.5, range=(0.0, 5.0))
    throttle_after_s: float = param(0.0, key="throttle_after", unit="s", zero=True, range=(0.0, 1e6))
    throttle_factor: float = param(1.0, range=(0.0, 1.0))

    _group = "calibration.noise"

    def __post_init__(self):
        g = self._group
        non_negative(g, "jitter_sigma", self.jitter_sigma)
        non_negative(g, "jump_rate", self.jump_rate_per_s, unit="per s")
        one_of(g, "jump_dist", self.jump_dist, JUMP_DISTS)
        non_negative(g, "jump_size", self.jump_mean_s, unit="s")
        non_negative(g, "jump_sigma", self.jump_sigma)
        non_negative(g, "throttle_after", self.throttle_after_s, unit="s")
        fraction(g, "throttle_factor", self.throttle_factor)

    @property
    def enabled(self) -> bool:
        """True when any part of the noise changes a step time."""
        jumps = self.jump_rate_per_s > 0 and self.jump_mean_s > 0
        throttle = self.throttle_after_s > 0 and self.throttle_factor < 1
        return self.jitter_sigma > 0 or jumps or throttle


@dataclass(frozen=True)
class CostSpec:
    """How an operator's time is priced (``calibration.cost``; engine.cost.registry).

    backend: roofline (peak x the calibration's efficiencies, in closed form), measured (the chip's
        measured kernel tables for the framework's ``kernel_tables``), transfer (curves learned on
        the measured chips applied to this chip's spec-sheet peaks), anchored (the nearest measured
        chip's tables scaled by the transfer curves' ratio between the two chips), auto (measured
        when the chip has tables, else transfer; roofline when the framework names no kernel tables);
    transfer_exclude: measured table sets (e.g. "h100_sxm") the transfer curves are fitted
        without - to validate the transfer on a chip whose tables are held out.

    A sub-node of the calibration, not a group of its own: the efficiencies and overheads of a
    calibration were fitted under one backend (conf/calibration/default.yaml: auto) and mean
    nothing under another, so the two travel together. Defaults live in ``conf/calibration/``.
    """

    backend: str = "roofline"
    transfer_exclude: tuple = param((), config_type=list)

    _group = "calibration.cost"

    def __post_init__(self):
        object.__setattr__(self, "transfer_exclude", tuple(self.transfer_exclude))
        one_of(self._group, "backend", self.backend, KERNEL_BACKENDS)


@dataclass(frozen=True)
class CalibrationSpec:
    """Efficiencies (fractions of peak) and memory-accounting factors.

    effective compute = peak x compute_efficiency; effective bandwidth = HBM bandwidth x
    memory_bandwidth_efficiency; effective link bandwidth = link x comm_efficiency.
    KV capacity = (HBM - weights - activations - memory_reserve_bytes) x kv_usable_fraction.

    Framework overheads (seconds), added to the roofline time:
    step_overhead_s: per forward pass / iteration (scheduler, input preparation);
    launch_overhead_s: per forward pass, launching the kernels or replaying the CUDA graph
        (kept apart from the scheduler so each can be set; the step model adds both per pass);
    per_token_overhead_s: per sequence per step that emits a token (sampling, detokenisation);
    per_request_overhead_s: once per request (tokenisation, admission, response).
    cost: the operator-cost backend and its transfer exclusions (``CostSpec``; read as
        ``kernels`` and ``transfer_exclude``, the names these had before the sub-node);
    Defaults live in ``conf/calibration/``, never here.
    """

    compute_efficiency: float = param(range=(0.0, 1.0))
    memory_bandwidth_efficiency: float = param(range=(0.0, 1.0))
    comm_efficiency: float = param(range=(0.0, 1.0))
    memory_reserve_bytes: float = param(key="memory_reserve", unit="GB", zero=True, range=(0.0, 1e12))
    kv_usable_fraction: float = param(range=(0.0, 1.0))
    step_overhead_s: float = param(0.0, key="step_overhead", unit="us", zero=True, required=True,
                                   range=(0.0, 1.0))
    per_token_overhead_s: float = param(0.0, key="per_token_overhead", unit="us", zero=True, required=True,
                                        range=(0.0, 1.0))
    per_request_overhead_s: float = param(0.0, key="per_request_overhead", unit="us", zero=True,
                                          required=True, range=(0.0, 10.0))
    launch_overhead_s: float = param(0.0, key="launch_overhead", unit="us", zero=True, range=(0.0, 1.0))
    name: str = param("calibration", required=True)
    cost: CostSpec = field(default_factory=CostSpec)  # operator-cost backend (engine.cost.registry)
    noise: NoiseSpec = field(default_factory=NoiseSpec)  # step-time jitter and jumps (DES only)

    #: Config-only keys (conf/calibration/*.yaml): where the factors came from; and the keys that
    #: moved into ``cost`` (runner.schema.RENAMED), still accepted, null when not given.
    CONFIG_EXTRA = (("provenance", str, ""), ("kernels", Optional[str], None),
                    ("transfer_exclude", Optional[Any], None))

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
        non_negative(g, "launch_overhead", self.launch_overhead_s, unit="s")

    @property
    def kernels(self) -> str:
        """The operator-cost backend (``cost.backend``)."""
        return self.cost.backend

    @property
    def transfer_exclude(self) -> tuple:
        """Table sets the transfer curves are fitted without (``cost.transfer_exclude``)."""
        return self.cost.transfer_exclude
