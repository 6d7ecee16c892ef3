"""Specs: the specs of one job, checked against each other."""

from dataclasses import dataclass, field

from engine.errors import SpecError
from engine.spec.analytical import AnalyticalSpec
from engine.spec.calibration import CalibrationSpec
from engine.spec.des import DesSpec
from engine.spec.framework import FrameworkSpec
from engine.spec.hardware import HardwareSpec
from engine.spec.model import ModelSpec
from engine.spec.partition import PartitionSpec
from engine.spec.workload import WorkloadSpec


@dataclass(frozen=True)
class Specs:
    """Everything one engine run needs. Cross-field rules are checked here."""

    hardware: HardwareSpec
    model: ModelSpec
    partition: PartitionSpec
    workload: WorkloadSpec
    calibration: CalibrationSpec
    analytical: AnalyticalSpec = field(default_factory=AnalyticalSpec)
    #: the serving framework's profile (conf/framework/; generic = the neutral one)
    framework: FrameworkSpec = field(default_factory=FrameworkSpec)
    #: discrete-event engine settings (conf/engine/des.yaml); its None fields come from framework
    des: DesSpec = field(default_factory=DesSpec)

    @property
    def kv_usable_fraction(self) -> float:
        """Share of (HBM - weights - activations - reserve) given to the KV cache: the framework
        profile's when it sets one (> 0: e.g. vLLM gpu_memory_utilization, TensorRT-LLM
        free_gpu_memory_fraction), else the calibration's. Both engines size KV with this."""
        f = self.framework.kv_usable_fraction
        return f if f > 0 else self.calibration.kv_usable_fraction

    @property
    def per_request_overhead_s(self) -> float:
        """Host seconds once per request before it reaches the scheduler [s]: the calibration's
        per-request overhead (client, HTTP) plus the framework profile's (API server: parse,
        tokenise, hand-off to the engine core). Both engines delay the first token by it."""
        return self.calibration.per_request_overhead_s + self.framework.per_request_s

    def request_overhead_s(self, prompt_len):
        """Host seconds before the scheduler for a request of ``prompt_len`` prompt tokens [s]
        (floats or arrays): ``per_request_overhead_s`` + prompt_len x the framework's
        ``per_request_token_s`` (the API server tokenising and handing over the prompt)."""
        t = self.framework.per_request_token_s
        return self.per_request_overhead_s + prompt_len * t if t else self.per_request_overhead_s

    def __post_init__(self):
        m, p = self.model, self.partition
        if m.num_heads % p.tp:
            raise SpecError("partition.tp", p.tp,
                            f"a divisor of model.num_heads={m.num_heads} ({m.name})")
        if m.num_kv_heads % p.tp and p.tp % m.num_kv_heads:
            raise SpecError("partition.tp", p.tp,
                            f"a divisor or multiple of model.num_kv_heads={m.num_kv_heads} ({m.name})")
        if p.pp > m.num_layers:
            # Uneven stages are allowed: the largest, ceil(L/pp) layers, sets the pace
            # (engine.analytical.parallel.stage_share).
            raise SpecError("partition.pp", p.pp,
                            f"at most model.num_layers={m.num_layers} ({m.name})")
        if p.ep > 1:
            if not m.is_moe:
                raise SpecError("partition.ep", p.ep, f"1 for the dense model {m.name}")
            if m.num_experts % p.ep:
                if p.ep_groups > 1:         # ep_layout=extra: priced with experts over tp x ep
                    raise SpecError("partition.ep", p.ep_groups,
                                    f"with ep_layout=extra, tp x ep = {p.ep} dividing "
                                    f"model.num_experts={m.num_experts}")
                raise SpecError("partition.ep", p.ep,
                                f"a divisor of model.num_experts={m.num_experts}")
            if (p.tp * p.sp) % p.ep:
                # experts of a layer live on one pipeline stage's tp*sp devices
                raise SpecError("partition.ep", p.ep,
                                f"a divisor of tp*sp={p.tp * p.sp} (the devices of one stage)")
        w = self.workload
        if m.context_length and w.prompt_len + w.output_len > m.context_length:
            raise SpecError("workload.prompt_len", w.prompt_len,
                            f"prompt_len + output_len ({w.prompt_len} + {w.output_len}) at most "
                            f"model.context_length = {m.context_length} tokens ({m.name})")
        if self.workload.prompt_len % p.sp:
            raise SpecError("partition.sp", p.sp,
                            f"a divisor of workload.prompt_len={self.workload.prompt_len}")
