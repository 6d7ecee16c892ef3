"""One serving replica: waiting queue, iteration-level scheduler, paged KV blocks, preemption.

Running sequences live in slot arrays (structure of arrays, compacted to the first ``n`` slots):
    ctx     tokens whose KV is computed (the prompt prefix in the prefix cache included)
    left    output tokens still to emit
    pf      prompt (+ recompute) tokens still to prefill; 0 = decoding
    blocks  KV blocks the sequence owns (beyond its pinned prefix-cache entries)
A decoding sequence with ``ctx`` cached tokens attends c = ctx + 1 positions in its next step
(the token it just emitted included), reads c cached positions and writes one.

Schedulers (``DesSpec.scheduler``):
    vllm     an iteration is either a batch of whole prompts (admitted FCFS-by-policy while the
             token budget, max_num_seqs and KV blocks with the watermark allow) or one decode
             token for every running sequence; prompts first (vLLM v0 default).
    sarathi  every running decode first, then prompt chunks (continuing ones first, then new
             admissions) until the token budget is spent (Sarathi-Serve stall-free batching).
    orca     decodes plus whole new prompts in one iteration; KV for prompt + output is
             reserved on admission, so a sequence never has to be preempted.
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
"""

import heapq

import numpy as np

from engine.des.config import DesSpec
from engine.des.kv_cache import PrefixCache
from engine.des.state import State

_INTS = ("rid", "ctx", "left", "pf", "blocks", "adm", "cached", "nhit")


class Replica:
    """One replica's queue, running slots and KV pool (see the module docstring)."""

    def __init__(self, idx: int, st: State, spec: DesSpec, total_blocks: int, step_time,
                 step_times, prefix: PrefixCache | None, block_tokens: int):
        self.idx = idx
        self.st = st
        self.spec = spec
        self.kind = spec.scheduler
        self.bs = spec.block_size
        self.budget = spec.token_budget
        self.max_seqs = spec.max_num_seqs
        self.max_run = spec.max_decode_run
        self.total = total_blocks
        self.free = total_blocks
        self.wm = int(spec.watermark * total_blocks)
        # (T, logits, ((chunk, cached), ...), decode seqs, sum of decode contexts) -> s, scalar
        self.step_time = step_time
        # (B, sum of decode contexts at the first step, k) -> s array of k decode steps
        self.step_times = step_times
        self.prefix = prefix
        self.bt = block_tokens
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
        # current run: None (idle),
        #   ("decode", start, cumulative step times, k, KV blocks used, ends at a completion, step times)
        #   ("single", start, duration, [(slot, prefill chunk)], decoding slots, KV blocks used, #decoding)
        self.run = None
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
        self.swap_s_per_token = 0.0   # > 0: preempt decoding sequences by swapping their KV
        self.pending_s = 0.0          # swap transfer time to add to the next iteration
        self.handoffs: list = []      # prefill role: requests whose prefill just finished

    # ------------------------------------------------------------------ queue
    @property
    def outstanding(self) -> int:
        return self.n + len(self.waiting)

    @property
    def kv_load(self) -> float:
        return (self.total - self.free) / self.total if self.total else 1.0

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
        """Choose the next iteration (or run of decode iterations) at time ``t``; return its end
        time, or None when there is nothing to do."""
        self.plan_pending = False
        if self.kind == "vllm":
            if self.waiting and self.n < self.max_seqs:
                chunks = self._admit(t, self.budget, whole=True, busy=False)
                if chunks:
                    return self._single(t, chunks, None)
            if not self.n:
                self.run = None
                return None
            return self._decode_run(t)
        # sarathi / orca: decodes first, then prompt work in the remaining budget
        if not self.n and not self.waiting:
            self.run = None
            return None
        n = self.n
        if n and not np.count_nonzero(self.pf[:n]) and (
                not self.waiting or n >= self.max_seqs or self.budget <= n
                or not self._head_fits(self.budget - n, self.kind == "orca")):
            return self._decode_run(t)   # nothing to prefill and nobody can be admitted
        dec = self.pf[:n] == 0
        didx = np.flatnonzero(dec)
        nd = len(didx)
        if nd:
            need = self._need(didx, 1)
            if need > self._avail():
                self._make_room(1)
                n = self.n
                dec = self.pf[:n] == 0
                didx = np.flatnonzero(dec)
                nd = len(didx)
                need = self._need(didx, 1)
        if nd:
            self._take(need)
            own = self.ctx[didx] + 1 - self.cached[didx]
            self.blocks[didx] = np.maximum(self.blocks[didx], -(-own // self.bs))
        else:
            didx = None
        left = self.budget - nd
        chunks = []
        if nd < n and left > 0:
            order = np.flatnonzero(~dec)
            order = order[np.argsort(self.adm[order], kind="stable")]
            for s in order:
                if left <= 0:
                    break
                c = int(min(self.pf[s], left)) if self.kind == "sarathi" else int(self.pf[s])
                chunks.append((int(s), c))
                left -= c
        if self.waiting and left > 0 and self.n < self.max_seqs:
            chunks += self._admit(t, left, whole=self.kind == "orca", busy=bool(nd or chunks))
        if not chunks:
            if not self.n:
                self.run = None
                return None
            if nd == self.n:
                self._unreserve(didx)
                return self._decode_run(t)
        return self._single(t, chunks, didx)

    def _head_fits(self, rem, whole):
        """Would the queue head be admitted now (KV blocks above the watermark; orca: its whole
        prompt within ``rem`` tokens)? Mirrors the first pass of ``_admit`` with a busy batch."""
        st, pc = self.st, self.prefix
        rid = self.waiting[0][3]
        prompt = int(st.prompt[rid])
        seq = prompt + int(st.emitted[rid])
        if st.kv_ready[rid]:
            pf, reserve = 0, ((prompt + int(st.output[rid])) if self.kind == "orca" else seq - 1)
        else:
            cached = 0
            if pc is not None and st.hashes is not None and len(st.hashes[rid]):
                cached = pc.match(st.hashes[rid], min(seq - 1, prompt) // self.bt) * self.bt
            pf = seq - cached
            reserve = (prompt + int(st.output[rid]) - cached) if self.kind == "orca" else pf
        avail = self.free + (pc.evictable_pages if pc is not None else 0)
        if avail - (-(-reserve // self.bs)) < self.wm:
            return False
        return not (whole and pf > rem)

    def _admit(self, t, budget, whole, busy):
        """Admit queue heads while slots, token budget and KV blocks (above the watermark) allow.
        Returns [(slot, prefill chunk)]."""
        st, pc, bs = self.st, self.prefix, self.bs
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
                reserve = (prompt + int(st.output[rid])) if self.kind == "orca" else seq - 1
            else:
                if hashes is not None and len(hashes):
                    nhit = pc.match(hashes, (min(seq - 1, prompt)) // self.bt)
                cached = nhit * self.bt
                pf = seq - cached
                reserve = (prompt + int(st.output[rid]) - cached) if self.kind == "orca" else pf
            need = -(-reserve // bs)
            avail = self.free + (pc.evictable_pages if pc is not None else 0)
            if avail - need < self.wm:
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
            if st.swapped[rid]:       # swap-in before the next iteration
                st.swapped[rid] = False
                self.pending_s += (seq - 1) * self.swap_s_per_token
            if nhit:
                pc.acquire(hashes[:nhit])
            if need > self.free:
                self.free += pc.evict(need - self.free)
            self.free -= need
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

    def _need(self, idx, k):
        """Extra KV blocks the sequences ``idx`` need to run ``k`` more decode steps."""
        own = self.ctx[idx] + k - self.cached[idx]
        return int(np.maximum(0, -(-own // self.bs) - self.blocks[idx]).sum())

    def _avail(self):
        return self.free + (self.prefix.evictable_pages if self.prefix is not None else 0)

    def _make_room(self, k):
        """Preempt (newest first) until the decoding sequences fit ``k`` more steps."""
        while self.n:
            idx = np.flatnonzero(self.pf[:self.n] == 0)
            if self._need(idx, k) <= self._avail():
                return
            self._preempt(int(np.argmax(self.adm[:self.n])))

    def _take(self, need):
        if need > self.free:
            self.free += self.prefix.evict(need - self.free)
        self.free -= need

    def _unreserve(self, idx):
        """Give back blocks reserved beyond what the sequences ``idx`` hold now."""
        newb = -(-(self.ctx[idx] - self.cached[idx]) // self.bs)
        if self.kind != "orca":
            self.free += int((self.blocks[idx] - newb).sum())
            self.blocks[idx] = newb

    def _single(self, t, chunks, didx):
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
        dt = self.step_time(T, logits, tuple(pieces), nd, pd) + self.pending_s
        self.pending_s = 0.0
        self.st.prefill_tokens += T - nd
        self.run = ("single", t, dt, chunks, didx, self.total - self.free, nd)
        return t + dt

    def _decode_run(self, t):
        """Plan k decode steps for all running sequences (all are decoding)."""
        n = self.n
        bs = self.bs
        kmax = int(self.left[:n].min())
        if kmax > self.max_run:
            kmax = self.max_run
        pc = self.prefix
        # blocks each sequence holds at the end of k more steps: ceil((ctx + k - cached) / bs)
        newb = (self.ctx[:n] + (kmax + bs - 1) - self.cached[:n]) // bs
        blk = self.blocks[:n]
        if self.kind == "orca":
            need = int(np.maximum(newb - blk, 0).sum())
        else:   # outside a run every sequence holds exactly ceil(own / bs) blocks
            need = int(newb.sum()) - (self.total - self.free - (pc.pages if pc is not None else 0))
        avail = self.free + (pc.evictable_pages if pc is not None else 0)
        k = kmax
        if need > avail:
            self._make_room(1)
            n = self.n
            if not n:
                return self.plan(t)
            blk = self.blocks[:n]
            own = self.ctx[:n] - self.cached[:n]
            kmax = min(int(self.left[:n].min()), self.max_run)
            avail = self._avail()
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
            self._take(need)
            np.maximum(blk, newb, out=blk)
        x = self.step_times(n, float(self.ctx[:n].sum() + n), k)
        if self.pending_s:            # swap transfers before the first step
            x = x.copy()
            x[0] += self.pending_s
            self.pending_s = 0.0
        cum = np.cumsum(x)
        # last field: True when the run ends at a completion (k = fewest tokens left)
        self.run = ("decode", t, cum, k, self.total - self.free, k == int(self.left[:n].min()), x)
        return t + float(cum[-1])

    def truncate(self, t):
        """A request arrived at ``t`` during a decode run: end the run after the step in
        progress. Returns the new end time, or None if the run already ends then."""
        run = self.run
        if run is None or run[0] != "decode" or self.plan_pending:
            return None
        _, t0, cum, k, used, _, x = run
        j = int(np.searchsorted(cum, t - t0, side="left")) + 1
        if j >= k:
            return None
        self.run = ("decode", t0, cum[:j], j, used, None, x[:j])
        return t0 + float(cum[j - 1])

    # --------------------------------------------------------------- finish
    def finish(self, t):
        """Apply the planned run that ends at ``t``; returns the completed request ids."""
        run, st = self.run, self.st
        self.run = None
        n = self.n
        if run[0] == "decode":
            _, t0, cum, k, used, whole, x = run
            dur = float(cum[-1])
            sl = slice(0, n)
            self._ints[1:3, :n] += np.array([[k], [-k]])     # rows ctx, left
            st.add_itl(t0 + cum[0] - self.last[sl], 1.0)
            if k > 1:
                st.add_itl(x[1:], float(n))
            self.last[sl] = t
            if whole is None and self.kind != "orca":
                # truncated: give back the blocks reserved for steps not taken (orca keeps
                # its prompt + output reservation)
                newb = -(-(self.ctx[sl] - self.cached[sl]) // self.bs)
                self.free += int((self.blocks[sl] - newb).sum())
                self.blocks[sl] = newb
            st.tokens_out += n * k
            self.iterations += k
            batch = n
            prefill = 0
        else:
            _, t0, dur, chunks, didx, used, nd = run
            if didx is not None:
                self.ctx[didx] += 1
                self.left[didx] -= 1
                st.add_itl(t - self.last[didx], 1.0)
                self.last[didx] = t
                st.tokens_out += nd
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
        self.kv_area += used * dur
        self.batch_area += batch * dur
        if self.timeline is not None:
            self.timeline.append((self.idx, t0, t, 1 if run[0] == "single" else run[3], batch, prefill,
                                  self.total - self.free, self.n, len(self.waiting)))
        if self.role == "prefill":
            self._hand_off(t)
        if run[0] == "decode":
            return self._complete(t) if run[5] else ()
        return self._complete(t) if maybe_done else ()

    def _emit_first(self, s, t):
        """A sequence finished its (re)prefill: it emits a token and its prompt's full prefix
        blocks join the prefix cache (pinned while it runs)."""
        st = self.st
        rid = int(self.rid[s])
        self.left[s] -= 1
        st.tokens_out += 1
        if st.first_token[rid] != st.first_token[rid]:
            st.first_token[rid] = t
        elif self.last[s] == self.last[s]:
            st.add_itl(np.array([t - self.last[s]]), 1.0)
        self.last[s] = t
        pc = self.prefix
        if pc is not None and st.hashes is not None:
            h = st.hashes[rid]
            nfull = min(int(st.prompt[rid]) // self.bt, len(h))
            nhit = int(self.nhit[s])
            if nfull > nhit:
                new = pc.insert_pinned(h[nhit:nfull])
                cached = nfull * self.bt
                newb = -(-(int(self.ctx[s]) - cached) // self.bs)
                if self.kind == "orca":
                    newb = -(-(int(st.prompt[rid]) + int(st.output[rid]) - cached) // self.bs)
                self.free += int(self.blocks[s]) - newb - new * pc.pages_per_entry
                self.blocks[s], self.cached[s], self.nhit[s] = newb, cached, nfull

    def _release(self, s):
        """Free slot ``s``'s KV blocks and unpin its prefix entries."""
        self.free += int(self.blocks[s])
        if self.nhit[s]:
            self.prefix.release(self.st.hashes[int(self.rid[s])][:int(self.nhit[s])])

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
        self.free += int(self.blocks[idx].sum())
        if self.prefix is not None:
            for s in idx[self.nhit[idx] > 0]:
                self.prefix.release(st.hashes[int(self.rid[s])][:int(self.nhit[s])])
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
        self.free += int(self.blocks[idx].sum())
        if self.prefix is not None:
            for s in idx[self.nhit[idx] > 0]:
                self.prefix.release(self.st.hashes[int(self.rid[s])][:int(self.nhit[s])])
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
        st.emitted[rid] = int(st.output[rid]) - int(self.left[s])
        st.last_token[rid] = self.last[s]
        swap = bool(self.swap_s_per_token) and self.pf[s] == 0
        st.kv_ready[rid] = swap
        st.swapped[rid] = swap
        if swap:
            self.pending_s += int(self.ctx[s]) * self.swap_s_per_token
        st.preemptions[rid] += 1
        self.preemptions += 1
        self._release(s)
        last = self.n - 1
        if s != last:
            self._ints[:, s] = self._ints[:, last]
            self.last[s] = self.last[last]
        self.n = last
        self._seq += 1
        heapq.heappush(self.waiting, (0, -self._seq, self._seq, rid))
