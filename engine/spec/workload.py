"""WorkloadSpec: what is asked of the system (the analytical engine's view: one static batch)."""

from dataclasses import dataclass

from engine.spec._check import positive_int


@dataclass(frozen=True)
class WorkloadSpec:
    """``batch_size`` requests of ``prompt_len`` prompt tokens each generating ``output_len`` tokens.

    The analytical engine treats the batch as arriving together and decoding in lock-step (the
    lower bound with no queueing). ``output_len`` counts every generated token, the first included
    (the first comes out of prefill).
    """

    prompt_len: int
    output_len: int
    batch_size: int = 1
    name: str = "workload"

    _group = "workload"

    def __post_init__(self):
        positive_int(self._group, "prompt_len", self.prompt_len)
        positive_int(self._group, "output_len", self.output_len)
        positive_int(self._group, "batch_size", self.batch_size)
