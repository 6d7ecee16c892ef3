"""The request side of the DES, one module per concern (leaves first):

    stream.py     RequestStream: the arrays of one simulation's requests (a leaf)
    arrivals.py   arrival processes: open loop, closed loop, ramp (a leaf)
    lengths.py    prompt/output lengths from a LengthDist
    trace.py      read a recorded trace (CSV, JSON, JSON Lines, Parquet; known layouts detected)
    importers/    foreign workload descriptions -> traces, registered by name (inference-perf,
                  ServeGen)
    build.py      build_stream: the stream a WorkloadSpec describes (trace rows or synthetic draws)
    clients.py    benchmark-client profiles (workload.client) and their behaviour (ramp-up, length jitter, TPOT definition)
    sessions.py   cluster-scale stream transforms: traffic shapes, sessions, reasoning, classes

Arrows run down this list's dependencies only (stream and arrivals import nothing here), so the
trace importers and the sessions draw arrivals without a workload <-> trace circle.
"""

from engine.des.workload.arrivals import arrivals, ramp_arrivals, synthetic_arrivals, weibull_shape
from engine.des.workload.build import build_stream
from engine.des.workload.clients import apply_clients
from engine.des.workload.lengths import sample_lengths
from engine.des.workload.stream import RequestStream

__all__ = ["RequestStream", "build_stream", "arrivals", "ramp_arrivals", "synthetic_arrivals",
           "weibull_shape", "sample_lengths", "apply_clients"]
