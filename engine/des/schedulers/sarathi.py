"""sarathi: decode-first chunked prefill (vLLM V1 scheduler; Sarathi-Serve stall-free batching,
Agrawal et al., OSDI 2024).

Every running decode first (its next token's KV reserved, preempting newest-first when the pool
lacks it), then prompt chunks of the partially prefilled sequences (oldest admission first), then
new admissions, until the token budget min(max_num_batched_tokens, chunk_size) is spent. With
nothing to prefill and nobody admissible, a run of decode steps.
"""

from engine.des.schedulers.base import DECODE_RUN, Plan, Scheduler
from engine.des.schedulers.registry import register


@register("sarathi")
class DecodeFirst(Scheduler):
    """vLLM V1 / Sarathi-Serve: running decodes first, then prompt chunks in what is left of the
    token budget; a prompt may be split (``chunks``)."""

    def schedule(self, rep, t):
        if not rep.n and not rep.waiting:
            return None
        n = rep.n
        if n and not rep.any_prefilling() and (
                not rep.waiting or n >= rep.max_seqs or rep.budget <= n
                or not rep.head_fits(rep.budget - n, not self.chunks)):
            return DECODE_RUN   # nothing to prefill and nobody can be admitted
        didx = rep.reserve_decodes()
        nd = 0 if didx is None else len(didx)
        left = rep.budget - nd
        chunks = []
        if nd < rep.n and left > 0:
            for s, pf in rep.prefilling():
                if left <= 0:
                    break
                c = min(pf, left) if self.chunks else pf
                chunks.append((s, c))
                left -= c
        if rep.waiting and left > 0 and rep.n < rep.max_seqs:
            chunks += rep.admit(t, left, whole=not self.chunks, busy=bool(nd or chunks))
        if not chunks:
            if not rep.n:
                return None
            if nd == rep.n:
                rep.unreserve(didx)
                return DECODE_RUN
        return Plan(chunks, didx)


__all__ = ["DecodeFirst"]
