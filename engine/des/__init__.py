"""Discrete-event serving engine: request streams and benchmark-style clients, continuous batching
by a scheduler strategy per serving framework (engine.des.schedulers), a paged KV pool with
prefix caching and preemption (engine.des.kv), replicas behind a router, per-request
TTFT/TPOT distributions.

``run(specs) -> RunResult`` and ``simulate(specs) -> SimResult`` (adds the raw state and the
optional per-iteration timeline) read their settings from ``specs.des`` (DesSpec), whose null
scheduler settings come from ``specs.framework`` (FrameworkSpec); a DesSpec passed explicitly
replaces ``specs.des``. Step times come from ``engine.analytical.step``.
"""

from engine.des.config import DesSpec
from engine.des.run import SimResult, run, simulate
from engine.des.workload import RequestStream, build_stream

__all__ = ["DesSpec", "run", "simulate", "SimResult", "RequestStream", "build_stream"]
