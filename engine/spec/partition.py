"""PartitionSpec: how one model replica is laid out over devices, and how many replicas run."""

from dataclasses import dataclass

from engine.spec._check import one_of, positive_int
from engine.spec.meta import param

EP_LAYOUTS = ("shared", "extra")


@dataclass(frozen=True)
class PartitionSpec:
    """Parallel layout.

    tp: tensor parallel (heads and FFN columns split; two all-reduces per layer);
    pp: pipeline parallel (layers split into pp stages);
    ep: expert parallel (routed experts split over ep devices of the replica);
    sp: sequence/context parallel (the prompt split over sp devices);
    dp: data-parallel replicas (independent copies; multiply throughput, not speed).
    Devices per replica = tp x pp x sp; devices in all = that x dp.

    ep_layout: where the EP groups come from.
      shared (default): from a stage's tp x sp devices (ep | tp x sp); ep adds no devices.
      extra (llm_perf's convention, where PP8-TP4-EP2 is 64 GPUs): ep multiplies the devices; a
        stage is tp x sp x ep devices, attention and the dense layers run data-parallel over the ep
        groups of tp x sp devices (each group holds its share of the sequences and their KV), and
        the routed experts are split over all tp x ep devices of the stage (ep groups of whole
        experts, each tensor-split tp ways). Per device this is the shared layout with
            sp' = sp x ep    (tokens and KV of a stage split sp x ep ways)
            ep' = tp x ep    (experts split tp x ep ways; the all-to-all spans tp x ep devices)
        and that is how it is priced: the spec holds (tp, pp, ep', sp') and records the factor
        in ``ep_groups`` (so ``dataclasses.replace`` does not convert twice). Two differences to
        true data-parallel attention remain, both stated in the run's assumptions: the pass adds
        an all-gather of the new tokens' K/V over the sp' devices (small in decode), and a single
        prompt's prefill is split over the groups (context parallel) instead of running on one.
        ep' must divide the routed experts (the shared layout's rule applied to ep').
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1
    sp: int = 1
    dp: int = 1
    ep_layout: str = "shared"
    ep_groups: int = param(1, config=False)   # ep_layout=extra: the EP factor as given (set here)

    _group = "partition"

    def __post_init__(self):
        for f in ("tp", "pp", "ep", "sp", "dp", "ep_groups"):
            positive_int(self._group, f, getattr(self, f))
        one_of(self._group, "ep_layout", self.ep_layout, EP_LAYOUTS)
        if self.ep_layout == "extra" and self.ep > 1 and self.ep_groups == 1:
            # the equivalent shared layout (class docstring); ep_groups marks it converted
            object.__setattr__(self, "ep_groups", self.ep)
            object.__setattr__(self, "sp", self.sp * self.ep)
            object.__setattr__(self, "ep", self.tp * self.ep)

    @property
    def devices_per_replica(self) -> int:
        return self.tp * self.pp * self.sp

    @property
    def devices(self) -> int:
        return self.devices_per_replica * self.dp

    @property
    def label(self) -> str:
        """PP-TP-EP-SP as the user gave it (ep_layout=extra: EP is the device factor)."""
        g = self.ep_groups
        if g > 1:
            return f"PP{self.pp}-TP{self.tp}-EP{g}x-SP{self.sp // g}"
        return f"PP{self.pp}-TP{self.tp}-EP{self.ep}-SP{self.sp}"
