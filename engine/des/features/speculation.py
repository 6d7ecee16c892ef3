"""Speculative decoding in the discrete-event engine (engine.analytical.specdec for the model): the
replica's ``decoding`` slot (engine.des.features.base; PlainDecoding is the default).

A pure decode iteration of B sequences becomes one speculative step: gamma draft passes (the
draft model's or the MTP head's ``StepModel``; or a fixed fraction of a target step) plus one
verify pass of B (gamma + 1) tokens. Each sequence then emits A tokens, drawn per step and per
sequence from the acceptance model, A = min(Geometric(1 - alpha), gamma + 1) (seeded from
``engine.des.seed``, its own stream), at most the tokens it still has to emit. Its KV grows by A;
KV blocks are held for gamma lookahead positions beyond it (the verify writes gamma + 1 entries,
the rejected ones are overwritten next step; vLLM's lookahead slots) and given back after the run.

A run of k steps is planned at once (as plain decode runs): draws for k steps, the run ends at
the first step where a sequence completes; step j's contexts are the sums of the tokens emitted
before it. An iteration with prompt chunks beside decodes (chunked prefill) speculates too when
the KV pool has the decodes' extra blocks (else they emit one token each that iteration): their
verify tokens join the pass (``spec_pass``, beyond the scheduler's token budget), the draft
decodes for them, and the draft prefills every prompt chunk (its pass added to the iteration, as
the analytical engine adds it to TTFT).
"""

import numpy as np

from engine.analytical import parallel, specdec
from engine.analytical.step import StepModel
from engine.des.features.power import roof_s
from engine.des.runs import DecodeRun


def spec_pass(sm: StepModel, T, n, LPp, LRp, LPd, Bd, q):
    """Seconds and roofline-busy seconds of a pass (``StepModel.pass_time``'s aggregates: T tokens
    and n logits counting one per decoding sequence) whose Bd decoding sequences each verify q
    tokens: dense operators, LM head and collectives on T + Bd (q - 1) tokens (no CUDA-graph
    padding), the decodes' attention compute q x their attended positions LPd, their KV read once
    (engine.analytical.decode with q = gamma + 1)."""
    Tq, nq = T + Bd * (q - 1.0), n + Bd * (q - 1.0)
    att_c, _ = sm.attention(LPp, LRp, T - Bd, q * LPd, Bd, Tq)
    _, att_m = sm.attention(LPp, LRp, T - Bd, LPd, Bd, Tq)
    roof = sm.roof(sm.operators(Tq, nq, att_c, att_m))
    t = sm.wall(parallel.overlapped(roof, sm.comm_s(Tq), sm.overlap) + sm.launch_s(T, Bd),
                sm.host_s(nq, T - Bd))
    if sm.frontend_s_per_token:
        t = np.maximum(t, nq * sm.frontend_s_per_token)
    return t, roof


def verify_time(sm: StepModel, B: float, q: float, ctx_sum):
    """Seconds (and roofline-busy seconds) of one verify pass of B sequences with q query tokens
    each, attending ``ctx_sum`` positions in all (floats or arrays): ``spec_pass`` of decodes only."""
    return spec_pass(sm, B, B, 0.0, 0.0, sm.decode_positions(B, ctx_sum), B, q)


class Speculation:
    """Prices and draws speculative steps for the replicas of one simulation."""

    def __init__(self, specs, sm: StepModel, noise, seed: int):
        sd = specs.analytical.spec_decode
        self.gamma, self.alpha = sd.gamma, sd.acceptance
        self.q = float(sd.gamma + 1)
        self.sm, self.noise = sm, noise
        self.frac = sd.draft_cost_fraction
        dsp = specdec.draft_specs(specs)
        self.sm_d = StepModel.from_specs(dsp) if dsp is not None else None
        self.label = specdec.draft_label(specs)
        self.rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x73706563]))
        self._lines: dict = {}
        self.mean = float(specdec.expected_tokens(self.alpha, self.gamma))

    def _raw(self, B: float, ctx_sum):
        x, busy = verify_time(self.sm, B, self.q, ctx_sum)
        dx, db = self.draft_decode(B, ctx_sum)
        return x + dx, busy + db

    def step_times(self, B: int, ctx_sum: np.ndarray):
        """(seconds, roofline-busy seconds) of speculative steps of B sequences attending
        ``ctx_sum`` positions in all (one entry per step); the noise hook applied to the time.
        Both are convex piecewise-linear in the positions for a fixed B: where the probes prove
        a line (engine.des.pricing.probe_line) it prices the steps."""
        B = float(B)
        line = self._lines.get(B, 0)
        if line == 0:
            from engine.des.pricing import probe_line
            lx = probe_line(lambda P: self._raw(B, P)[0], B)
            lb = probe_line(lambda P: self._raw(B, P)[1], B)
            line = self._lines[B] = (lx, lb, min(lx[2], lb[2])) if lx and lb else None
        if line is not None and ctx_sum[-1] <= line[2]:
            x = line[0][0] + line[0][1] * ctx_sum
            busy = line[1][0] + line[1][1] * ctx_sum
        else:
            x, busy = self._raw(B, ctx_sum)
            x = np.asarray(x, dtype=np.float64) * np.ones_like(ctx_sum, dtype=np.float64)
            busy = np.asarray(busy, dtype=np.float64) * np.ones_like(x)
        if self.noise is not None:
            x = self.noise(x)
        return x, busy

    def draft_decode(self, B: float, ctx_sum):
        """(seconds, busy seconds) of the gamma draft passes for B decoding sequences attending
        ``ctx_sum`` positions in all (a fixed fraction of a target step with draft_cost_fraction)."""
        d = self.sm_d if self.sm_d is not None else self.sm
        f = 1.0 if self.sm_d is not None else self.frac
        if not f:
            return 0.0, 0.0
        t = np.asarray(d.time(B, B, decode_seqs=B, decode_ctx=ctx_sum))
        r = roof_s(d, B, B, 0.0, 0.0, d.decode_positions(B, ctx_sum), B)
        return self.gamma * f * t, self.gamma * f * r

    def mixed_time(self, T: int, n: int, chunks: tuple, nd: int, pd: int):
        """(seconds, busy seconds) of an iteration with prompt ``chunks`` whose ``nd`` decoding
        sequences (attending ``pd`` positions in all) speculate: the target pass with their
        verifies (``spec_pass``), the draft's passes for them and its pass over the chunks; the
        noise hook applied."""
        sm = self.sm
        LPp = LRp = 0.0
        for c, k in chunks:
            p, r = sm.chunk_positions(c, k)
            LPp += p
            LRp += r
        x, busy = spec_pass(sm, float(T), float(n), LPp, LRp, sm.decode_positions(float(nd), float(pd)),
                            float(nd), self.q)
        dx, db = self.draft_decode(float(nd), float(pd))
        px, pb = self.prefill_extra(T - nd, n - nd, chunks)
        x, busy = float(x + dx + px), float(busy + db + pb)
        if self.noise is not None:
            x = float(self.noise(np.array([x]))[0])
        return x, busy

    def prefill_extra(self, T: int, n: int, chunks: tuple):
        """(seconds, busy seconds) the draft adds to an iteration with prompt ``chunks``
        ((tokens, cached), ...): its own pass over them (0 for a fixed-fraction draft)."""
        d = self.sm_d
        if d is None or not chunks:
            return 0.0, 0.0
        LPp = LRp = 0.0
        for c, k in chunks:
            p, r = d.chunk_positions(c, k)
            LPp += p
            LRp += r
        return (float(d.pass_time(float(T), float(n), LPp, LRp, 0.0, 0.0)),
                float(roof_s(d, float(T), float(n), LPp, LRp, 0.0, 0.0)))

    def draw(self, k: int, n: int) -> np.ndarray:
        """Tokens emitted by n sequences in k steps (k x n)."""
        return specdec.draw_tokens(self.rng, self.alpha, self.gamma, (k, n))

    # ---- the replica's decoding slot (engine.des.features.decoding.PlainDecoding's methods)
    def mixed_emit(self, rep, didx):
        """Speculative decodes in an iteration with prompt chunks: tokens each of ``didx`` emits
        (drawn, at most what it has left), with KV blocks for them + gamma lookahead taken; None
        (one token each, no speculation) when the pool lacks those blocks."""
        a = np.minimum(self.draw(1, len(didx))[0], rep.left[didx])
        newb = -(-(rep.ctx[didx] + a + self.gamma - rep.cached[didx]) // rep.bs)
        need = int(np.maximum(newb - rep.blocks[didx], 0).sum())
        if need > rep.kv.avail():
            return None
        if need:
            rep.kv.take(need)
            rep.blocks[didx] = np.maximum(rep.blocks[didx], newb)
        return a

    def mixed_price(self, rep, T, logits, pieces, nd, pd, emit):
        """(seconds, busy seconds) of a mixed iteration: speculating decodes (``emit``) beside the
        prompt chunks (``mixed_time``), or plain decodes with the draft's pass over the chunks."""
        if emit is not None:
            return self.mixed_time(T, logits, pieces, nd, pd)
        dt = rep.step_time(T, logits, pieces, nd, pd)
        busy = rep.power.busy_one(T, logits, pieces, nd, pd)
        if pieces:     # the draft prefills the prompt chunks too
            ex, eb = self.prefill_extra(T - nd, logits - nd, pieces)
            dt += ex
            busy += eb
        return dt, busy

    def plan_run(self, rep, t: float):
        """Plan a run of speculative decode steps on replica ``rep`` (all running sequences are
        decoding); returns its end time (``PlainDecoding.plan_run`` with speculation)."""
        g, bs, kv = self.gamma, rep.bs, rep.kv
        n = rep.n
        kmax = min(int(rep.left[:n].min()), rep.max_run)
        for attempt in (0, 1):
            left = rep.left[:n]
            cum = self._steps_until_done(kmax, n, left)
            k = len(cum)
            hit = (cum[-1] >= left).any()
            cum = np.minimum(cum, left)
            blk = rep.blocks[:n]
            newb = -(-(rep.ctx[:n] + cum[-1] + g - rep.cached[:n]) // bs)
            need = int(np.maximum(newb - blk, 0).sum())
            if need <= kv.avail():
                break
            if attempt:
                raise RuntimeError("speculative decoding: no KV room after preemption")  # pragma: no cover
            rep.make_room(2 * g + 1)      # room for one step (A <= gamma + 1) + lookahead
            n = rep.n
            if not n:
                return rep.plan(t)
            kmax = 1
        if need:
            kv.take(need)
            np.maximum(blk, newb, out=blk)
        base = float(rep.ctx[:n].sum() + n)
        P = base + np.concatenate(([0.0], cum[:-1].sum(axis=1).astype(np.float64)))
        x, busy = self.step_times(n, P)
        if kv.pending_s:
            x[0] += kv.take_pending()
        x, energy, pstate = rep.power.price_steps(t, x, busy)
        cumt = np.cumsum(x)
        rep.run = DecodeRun(t, cumt, k, kv.used, bool(hit), x, emit=cum, busy=busy,
                            energy=energy, pstate=pstate)
        return t + float(cumt[-1])

    def _steps_until_done(self, kmax: int, n: int, left: np.ndarray) -> np.ndarray:
        """Cumulative tokens of n sequences over the steps up to the first where one of them
        reaches its ``left`` (at most kmax steps; k x n). Drawn in blocks of about the expected
        number of steps, so a long run does not draw kmax x n tokens it will not use."""
        lo = int(left.min())
        block = min(kmax, max(4, int(lo / self.mean * 1.25) + 2))
        cum = np.zeros((0, n), np.int64)
        base = np.zeros(n, np.int64)
        while True:
            c = base + np.cumsum(self.draw(min(block, kmax - len(cum)), n), axis=0)
            hit = (c >= left).any(axis=1)
            if hit.any():
                return np.concatenate([cum, c[:int(np.argmax(hit)) + 1]])
            cum = np.concatenate([cum, c])
            if len(cum) >= kmax:
                return cum
            base = cum[-1]


__all__ = ["Speculation", "verify_time"]
