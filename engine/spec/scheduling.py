"""The DES scheduler policies by name, with their traits: the one list that engine.spec validation,
``DesSpec.token_budget``, engine.plan.bound and the policy classes of engine.des.schedulers (their
class attributes, set by ``register``) read. Data only: engine.spec imports nothing above it.

Traits:
    chunks            prompts may be split across iterations
    chunked_prefill   the framework profile's ``chunked_prefill`` the policy requires (None:
                      either; then ``chunks`` follows it, TensorRT-LLM chunked context)
    reserves_output   KV for prompt + all output reserved at admission (no-evict: never
                      preempts, so ``preemption=none`` is allowed)
    prefill_first     prefill iterations take priority and run without decodes
    budget_is_chunk   the token budget is min(max_num_batched_tokens, chunk_size) when
                      chunk_size > 0 (else max_num_batched_tokens)
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class SchedulerTraits:
    """What a DES scheduler policy does, as the specs and the capacity bound need to know it."""

    summary: str
    chunks: bool = False
    chunked_prefill: bool | None = None
    reserves_output: bool = False
    prefill_first: bool = False
    budget_is_chunk: bool = False


#: name -> traits, one line per policy (the policy itself: engine/des/schedulers/<name>.py)
POLICIES: dict = {
    "vllm": SchedulerTraits("prefill-first, whole prompts (vLLM V0)", chunked_prefill=False,
                            prefill_first=True),
    "sarathi": SchedulerTraits("decode-first chunked prefill (vLLM V1, Sarathi-Serve)", chunks=True,
                               chunked_prefill=True, budget_is_chunk=True),
    "orca": SchedulerTraits("decodes plus whole prompts, prompt + output KV reserved (Orca, "
                            "TensorRT-LLM)", reserves_output=True),
    "sglang": SchedulerTraits("prefill-first, chunked prompts, decode batches separate (SGLang)",
                              chunks=True, prefill_first=True, budget_is_chunk=True),
}


def scheduler_names() -> tuple:
    """The DES scheduler policies, in declaration order."""
    return tuple(POLICIES)


def scheduler_traits(name: str) -> SchedulerTraits:
    """The traits of policy ``name`` (KeyError for an unknown one)."""
    return POLICIES[name]


__all__ = ["SchedulerTraits", "POLICIES", "scheduler_names", "scheduler_traits"]
