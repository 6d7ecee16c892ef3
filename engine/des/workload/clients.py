"""Benchmark-client behaviour applied to a run's requests (DesSpec: length jitter, ramp-up)."""

import numpy as np

from engine.des.workload.arrivals import ramp_arrivals


def apply_clients(st, des, users: int) -> np.random.Generator:
    """Client behaviour of ``des`` (DesSpec: ramp_up_s, length_jitter) applied to the state's
    request arrays before the loop runs (copies; the caller's stream is untouched). Returns the
    generator the loop draws exponential think times from. Seeded from ``des.seed``
    (sub-streams 1: lengths, 2: think times), so turning a client option on does not move the
    request stream (workload.seed)."""
    ss = np.random.SeedSequence([des.seed, 12])
    r_len, r_think = (np.random.default_rng(s) for s in ss.spawn(2))
    j = des.length_jitter
    if j > 0:
        n = st.n
        f = r_len.uniform(1.0 - j, 1.0 + j, size=(2, n))
        st.prompt = np.maximum(1, np.rint(st.prompt * f[0])).astype(np.int64)
        st.output = np.maximum(1, np.rint(st.output * f[1])).astype(np.int64)
    if des.ramp_up_s > 0 and not users:
        order = np.argsort(st.arrival, kind="stable")
        arr = st.arrival.copy()
        arr[order] = ramp_arrivals(st.arrival[order], des.ramp_up_s)
        st.arrival = arr
    return r_think


__all__ = ["apply_clients"]
