"""One serving replica: running slots that commit the plans of a scheduler policy.

Running sequences live in slot arrays (structure of arrays, compacted to the first ``n`` slots):
    ctx     tokens whose KV is computed (the prompt prefix in the prefix cache included)
    left    output tokens still to emit
    pf      prompt (+ recompute) tokens still to prefill; 0 = decoding
    blocks  KV blocks the sequence owns (beyond its pinned prefix-cache entries)
    adm     admission order; cached, nhit: prefix-cache tokens and hash blocks it holds pinned
A decoding sequence with ``ctx`` cached tokens attends c = ctx + 1 positions in its next step
(the token it just emitted included), reads c cached positions and writes one.

One iteration: ``plan(t)`` asks the scheduler policy (engine.des.schedulers) for a ``Plan`` and
prices it: a ``MixedRun`` (one iteration of prompt chunks, maybe with decodes; ``mixed``) or a
``DecodeRun`` (k pure decode steps, sized by the ``decoding`` slot: engine.des.features.decoding,
or speculation); ``finish(t)`` commits it when it ends (tokens, KV blocks, first tokens, prefix
cache entries, completions). Beside this file: the waiting queue and its policy
(engine.des.queue), the KV-fit test, admission and preemption (engine.des.admission), completion,
hand-off and abort (engine.des.departures), the run records (engine.des.runs), the block pool
and prefix cache (engine.des.kv). Optional features sit in three slots with null defaults
(engine.des.features.base): ``decoding``, ``power``, ``hooks``.

Out of KV blocks during decode: the most recently admitted sequence is preempted (recompute:
its blocks are freed and it re-enters the front of the queue; on re-admission its prompt and the
tokens emitted so far are prefilled again; swap: its KV goes to host memory and back, the
transfers added to the next iteration).

Roles (disaggregated serving): a "prefill" replica runs prompt iterations only and hands each
finished prompt to the event loop (``handoffs``); a "decode" replica admits those with their KV
already computed (``State.kv_ready``) and only decodes.

CUDA-graph padding and the framework's host costs (per-iteration and per-token overheads) are
priced by the step path (``StepModel``), the same for both engines. The front end's token ceiling
is a queue the emitted tokens pass before the clients see them (engine.des.frontend), and an
engine that schedules one iteration ahead admits a new request one iteration later
(engine.des.ahead).
"""

import numpy as np

from engine.des import ahead, frontend
from engine.des.admission import Admission
from engine.des.departures import Departures
from engine.des.config import DesSpec
from engine.des.features.base import NO_FEATURE, NO_POWER
from engine.des.features.decoding import PLAIN
from engine.des.kv import KvPool, PrefixCache
from engine.des.queue import KEYS, Queue
from engine.des.runs import DecodeRun, MixedRun
from engine.des.schedulers import make as make_scheduler
from engine.des.state import State, imin, isum

_INTS = ("rid", "ctx", "left", "pf", "blocks", "adm", "cached", "nhit")
#: added to rows 1:3 of ``Replica._ints`` (ctx, left) by a step that emits one token per sequence
_ONE_STEP = np.array([[1], [-1]], np.int64)
assert _INTS[1:3] == ("ctx", "left")


def _no_preempt_hook(rep, s) -> None:
    """The default ``on_preempt``: nobody listens."""


class Replica(Queue, Admission, Departures):
    """One replica's running slots, queue and KV pool (see the module docstring)."""

    def __init__(self, idx: int, st: State, spec: DesSpec, total_blocks: int, step_time,
                 step_times, prefix: PrefixCache | None, block_tokens: int):
        spec = spec.resolved
        self.idx = idx
        self.st = st
        self.spec = spec              # the resolved DesSpec (engine.des.cluster.Loop reads it)
        self.sched = make_scheduler(spec.scheduling.scheduler, spec.framework.chunked_prefill)
        self.reserves = self.sched.reserves_output
        self.bs = spec.kv.block_size
        self.budget = spec.token_budget
        self.max_seqs = spec.scheduling.max_num_seqs
        self.max_run = spec.max_decode_run
        self.kv = KvPool(total_blocks, spec.kv.block_size, spec.kv.watermark, prefix, block_tokens)
        # (T, logits, ((chunk, cached), ...), decode seqs, sum of decode contexts) -> s, scalar
        self.step_time = step_time
        # (B, sum of decode contexts at the first step, k) -> s array of k decode steps
        self.step_times = step_times
        S = spec.scheduling.max_num_seqs
        # one 2-D array, a row per field, so moving slots is one operation for all fields
        self._ints = np.zeros((len(_INTS), S), np.int64)
        for i, name in enumerate(_INTS):
            setattr(self, name, self._ints[i])
        self.last = np.full(S, np.nan)
        self._step = np.zeros((2, 1), np.int64)   # (k, -k) of a decode run (``finish``)
        self.n = 0
        self.n_prefill = 0            # running sequences with prompt tokens still to prefill (pf > 0)
        self._slots = np.arange(S)    # slot numbers: the first n are every running slot
        self.waiting: list = []       # the queue's heap (engine.des.queue)
        self._seq = 0
        self._key = KEYS[spec.scheduling.queue_policy]
        self.run: DecodeRun | MixedRun | None = None
        self.version = 0
        self.plan_pending = False
        # time-weighted statistics
        self.busy_s = 0.0
        self.kv_area = 0.0
        self.batch_area = 0.0
        self.iterations = 0
        self.preemptions = 0
        self.timeline = [] if spec.outputs.record_iterations else None
        self.role = "both"            # both | prefill | decode (disaggregated pools)
        self.handoffs: list = []      # prefill role: requests whose prefill just finished
        # feature slots with null defaults (engine.des.features.build fills them)
        self.decoding = PLAIN         # plain decoding or speculation
        self.power = NO_POWER         # device power, energy, TDP throttle
        self.hooks = NO_FEATURE       # observers: token times, head-of-line detector, ...
        self.hol_detector = None      # the HolDetector among the hooks (cluster features)
        self.on_preempt = _no_preempt_hook   # cluster decision trace: f(replica, victim slot)
        self.t_plan = 0.0             # time of the plan in progress (stamps preemption decisions)
        # scheduling ahead (engine.des.ahead): iterations fixed before the one running ends
        self.ahead = int(getattr(spec.framework, "schedule_ahead", 0) or 0)
        # host work beside the GPU (StepModel.wall): an iteration an idle engine starts pays it
        self.host_overlap = float(getattr(spec.framework, "host_overlap", 0.0) or 0.0)
        self.t_end = self.t_last_start = self.t_newest = -np.inf
        self.newest_rid = -1
        # the front end as a queue every emitted token passes (engine.des.frontend); None: off
        self.frontend = frontend.make(getattr(spec.framework, "frontend_tok_s", 0.0) or 0.0)

    # the pool's figures under the names the event loop, the fleet and the summary read
    @property
    def prefix(self) -> PrefixCache | None:
        return self.kv.prefix

    @property
    def total(self) -> int:
        return self.kv.total

    @property
    def kv_load(self) -> float:
        return self.kv.load

    @property
    def swap_s_per_token(self) -> float:
        return self.kv.swap_s_per_token

    @swap_s_per_token.setter
    def swap_s_per_token(self, v: float) -> None:
        self.kv.swap_s_per_token = v

    # the head-of-line detector's figures (engine.des.cluster.fleet.results), None/empty when off
    @property
    def hol(self):
        return self.hol_detector

    @property
    def hol_since(self) -> dict:
        return self.hol_detector.since if self.hol_detector is not None else {}

    @property
    def hol_s(self) -> float:
        return self.hol_detector.s if self.hol_detector is not None else 0.0

    @property
    def hol_max_s(self) -> float:
        return self.hol_detector.max_s if self.hol_detector is not None else 0.0

    def enqueue(self, rid: int, t: float) -> None:
        """Request ``rid`` joins the queue at ``t`` (the time kept for ``engine.des.ahead``)."""
        st = self.st
        st.queued_s[rid] = t
        self.newest_rid = rid
        if st.entered_s[rid] != st.entered_s[rid]:
            st.entered_s[rid] = t
        if t > self.t_newest:
            self.t_newest = t
        Queue.enqueue(self, rid, t)

    # ------------------------------------------------------------- planning
    def plan(self, t: float):
        """Plan the next iteration (or run of decode iterations) at ``t`` with the scheduler
        policy and price it; return its end time, or None when there is nothing to do. With
        ``schedule_ahead`` the requests queued while the last iteration ran wait one more
        (engine.des.ahead), unless the replica would otherwise idle."""
        self.plan_pending = False
        self.t_plan = t
        hidden = ahead.hide_new(self, t) if self.ahead else ()
        p = self.sched.schedule(self, t)
        if hidden:
            ahead.restore(self, hidden)
            if p is None:               # nothing else to run: the engine takes them at once
                p = self.sched.schedule(self, t)
                hidden = ()
        if p is None:
            self.run = None
            return None
        if p.decode_run:
            end = self.decoding.plan_run(self, t)
            if hidden and self.run.__class__ is DecodeRun:
                end = ahead.one_step(self, t)
        else:
            end = self.mixed(t, p.chunks, p.decodes)
        if hidden:
            ahead.charge(self, hidden, t, end)
        return end

    def decode_run(self, t):
        """Plan k decode steps for all running sequences (all are decoding): the decoding slot's."""
        return self.decoding.plan_run(self, t)

    def mixed(self, t, chunks, didx):
        """Price one iteration: the decoding sequences ``didx`` (KV already reserved) plus the
        prompt ``chunks``."""
        ctx = self.ctx
        if didx is not None:
            nd = len(didx)
            # the decodes are usually the first nd slots: a slice (a view) indexes them cheaper
            pd = isum(ctx[:nd] if didx[-1] == nd - 1 else ctx[didx]) + nd
        else:
            nd, pd = 0, 0
        T, logits = nd, nd
        pieces = []
        pf = self.pf
        for s, c in chunks:
            T += c
            pieces.append((c, int(ctx[s])))
            if c == pf[s]:
                logits += 1
        pieces = tuple(pieces)
        emit = self.decoding.mixed_emit(self, didx) if nd else None
        dt, busy = self.decoding.mixed_price(self, T, logits, pieces, nd, pd, emit)
        if self.host_overlap and t != self.t_end:     # an idle engine starts it: host work exposed
            dt += self.step_time.cold(T, logits, pieces, nd, pd)
        kv = self.kv
        if kv.pending_s:              # swap transfers before it
            dt += kv.take_pending()
        self.st.prefill_tokens += T - nd
        dt, energy, pstate = self.power.price_one(t, dt, busy)
        self.run = MixedRun(t, dt, chunks, didx, kv.total - kv.free, nd, busy, energy, pstate, emit)
        return t + dt

    def truncate(self, t):
        """A request arrived at ``t`` during a decode run: end the run after the step in
        progress (and the one scheduled ahead of it, engine.des.ahead). Returns the new end
        time, or None if the run already ends then."""
        run = self.run
        if run is None or run.__class__ is not DecodeRun or self.plan_pending:
            return None
        j = int(run.cum.searchsorted(t - run.start)) + 1     # side="left"
        if self.ahead:
            j = ahead.extra_step(self, run, j, t)
        if j >= run.k:
            return None
        self.run = run.first(j)
        return run.start + float(run.cum[j - 1])

    # ------------------------------------------------------------------ commit
    def finish(self, t):
        """Apply the planned run that ends at ``t``; returns the completed request ids."""
        run, st = self.run, self.st
        self.run = None
        n = self.n
        decode = run.__class__ is DecodeRun
        if decode:
            cum, k, x, emit = run.cum, run.k, run.steps, run.emit
            t0 = run.start
            dur = float(cum[-1])
            last = self.last[:n]      # views of the running slots
            if emit is None:
                step = self._step         # ctx += k, left -= k: rows 1 and 2 of _ints, one add
                step[0, 0] = k
                step[1, 0] = -k
                v = self._ints[1:3, :n]   # in place on the view (no write-back)
                v += step
                ntok = n * k
            else:       # speculative: each sequence's accepted tokens (tokens of a step arrive together)
                tok = emit[-1]
                self.ctx[:n] += tok
                self.left[:n] -= tok
                ntok = int(tok.sum())
                st.spec_steps += k * n
                st.spec_tokens += ntok
            tc = t                    # when the clients see the run's last tokens
            if self.frontend is None:
                st.add_itl(t0 + cum[0] - last, 1.0)
                if k > 1:
                    st.add_itl(x[1:], float(n))
            else:                     # each step's tokens as the front end delivers them
                per = n if emit is None else np.diff(emit.sum(axis=1), prepend=0)
                f = self.frontend.run(t0 + cum, per)
                st.add_itl(f[0] - last, 1.0)
                if k > 1:
                    st.add_itl(np.diff(f), float(n))
                tc = float(f[-1])
            last.fill(tc)
            if self.hooks is not NO_FEATURE:
                self.hooks.decode_run(self, t0, cum, emit, n)
            self.power.charge_run(self, run, t)
            st.decode_tokens += ntok
            if (run.at_completion is None or emit is not None) and not self.reserves:
                # truncated: give back the blocks reserved for steps not taken (a no-evict
                # reservation keeps its prompt + output blocks); ceil((ctx - cached) / bs)
                newb, blk = self._grown(slice(0, n), 0)
                self.kv.give(isum(blk - newb))
                blk[:] = newb
            st.tokens_out += ntok
            self.iterations += k
            batch = n
            prefill = 0
        else:
            t0, dur, chunks, didx, nd = run.start, run.dur, run.chunks, run.didx, run.nd
            em = run.emit
            tc = t                    # when the clients see this iteration's tokens
            if self.frontend is not None:
                m = sum(1 for s, c in chunks if c == self.pf[s])       # first tokens
                m += 0 if didx is None else (nd if em is None else int(em.sum()))
                tc = self.frontend.batch(t, m)
            if didx is not None:
                # the decodes are usually the first nd slots: a slice (a view) indexes them cheaper
                sel = slice(0, nd) if didx[-1] == nd - 1 else didx
                if em is None:            # ctx += 1, left -= 1: rows 1 and 2 of _ints, one add
                    if sel.__class__ is slice:
                        v = self._ints[1:3, sel]      # in place on the view (no write-back)
                        v += _ONE_STEP
                    else:
                        self._ints[1:3, sel] += _ONE_STEP
                else:
                    self.ctx[sel] += em
                    self.left[sel] -= em
                st.add_itl(tc - self.last[sel], 1.0)
                self.last[sel] = tc
                ne = nd if em is None else int(em.sum())
                st.tokens_out += ne
                st.decode_tokens += ne
                if em is not None:
                    st.spec_steps += nd
                    st.spec_tokens += ne
                    self.unreserve(didx)            # the lookahead blocks
            if self.hooks is not NO_FEATURE:
                self.hooks.iteration(self, didx, em, t)
            # shared by the iteration's tokens (q per verifying decode)
            self.power.charge_iteration(self, run, t, 1.0 if em is None else self.decoding.q)
            prefill = 0
            maybe_done = didx is not None and imin(self.left[sel]) <= 0
            ctx, pf, left = self.ctx, self.pf, self.left
            for s, c in chunks:
                ctx[s] += c
                pf[s] -= c
                prefill += c
                if pf[s] == 0:
                    self.n_prefill -= 1
                    self._emit_first(s, t, tc)
                    maybe_done = maybe_done or left[s] <= 0
            self.iterations += 1
            batch = nd + len(chunks)
        if self.ahead:
            ahead.mark_end(self, run, decode, t)
        else:                         # only the schedule-ahead plan reads t_last_start
            self.t_end = t
        self.busy_s += dur
        self.kv_area += run.used * dur
        self.batch_area += batch * dur
        if self.timeline is not None:
            self.timeline.append((self.idx, t0, t, run.k if decode else 1, batch, prefill,
                                  self.kv.used, self.n, len(self.waiting)))
        if self.role == "prefill":
            self._hand_off(t)
        if decode:
            return self._complete(tc) if run.at_completion else ()
        return self._complete(tc) if maybe_done else ()

    def _emit_first(self, s, t, tc):
        """A sequence finished its (re)prefill at ``t``: it emits a token (the client sees it at
        ``tc``, the front end's, engine.des.frontend) and its prompt's full prefix blocks join
        the prefix cache (pinned while it runs)."""
        st = self.st
        rid = int(self.rid[s])
        self.left[s] -= 1
        st.tokens_out += 1
        if self.hooks is not NO_FEATURE:
            self.hooks.first_token(self, rid, t)
        if st.first_token[rid] != st.first_token[rid]:
            st.first_token[rid] = tc
            st.first_token_engine[rid] = t
        elif self.last[s] == self.last[s]:
            st.add_itl(np.array([tc - self.last[s]]), 1.0)
        self.last[s] = tc
        kv = self.kv
        if kv.prefix is not None and st.hashes is not None:
            h = st.hashes[rid]
            nfull = min(int(st.prompt[rid]) // kv.bt, len(h))
            nhit = int(self.nhit[s])
            if nfull > nhit:
                cached = nfull * kv.bt
                newb = -(-(int(self.ctx[s]) - cached) // self.bs)
                if self.reserves:
                    newb = -(-(int(st.prompt[rid]) + int(st.output[rid]) - cached) // self.bs)
                kv.cache_prompt(h[nhit:nfull], int(self.blocks[s]), newb)
                self.blocks[s], self.cached[s], self.nhit[s] = newb, cached, nfull
