"""One serving replica: waiting queue, iteration-level scheduler, paged KV blocks, preemption.

Running sequences live in slot arrays (structure of arrays, compacted to the first ``n`` slots):
    ctx     tokens whose KV is computed (the prompt prefix in the prefix cache included)
    left    output tokens still to emit
    pf      prompt (+ recompute) tokens still to prefill; 0 = decoding
    blocks  KV blocks the sequence owns (beyond its pinned prefix-cache entries)
A decoding sequence with ``ctx`` cached tokens attends c = ctx + 1 positions in its next step
(the token it just emitted included), reads c cached positions and writes one.

Schedulers: strategy classes in engine.des.schedulers (registered by name; ``DesSpec.scheduler``,
default from the framework profile) decide each iteration; block accounting, the prefix cache and
swap traffic live in engine.des.kv.KvPool. A planned iteration is a ``MixedRun`` (one
iteration: prompt chunks, maybe with decodes) or a ``DecodeRun`` (k pure decode steps).
Out of KV blocks during decode: the most recently admitted sequence is preempted (recompute:
its blocks are freed and it re-enters the front of the queue; on re-admission its prompt and the
tokens emitted so far are prefilled again; swap: its KV goes to host memory and back, the
transfers added to the next iteration). Head-of-line blocking: the queue head that does not
fit blocks the ones behind it, as in vLLM.

Roles (disaggregated serving): a "prefill" replica runs prompt iterations only and hands each
finished prompt to the event loop (``handoffs``); a "decode" replica admits those with their KV
already computed (``State.kv_ready``) and only decodes.

Pure decode iterations are advanced many at a time: with B sequences and no admission possible,
step j (0-based) has aggregates tokens = logits = B, attn_pairs = kv_read = sum(ctx + 1) + B j,
so its time is ``StepModel.time`` of an arange; the run stops at the first completion, at the
last step the free KV blocks allow, or early when a request arrives (``truncate``).

CUDA-graph padding and the framework's host costs (per-iteration and per-token overheads, the
front end's token ceiling) are priced by the step path (``StepModel``), the same for both engines.
"""

import heapq
from dataclasses import dataclass

import numpy as np

from engine.des.config import DesSpec
from engine.des.kv import PrefixCache
from engine.des.kv import KvPool
from engine.des.schedulers import make as make_scheduler
from engine.des.state import State

_INTS = ("rid", "ctx", "left", "pf", "blocks", "adm", "cached", "nhit")


@dataclass(slots=True)
class DecodeRun:
    """k pure decode steps of every running sequence, planned at ``start``."""

    start: float
    cum: np.ndarray          # cumulative step times [s]
    k: int
    used: int                # KV blocks in use during the run
    at_completion: bool | None   # True: ends at a completion; None: truncated by an arrival
    steps: np.ndarray        # the k step times [s]
    emit: np.ndarray | None = None    # speculative: tokens each sequence emitted by step j (k x n)
    busy: object = None               # roofline-busy part of the steps [s]: array or line (engine.des.power)
    energy: np.ndarray | None = None  # joules of each step (all devices of the replica)
    pstate: tuple | None = None       # power-limiter state after each step


@dataclass(slots=True)
class MixedRun:
    """One iteration: prompt ``chunks`` [(slot, tokens)] plus the decoding slots ``didx``."""

    start: float
    dur: float
    chunks: list
    didx: np.ndarray | None
    used: int
    nd: int
    busy: float = 0.0                 # roofline-busy part [s] (energy; engine.des.power)
    energy: np.ndarray | None = None  # joules of the iteration (1 entry)
    pstate: tuple | None = None
    emit: np.ndarray | None = None    # speculative: tokens each of ``didx`` emits


class Replica:
    """One replica's queue, running slots and KV pool (see the module docstring)."""

    def __init__(self, idx: int, st: State, spec: DesSpec, total_blocks: int, step_time,
                 step_times, prefix: PrefixCache | None, block_tokens: int):
        spec = spec.resolved
        self.idx = idx
        self.st = st
        self.spec = spec              # the resolved DesSpec (engine.des.cluster.Loop reads it)
        self.sched = make_scheduler(spec.scheduler, spec.framework.chunked_prefill)
        self.reserves = self.sched.reserves_output
        self.bs = spec.block_size
        self.budget = spec.token_budget
        self.max_seqs = spec.max_num_seqs
        self.max_run = spec.max_decode_run
        self.kv = KvPool(total_blocks, spec.block_size, spec.watermark, prefix, block_tokens)
        # (T, logits, ((chunk, cached), ...), decode seqs, sum of decode contexts) -> s, scalar
        self.step_time = step_time
        # (B, sum of decode contexts at the first step, k) -> s array of k decode steps
        self.step_times = step_times
        S = spec.max_num_seqs
        # one 2-D array, a row per field, so moving slots is one operation for all fields
        self._ints = np.zeros((len(_INTS), S), np.int64)
        for i, name in enumerate(_INTS):
            setattr(self, name, self._ints[i])
        self.last = np.full(S, np.nan)
        self.n = 0
        self.waiting: list = []
        self._seq = 0
        self._policy = spec.queue_policy
        self.run: DecodeRun | MixedRun | None = None
        self.version = 0
        self.plan_pending = False
        # time-weighted statistics
        self.busy_s = 0.0
        self.kv_area = 0.0
        self.batch_area = 0.0
        self.iterations = 0
        self.preemptions = 0
        self.timeline = [] if spec.record_iterations else None
        self.role = "both"            # both | prefill | decode (disaggregated pools)
        # set by engine.des.run.simulate when enabled: speculative decoding
        # (engine.des.speculation), device power (engine.des.power) with the roof functions
        # that give each iteration's busy time, per-token timestamps (State.token_times)
        self.specdec = None
        self.power = None
        self.roof_one = self.roof_run = self.roof_line = None
        self.handoffs: list = []      # prefill role: requests whose prefill just finished
        #: cluster features: queue heads that did not fit the KV blocks while others waited
        #: behind them (head-of-line blocking detector); None when off
        self.hol: set | None = set() if spec.cluster_features else None
        self.hol_since: dict = {}     # blocked head -> when it first blocked (open episodes)
        self.hol_s = 0.0              # closed episodes: seconds from first block to admission
        self.hol_max_s = 0.0
        self.on_preempt = None        # cluster decision trace: f(replica, victim slot) before it is freed
        self.t_plan = 0.0             # time of the plan in progress (stamps preemption decisions)

    # the pool's figures under the names the event loop and the summary read
    @property
    def prefix(self) -> PrefixCache | None:
        return self.kv.prefix

    @property
    def total(self) -> int:
        return self.kv.total

    @property
    def swap_s_per_token(self) -> float:
        return self.kv.swap_s_per_token

    @swap_s_per_token.setter
    def swap_s_per_token(self, v: float) -> None:
        self.kv.swap_s_per_token = v

    # ------------------------------------------------------------------ queue
    @property
    def outstanding(self) -> int:
        return self.n + len(self.waiting)

    @property
    def kv_load(self) -> float:
        return self.kv.load

    def enqueue(self, rid: int, t: float) -> None:
        st = self.st
        self._seq += 1
        if self._policy == "fcfs":
            key = st.arrival[rid]
        elif self._policy == "priority":
            key = (int(st.priority[rid]), st.arrival[rid])
        else:
            key = int(st.prompt[rid])
        heapq.heappush(self.waiting, (1, key, self._seq, rid))

    # ------------------------------------------------------------- planning
    def plan(self, t: float):
        """Choose the next iteration (or run of decode iterations) at time ``t`` with the
        scheduler strategy; return its end time, or None when there is nothing to do."""
        self.plan_pending = False
        self.t_plan = t
        p = self.sched.schedule(self, t)
        if p is None:
            self.run = None
            return None
        if p.decode_run:
            return self.decode_run(t)
        return self.mixed(t, p.chunks, p.decodes)

    # ------------------------------------------- what a scheduler policy reads and asks for
    def any_prefilling(self) -> bool:
        """Whether a running sequence still has prompt tokens to prefill."""
        return bool(np.count_nonzero(self.pf[:self.n]))

    def prefilling(self) -> list:
        """[(slot, prompt tokens still to prefill)] of the partially prefilled sequences, oldest
        admission first."""
        n = self.n
        part = np.flatnonzero(self.pf[:n] > 0)
        if not len(part):
            return []
        part = part[np.argsort(self.adm[part], kind="stable")]
        return [(int(s), int(self.pf[s])) for s in part.tolist()]

    def reserve_decodes(self):
        """Reserve the next token's KV block for every decoding sequence, preempting newest
        first (``make_room``) when the pool lacks them; returns their slots, or None if none is
        decoding."""
        didx = np.flatnonzero(self.pf[:self.n] == 0)
        if not len(didx):
            return None
        need = self.need(didx, 1)
        if need > self.kv.avail():
            self.make_room(1)
            didx = np.flatnonzero(self.pf[:self.n] == 0)
            if not len(didx):
                return None
            need = self.need(didx, 1)
        self.kv.take(need)
        own = self.ctx[didx] + 1 - self.cached[didx]
        self.blocks[didx] = np.maximum(self.blocks[didx], -(-own // self.bs))
        return didx

    def _reserve(self, prompt, output, cached, pf, seq):
        """Tokens of KV a sequence needs at admission: prompt + all output (no-evict
        reservation) or what it prefills now (``seq - 1`` when its KV arrives whole)."""
        if self.reserves:
            return prompt + output - cached
        return pf if pf else seq - 1

    def head_fits(self, rem, whole):
        """Would the queue head be admitted now (KV blocks above the watermark; whole prompts:
        within ``rem`` tokens)? Mirrors the first pass of ``admit`` with a busy batch."""
        st, kv = self.st, self.kv
        pc = kv.prefix
        rid = self.waiting[0][3]
        prompt = int(st.prompt[rid])
        seq = prompt + int(st.emitted[rid])
        extra = 0
        if st.kv_ready[rid]:
            pf, cached = 0, 0
        else:
            cached = 0
            if pc is not None and st.hashes is not None and len(st.hashes[rid]):
                nhit = pc.match(st.hashes[rid], min(seq - 1, prompt) // kv.bt)
                cached = nhit * kv.bt
                if nhit and pc.tiered:       # lower-tier hits need HBM pages to come back to
                    extra = pc.lower(st.hashes[rid][:nhit])[0]
            pf = seq - cached
        reserve = self._reserve(prompt, int(st.output[rid]), cached, pf, seq)
        if kv.avail() - (-(-reserve // self.bs)) - extra < kv.wm:
            return False
        return not (whole and pf > rem)

    def admit(self, t, budget, whole, busy):
        """Admit queue heads while slots, token budget and KV blocks (above the watermark) allow.
        Returns [(slot, prefill chunk)]."""
        st, kv, bs = self.st, self.kv, self.bs
        pc = kv.prefix
        out, used = [], 0
        while self.waiting and self.n < self.max_seqs:
            rid = self.waiting[0][3]
            prompt = int(st.prompt[rid])
            emitted = int(st.emitted[rid])
            seq = prompt + emitted
            nhit = 0
            hashes = st.hashes[rid] if (pc is not None and st.hashes is not None) else None
            if st.kv_ready[rid]:
                # handed off by a prefill replica, or swapped out: its KV (all but the last
                # emitted token) arrives whole
                hashes, cached, pf = None, 0, 0
            else:
                if hashes is not None and len(hashes):
                    nhit = pc.match(hashes, (min(seq - 1, prompt)) // kv.bt)
                cached = nhit * kv.bt
                pf = seq - cached
            need = -(-self._reserve(prompt, int(st.output[rid]), cached, pf, seq) // bs)
            low = None
            if nhit and pc.tiered:
                # prefix blocks in host/disk tiers: HBM pages to promote them, transfer time
                low = pc.lower(hashes[:nhit])
                if kv.avail() - need - low[0] < kv.wm:
                    if self.hol is not None and len(self.waiting) > 1:
                        self._hol_block(rid, t)
                    break
            elif kv.avail() - need < kv.wm:
                if self.hol is not None and len(self.waiting) > 1:
                    self._hol_block(rid, t)    # head-of-line: it blocks the requests queued behind
                break
            rem = budget - used
            if not pf:
                chunk = 0
            elif whole:
                if pf > rem and (out or busy):
                    break
                chunk = pf
            else:
                if rem <= 0:
                    break
                chunk = min(pf, rem)
            heapq.heappop(self.waiting)
            if self.hol_since:
                self.hol_end(rid, t)
            if st.swapped[rid]:       # swap-in before the next iteration
                st.swapped[rid] = False
                kv.swap_in(seq - 1)
            if nhit:
                kv.pin(hashes[:nhit])
            if low is not None:
                kv.take(low[0])            # the promoted entries' pages (held by the cache)
                kv.pending_s += low[1]
                if st.scheduled[rid] != st.scheduled[rid]:
                    pc.hit_entries["host"] += low[2]
                    pc.hit_entries["disk"] += low[3]
                    pc.hit_entries["hbm"] += nhit - low[2] - low[3]
            kv.take(need)
            s = self.n
            self.n += 1
            self._seq += 1
            self.rid[s], self.ctx[s], self.left[s], self.pf[s] = (rid, cached if pf else seq - 1,
                                                                  int(st.output[rid]) - emitted, pf)
            self.blocks[s], self.adm[s], self.cached[s], self.nhit[s] = need, self._seq, cached, nhit
            self.last[s] = st.last_token[rid]
            if st.scheduled[rid] != st.scheduled[rid]:  # NaN: first admission
                st.scheduled[rid] = t
                st.cached_tokens[rid] = cached
                st.replica[rid] = self.idx
                st.lookup_tokens += prompt
                st.hit_tokens += cached
            else:
                st.recompute_tokens += pf
                st.recomputed[rid] += pf
            if pf:
                out.append((s, chunk))
                used += chunk
        return out

    def need(self, idx, k):
        """Extra KV blocks the sequences ``idx`` need to run ``k`` more decode steps."""
        own = self.ctx[idx] + k - self.cached[idx]
        return int(np.maximum(0, -(-own // self.bs) - self.blocks[idx]).sum())

    def make_room(self, k):
        """Preempt (newest first) until the decoding sequences fit ``k`` more steps."""
        while self.n:
            idx = np.flatnonzero(self.pf[:self.n] == 0)
            if self.need(idx, k) <= self.kv.avail():
                return
            self._preempt(int(np.argmax(self.adm[:self.n])))

    def unreserve(self, idx):
        """Give back blocks reserved beyond what the sequences ``idx`` hold now (a no-evict
        reservation keeps them)."""
        if not self.reserves:
            newb = -(-(self.ctx[idx] - self.cached[idx]) // self.bs)
            self.kv.give(int((self.blocks[idx] - newb).sum()))
            self.blocks[idx] = newb

    def mixed(self, t, chunks, didx):
        """One iteration: the decoding sequences ``didx`` (KV already reserved) plus the prompt
        ``chunks``."""
        if didx is not None:
            nd = len(didx)
            pd = int(self.ctx[didx].sum()) + nd
        else:
            nd, pd = 0, 0
        T, logits = nd, nd
        pieces = []
        for s, c in chunks:
            k = int(self.ctx[s])
            T += c
            pieces.append((c, k))
            if c == self.pf[s]:
                logits += 1
        pieces = tuple(pieces)
        emit = self._spec_emit(didx) if (self.specdec is not None and nd) else None
        if emit is not None:      # the decodes speculate beside the prompt chunks
            dt, busy = self.specdec.mixed_time(T, logits, pieces, nd, pd)
        else:
            dt = self.step_time(T, logits, pieces, nd, pd)
            busy = 0.0
            if self.power is not None:
                busy = self.roof_one(T, logits, pieces, nd, pd)
            if self.specdec is not None and pieces:     # the draft prefills the prompt chunks too
                ex, eb = self.specdec.prefill_extra(T - nd, logits - nd, pieces)
                dt += ex
                busy += eb
        dt += self.kv.take_pending()
        self.st.prefill_tokens += T - nd
        energy = pstate = None
        if self.power is not None and self.power.throttle:
            x, energy, pstate = self.power.price(t, np.array([dt]), np.array([busy]))
            dt = float(x[0])
        self.run = MixedRun(t, dt, chunks, didx, self.kv.used, nd, busy, energy, pstate, emit)
        return t + dt

    def _spec_emit(self, didx):
        """Speculative decodes in an iteration with prompt chunks: tokens each of ``didx`` emits
        (drawn, at most what it has left), with KV blocks for them + gamma lookahead taken; None
        (one token each, no speculation) when the pool lacks those blocks."""
        sp = self.specdec
        a = np.minimum(sp.draw(1, len(didx))[0], self.left[didx])
        newb = -(-(self.ctx[didx] + a + sp.gamma - self.cached[didx]) // self.bs)
        need = int(np.maximum(newb - self.blocks[didx], 0).sum())
        if need > self.kv.avail():
            return None
        if need:
            self.kv.take(need)
            self.blocks[didx] = np.maximum(self.blocks[didx], newb)
        return a

    def price_power(self, t, x, busy):
        """Step times after the power limiter, energy per step, limiter state (engine.des.power);
        (x, None, None) without a power model."""
        if self.power is None or not self.power.throttle:
            return x, None, None
        return self.power.price(t, x, busy)

    def decode_run(self, t):
        """Plan k decode steps for all running sequences (all are decoding)."""
        if self.specdec is not None:
            return self.specdec.plan(self, t)
        n = self.n
        bs = self.bs
        kv = self.kv
        kmax = int(self.left[:n].min())
        if kmax > self.max_run:
            kmax = self.max_run
        pc = kv.prefix
        # blocks each sequence holds at the end of k more steps: ceil((ctx + k - cached) / bs)
        newb = (self.ctx[:n] + (kmax + bs - 1) - self.cached[:n]) // bs
        blk = self.blocks[:n]
        if self.reserves:
            need = int(np.maximum(newb - blk, 0).sum())
        else:   # outside a run every sequence holds exactly ceil(own / bs) blocks
            need = int(newb.sum()) - (kv.used - (pc.pages if pc is not None else 0))
        avail = kv.avail()
        k = kmax
        if need > avail:
            self.make_room(1)
            n = self.n
            if not n:
                return self.plan(t)
            blk = self.blocks[:n]
            own = self.ctx[:n] - self.cached[:n]
            kmax = min(int(self.left[:n].min()), self.max_run)
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
        p0 = float(self.ctx[:n].sum() + n)
        x = self.step_times(n, p0, k)
        if kv.pending_s:            # swap transfers before the first step
            x = x.copy()
            x[0] += kv.take_pending()
        busy = energy = pstate = None
        if self.power is not None:
            if self.power.throttle:
                busy = self.roof_run(n, p0 + float(n) * np.arange(k, dtype=np.float64))
                x, energy, pstate = self.power.price(t, x, busy)
            else:       # a line, summed in closed form when the run ends
                busy = self.roof_line(n, p0, k)
        cum = np.cumsum(x)
        self.run = DecodeRun(t, cum, k, kv.used, k == int(self.left[:n].min()), x, None, busy,
                             energy, pstate)
        return t + float(cum[-1])

    def truncate(self, t):
        """A request arrived at ``t`` during a decode run: end the run after the step in
        progress. Returns the new end time, or None if the run already ends then."""
        run = self.run
        if run is None or run.__class__ is not DecodeRun or self.plan_pending:
            return None
        j = int(np.searchsorted(run.cum, t - run.start, side="left")) + 1
        if j >= run.k:
            return None
        cut = (lambda a: a if a is None or isinstance(a, tuple) else a[:j])
        self.run = DecodeRun(run.start, run.cum[:j], j, run.used, None, run.steps[:j], cut(run.emit),
                             cut(run.busy), cut(run.energy), run.pstate)
        return run.start + float(run.cum[j - 1])

    # --------------------------------------------------------------- finish
    def finish(self, t):
        """Apply the planned run that ends at ``t``; returns the completed request ids."""
        run, st = self.run, self.st
        self.run = None
        n = self.n
        decode = run.__class__ is DecodeRun
        if decode:
            cum, k, x = run.cum, run.k, run.steps
            t0 = run.start
            dur = float(cum[-1])
            sl = slice(0, n)
            if run.emit is None:
                self._ints[1:3, :n] += np.array([[k], [-k]])     # rows ctx, left
                tok = k
            else:       # speculative: each sequence's accepted tokens (tokens of a step arrive together)
                tok = run.emit[-1]
                self.ctx[sl] += tok
                self.left[sl] -= tok
                st.spec_steps += k * n
                st.spec_tokens += int(tok.sum())
            st.add_itl(t0 + cum[0] - self.last[sl], 1.0)
            if k > 1:
                st.add_itl(x[1:], float(n))
            self.last[sl] = t
            if st.token_times is not None:
                self._token_times_run(t0 + cum, run.emit, n)
            if self.power is not None:
                st.energy_decode_j[self.rid[sl]] += self.power.account(run, True, t) / n
            st.decode_tokens += n * k if run.emit is None else int(tok.sum())
            if (run.at_completion is None or run.emit is not None) and not self.reserves:
                # truncated: give back the blocks reserved for steps not taken (a no-evict
                # reservation keeps its prompt + output blocks)
                newb = -(-(self.ctx[sl] - self.cached[sl]) // self.bs)
                self.kv.give(int((self.blocks[sl] - newb).sum()))
                self.blocks[sl] = newb
            st.tokens_out += n * k if run.emit is None else int(tok.sum())
            self.iterations += k
            batch = n
            prefill = 0
        else:
            t0, dur, chunks, didx, nd = run.start, run.dur, run.chunks, run.didx, run.nd
            em = run.emit
            if didx is not None:
                inc = 1 if em is None else em
                self.ctx[didx] += inc
                self.left[didx] -= inc
                st.add_itl(t - self.last[didx], 1.0)
                self.last[didx] = t
                ne = nd if em is None else int(em.sum())
                st.tokens_out += ne
                st.decode_tokens += ne
                if em is not None:
                    st.spec_steps += nd
                    st.spec_tokens += ne
                    self.unreserve(didx)            # the lookahead blocks
                if st.token_times is not None:
                    for i, r in enumerate(self.rid[didx].tolist()):
                        st.token_times[r].append(np.full(1 if em is None else int(em[i]), t))
            if self.power is not None:      # shared by the iteration's tokens (q per verifying decode)
                q = 1.0 if em is None else self.specdec.q
                e_it = self.power.account(run, False, t)
                n_tok = nd * q + sum(c for _, c in chunks)
                # an iteration that moved no token (a disaggregated pool's KV hand-off step) keeps
                # its energy in the device total only: no request to charge it to
                e_tok = e_it / n_tok if n_tok > 0 else 0.0
                if nd:
                    st.energy_decode_j[self.rid[didx]] += e_tok * q
                for s, c in chunks:
                    st.energy_prefill_j[self.rid[s]] += e_tok * c
            prefill = 0
            maybe_done = didx is not None and self.left[didx].min() <= 0
            for s, c in chunks:
                self.ctx[s] += c
                self.pf[s] -= c
                prefill += c
                if self.pf[s] == 0:
                    self._emit_first(s, t)
                    maybe_done = maybe_done or self.left[s] <= 0
            self.iterations += 1
            batch = nd + len(chunks)
        self.busy_s += dur
        self.kv_area += run.used * dur
        self.batch_area += batch * dur
        if self.timeline is not None:
            self.timeline.append((self.idx, t0, t, run.k if decode else 1, batch, prefill,
                                  self.kv.used, self.n, len(self.waiting)))
        if self.role == "prefill":
            self._hand_off(t)
        if decode:
            return self._complete(t) if run.at_completion else ()
        return self._complete(t) if maybe_done else ()

    def _token_times_run(self, times, emit, n):
        """Per-token timestamps of a decode run: step j's tokens at ``times[j]`` (speculative:
        each sequence's accepted tokens of step j all at ``times[j]``)."""
        tt = self.st.token_times
        rids = self.rid[:n].tolist()
        if emit is None:
            for r in rids:
                tt[r].append(times)
            return
        per = np.diff(np.vstack([np.zeros((1, n), emit.dtype), emit]), axis=0)
        for i, r in enumerate(rids):
            tt[r].append(np.repeat(times, per[:, i]))

    def _emit_first(self, s, t):
        """A sequence finished its (re)prefill: it emits a token and its prompt's full prefix
        blocks join the prefix cache (pinned while it runs)."""
        st = self.st
        rid = int(self.rid[s])
        self.left[s] -= 1
        st.tokens_out += 1
        if st.token_times is not None:
            st.token_times[rid].append(np.array([t]))
        if st.first_token[rid] != st.first_token[rid]:
            st.first_token[rid] = t
        elif self.last[s] == self.last[s]:
            st.add_itl(np.array([t - self.last[s]]), 1.0)
        self.last[s] = t
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
        idx = np.flatnonzero(go)
        rid = self.rid[idx]
        st.emitted[rid] = st.output[rid] - self.left[idx]
        st.last_token[rid] = self.last[idx]
        st.kv_ready[rid] = True
        self.kv.give(int(self.blocks[idx].sum()))
        if self.kv.prefix is not None:
            self._unpin(idx)
        keep = np.flatnonzero(~go)
        m = len(keep)
        self._ints[:, :m] = self._ints[:, keep]
        self.last[:m] = self.last[keep]
        self.n = m
        self.handoffs.extend(rid.tolist())

    def _complete(self, t):
        n = self.n
        if not n or self.left[:n].min() > 0:
            return ()
        done = self.left[:n] <= 0
        idx = np.flatnonzero(done)
        rid = self.rid[idx]
        self.st.completion[rid] = t
        self.kv.give(int(self.blocks[idx].sum()))
        if self.kv.prefix is not None:
            self._unpin(idx)
        m = n - len(idx)
        if m:
            keep = np.flatnonzero(~done)
            self._ints[:, :m] = self._ints[:, keep]
            self.last[:m] = self.last[keep]
        self.n = m
        return rid.tolist()

    def _preempt(self, s):
        """Preempt slot ``s``: free its KV and requeue it at the front. Recompute: prefilled
        again on re-admission. Swap (a decoding sequence, ``swap_s_per_token`` > 0): its KV goes
        to host memory now and comes back on re-admission, each transfer added to the next
        iteration (vLLM swaps between iterations)."""
        st = self.st
        rid = int(self.rid[s])
        if self.on_preempt is not None:
            self.on_preempt(self, s)
        st.emitted[rid] = int(st.output[rid]) - int(self.left[s])
        st.last_token[rid] = self.last[s]
        swap = bool(self.kv.swap_s_per_token) and self.pf[s] == 0
        st.kv_ready[rid] = swap
        st.swapped[rid] = swap
        if swap:
            self.kv.swap_out(int(self.ctx[s]))
        st.preemptions[rid] += 1
        self.preemptions += 1
        self._remove(s)
        self._seq += 1
        heapq.heappush(self.waiting, (0, -self._seq, self._seq, rid))

    # ------------------------------------------ cluster hooks (engine.des.fleet; off by default)
    def _hol_block(self, rid, t):
        """Head-of-line detector: queue head ``rid`` failed the KV check with others behind it."""
        self.hol.add(rid)
        self.hol_since.setdefault(rid, t)

    def hol_end(self, rid, t):
        """``rid`` left the queue (admitted or cancelled): close its blocked episode, if any."""
        t0 = self.hol_since.pop(rid, None)
        if t0 is not None:
            self.hol_s += t - t0
            self.hol_max_s = max(self.hol_max_s, t - t0)

    def unqueue(self, rid: int, t: float) -> bool:
        """Remove ``rid`` from the waiting queue (a deadline passed, or the client went away
        before it ran); False if it is not there."""
        w = self.waiting
        for i, e in enumerate(w):
            if e[3] == rid:
                w[i] = w[-1]
                w.pop()
                if i < len(w):
                    heapq.heapify(w)
                if self.hol_since:
                    self.hol_end(rid, t)
                return True
        return False

    def abort(self, rid: int) -> bool:
        """Drop running request ``rid`` between iterations (an end-to-end deadline passed): its KV
        blocks freed and prefix entries unpinned and its slot compacted as a preemption does
        (``_remove``); not requeued. False if it is not running here."""
        hit = np.flatnonzero(self.rid[:self.n] == rid)
        if not hit.size:
            return False
        s = int(hit[0])
        self.st.emitted[rid] = int(self.st.output[rid]) - int(self.left[s])
        self._remove(s)
        return True
