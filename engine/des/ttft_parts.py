"""A request's TTFT taken apart along its path, from the DES's own timestamps (``State``):

    path           arrival -> entry into a replica's queue: the request overhead of
                   ``calibration.per_request_overhead`` + the framework's ``per_request_overhead``
                   and ``per_request_token_overhead`` per prompt token
                   (API server: parse, tokenise, hand to the engine; a FIFO single server, so its
                   queue is in this part) and half the client round
                   trip (``engine.des.clients.client_rtt_ms``)
    queue          entry -> first admission into an iteration (waiting for a slot, KV or the
                   token budget), of which
      ahead        the wait for the iteration the engine had already scheduled when the request
                   came (``framework.schedule_ahead``, engine.des.ahead), counted when the first
                   plan that sees the request admits it (else the request would have waited
                   anyway, for a slot, KV or the budget)
    prefill        first admission -> the engine emits the first token: the prefill iterations
                   (chunks, the decodes sharing them, a preemption and its recompute)
    first_token    the engine's first token -> the client's: half the client round trip on the
                   way out

path + queue + prefill + first_token = TTFT exactly (each a difference of consecutive
timestamps). ``table`` gives them per request [ms]; ``summary`` their means over the requests the
summary counts (the measurement window of engine.des.metrics), as ``ttft_<part>_ms_mean``.
"""

import numpy as np
import polars as pl

from engine.des.metrics import _measured

PARTS = ("path", "queue", "ahead", "prefill", "first_token")


def arrays(st) -> dict:
    """Per-request parts [s] (NaN where the request never got a first token)."""
    lag = np.isfinite(st.ahead_s) & (st.scheduled <= st.ahead_at)
    ahead = np.where(lag, st.ahead_s, 0.0)
    return {
        "path": st.entered_s - st.arrival,
        "queue": st.scheduled - st.entered_s,
        "ahead": np.where(np.isfinite(st.first_token), ahead, np.nan),
        "prefill": st.first_token_engine - st.scheduled,
        "first_token": st.first_token - st.first_token_engine,
    }


def table(st) -> pl.DataFrame:
    """One row per request: request_id, ttft_ms and ``ttft_<part>_ms`` for each part."""
    a = arrays(st)
    cols = {"request_id": np.arange(st.n, dtype=np.int64),
            "ttft_ms": (st.first_token - st.arrival) * 1e3}
    cols.update({f"ttft_{k}_ms": v * 1e3 for k, v in a.items()})
    return pl.DataFrame(cols, nan_to_null=False)


def summary(st) -> dict:
    """``ttft_<part>_ms_mean`` over the measured requests (NaN when none)."""
    m = _measured(st) & np.isfinite(st.first_token)
    a = arrays(st)
    return {f"ttft_{k}_ms_mean": float(np.mean(v[m]) * 1e3) if m.any() else float("nan")
            for k, v in a.items()}


__all__ = ["PARTS", "arrays", "table", "summary"]
