"""Candidate deployments: hardware x partition x serving mode (one *unit* = the replicas that
serve together and are replicated for more rate).

colocated  one replica of tp x pp devices doing prefill and decode (continuous batching);
disagg     P prefill replicas + D decode replicas of tp x pp devices each (KV handed over between
           the pools, engine.des ``prefill_replicas``).
Each also x ``schedulers`` (engine.des.scheduling.scheduler) x ``token_budgets`` (the chunked-prefill token
budget, engine.des.scheduling.max_num_batched_tokens) when those lists are given (else the framework
profile's). Partitions the model cannot take (``engine.analytical.parallel.invalid_reasons``: heads not
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
    scheduler: str = ""           # '' = the framework profile's
    token_budget: int = 0         # max_num_batched_tokens; 0 = the framework profile's

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
        return (f"TP{self.tp}" + (f"PP{self.pp}" if self.pp > 1 else "")
                + (f" {self.scheduler}" if self.scheduler else "")
                + (f" C{self.token_budget}" if self.token_budget else ""))

    @property
    def key(self) -> str:
        return f"{self.hardware}:{self.layout.replace(' ', ':')}:" + (
            f"{self.prefill_replicas}P{self.replicas - self.prefill_replicas}D" if self.prefill_replicas
            else "co")

    def overrides(self) -> dict:
        """Config keys this candidate sets (dotted key -> value)."""
        out = {"partition.tp": self.tp, "partition.pp": self.pp, "partition.dp": 1,
               "engine.des.cluster.replicas": self.replicas,
               "engine.des.cluster.prefill_replicas": self.prefill_replicas}
        if self.scheduler:
            out["engine.des.scheduling.scheduler"] = self.scheduler
        if self.token_budget:
            out["engine.des.scheduling.max_num_batched_tokens"] = self.token_budget
        return out


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
                for sched in space.schedulers or ("",):
                    for budget in space.token_budgets or (0,):
                        if "colocated" in space.modes:
                            units.append(Candidate(hw, tp, pp, 1, 0, sched, budget))
                        if "disagg" in space.modes:
                            units += [Candidate(hw, tp, pp, p + d, p, sched, budget)
                                      for p, d in space.disagg_pools]
                for c in units:
                    if device_budget and c.devices > device_budget:
                        dropped.append((hw, tp, pp, f"{c.mode}: {c.devices} devices > budget {device_budget}"))
                    else:
                        out.append(c)
    return out, dropped
