"""Speculative decoding with a draft model or multi-token-prediction (MTP / EAGLE-style) heads.

Each step drafts gamma tokens, then the target verifies all of them in one pass of q = gamma + 1
query tokens per sequence. With each draft token accepted independently with probability alpha,
the tokens emitted per step (accepted prefix + the target's own next token) are
    A = min(G, gamma + 1),  G ~ Geometric(1 - alpha):  P(A = j) = alpha^(j-1) (1 - alpha), j <= gamma,
                                                       P(A = gamma + 1) = alpha^gamma
with the mean
    E[A] = (1 - alpha^(gamma+1)) / (1 - alpha)          (Leviathan et al., ICML 2023, eq. 1)

What a step costs (both priced by ``engine.analytical.step.StepModel``, the pass price of both
engines):
  draft (method=draft): gamma decode passes of the draft model (``SpecDecodeSpec.draft``: its own
      ModelSpec, resolved from ``draft_model`` by the runner; same hardware, the target's tp and sp, pp = ep = 1) at the same batch and
      context: t_draft = gamma x t_step^draft(B, c); the draft also prefills every prompt, so
      TTFT adds the draft model's prefill of the prompt;
  mtp (method=mtp; DeepSeek-V3 MTP, EAGLE): ``mtp_layers`` extra transformer layers plus the
      target's LM head on the target's partition (pp = 1): t_draft = gamma x t_step^head(B, c),
      the head priced as a ``mtp_layers``-layer model with the target's shapes; TTFT adds the
      head's pass over the prompt (it consumes the prompt's hidden states);
  ``draft_cost_fraction`` > 0 overrides either price with that fraction of one target decode step
      (the v1 rule, kept for hand what-ifs).
  verify: one target pass of B q tokens, B q logits, each sequence's q queries attending its
      context (``decode.tpot(..., q=gamma+1)``: compute q x positions, KV read once).
    TPOT = (t_draft + t_verify) / E[A];   decode throughput = B E[A] / (t_draft + t_verify)
Memory (``draft_memory``): the draft's weights and its KV cache share the devices' HBM with the
target's: a draft model's weights per device (its tp shard) and its KV per token; an MTP head's
own layers only (embedding and LM head are the target's) and their KV. Both engines take the
weights off the KV room and size the KV per token as target + draft:
    KV room = (HBM - weights - draft weights - activations - reserve) x usable fraction
    tokens  = KV room / (target KV per token + draft KV per token)   (per device)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.errors import SpecError


def expected_tokens(acceptance, gamma):
    """Mean tokens emitted per speculative step: (1 - a^(g+1)) / (1 - a)."""
    a = np.asarray(acceptance, dtype=float)
    return (1.0 - a ** (gamma + 1)) / (1.0 - a)


def tpot(step_s, verify_s, gamma, draft_cost_fraction, acceptance):
    """TPOT with speculation [s] when a draft pass is a fraction of a target step:
    (gamma x fraction x step + verify) / E[tokens]."""
    return (gamma * draft_cost_fraction * step_s + verify_s) / expected_tokens(acceptance, gamma)


def draw_tokens(rng: np.random.Generator, acceptance: float, gamma: int, shape) -> np.ndarray:
    """Tokens emitted per sequence per step, A = min(Geometric(1 - alpha), gamma + 1) (int64)."""
    if acceptance <= 0:
        return np.ones(shape, np.int64)
    return np.minimum(rng.geometric(1.0 - acceptance, size=shape), gamma + 1).astype(np.int64)


def draft_specs(specs):
    """The Specs whose StepModel prices one draft pass (module docstring), or None when the
    method is none or a fixed ``draft_cost_fraction`` prices it."""
    sd = specs.analytical.spec_decode
    if sd.method == "none" or sd.draft_cost_fraction > 0:
        return None
    m, p = specs.model, specs.partition
    if sd.method == "mtp":
        fd = min(m.first_dense_layers, sd.mtp_layers)
        head = replace(m, name=f"{m.name}_mtp{sd.mtp_layers}", num_layers=sd.mtp_layers,
                       first_dense_layers=fd, sliding_window_layers=min(m.sliding_window_layers, sd.mtp_layers),
                       num_params=None)
        return replace(specs, model=head, partition=replace(p, pp=1))
    if sd.draft is None:
        why = ("a draft model (conf/model name, model YAML or HF config.json) for method=draft"
               if not sd.draft_model else
               "a draft model resolved to a ModelSpec (SpecDecodeSpec.draft; the runner resolves "
               "the name with runner.convert.draft_model_spec)")
        raise SpecError("engine.analytical.spec_decode.draft_model", sd.draft_model, why)
    d = sd.draft
    tp = p.tp if (d.num_heads % p.tp == 0 and (d.num_kv_heads % p.tp == 0 or p.tp % d.num_kv_heads == 0)) else 1
    try:
        return replace(specs, model=d, partition=replace(p, tp=tp, pp=1, ep=1))
    except SpecError as e:
        raise SpecError("engine.analytical.spec_decode.draft_model", sd.draft_model,
                        f"a draft model that fits the partition ({e})") from None


def draft_memory(specs, tp, ep, sp):
    """(weight bytes, KV bytes per token) per device the draft adds beside the target (module
    docstring); (0, 0) without speculation or with a fixed-fraction draft. ``tp``, ``ep``, ``sp``
    the target's (floats or arrays)."""
    from engine.analytical import kvcache, memory

    dsp = draft_specs(specs)
    if dsp is None:
        return 0.0, 0.0
    dm = dsp.model
    tp = np.asarray(tp, dtype=float)
    if specs.analytical.spec_decode.method == "mtp":
        # the head's own layers: weights of an (n+1)-layer minus an n-layer head, times n
        n = dm.num_layers
        more = replace(dm, num_layers=n + 1)
        w = n * (kvcache.weights_per_device(more, tp, 1.0, ep) - kvcache.weights_per_device(dm, tp, 1.0, ep))
        return w, memory.kv_bytes_per_token(dm) / kvcache.kv_split(dm, tp, 1.0, sp)
    ok = (dm.num_heads % tp == 0) & ((dm.num_kv_heads % tp == 0) | (tp % dm.num_kv_heads == 0))
    tp_d = np.where(ok, tp, 1.0)
    return (kvcache.weights_per_device(dm, tp_d, 1.0, 1.0),
            memory.kv_bytes_per_token(dm) / kvcache.kv_split(dm, tp_d, 1.0, sp))


def draft_label(specs) -> str:
    """Human-readable price of a draft pass (assumptions.md)."""
    sd = specs.analytical.spec_decode
    if sd.draft_cost_fraction > 0:
        return f"draft pass = {sd.draft_cost_fraction:g} x one target decode step (fixed fraction)"
    if sd.method == "mtp":
        return (f"{sd.mtp_layers} extra layer(s) + LM head of {specs.model.name} per draft token, "
                "priced by StepModel; its pass over the prompt added to TTFT; its layers' weights "
                "and KV share the HBM with the target's")
    d = draft_specs(specs)
    return (f"draft model {d.model.name} (tp={d.partition.tp}, pp=1) decode pass per draft token, "
            "priced by StepModel; its prefill of the prompt added to TTFT; its weights and KV share "
            "the HBM with the target's (KV room less its weights, KV per token target + draft)")
