"""Plain decoding, the replica's default ``decoding`` slot: one token per sequence per step.

Pure decode iterations are advanced many at a time: with B sequences and no admission possible,
step j (0-based) has aggregates tokens = logits = B, attn_pairs = kv_read = sum(ctx + 1) + B j,
so its time is ``StepModel.time`` of an arange (``Replica.step_times``); the run stops at the
first completion, at the last step the free KV blocks allow (newest sequences preempted first
when not even one step fits), at ``max_decode_run`` steps, or early when a request arrives
(``Replica.truncate``). Speculation (engine.des.features.speculation) fills the same slot.
"""

import numpy as np

from engine.des.runs import DecodeRun
from engine.des.state import imin, isum


class PlainDecoding:
    """One token per decoding sequence per step."""

    q = 1.0         # tokens a decode verifies per step (speculation: gamma + 1)

    def mixed_emit(self, rep, didx):
        """Tokens each of the decodes ``didx`` beside prompt chunks emits: one (None)."""
        return None

    def mixed_price(self, rep, T, logits, pieces, nd, pd, emit):
        """(seconds, roofline-busy seconds) of one iteration: the step model's pass time and
        the power slot's busy part (0 without a power model)."""
        return (rep.step_time(T, logits, pieces, nd, pd),
                rep.power.busy_one(T, logits, pieces, nd, pd))

    def plan_run(self, rep, t):
        """Plan k decode steps for all running sequences of ``rep`` (all are decoding): KV blocks
        for the k steps taken, priced (power limiter included); returns the end time."""
        n = rep.n
        bs = rep.bs
        kv = rep.kv
        lmin = imin(rep.left[:n])     # the run ends at a completion when it takes lmin steps
        kmax = lmin if lmin <= rep.max_run else rep.max_run
        pc = kv.prefix
        ctx = rep.ctx[:n]
        # blocks each sequence holds at the end of k more steps: ceil((ctx + k - cached) / bs)
        newb = ctx + (kmax + bs - 1)
        if pc is not None:            # cached is 0 without a prefix cache
            newb -= rep.cached[:n]
        newb //= bs
        blk = rep.blocks[:n]
        if rep.reserves:
            need = int(np.maximum(newb - blk, 0).sum())
        else:   # outside a run every sequence holds exactly ceil(own / bs) blocks
            need = isum(newb) - (kv.total - kv.free - (pc.pages if pc is not None else 0))
        avail = kv.avail()
        k = kmax
        if need > avail:
            rep.make_room(1)
            n = rep.n
            if not n:
                return rep.plan(t)
            blk = rep.blocks[:n]
            ctx = rep.ctx[:n]
            own = ctx - rep.cached[:n]
            lmin = int(rep.left[:n].min())
            kmax = min(lmin, rep.max_run)
            avail = kv.avail()
            lo, hi = 1, kmax + 1     # need(lo) fits, need(hi) does not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if int(np.maximum(-(-(own + mid) // bs) - blk, 0).sum()) <= avail:
                    lo = mid
                else:
                    hi = mid
            k = lo
            newb = -(-(own + k) // bs)
            need = int(np.maximum(newb - blk, 0).sum())
        if need:
            kv.take(need)
            np.maximum(blk, newb, out=blk)
        # CUDA-graph padding and the framework's host costs are the step path's (StepModel)
        p0 = float(isum(ctx) + n)
        x = rep.step_times(n, p0, k)
        if kv.pending_s:            # swap transfers before the first step
            x = x.copy()
            x[0] += kv.take_pending()
        x, busy, energy, pstate = rep.power.price_run(t, x, n, p0, k)
        cum = np.add.accumulate(x)       # x.cumsum(), without its wrapper
        rep.run = DecodeRun(t, cum, k, kv.total - kv.free, k == lmin, x, None, busy,
                            energy, pstate)
        return t + float(cum[-1])


PLAIN = PlainDecoding()

__all__ = ["PlainDecoding", "PLAIN"]
