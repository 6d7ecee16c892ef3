"""Iteration schedulers of a replica, one strategy class per policy, registered by name.

A strategy decides what the next iteration runs; the replica (engine.des.replica) carries it out
with its helpers (``admit``, ``mixed``, ``decode_run``, ...), and the KvPool does the block
accounting. Interface: ``plan(replica, t) -> end time | None`` plus two properties the replica's
block accounting reads: ``reserves_output`` (KV for prompt + all output reserved at admission, so
a running sequence never needs a block it does not hold) and ``chunks`` (prompts may be split
across iterations).

Policies (framework profiles in conf/framework/ pick one; engine.des.scheduler overrides):
    vllm     prefill-first (vLLM V0 ``_schedule_default``): an iteration is either a batch of whole
             new prompts, admitted while the token budget, max_num_seqs and the KV blocks above
             the watermark allow, or one decode step of every running sequence.
    sarathi  decode-first chunked prefill (vLLM V1 scheduler; Sarathi-Serve stall-free batching,
             Agrawal et al., OSDI 2024): every running decode first, then prompt chunks of the
             partially prefilled sequences (oldest admission first), then new admissions, until
             the token budget min(max_num_batched_tokens, chunk_size) is spent.
    orca     in-flight batching with a no-evict reservation (Orca, Yu et al., OSDI 2022;
             TensorRT-LLM GUARANTEED_NO_EVICT): decodes plus whole new prompts in one iteration;
             a request is admitted only when the blocks for its prompt and all its output are free;
             with the profile's chunked_prefill (TensorRT-LLM chunked context) prompts are split
             within the token budget like sarathi's, the reservation unchanged.
    sglang   prefill-first with chunked prompts (SGLang ``get_next_batch_to_run``: a new prefill
             batch, the chunked request first, takes priority over decoding; prefill and decode
             batches are separate unless mixed chunks are enabled, which they are not by
             default): prompt chunks within min(max_num_batched_tokens, chunk_size) tokens, else
             one decode step of every running sequence. Admission needs the prompt's blocks (SGLang
             also reserves a decaying share of each request's output, new_token_ratio; not modelled).

A new policy is one class here with ``@register("name")`` and the name added to
``engine.spec.framework.FRAMEWORK_SCHEDULERS``.
"""

import numpy as np

#: name -> strategy class
REGISTRY: dict = {}


def register(name: str):
    def deco(cls):
        cls.name = name
        REGISTRY[name] = cls
        return cls
    return deco


def make(name: str, chunked_prefill: bool = False):
    """The strategy registered under ``name``; ``chunked_prefill`` (the framework profile's) lets
    the no-evict policy split prompts (TensorRT-LLM chunked context); the others fix it."""
    s = REGISTRY[name]()
    if s.name == "orca" and chunked_prefill:
        s.chunks = True
    return s


class Scheduler:
    """Base strategy: no reservation, whole prompts."""

    name = ""
    reserves_output = False
    chunks = False

    def plan(self, rep, t: float):
        raise NotImplementedError

    @staticmethod
    def prefill_else_decode(rep, t, chunks):
        """A prefill-only iteration of ``chunks`` if any, else a decode run of every running
        sequence, else idle (None)."""
        if chunks:
            return rep.mixed(t, chunks, None)
        if not rep.n:
            rep.run = None
            return None
        return rep.decode_run(t)


@register("vllm")
class PrefillFirst(Scheduler):
    """vLLM V0: whole new prompts first (if any can be admitted), else decode every sequence."""

    def plan(self, rep, t):
        chunks = []
        if rep.waiting and rep.n < rep.max_seqs:
            chunks = rep.admit(t, rep.budget, whole=True, busy=False)
        return self.prefill_else_decode(rep, t, chunks)


@register("sglang")
class SGLang(Scheduler):
    """SGLang: prefill batch first (the partially prefilled sequences' next chunks, then new
    prompts, chunked, within the budget), decode batch otherwise."""

    chunks = True

    def plan(self, rep, t):
        n = rep.n
        left = rep.budget
        chunks = []
        if n:
            part = np.flatnonzero(rep.pf[:n] > 0)
            if len(part):
                part = part[np.argsort(rep.adm[part], kind="stable")]
                for s in part:
                    if left <= 0:
                        break
                    c = int(min(rep.pf[s], left))
                    chunks.append((int(s), c))
                    left -= c
        if rep.waiting and left > 0 and rep.n < rep.max_seqs:
            chunks += rep.admit(t, left, whole=False, busy=bool(chunks))
        return self.prefill_else_decode(rep, t, chunks)


@register("sarathi")
class DecodeFirst(Scheduler):
    """vLLM V1 / Sarathi-Serve: running decodes first, then prompt chunks in what is left of the
    token budget; a prompt may be split (``chunks``)."""

    chunks = True

    def plan(self, rep, t):
        if not rep.n and not rep.waiting:
            rep.run = None
            return None
        n = rep.n
        if n and not np.count_nonzero(rep.pf[:n]) and (
                not rep.waiting or n >= rep.max_seqs or rep.budget <= n
                or not rep.head_fits(rep.budget - n, not self.chunks)):
            return rep.decode_run(t)   # nothing to prefill and nobody can be admitted
        dec = rep.pf[:n] == 0
        didx = np.flatnonzero(dec)
        nd = len(didx)
        if nd:
            need = rep.need(didx, 1)
            if need > rep.kv.avail():
                rep.make_room(1)
                n = rep.n
                dec = rep.pf[:n] == 0
                didx = np.flatnonzero(dec)
                nd = len(didx)
                need = rep.need(didx, 1)
        if nd:
            rep.kv.take(need)
            own = rep.ctx[didx] + 1 - rep.cached[didx]
            rep.blocks[didx] = np.maximum(rep.blocks[didx], -(-own // rep.bs))
        else:
            didx = None
        left = rep.budget - nd
        chunks = []
        if nd < n and left > 0:
            order = np.flatnonzero(~dec)
            order = order[np.argsort(rep.adm[order], kind="stable")]
            for s in order:
                if left <= 0:
                    break
                c = int(min(rep.pf[s], left)) if self.chunks else int(rep.pf[s])
                chunks.append((int(s), c))
                left -= c
        if rep.waiting and left > 0 and rep.n < rep.max_seqs:
            chunks += rep.admit(t, left, whole=not self.chunks, busy=bool(nd or chunks))
        if not chunks:
            if not rep.n:
                rep.run = None
                return None
            if nd == rep.n:
                rep.unreserve(didx)
                return rep.decode_run(t)
        return rep.mixed(t, chunks, didx)


@register("orca")
class NoEvict(DecodeFirst):
    """Orca / TensorRT-LLM GUARANTEED_NO_EVICT: decodes plus whole prompts; KV for prompt + output
    reserved at admission."""

    chunks = False
    reserves_output = True


__all__ = ["REGISTRY", "register", "make", "Scheduler", "PrefillFirst", "SGLang", "DecodeFirst", "NoEvict"]
