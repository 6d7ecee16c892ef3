"""The priced iterations a replica runs: a ``MixedRun`` (one iteration of prompt chunks, maybe with
decodes) or a ``DecodeRun`` (k pure decode steps of every running sequence), made when the replica
prices a scheduler's ``Plan`` (engine.des.schedulers.base) and committed by ``Replica.finish``."""

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class DecodeRun:
    """k pure decode steps of every running sequence, planned at ``start``."""

    start: float
    cum: np.ndarray          # cumulative step times [s]
    k: int
    used: int                # KV blocks in use during the run
    at_completion: bool | None   # True: ends at a completion; None: truncated by an arrival
    steps: np.ndarray        # the k step times [s]
    emit: np.ndarray | None = None    # speculative: tokens each sequence emitted by step j (k x n)
    busy: object = None               # roofline-busy part of the steps [s]: array or line (features.power)
    energy: np.ndarray | None = None  # joules of each step (all devices of the replica)
    pstate: tuple | None = None       # power-limiter state after each step

    def first(self, j: int) -> "DecodeRun":
        """The run cut after its first ``j`` steps (an arrival or an abort truncated it)."""
        emit, busy, energy = self.emit, self.busy, self.energy     # arrays cut, None or a line kept
        return DecodeRun(self.start, self.cum[:j], j, self.used, None, self.steps[:j],
                         None if emit is None else emit[:j],
                         busy if busy is None or busy.__class__ is tuple else busy[:j],
                         None if energy is None else energy[:j], self.pstate)


@dataclass(slots=True)
class MixedRun:
    """One iteration: prompt ``chunks`` [(slot, tokens)] plus the decoding slots ``didx``."""

    start: float
    dur: float
    chunks: list
    didx: np.ndarray | None
    used: int
    nd: int
    busy: float = 0.0                 # roofline-busy part [s] (energy; features.power)
    energy: np.ndarray | None = None  # joules of the iteration (1 entry)
    pstate: tuple | None = None
    emit: np.ndarray | None = None    # speculative: tokens each of ``didx`` emits


__all__ = ["DecodeRun", "MixedRun"]
