"""Attention cost per attended position, for MHA/GQA/MQA, MLA and sliding-window layers. Vectorised.

A query scores every position it attends (QK^T) and mixes their values (AV). Per layer and per
attended position (a "pair" of query token and cached/causal key):

    MHA/GQA/MQA   2*nh*dh (QK^T) + 2*nh*dh (AV) = 4*nh*dh FLOP            (GQA shares K/V, not FLOPs)
    MLA, prefill  2*nh*(dn + dr) + 2*nh*dv FLOP   (keys/values expanded per head, "naive" form)
    MLA, decode   2*nh*(rkv + dr) + 2*nh*rkv FLOP (weight absorption: queries projected into the
                  latent space and attending to the cached 576-wide latent, as FlashMLA, vLLM
                  and SGLang run decode; DeepSeek-V2 sec. 2.1.2)

Sliding-window layers attend to at most W positions. Layer-pairs (sum over layers of attended
positions, summed over the model's layer groups) replace L x pairs wherever windows exist
(formulas in ``engine.analytical.window``):
    prefill of S new tokens after c cached, full layer:   S*c + S(S+1)/2
    windowed layer:                                      sum_{i=c+1}^{c+S} min(i, W)
    decode token at context n:   (L - Lw) n + Lw min(n, W)
Sources: Vaswani et al. 2017 for the 4*nh*dh count; Mistral 7B (arXiv 2310.06825) for windows.
"""

import numpy as np

from engine.analytical import window
from engine.spec import ModelSpec


def pair_flops_per_layer(model: ModelSpec, phase: str = "prefill") -> float:
    """FLOPs of one query attending one position in one layer (see module docstring)."""
    nh = model.num_heads
    if model.attention == "mla":
        if phase == "decode":
            return 2.0 * nh * (model.kv_lora_rank + model.qk_rope_head_dim) + 2.0 * nh * model.kv_lora_rank
        return 2.0 * nh * (model.qk_nope_head_dim + model.qk_rope_head_dim) + 2.0 * nh * model.v_head_dim
    return 4.0 * nh * model.head_dim


def prefill_layer_pairs(model: ModelSpec, new_tokens, cached_len=0.0):
    """Sum over layers of (query, position) pairs of a prefill of ``new_tokens`` after
    ``cached_len`` cached tokens [layer-pairs]: sum over ``model.layer_groups`` of count x
    pairs per layer (``window.chunk_positions``); L x (S c + S(S+1)/2) without windows."""
    s, c = np.asarray(new_tokens, dtype=float), np.asarray(cached_len, dtype=float)
    return window.chunk_positions(model.layer_groups, s, c)
