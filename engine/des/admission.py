"""What a replica admits and what it preempts: the KV-fit test (written once, ``fit``), admission of
queue heads into the running slots, the decode-block reservation and newest-first preemption.

KV-fit test of a queue head (vLLM's can_allocate with the watermark): the blocks it needs now,
    need = ceil(reserve / block_size),   reserve = prompt + output - cached   (no-evict policies)
                                                  pf = seq - cached         (else; seq - 1 when
                                                                             its KV arrives whole)
(seq = prompt + tokens emitted before a preemption; cached = prefix-cache hit tokens), plus the HBM
pages its lower-tier prefix hits need to come back to; it fits when the pool's available blocks
(free + evictable prefix entries) less those stay at or above the watermark. Head-of-line: a head
that does not fit blocks the ones behind it (FCFS, as in vLLM); the replica's hooks hear it.

SGLang's output reservation (profiles with ``framework.new_token_ratio`` > 0; sgl-project/sglang
python/sglang/srt/managers/schedule_policy.py PrefillAdder.add_one_req, 0.4.x-0.5.x): on top of
the blocks test, a head is admitted only while
    pf + min(left, clip)  <  free tokens - r x sum over running of min(left_i, clip)
                                         - sum over heads admitted this round of min(left_j, clip)
(left = output tokens still to come, clip = clip_max_new_tokens; this round's heads hold their
prompt pages already, so only their output is added whole). The ratio r starts at
new_token_ratio, falls by (new_token_ratio - new_token_ratio_min) / new_token_ratio_decay_steps per
iteration (SGLang per decode batch; here every iteration counts: prefill iterations are few), is
reset when the replica is idle (``Scheduler.self_check_during_idle``) and is re-estimated after a
retraction (``ScheduleBatch.retract_decode``): r = min(1, (tokens decoded + retract_decode_steps x
n) / sum of outputs) over the n requests left running. An idle replica admits its head on the
blocks test alone (SGLang would wait forever for a request larger than the pool).

Retraction (``retract_decode_steps`` > 0, SGLang): when the decoding sequences lack a block, the one
with the fewest output tokens (then the longest prompt, then the newest) is retracted until
every one left has retract_decode_steps steps of room; its KV is freed (recomputed on return).
Otherwise (vLLM) the newest is preempted until the next step fits.

A mixin of ``engine.des.replica.Replica`` (it works on the replica's slot arrays and KvPool).
"""

import heapq

import numpy as np

from engine.des.state import isum


class Admission:
    """Admission, reservation and preemption of ``Replica`` (see the module docstring)."""

    # ------------------------------------------------ what a scheduler policy reads
    def any_prefilling(self) -> bool:
        """Whether a running sequence still has prompt tokens to prefill."""
        return self.n_prefill > 0

    def prefilling(self) -> list:
        """[(slot, prompt tokens still to prefill)] of the partially prefilled sequences, oldest
        admission first."""
        if not self.n_prefill:
            return []
        part = (self.pf[:self.n] > 0).nonzero()[0]
        if not len(part):
            return []
        part = part[np.argsort(self.adm[part], kind="stable")]
        return [(int(s), int(self.pf[s])) for s in part.tolist()]

    # ------------------------------------------------------------ the KV-fit test
    def fit(self, rid, round_out=(0, 0)):
        """The KV-fit test of queue head ``rid`` (module docstring): (fits, seq, pf, cached,
        nhit, hashes, need, low) with ``low`` the lower-tier promotion (pages, s, host entries,
        disk entries) or None; ``round_out``: (heads admitted this round, the sum of their clipped
        outputs) for SGLang's reservation."""
        st, kv = self.st, self.kv
        pc = kv.prefix
        prompt = int(st.prompt[rid])
        seq = prompt + int(st.emitted[rid])
        nhit = 0
        hashes = st.hashes[rid] if (pc is not None and st.hashes is not None) else None
        if st.kv_ready[rid]:
            # handed off by a prefill replica, or swapped out: its KV (all but the last emitted
            # token) arrives whole
            hashes, cached, pf = None, 0, 0
        else:
            if hashes is not None and len(hashes):
                nhit = pc.match(hashes, min(seq - 1, prompt) // kv.bt)
            cached = nhit * kv.bt
            pf = seq - cached
        if self.reserves:
            reserve = prompt + int(st.output[rid]) - cached
        else:
            reserve = pf if pf else seq - 1
        need = -(-reserve // self.bs)
        low = pc.lower(hashes[:nhit]) if (nhit and pc.tiered) else None
        fits = kv.avail() - need - (low[0] if low is not None else 0) >= kv.wm
        if fits and self.spec.framework.new_token_ratio > 0 and not self.reserves:
            fits = self._ratio_fits(rid, pf, seq, round_out)
        return fits, seq, pf, cached, nhit, hashes, need, low

    # ------------------------------------------- SGLang's new-token-ratio reservation
    def new_token_ratio(self) -> float:
        """SGLang's current new_token_ratio (module docstring): set at ``_ntr`` when the replica
        had done ``_ntr_it`` iterations, falling linearly per iteration to the minimum."""
        fw = self.spec.framework
        if not hasattr(self, "_ntr"):
            self._ntr, self._ntr_it = fw.new_token_ratio, self.iterations
        decay = (fw.new_token_ratio - fw.new_token_ratio_min) / fw.new_token_ratio_decay_steps
        return max(fw.new_token_ratio_min, self._ntr - decay * (self.iterations - self._ntr_it))

    def _ratio_fits(self, rid, pf, seq, round_out) -> bool:
        """SGLang's admission test (module docstring) for head ``rid`` with ``pf`` tokens to
        prefill; ``round_out``: (slots admitted this round, their clipped outputs)."""
        fw = self.spec.framework
        clip = fw.clip_max_new_tokens
        n_round, out_round = round_out
        n_old = self.n - n_round
        if self.n == 0:       # idle: SGLang resets the ratio; the head goes on the blocks test
            self._ntr, self._ntr_it = fw.new_token_ratio, self.iterations
            return True
        st = self.st
        left = int(st.output[rid]) - (seq - int(st.prompt[rid]))
        running = float(np.minimum(self.left[:n_old], clip).sum()) * self.new_token_ratio()
        free = self.kv.avail() * self.bs
        return pf + min(left, clip) < free - running - out_round

    def head_fits(self, rem, whole):
        """Would the queue head be admitted now (the KV-fit test; whole prompts: within ``rem``
        tokens)? The first pass of ``admit`` with a busy batch."""
        fits, _, pf, *_ = self.fit(self.waiting[0][3])
        return fits and not (whole and pf > rem)

    def admit(self, t, budget, whole, busy):
        """Admit queue heads while slots, token budget and KV blocks (above the watermark) allow.
        Returns [(slot, prefill chunk)]."""
        st, kv = self.st, self.kv
        out, used = [], 0
        n_round, out_round = 0, 0       # SGLang's reservation: this round's heads and outputs
        clip = self.spec.framework.clip_max_new_tokens
        while self.waiting and self.n < self.max_seqs:
            rid = self.waiting[0][3]
            fits, seq, pf, cached, nhit, hashes, need, low = self.fit(rid, (n_round, out_round))
            if not fits:
                if len(self.waiting) > 1:
                    self.hooks.blocked(self, rid, t)    # head-of-line: it blocks the ones behind
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
            self.hooks.dequeued(self, rid, t)
            if st.swapped[rid]:       # swap-in before the next iteration
                st.swapped[rid] = False
                kv.swap_in(seq - 1)
            if nhit:
                kv.pin(hashes[:nhit])
            if low is not None:
                pc = kv.prefix
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
            prompt, output = int(st.prompt[rid]), int(st.output[rid])
            self.rid[s], self.ctx[s], self.left[s], self.pf[s] = (rid, cached if pf else seq - 1,
                                                                  output - (seq - prompt), pf)
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
                self.n_prefill += 1
                out.append((s, chunk))
                used += chunk
            n_round += 1
            out_round += min(int(self.left[s]), clip)
        return out

    # ------------------------------------------------------- decode reservation
    def _grown(self, idx, k):
        """(blocks the sequences ``idx`` hold after ``k`` more decode steps, ceil((ctx + k -
        cached) / bs) = (ctx + k + bs - 1 - cached) // bs in integers; the blocks they hold now);
        ``idx`` an index array or a slice. ``cached`` is 0 without a prefix cache."""
        g = self.ctx[idx] + (k + self.bs - 1)
        if self.kv.prefix is not None:
            g -= self.cached[idx]
        g //= self.bs
        return g, self.blocks[idx]

    def need(self, idx, k):
        """Extra KV blocks the sequences ``idx`` need to run ``k`` more decode steps."""
        newb, blk = self._grown(idx, k)
        return isum(np.maximum(newb - blk, 0))

    def reserve_decodes(self):
        """Reserve the next token's KV block for every decoding sequence, preempting newest
        first (``make_room``) when the pool lacks them; returns their slots, or None if none is
        decoding."""
        # every running sequence decodes unless some still prefill
        didx = self._slots[:self.n] if not self.n_prefill else (self.pf[:self.n] == 0).nonzero()[0]
        nd = len(didx)
        if not nd:
            return None
        # the decodes are usually the first nd slots: a slice (a view) indexes them cheaper
        sel = slice(0, nd) if didx[-1] == nd - 1 else didx
        newb, blk = self._grown(sel, 1)
        d = newb - blk
        need = isum(np.maximum(d, 0, out=d))                             # ``need(sel, 1)``
        if need > self.kv.avail():
            self.make_room(1)
            didx = sel = (self.pf[:self.n] == 0).nonzero()[0]
            if not len(didx):
                return None
            newb, blk = self._grown(sel, 1)
            need = isum(np.maximum(newb - blk, 0))
        self.kv.take(need)
        if sel.__class__ is slice:        # blk is a view of the slot row
            np.maximum(blk, newb, out=blk)
        else:
            self.blocks[sel] = np.maximum(blk, newb)
        return didx

    def unreserve(self, idx):
        """Give back blocks reserved beyond what the sequences ``idx`` hold now (a no-evict
        reservation keeps them)."""
        if not self.reserves:
            newb, _ = self._grown(idx, 0)
            self.kv.give(int((self.blocks[idx] - newb).sum()))
            self.blocks[idx] = newb

    # ---------------------------------------------------------------- preemption
    def make_room(self, k):
        """Preempt (newest first) until the decoding sequences fit ``k`` more steps; with
        ``retract_decode_steps`` > 0, SGLang's retraction (module docstring)."""
        fw = self.spec.framework
        if fw.retract_decode_steps > 0:
            return self._retract(max(k, fw.retract_decode_steps))
        while self.n:
            idx = (self.pf[:self.n] == 0).nonzero()[0]
            if self.need(idx, k) <= self.kv.avail():
                return
            self._preempt(int(np.argmax(self.adm[:self.n])))

    def _retract(self, k):
        """SGLang's retract_decode: retract the decoding sequence with the fewest output tokens
        (then the longest prompt, then the newest) until the rest fit ``k`` more steps; then
        re-estimate the new-token ratio over the requests left running."""
        st = self.st
        retracted = False
        while self.n:
            idx = (self.pf[:self.n] == 0).nonzero()[0]
            if not len(idx) or self.need(idx, k) <= self.kv.avail():
                break
            rids = self.rid[idx]
            out_done = st.output[rids] - self.left[idx]
            order = np.lexsort((-self.adm[idx], -st.prompt[rids], out_done))
            self._preempt(int(idx[order[0]]))
            retracted = True
        if retracted and self.n and self.spec.framework.new_token_ratio > 0:
            rids = self.rid[:self.n]
            done = float((st.output[rids] - self.left[:self.n]).sum())
            total = float(st.output[rids].sum())
            steps = self.spec.framework.retract_decode_steps
            self._ntr = min(1.0, (done + steps * self.n) / total) if total else 1.0
            self._ntr_it = self.iterations

    def _preempt(self, s):
        """Preempt slot ``s``: free its KV and requeue it at the front. Recompute: prefilled
        again on re-admission. Swap (a decoding sequence, ``swap_s_per_token`` > 0): its KV goes
        to host memory now and comes back on re-admission, each transfer added to the next
        iteration (vLLM swaps between iterations)."""
        st = self.st
        rid = int(self.rid[s])
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


__all__ = ["Admission"]
