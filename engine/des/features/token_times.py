"""Per-token timestamps (``DesSpec.outputs.token_times``): ``State.token_times[rid]`` collects the times
[s] of request rid's tokens, a list of arrays, concatenated into the table's ``token_times_s``
and ``itl_ms`` columns (engine.des.features.report). A decode run's step j emits at its end
``times[j]``; with speculation each sequence's accepted tokens of a step all at its end."""

import numpy as np

from engine.des.features.base import Feature


class TokenTimes(Feature):
    """Records every token's time into ``st.token_times``."""

    def __init__(self, st):
        st.token_times = [[] for _ in range(st.n)]
        self.tt = st.token_times

    def first_token(self, rep, rid, t):
        self.tt[rid].append(np.array([t]))

    def decode_run(self, rep, t0, cum, emit, n):
        tt = self.tt
        times = t0 + cum
        rids = rep.rid[:n].tolist()
        if emit is None:
            for r in rids:
                tt[r].append(times)
            return
        per = np.diff(np.vstack([np.zeros((1, n), emit.dtype), emit]), axis=0)
        for i, r in enumerate(rids):
            tt[r].append(np.repeat(times, per[:, i]))

    def iteration(self, rep, didx, emit, t):
        if didx is None:
            return
        tt = self.tt
        for i, r in enumerate(rep.rid[didx].tolist()):
            tt[r].append(np.full(1 if emit is None else int(emit[i]), t))


__all__ = ["TokenTimes"]
