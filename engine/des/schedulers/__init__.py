"""Iteration schedulers of a replica: one module per policy, registered by name.

    base.py      the ``Scheduler`` interface, its traits and the ``Plan`` record it returns
    registry.py  name -> policy class
    vllm.py      prefill-first, whole prompts (vLLM V0)
    sarathi.py   decode-first chunked prefill (vLLM V1, Sarathi-Serve)
    orca.py      decodes + whole prompts, no-evict reservation (Orca, TensorRT-LLM)
    sglang.py    prefill-first, chunked prompts, decode batches separate (SGLang)

Framework profiles in conf/framework/ pick one; engine.des.scheduling.scheduler overrides. A new policy is
its traits, one line in engine.spec.scheduling.POLICIES (which engine.spec's validation,
``DesSpec.token_budget`` and engine.plan.bound read), one module here (a ``Scheduler`` subclass
with ``schedule``, decorated ``@register("name")``, which sets the traits on the class) and its
import below: 3 files, 3 places.
"""

from engine.des.schedulers.base import DECODE_RUN, Plan, Scheduler
from engine.des.schedulers.registry import REGISTRY, register
from engine.des.schedulers.vllm import PrefillFirst
from engine.des.schedulers.sarathi import DecodeFirst
from engine.des.schedulers.orca import NoEvict
from engine.des.schedulers.sglang import SGLang


def names() -> tuple:
    """The registered policy names, in registration order."""
    return tuple(REGISTRY)


def traits(name: str):
    """The policy class registered under ``name`` (its class attributes are the traits of
    engine.spec.scheduling). KeyError for an unknown name."""
    return REGISTRY[name]


def make(name: str, chunked_prefill: bool = False) -> Scheduler:
    """The policy registered under ``name``; a policy whose ``chunked_prefill`` trait is None
    (either) chunks as the framework profile's ``chunked_prefill`` says."""
    s = REGISTRY[name]()
    if s.chunked_prefill is None and chunked_prefill:
        s.chunks = True
    return s


__all__ = ["REGISTRY", "register", "make", "names", "traits", "Scheduler", "Plan", "DECODE_RUN",
           "PrefillFirst", "SGLang", "DecodeFirst", "NoEvict"]
