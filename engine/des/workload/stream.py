"""The request stream of one simulation: arrival times, prompt/output lengths, priority classes and
prefix hashes, one numpy array per attribute, indexed by request id (no objects). A leaf: numpy only.
"""

from dataclasses import dataclass

import numpy as np


@dataclass
class RequestStream:
    """The requests of one simulation.

    arrival_s: float64 seconds; NaN for closed-loop requests whose time is set when the user's
    previous request completes. users > 0 marks a closed loop of that many users.
    hashes: per request, the prefix block hashes (``block_tokens`` prompt tokens each) or None.
    """

    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    priority: np.ndarray
    hashes: list | None = None
    block_tokens: int = 512
    users: int = 0
    think_time_s: float = 0.0
    source: str = "synthetic"
    #: multi-turn sessions (engine.des.workload.sessions): next turn's request id (-1: last), think time
    #: before each turn [s], session id; None without sessions
    next_turn: np.ndarray | None = None
    think_s: np.ndarray | None = None
    session: np.ndarray | None = None
    #: request classes (DesSpec.clients.classes; engine.des.workload.sessions.apply_classes): class index per
    #: request; None = one class
    klass: np.ndarray | None = None
    #: a trace's other numeric columns per request (engine.des.workload.trace.Trace.columns) or None
    columns: dict | None = None

    def __len__(self) -> int:
        return len(self.prompt)


__all__ = ["RequestStream"]
