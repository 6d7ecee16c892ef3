"""sglang: prefill-first with chunked prompts (SGLang ``get_next_batch_to_run``).

A new prefill batch, the chunked request first, takes priority over decoding; prefill and
decode batches are separate unless mixed chunks are enabled, which they are not by default:
prompt chunks within min(max_num_batched_tokens, chunk_size) tokens, else one decode step of
every running sequence. Admission needs the prompt's blocks (SGLang also reserves a decaying
share of each request's output, new_token_ratio; not modelled).
"""

from engine.des.schedulers.base import Scheduler
from engine.des.schedulers.registry import register


@register("sglang")
class SGLang(Scheduler):
    """SGLang: prefill batch first (the partially prefilled sequences' next chunks, then new
    prompts, chunked, within the budget), decode batch otherwise."""

    def schedule(self, rep, t):
        left = rep.budget
        chunks = []
        for s, pf in rep.prefilling():
            if left <= 0:
                break
            c = min(pf, left)
            chunks.append((s, c))
            left -= c
        if rep.waiting and left > 0 and rep.n < rep.max_seqs:
            chunks += rep.admit(t, left, whole=False, busy=bool(chunks))
        return self.prefill_else_decode(rep, chunks)


__all__ = ["SGLang"]
