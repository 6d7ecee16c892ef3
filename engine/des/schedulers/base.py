"""The scheduler interface: a policy's traits, and the ``Plan`` record it hands the replica.

A policy (one module each: vllm, sarathi, orca, sglang) decides what the next iteration runs
and returns it as a ``Plan``; the replica (engine.des.replica) prices it with the step model and
commits it when the iteration ends. As vLLM v1's ``Scheduler.schedule()`` allocates KV slots
while it builds its ``SchedulerOutput``, a policy admits queue heads and reserves decode blocks
through the replica's admission API (``admit``, ``reserve_decodes``, ``make_room``); it never
prices an iteration, never sets the replica's run in progress and never touches the KV pool's
accounting directly.

Traits (class attributes, the one source that engine.spec validation, ``DesSpec.token_budget``
and engine.plan.bound read through ``engine.des.schedulers.traits``):
    chunks            prompts may be split across iterations
    chunked_prefill   the profile's ``chunked_prefill`` this policy requires (None: either;
                      then ``chunks`` follows it, TensorRT-LLM chunked context)
    reserves_output   KV for prompt + all output reserved at admission (no-evict: never
                      preempts, so ``preemption=none`` is allowed)
    prefill_first     prefill iterations take priority and run without decodes
    budget_is_chunk   the token budget is min(max_num_batched_tokens, chunk_size) when
                      chunk_size > 0 (else max_num_batched_tokens)
"""

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class Plan:
    """One scheduling decision. ``decode_run``: a run of pure decode steps of every running
    sequence (the replica sizes it, ``Replica.decode_run``); otherwise one iteration of the prompt
    ``chunks`` [(slot, tokens)] beside the decoding slots ``decodes`` (their next-token KV
    already reserved; None: no decode)."""

    chunks: list
    decodes: np.ndarray | None = None
    decode_run: bool = False


#: the plan of a run of decode steps (shared: a Plan is never mutated)
DECODE_RUN = Plan([], None, True)


class Scheduler:
    """Base policy: no reservation, whole prompts. Subclasses set the traits and ``schedule``."""

    name = ""
    chunks = False
    chunked_prefill: bool | None = None
    reserves_output = False
    prefill_first = False
    budget_is_chunk = False
    #: one line for the registry's listing and error messages
    summary = ""

    def schedule(self, rep, t: float) -> Plan | None:
        """The next iteration on replica ``rep`` at ``t``, or None when there is nothing to run."""
        raise NotImplementedError

    @staticmethod
    def prefill_else_decode(rep, chunks) -> Plan | None:
        """A prefill-only iteration of ``chunks`` if any, else a decode run of every running
        sequence, else idle (None)."""
        if chunks:
            return Plan(chunks)
        if not rep.n:
            return None
        return DECODE_RUN


__all__ = ["Plan", "DECODE_RUN", "Scheduler"]
