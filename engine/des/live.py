"""A live replica: the DES's continuous-batching replicas stepped by an outside clock.

``LiveEngine`` builds its replicas through the one assembly ``engine.des.run.simulate`` uses
(``engine.des.assembly.assemble``: ``Replica`` with its scheduler policy, ``KvPool`` with the KV
blocks a speculative draft leaves, prefix caches, speculative decoding, the power model and its
throttle, swap preemption; ``StepModel`` step times with the calibration's noise hook) and routes
with ``Router`` over ``partition.dp`` replicas, but requests arrive one by one from outside
(``submit``, with their prompt's prefix block hashes for prefix caching) instead of from a
pre-drawn stream, and time moves when the caller says so (``advance(t)``). It is pure: no
clock, no I/O, no threads. ``simllm-serve`` (runner/tools/serve.py) drives it from the wall
clock and streams each token at its simulated time.

Event order is the event loop's (engine.des.cluster.Loop): at equal times an iteration end
first, then arrivals, then (re)planning, so a replica plans once it has seen every request
that arrived at that instant; an arrival during a run of decode steps ends the run after the
step in progress (``Replica.truncate``). Hence feeding the same arrivals gives the same
token times as ``simulate`` (tests/live/test_live_engine.py checks it request by request),
whatever the times at which ``advance`` is called.

Committed tokens: a run of k decode steps planned at ``start`` emits one token per running
sequence at each ``start + cum[j]``. An arrival at ``a`` keeps every step that ends at or after
``a`` up to the one in progress, so once ``advance(t)`` has been called every step ending at
or before ``t`` is final: ``advance`` hands those tokens out while the run is still going, and
the rest when the run ends. Prefill/mixed iterations emit their tokens at the iteration end.

Bounded: at most ``capacity`` requests are in the engine at once (running, waiting and
completed-but-not-released); the request slots of the DES's ``State`` arrays are reused
(``release``). A request that can never fit the KV cache (prompt + output above the blocks
left after the watermark) is refused at ``submit``, as the event loop rejects it.

Not supported live (SpecError at construction): disaggregated prefill/decode pools
(``prefill_replicas``), token-bucket admission and the fleet's server-side controls (router
weighted, signal_delay_s, shed_outstanding, autoscale, timeout_s, deadline_s, max_model_len);
the client-side options of DesSpec (ramp-up, length jitter, think times, warm-up window,
sessions) belong to the real clients. Per-iteration timelines and per-token timestamps are off
live (the caller gets every token's time from ``advance``).
"""

import heapq
from dataclasses import dataclass, field

import numpy as np

from engine.des.assembly import assemble
from engine.des.cluster import Router
from engine.des.cluster.loop import ApiServer
from engine.des.config import DesSpec, deployment
from engine.des.replica import DecodeRun, Replica
from engine.des.workload import RequestStream
from engine.errors import SpecError
from engine.spec import Specs


#: the prefix hashes of a request submitted without any (prefix caching matches nothing)
_NO_HASHES = np.zeros(0, np.uint64)


def st_done(st, rid: int) -> bool:
    """Whether request ``rid`` of State ``st`` has completed."""
    return st.completion[rid] == st.completion[rid]


class EngineFull(RuntimeError):
    """No free request slot: ``capacity`` requests are already in the engine."""


@dataclass
class Emitted:
    """What ``advance`` produced: tokens (request id, simulated times [s] of its new tokens, in
    order) and the requests that completed (their last token is among ``tokens``)."""

    tokens: list = field(default_factory=list)
    done: list = field(default_factory=list)


class LiveEngine:
    """The replicas of one deployment, fed by ``submit`` and stepped by ``advance``."""

    def __init__(self, specs: Specs, des: DesSpec | None = None, *, capacity: int = 1024,
                 noise=None, block_tokens: int = 512):
        specs, des = deployment(specs, des)
        if des.cluster.prefill_replicas:
            raise SpecError("engine.des.cluster.prefill_replicas", des.cluster.prefill_replicas,
                            "0: disaggregated pools are not served live")
        if des.scheduling.admission == "token_bucket":
            raise SpecError("engine.des.scheduling.admission", des.scheduling.admission, "none: token-bucket admission "
                            "is not served live")
        if capacity < 1:
            raise SpecError("capacity", capacity, "at least 1 request slot")
        refuse = [(f, v, why) for f, v, why in (
            ("router", des.cluster.router, "a router engine.des.cluster.Router serves (weighted is the fleet's)"),
            ("signal_delay_s", des.cluster.signal_delay_s, "0: delayed routing signals are the fleet's"),
            ("shed_outstanding", des.cluster.shed_outstanding, "0: load shedding is the fleet's"),
            ("autoscale", des.cluster.autoscale, "none: autoscaling is the fleet's"),
            ("timeout_s", des.cluster.timeout_s, "0: queue expiry is the fleet's (a live client aborts)"),
            ("deadline_s", des.cluster.deadline_s, "0: deadlines are the fleet's (a live client aborts)"),
            ("max_model_len", des.cluster.max_model_len, "0: the live engine refuses by the KV cache")
        ) if (v == "weighted" if f == "router" else v not in (0, 0.0, "none"))]
        if refuse:
            f, v, why = refuse[0]
            raise SpecError(f"engine.des.{f}", v, why + " (not served live)")
        if capacity < 1:
            raise SpecError("capacity", capacity, "at least 1 request slot")
        # per-iteration timelines and per-token timestamps would grow without bound live
        des = des.with_(outputs=dict(record_iterations=False, token_times=False))
        self.specs, self.des = specs, des
        self.block_tokens = block_tokens   # tokens per prefix-cache block (submit's hashes)
        n = capacity
        stream = RequestStream(arrival_s=np.full(n, np.nan), prompt=np.ones(n, np.int64),
                               output=np.ones(n, np.int64), priority=np.ones(n, np.int8),
                               hashes=[_NO_HASHES] * n if des.kv.prefix_caching else None,
                               block_tokens=block_tokens)
        # the replicas engine=des simulates (engine.des.assembly): KV blocks with a draft's
        # share off, prefix caches, speculation, power, swap
        asm = assemble(specs, des, stream, noise)
        blocks, cap = asm.blocks, asm.cap
        if blocks <= 0:
            raise SpecError("model/hardware", f"{cap.weights_gb:.1f} GB weights per device",
                            "a deployment with KV blocks left (no KV blocks: it does not fit)")
        self.blocks = blocks
        self.capacity = capacity
        self.st = st = asm.st
        self.assembly = asm
        n_rep = asm.n_rep
        self.replicas = asm.reps
        self.router = Router(des.cluster.router, self.replicas, st)
        self.overhead_s = specs.calibration.per_request_overhead_s
        # the framework's per-request time at one API server in arrival order, as the event loop
        # serves it (engine.des.cluster.loop.ApiServer)
        fw = specs.framework
        self._api = ApiServer(fw.per_request_s, fw.per_request_dist, des.seed, fw.per_request_token_s)
        #: the longest request served (prompt + output tokens): the model's context length
        #: (``ModelSpec.context_length``) or one replica's KV cache, whichever is smaller
        self.kv_tokens = (blocks - int(des.kv.watermark * blocks)) * des.kv.block_size
        self.context_length = specs.model.context_length
        self.max_tokens = min(self.kv_tokens, self.context_length or self.kv_tokens)
        self._free = list(range(n - 1, -1, -1))
        self._pending: list = []         # (time the request enters the queue, seq, rid)
        self._seq = 0
        self._sent = [0] * n_rep         # decode steps of the current run already handed out
        self._aborting: dict = {}        # replica index -> ids to drop when its iteration ends
        self.now = 0.0
        # counters (for /metrics): tokens handed out, prompts admitted, requests finished
        self.generation_tokens = 0
        self.prompt_tokens = 0
        self.finished = 0
        self.aborted = 0                 # requests dropped because their client went away

    # ----------------------------------------------------------------- requests
    @property
    def in_engine(self) -> int:
        return self.capacity - len(self._free)

    def submit(self, prompt: int, output: int, t: float, hashes=None) -> int:
        """A request of ``prompt`` tokens that will emit ``output`` tokens arrives at ``t`` [s]
        (not before the engine's clock). ``hashes``: its prompt's prefix block hashes
        (``block_tokens`` tokens each, as RequestStream.hashes; prefix caching matches them),
        None = no shared prefix. Returns its id. Raises EngineFull or SpecError (longer than the
        model's context or the KV cache, or lengths < 1)."""
        prompt, output = int(prompt), int(output)
        if prompt < 1 or output < 1:
            raise SpecError("request", f"prompt {prompt}, output {output} tokens",
                            "at least 1 prompt and 1 output token")
        if self.context_length and prompt + output > self.context_length:
            raise SpecError("request", f"{prompt} prompt + {output} output tokens",
                            f"at most {self.context_length} tokens: the model's context length "
                            "(model.context_length)")
        if prompt + output > self.kv_tokens:
            raise SpecError("request", f"{prompt} prompt + {output} output tokens",
                            f"at most {self.kv_tokens} tokens: the KV cache of one replica "
                            f"({self.blocks} blocks of {self.des.kv.block_size}, less the watermark)")
        if not self._free:
            raise EngineFull(f"{self.capacity} requests already in the engine")
        t = max(float(t), self.now)
        rid = self._free.pop()
        st = self.st
        st.prompt[rid], st.output[rid], st.arrival[rid] = prompt, output, t
        for a in (st.scheduled, st.first_token, st.completion, st.last_token):
            a[rid] = np.nan
        st.preemptions[rid] = 0
        st.replica[rid] = -1
        st.emitted[rid] = st.cached_tokens[rid] = st.recomputed[rid] = 0
        st.rejected[rid] = st.kv_ready[rid] = st.swapped[rid] = False
        st.energy_prefill_j[rid] = st.energy_decode_j[rid] = 0.0
        if st.hashes is not None:
            st.hashes[rid] = _NO_HASHES if hashes is None else np.asarray(hashes)
        self._seq += 1
        enter = t + self.overhead_s
        if self._api.on:
            enter = self._api.leave(enter, prompt)
        heapq.heappush(self._pending, (enter, self._seq, rid))
        self.prompt_tokens += prompt
        return rid

    def abort(self, rid: int, t: float) -> bool:
        """The client of ``rid`` went away at ``t`` [s]: drop the request, as vLLM aborts a
        request whose connection closed. Not yet in a queue, or queued: removed at once;
        running between iterations: dropped at once (``Replica.abort``: KV blocks freed, slot
        compacted as a preemption does, not requeued); in an iteration in progress: a decode
        run is cut after the step in progress (as an arrival cuts it) and the request dropped
        when that iteration ends (the deadline path of ``engine.des.cluster.deadlines``; if that iteration
        completes it, it stays completed and comes out in ``Emitted.done`` as usual). A dropped
        request's slot comes back by itself (no ``release``); tokens the engine still hands out
        for it (the iteration in progress) are the caller's to ignore. Returns False (nothing
        done) if it has already completed: ``release`` it as usual."""
        st = self.st
        if st_done(st, rid):
            return False
        t = max(float(t), self.now)
        for i, e in enumerate(self._pending):
            if e[2] == rid:
                self._pending[i] = self._pending[-1]
                self._pending.pop()
                heapq.heapify(self._pending)
                self._free.append(rid)
                self.aborted += 1
                return True
        rep = self.replicas[int(st.replica[rid])]
        if rep.unqueue(rid, t):
            self._free.append(rid)
            self.aborted += 1
            return True
        if rep.run is None and rep.abort(rid):
            self._free.append(rid)
            self.aborted += 1
            rep.plan_pending = True
            return True
        rep.truncate(t)
        self._aborting.setdefault(rep.idx, set()).add(rid)
        return True

    def release(self, rid: int) -> None:
        """Give a completed request's slot back (after its tokens were delivered)."""
        if self.st.completion[rid] != self.st.completion[rid]:
            raise ValueError(f"request {rid} has not completed")
        self._free.append(rid)

    # --------------------------------------------------------------------- time
    @staticmethod
    def _end(rep: Replica) -> float:
        run = rep.run
        if run is None:
            return float("inf")
        return run.start + (float(run.cum[-1]) if run.__class__ is DecodeRun else run.dur)

    def next_time(self) -> float:
        """The next simulated time at which something happens (a token, an iteration end, a
        request entering a queue); inf when idle."""
        t = self._pending[0][0] if self._pending else float("inf")
        for rep in self.replicas:
            run = rep.run
            if rep.plan_pending:
                return self.now
            if run is None:
                continue
            if run.__class__ is DecodeRun:
                j = self._sent[rep.idx]
                t = min(t, run.start + float(run.cum[min(j, run.k - 1)]))
            else:
                t = min(t, run.start + run.dur)
        return t

    def advance(self, t: float) -> Emitted:
        """Process everything up to simulated time ``t`` and return the tokens now final."""
        out = Emitted()
        reps, pend = self.replicas, self._pending
        inf = float("inf")
        t = max(float(t), self.now)
        while True:
            rep_e, te = None, inf
            for rep in reps:
                e = self._end(rep)
                if e < te:
                    rep_e, te = rep, e
            ta = pend[0][0] if pend else inf
            tn = min(te, ta)
            if tn > t:
                break
            if te <= ta:
                self._finish(rep_e, te, out)
                rep_e.plan_pending = True
            else:
                _, _, rid = heapq.heappop(pend)
                self._arrive(rid, ta)
            # plan once nothing else happens at tn (ends first, then arrivals, then plans)
            nxt = min(min((self._end(r) for r in reps), default=inf), pend[0][0] if pend else inf)
            if nxt > tn:
                for rep in reps:
                    if rep.plan_pending:
                        rep.plan(tn)
                        self._sent[rep.idx] = 0
        self.now = t
        # decode steps of runs in progress that ended by t are final
        for rep in reps:
            run = rep.run
            if run is not None and run.__class__ is DecodeRun:
                j0 = self._sent[rep.idx]
                j1 = int(np.searchsorted(run.start + run.cum, t, side="right"))
                if j1 > j0:
                    self._hand_steps(rep, run, j0, min(j1, run.k), out)
        return out

    def _arrive(self, rid: int, t: float) -> None:
        rep = self.router.pick(rid)
        self.st.replica[rid] = rep.idx
        rep.enqueue(rid, t)
        if rep.plan_pending:
            return
        if rep.run is None:
            rep.plan_pending = True
        else:
            rep.truncate(t)

    def _hand_steps(self, rep: Replica, run: DecodeRun, j0: int, j1: int, out: Emitted) -> None:
        """Steps j0..j1-1 of a decode run: one token per sequence per step, or with speculation
        each sequence's accepted tokens of step j (``run.emit``, cumulative), all at its end."""
        times = run.start + run.cum[j0:j1]
        rids = rep.rid[:rep.n].tolist()
        if run.emit is None:
            for rid in rids:
                out.tokens.append((rid, times))
            self.generation_tokens += rep.n * (j1 - j0)
        else:
            em = run.emit[:j1]
            prev = em[j0 - 1] if j0 else np.zeros(em.shape[1], em.dtype)
            per = np.diff(np.vstack([prev[None, :], em[j0:j1]]), axis=0)
            for i, rid in enumerate(rids):
                out.tokens.append((rid, np.repeat(times, per[:, i])))
            self.generation_tokens += int(per.sum())
        self._sent[rep.idx] = j1

    def _finish(self, rep: Replica, t: float, out: Emitted) -> None:
        run = rep.run
        if run.__class__ is DecodeRun:
            j0 = self._sent[rep.idx]
            if j0 < run.k:
                self._hand_steps(rep, run, j0, run.k, out)
            done = rep.finish(t)
        else:
            n = rep.n
            rids = rep.rid[:n].copy()
            before = rep.left[:n].copy()
            done = rep.finish(t)
            after = dict(zip(rep.rid[:rep.n].tolist(), rep.left[:rep.n].tolist()))
            tt = np.array([t])
            for rid, b in zip(rids.tolist(), before.tolist()):
                k = b - max(after.get(rid, 0), 0)
                if k > 0:       # one token per sequence per iteration
                    out.tokens.append((rid, np.repeat(tt, k)))
                    self.generation_tokens += k
        self._sent[rep.idx] = 0
        # clients that went away during this iteration (``abort``): dropped now unless this
        # iteration completed them (they stay completed, as the DES's deadline path keeps them)
        for rid in self._aborting.pop(rep.idx, ()):
            if st_done(self.st, rid):
                continue
            if rep.abort(rid) or rep.unqueue(rid, t):
                self._free.append(rid)
                self.aborted += 1
            else:               # neither running nor queued here now: try again next iteration
                self._aborting.setdefault(rep.idx, set()).add(rid)
        if done:
            out.done.extend(done)
            self.finished += len(done)

    # ------------------------------------------------------------------- gauges
    def gauges(self) -> dict:
        """running, waiting (queued + not yet entered), kv_usage (0-1), preemptions."""
        reps = self.replicas
        total = sum(r.total for r in reps)
        return {"running": sum(r.n for r in reps),
                "waiting": sum(len(r.waiting) for r in reps) + len(self._pending),
                "kv_usage": sum(r.kv.used for r in reps) / total if total else 0.0,
                "preemptions": sum(r.preemptions for r in reps)}


__all__ = ["LiveEngine", "Emitted", "EngineFull"]
