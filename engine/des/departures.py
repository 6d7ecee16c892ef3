"""Sequences leaving a replica's running slots: completion, the hand-off of a prefilled prompt to a
decode replica (disaggregated pools), an abort (a deadline passed or the client went away), and
what each frees: the slot's KV blocks and its pinned prefix-cache entries; the remaining slots are
compacted to the first ``n``. A mixin of ``engine.des.replica.Replica``.
"""

import numpy as np


class Departures:
    """Completion, hand-off and abort of ``Replica`` (see the module docstring)."""

    def _unpin(self, idx):
        """Unpin the prefix entries of slots ``idx``."""
        kv, st = self.kv, self.st
        for s in idx[self.nhit[idx] > 0]:
            kv.unpin(st.hashes[int(self.rid[s])][:int(self.nhit[s])])

    def _release(self, s):
        """Free slot ``s``'s KV blocks and unpin its prefix entries."""
        self.kv.give(int(self.blocks[s]))
        if self.nhit[s]:
            self.kv.unpin(self.st.hashes[int(self.rid[s])][:int(self.nhit[s])])

    def _remove(self, s):
        """Free slot ``s`` (``_release``) and move the last running slot into it."""
        if self.pf[s]:
            self.n_prefill -= 1
        self._release(s)
        last = self.n - 1
        if s != last:
            self._ints[:, s] = self._ints[:, last]
            self.last[s] = self.last[last]
        self.n = last

    def _hand_off(self, t):
        """Prefill role: every sequence whose prompt is done and that still has tokens to emit
        leaves for a decode replica (its KV is sent there; blocks here are freed)."""
        n = self.n
        go = (self.pf[:n] == 0) & (self.left[:n] > 0)
        if not go.any():
            return
        st = self.st
        idx = go.nonzero()[0]
        rid = self.rid[idx]
        st.emitted[rid] = st.output[rid] - self.left[idx]
        st.last_token[rid] = self.last[idx]
        st.kv_ready[rid] = True
        self.kv.give(int(self.blocks[idx].sum()))
        if self.kv.prefix is not None:
            self._unpin(idx)
        keep = (~go).nonzero()[0]
        m = len(keep)
        self._ints[:, :m] = self._ints[:, keep]
        self.last[:m] = self.last[keep]
        self.n = m
        self.handoffs.extend(rid.tolist())

    def _complete(self, t):
        """Sequences with no tokens left complete at ``t`` (the time their client sees the last
        token: the front end's, engine.des.frontend); their blocks are freed, slots compacted."""
        n = self.n
        if not n:
            return ()
        done = self.left[:n] <= 0
        idx = done.nonzero()[0]
        if not len(idx):
            return ()
        if len(idx) == 1:
            # one completion (the usual case): its blocks freed, its prefix entries unpinned,
            # the slots after it moved down one (in order)
            s = int(idx[0])
            rid = int(self.rid[s])
            self.st.completion[rid] = t
            self._release(s)
            if s < n - 1:
                self._ints[:, s:n - 1] = self._ints[:, s + 1:n]
                self.last[s:n - 1] = self.last[s + 1:n]
            self.n = n - 1
            return [rid]
        rid = self.rid[idx]
        self.st.completion[rid] = t
        self.kv.give(int(self.blocks[idx].sum()))
        if self.kv.prefix is not None:
            self._unpin(idx)
        m = n - len(idx)
        if m:
            keep = (~done).nonzero()[0]
            self._ints[:, :m] = self._ints[:, keep]
            self.last[:m] = self.last[keep]
        self.n = m
        return rid.tolist()

    def abort(self, rid: int) -> bool:
        """Drop running request ``rid`` between iterations (an end-to-end deadline passed): its KV
        blocks freed and prefix entries unpinned and its slot compacted as a preemption does
        (``_remove``); not requeued. False if it is not running here."""
        hit = (self.rid[:self.n] == rid).nonzero()[0]
        if not hit.size:
            return False
        s = int(hit[0])
        self.st.emitted[rid] = int(self.st.output[rid]) - int(self.left[s])
        self._remove(s)
        return True


__all__ = ["Departures"]
