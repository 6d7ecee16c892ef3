"""Candidate deployments: hardware x partition x serving mode (one *unit* = the replicas that
serve together and are replicated for more rate).

colocated  one replica of tp x pp devices doing prefill and decode (continuous batching);
disagg     P prefill replicas + D decode replicas of tp x pp devices each (KV handed over between
           the pools, engine.des ``prefill_replicas``).
Partitions the model cannot take (``engine.analytical.parallel.invalid_reasons``: heads not
divisible by tp, ...) are dropped with their reason; sp = ep = 1 (dense models; the DES prices
EP/SP passes too, but the search space keeps to the issue's TP x PP).
"""

from dataclasses import dataclass

import numpy as np

from engine.analytical import parallel
from engine.plan.spec import SpaceSpec
from engine.spec import Specs


@dataclass(frozen=True)
class Candidate:
    hardware: str
    tp: int
    pp: int = 1
    replicas: int = 1             # replicas in one unit
    prefill_replicas: int = 0     # > 0: disaggregated (that many of the replicas prefill)

    @property
    def devices_per_replica(self) -> int:
        return self.tp * self.pp

    @property
    def devices(self) -> int:
        """Devices of one unit."""
        return self.devices_per_replica * self.replicas

    @property
    def mode(self) -> str:
        return (f"disagg {self.prefill_replicas}P+{self.replicas - self.prefill_replicas}D"
                if self.prefill_replicas else "colocated")

    @property
    def layout(self) -> str:
        return f"TP{self.tp}" + (f"PP{self.pp}" if self.pp > 1 else "")

    @property
    def key(self) -> str:
        return f"{self.hardware}:{self.layout}:" + (
            f"{self.prefill_replicas}P{self.replicas - self.prefill_replicas}D" if self.prefill_replicas
            else "co")

    def overrides(self) -> dict:
        """Config keys this candidate sets (dotted key -> value)."""
        return {"partition.tp": self.tp, "partition.pp": self.pp, "partition.dp": 1,
                "engine.des.replicas": self.replicas,
                "engine.des.prefill_replicas": self.prefill_replicas}


def enumerate_candidates(space: SpaceSpec, specs: Specs, device_budget: int = 0):
    """(candidates, dropped): every hardware x (tp, pp) with tp x pp <= max_devices the model
    allows x mode; ``dropped`` lists (hardware, tp, pp, reason) of partitions left out."""
    out, dropped = [], []
    for hw in space.hardware:
        for tp in sorted(set(space.tp)):
            for pp in sorted(set(space.pp)):
                if tp * pp > space.max_devices:
                    continue
                bad = [why for why, m in parallel.invalid_reasons(specs, np.array([tp]), np.array([pp]),
                                                                  np.array([1]), np.array([1])).items()
                       if bool(np.asarray(m).reshape(-1)[0])]
                if bad:
                    dropped.append((hw, tp, pp, bad[0]))
                    continue
                units = []
                if "colocated" in space.modes:
                    units.append(Candidate(hw, tp, pp))
                if "disagg" in space.modes:
                    units += [Candidate(hw, tp, pp, p + d, p) for p, d in space.disagg_pools]
                for c in units:
                    if device_budget and c.devices > device_budget:
                        dropped.append((hw, tp, pp, f"{c.mode}: {c.devices} devices > budget {device_budget}"))
                    else:
                        out.append(c)
    return out, dropped
