"""Request stream: arrival times, prompt/output lengths, priority classes and prefix hashes.

Everything is drawn from ``WorkloadSpec.seed`` with independent sub-streams (lengths, arrivals,
priorities), so changing the arrival process does not change the lengths. Arrays, not objects:
one numpy array per attribute, indexed by request id.
"""

from engine.des.workload.arrivals import arrivals, synthetic_arrivals
from engine.des.workload.clients import client_requests
from engine.des.workload.lengths import sample_lengths
from engine.des.workload.stream import RequestStream
from engine.des.workload.trace import Trace, load_trace
from engine.errors import SpecError
from engine.spec.workload import WorkloadSpec

import numpy as np


def _tile(trace: Trace, n: int):
    """The trace's rows repeated to ``n`` requests; each repeat starts one mean gap after the
    previous one ends, and its prefix hashes are shifted so repeats do not share cache blocks."""
    rows = len(trace)
    idx = np.arange(n) % rows
    cycle = np.arange(n) // rows
    prompt, output = trace.prompt[idx], trace.output[idx]
    arrival = None
    if trace.arrival_s is not None:
        span = float(trace.arrival_s[-1])
        gap = span / (rows - 1) if rows > 1 and span > 0 else 1.0
        arrival = trace.arrival_s[idx] + cycle * (span + gap)
    hashes = None
    if trace.hashes is not None:
        top = 1 + max((int(h.max()) for h in trace.hashes if len(h)), default=0)
        hashes = [trace.hashes[i] + c * top if c else trace.hashes[i] for i, c in zip(idx, cycle)]
    return arrival, prompt, output, hashes


def _tile_columns(trace: Trace, n: int):
    """The trace's extra columns repeated as ``_tile`` repeats its rows."""
    if not trace.columns:
        return None
    idx = np.arange(n) % len(trace)
    return {c: v[idx] for c, v in trace.columns.items()}


def check_context(spec: WorkloadSpec, trace: Trace | None, context: int, model: str = "") -> None:
    """Every request fits ``context`` tokens (``ModelSpec.context_length``; 0 = not checked),
    prompt and output together: for a trace, each row (the first one over is named); for drawn
    lengths, the longest draws of ``prompt_dist`` and ``output_dist`` (their support, before any
    request is drawn). Raises SpecError naming the row or the distribution and the limit."""
    if not context:
        return
    limit = f"model.context_length = {context} tokens{f' ({model})' if model else ''}"
    if trace is not None:
        over = np.flatnonzero(trace.prompt + trace.output > context)
        if len(over):
            i = int(over[0])
            row = int(trace.rows[i]) if trace.rows is not None else i + 1
            raise SpecError("workload.trace.path", trace.path,
                            f"requests of at most {limit}, prompt and output together: row {row} has "
                            f"{int(trace.prompt[i])} + {int(trace.output[i])}"
                            + (f"; {len(over) - 1} more row(s) over" if len(over) > 1 else ""))
        return
    p_top = spec.prompt_dist.longest(spec.prompt_len)
    o_top = spec.output_dist.longest(spec.output_len)
    if p_top + o_top > context:
        key = "prompt_dist" if spec.prompt_dist.kind != "fixed" or spec.output_dist.kind == "fixed" else "output_dist"
        dist = getattr(spec, key)
        fld, val = ((f"workload.{key}.high", dist.high) if dist.kind != "fixed"
                    else ("workload.prompt_len", spec.prompt_len))
        raise SpecError(fld, val, f"lengths whose longest draws (prompt {p_top:g} + output {o_top:g} "
                        f"tokens) fit {limit}: set prompt_dist.high / output_dist.high")


def build_stream(spec: WorkloadSpec, context: int = 0, model: str = "") -> RequestStream:
    """The request stream a WorkloadSpec describes (trace rows or synthetic draws), seeded.
    ``context`` > 0: every request must fit that many tokens (``check_context``)."""
    ss = np.random.SeedSequence(spec.seed)
    r_len, r_arr, r_pri = (np.random.default_rng(s) for s in ss.spawn(3))
    trace = load_trace(spec.trace) if spec.trace.path else None
    check_context(spec, trace, context, model)
    if spec.num_requests:
        n = spec.num_requests
    elif trace is not None:
        n = len(trace)
    elif spec.arrival == "closed_loop":
        # the benchmark client's run length (engine.des.workload.clients), else batch_size per user
        n = client_requests(spec.client, spec.concurrency, spec.concurrency * max(spec.batch_size, 1))
    else:
        n = spec.batch_size
    hashes, t_arr = None, None
    if trace is not None:
        t_arr, prompt, output, hashes = _tile(trace, n)
    else:
        prompt = sample_lengths(spec.prompt_dist, spec.prompt_len, n, r_len)
        output = sample_lengths(spec.output_dist, spec.output_len, n, r_len)
    users = 0
    if spec.arrival == "trace":
        if t_arr is None:
            raise SpecError("workload.arrival", "trace", f"a synthetic process (poisson, gamma, "
                            f"closed_loop, batch): {spec.trace.path} has no arrival times")
        arrival = t_arr
        if spec.rate_rps > 0 and n > 1 and arrival[-1] > 0:
            arrival = arrival * ((n - 1) / arrival[-1]) / spec.rate_rps
    elif spec.arrival == "closed_loop":
        users = spec.concurrency
        arrival = arrivals("closed_loop", n, users=users)
    else:
        arrival = synthetic_arrivals(spec, n, r_arr)
    priority = (r_pri.random(n) >= spec.priority_fraction).astype(np.int8)
    return RequestStream(arrival_s=np.asarray(arrival, dtype=np.float64), prompt=prompt, output=output,
                         priority=priority, hashes=hashes, block_tokens=spec.trace.block_tokens,
                         users=users, think_time_s=spec.think_time_s,
                         source=trace.path if trace is not None else "synthetic",
                         columns=_tile_columns(trace, n) if trace is not None else None)


__all__ = ["build_stream", "check_context"]
