"""Discrete-event serving engine: request streams, continuous batching, paged KV cache with
preemption, replicas behind a router, per-request TTFT/TPOT distributions.

``run(specs, des) -> RunResult``; ``simulate(specs, des) -> SimResult`` (adds the raw state and
the optional per-iteration timeline). Step times come from ``engine.analytical.step``.
"""

from engine.des.config import DesSpec
from engine.des.run import SimResult, run, simulate
from engine.des.workload import RequestStream, build_stream

__all__ = ["DesSpec", "run", "simulate", "SimResult", "RequestStream", "build_stream"]
