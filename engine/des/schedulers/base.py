"""The scheduler interface: a policy's traits, and the ``Plan`` record it hands the replica.

A policy (one module each: vllm, sarathi, orca, sglang) decides what the next iteration runs
and returns it as a ``Plan``; the replica (engine.des.replica) prices it with the step model and
commits it when the iteration ends. As vLLM v1's ``Scheduler.schedule()`` allocates KV slots
while it builds its ``SchedulerOutput``, a policy admits queue heads and reserves decode blocks
through the replica's admission API (``admit``, ``reserve_decodes``, ``make_room``); it never
prices an iteration, never sets the replica's run in progress and never touches the KV pool's
accounting directly.

Traits (chunks, chunked_prefill, reserves_output, prefill_first, budget_is_chunk): declared by
name in engine.spec.scheduling, the one source the specs' validation, ``DesSpec.token_budget`` and
engine.plan.bound read; ``register`` (engine.des.schedulers.registry) sets them on the policy class
as class attributes.
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

    name = ""            # set by ``register``, with the traits of engine.spec.scheduling

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
