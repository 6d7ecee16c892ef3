"""KV cache in paged blocks (PagedAttention, Kwon et al., SOSP 2023): footprint per device,
fragmentation, capacity and the number of sequences that fit. Bytes; vectorised.

A sequence of n tokens occupies ceil(n / b) blocks of b tokens (``kv_block_tokens``); the unused
tail of its last block is internal fragmentation, 1 - n / (b ceil(n/b)). Per device the cache is
split min(tp, KV heads) x sp ways and the largest pipeline stage holds ceil(L/pp) of the L
layers (``parallel.stage_share``; 1/pp of them when pp divides L).
    capacity per device = (HBM - weights - activations - reserve) x kv_usable_fraction
    max concurrent sequences at context n = floor(capacity / per-sequence bytes per device)
Weights per device: (non-expert weights / tp + routed experts / max(tp, ep)) x ceil(L/pp)/L,
with group-scale overhead (``precision``).
"""

import numpy as np

from engine.analytical import memory, parallel
from engine.analytical.params import param_counts
from engine.analytical.precision import weight_bytes_per_param
from engine.spec import ModelSpec


def paged_tokens(context_len, block_tokens):
    """Tokens' worth of KV a sequence of ``context_len`` tokens holds in whole blocks:
    b ceil(n / b)."""
    return np.ceil(np.asarray(context_len, dtype=float) / block_tokens) * block_tokens


def fragmentation(context_len, block_tokens):
    """Fraction of a sequence's KV blocks left empty: 1 - n / (b ceil(n/b))."""
    return 1.0 - np.asarray(context_len, dtype=float) / paged_tokens(context_len, block_tokens)


def sequence_bytes(model: ModelSpec, context_len, block_tokens):
    """KV bytes one sequence of ``context_len`` tokens holds in paged blocks (all layer groups;
    sliding-window layers keep at most the window: ``memory.sequence_kv_bytes``)."""
    return memory.sequence_kv_bytes(model, paged_tokens(context_len, block_tokens))


def weights_per_device(model: ModelSpec, tp, pp, ep):
    """Weight bytes one device of the largest stage holds:
    ((total - experts) / tp + experts / max(tp, ep)) x ceil(L/pp)/L."""
    pc = param_counts(model)
    wb = weight_bytes_per_param(model)
    share = parallel.stage_share(model.num_layers, pp)
    return ((pc.total - pc.experts) * wb / tp + pc.experts * wb / parallel.expert_shard(tp, ep)) * share


def kv_split(model: ModelSpec, tp, pp, sp):
    """Ways one token's KV is split over a replica's devices: min(tp, KV heads) x L / ceil(L/pp)
    x sp (MLA: one KV head, the latent is whole on every TP rank; the largest stage holds
    ceil(L/pp) of the L layers)."""
    return memory.kv_shard_factor(memory.kv_heads(model), tp,
                                  1.0 / parallel.stage_share(model.num_layers, pp), sp)


def capacity(model: ModelSpec, tp, pp, ep, sp, pass_tokens, batch, hbm_bytes, reserve_bytes,
             usable_fraction):
    """The KV room of a replica; dict of arrays. The one footprint both engines use.

    weights      per device of the largest stage (``weights_per_device``: expert shard,
                 group scales, uneven stages)
    activations  per device at a pass of ``pass_tokens`` tokens and ``batch`` sequences
    kv_capacity  per device: (HBM - weights - activations - reserve) x usable fraction [bytes]
    split        ways one token's KV is split over the replica's devices:
                 min(tp, KV heads) x L / ceil(L/pp) x sp (MLA: 1 KV head, the latent is whole
                 on every TP rank)
    tokens       full-attention tokens of KV the replica holds: kv_capacity x split / KV bytes
                 per token (sliding-window layers counted whole: a lower bound)
    """
    split = kv_split(model, tp, pp, sp)
    w = weights_per_device(model, tp, pp, ep)
    act = memory.activation_peak_bytes(model, pass_tokens / sp, batch, tp)
    cap = memory.kv_capacity_bytes(hbm_bytes, w, act, reserve_bytes, usable_fraction)
    return dict(weights=w, activations=act, kv_capacity=cap, split=split,
                tokens=cap * split / memory.kv_bytes_per_token(model))


def footprint(model: ModelSpec, B, context_len, tp, pp, ep, sp, pass_tokens, hbm_bytes,
              reserve_bytes, usable_fraction, block_tokens):
    """Per-device memory of a batch of B sequences at ``context_len`` tokens; dict of arrays.

    weights, activations (of a pass of ``pass_tokens`` tokens), kv (paged), kv_capacity, fits,
    max_seqs (concurrent sequences the capacity holds at this context), fragmentation."""
    c = capacity(model, tp, pp, ep, sp, pass_tokens, B, hbm_bytes, reserve_bytes, usable_fraction)
    w, act, cap = c["weights"], c["activations"], c["kv_capacity"]
    seq = sequence_bytes(model, context_len, block_tokens) / c["split"]
    kv = B * seq
    fits = (w + act + reserve_bytes <= hbm_bytes) & (kv <= cap)
    return dict(weights=w, activations=act, kv=kv, kv_capacity=cap, fits=fits,
                max_seqs=np.floor(cap / seq), fragmentation=fragmentation(context_len, block_tokens))
