"""orca: in-flight batching with a no-evict reservation (Orca, Yu et al., OSDI 2022;
TensorRT-LLM GUARANTEED_NO_EVICT).

Decodes plus whole new prompts in one iteration (sarathi's iteration shape); a request is admitted
only when the blocks for its prompt and all its output are free, so a running sequence never
needs a block it does not hold. With the profile's chunked_prefill (TensorRT-LLM chunked context)
prompts are split within the token budget like sarathi's, the reservation unchanged.
"""

from engine.des.schedulers.registry import register
from engine.des.schedulers.sarathi import DecodeFirst


@register("orca")
class NoEvict(DecodeFirst):
    """Orca / TensorRT-LLM GUARANTEED_NO_EVICT: decodes plus whole prompts; KV for prompt + output
    reserved at admission (the traits of engine.spec.scheduling: reserves_output)."""


__all__ = ["NoEvict"]
