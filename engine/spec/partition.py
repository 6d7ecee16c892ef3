"""PartitionSpec: how one model replica is laid out over devices, and how many replicas run."""

from dataclasses import dataclass

from engine.spec._check import positive_int


@dataclass(frozen=True)
class PartitionSpec:
    """Parallel layout.

    tp: tensor parallel (heads and FFN columns split; two all-reduces per layer);
    pp: pipeline parallel (layers split into pp stages);
    ep: expert parallel (routed experts split over ep devices of the replica);
    sp: sequence/context parallel (the prompt split over sp devices);
    dp: data-parallel replicas (independent copies; multiply throughput, not speed).
    Devices per replica = tp x pp x sp; devices in all = that x dp.
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1
    sp: int = 1
    dp: int = 1

    _group = "partition"

    def __post_init__(self):
        for f in ("tp", "pp", "ep", "sp", "dp"):
            positive_int(self._group, f, getattr(self, f))

    @property
    def devices_per_replica(self) -> int:
        return self.tp * self.pp * self.sp

    @property
    def devices(self) -> int:
        return self.devices_per_replica * self.dp
