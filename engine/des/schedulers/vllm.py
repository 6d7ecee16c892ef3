"""vllm: prefill-first, whole prompts (vLLM V0 ``_schedule_default``).

An iteration is either a batch of whole new prompts, admitted while the token budget,
max_num_seqs and the KV blocks above the watermark allow, or one decode step of every running
sequence (a run of them, ``Replica.decode_run``).
"""

from engine.des.schedulers.base import Scheduler
from engine.des.schedulers.registry import register


@register("vllm")
class PrefillFirst(Scheduler):
    """vLLM V0: whole new prompts first (if any can be admitted), else decode every sequence."""

    def schedule(self, rep, t):
        chunks = []
        if rep.waiting and rep.n < rep.max_seqs:
            chunks = rep.admit(t, rep.budget, whole=True, busy=False)
        return self.prefill_else_decode(rep, chunks)


__all__ = ["PrefillFirst"]
