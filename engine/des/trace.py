"""Traces moved to engine.des.workload (trace.py: the reader; importers/: inference-perf, ServeGen);
these names stay for runner.tools.import_cli and the runner's tests."""

from engine.des.workload.importers import inference_perf_requests, servegen_requests
from engine.des.workload.trace import KNOWN_LAYOUTS, Trace, load_trace

__all__ = ["KNOWN_LAYOUTS", "Trace", "load_trace", "inference_perf_requests", "servegen_requests"]
