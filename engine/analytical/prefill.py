"""Prefill: TTFT of single-pass, batched (pipeline-microbatched) and chunked prefill, and the
chunk size C* that minimises it. Seconds; vectorised over numpy arrays.

Single pass, B prompts of S tokens: with pp stages the batch is cut into m microbatches
(m = pp_microbatches or pp, at most B) that fill the pipeline (warm-up bubble):
    TTFT = t_pass + (m - 1) t_s + (pp - 1) hop + m (step_overhead + eager) + B per_token_overhead
           + B S per_prefill_token + per_request
with t_pass = t_pass(B/m prompts) and t_s = t_pass x ceil(L/pp)/L its largest stage (equal
stages: (pp + m - 1) t_s). pp = 1: one pass over all B S tokens.

Chunked, chunk C (llm_perf's chunked prefill; Sarathi-Serve, arXiv 2403.02310): C is the token
budget of a pass (vLLM's max_num_batched_tokens), so the B prompts are prefilled one after
another, each in n = ceil(S/C) passes; chunk i (s_i tokens after k_i = i C cached) re-reads the
weights and attends to everything cached:
    attention compute_i ~ s_i k_i + s_i (s_i + 1)/2 pairs,  KV read_i ~ k_i + s_i
both affine in i for the n - 1 full chunks, so the sum of each chunk's roofline max is exact
(``latency.sum_max_affine``); the last (possibly partial) chunk, which emits the logits, is
evaluated on its own. Chunks pipeline across pp stages (chunk i+1 of a prompt needs only the stage's own KV of chunk
i, so the pipeline stays full, across prompts too); the batch is ready after
    TTFT = f B sum_i t_i + (1 - f) t_last + (pp - 1) hop + B n (step_overhead + eager) + B per_token
           + B S per_prefill_token + per_request,      f = ceil(L/pp)/L the largest stage's share (1/pp if equal)
Small C pays n weight re-reads and n step overheads; large C pays quadratic attention in one pass.
Sliding-window layers inside full chunks use their mean pair count per chunk (approximation).
Overlap of comm is applied to the summed body of chunks (exact when every chunk is on the same
side of roof vs comm). Prompt passes run eagerly: each pass adds the framework's launch time
(``StepModel.launch_s``: eager = num_layers x eager_layer_overhead) beside its step overhead.
"""

from dataclasses import replace

import numpy as np

from engine.analytical import attention, latency, memory, parallel, window
from engine.analytical.decode import microbatches
from engine.spec import ModelSpec


def _pass(sm, m: ModelSpec, B, s, k, logits):
    """(roof, compute, memory, comm) of one pass of chunk s after k cached for B prompts."""
    T = B * s
    att_c, att_m = sm.attention(B * attention.prefill_layer_pairs(m, s, k),
                                B * memory.kv_layer_positions(m, k), T, 0.0, 0.0, T)
    ops = sm.operators(T, logits, att_c, att_m)
    return (sm.roof(ops), sum(c for c, _ in ops), sum(mm for _, mm in ops), sm.comm_s(T))


def _hop(sm, T):
    return np.where(T > 0, sm.hop_latency_s + sm.hop_s_per_token * T, 0.0)


def single_pass(sm, m: ModelSpec, B, S, pp, mb, per_request_s):
    """TTFT of a single-pass (pipeline-microbatched) prefill and its parts; dict of arrays [s]."""
    mbs = microbatches(pp, B, mb)
    Bm = B / mbs
    roof, cmp, mem, comm = _pass(sm, m, Bm, S, 0.0, Bm)
    hop = _hop(sm, Bm * S)
    t_pass = parallel.overlapped(roof, comm - hop, sm.overlap)
    t_s = t_pass * parallel.stage_share(m.num_layers, pp)
    hop_b = np.where(pp > 1, hop / np.maximum(pp - 1, 1), 0.0)
    # from an idle engine: host work and passes in series (StepModel.serial)
    ttft = sm.serial(t_pass + (mbs - 1) * t_s + (pp - 1) * hop_b + mbs * sm.eager_s,
                     mbs * sm.step_overhead_s + B * sm.per_token_overhead_s
                     + B * S * sm.per_prefill_token_s, mbs) + per_request_s
    return dict(ttft_s=ttft, compute_s=mbs * cmp, memory_s=mbs * mem, comm_s=mbs * comm,
                passes=mbs, roof_s=mbs * roof * parallel.stage_share(m.num_layers, pp))


def chunked(sm, m: ModelSpec, B, S, C, pp, per_request_s):
    """TTFT of chunked prefill of B prompts, one after another, in chunks of ``C`` (< S) tokens;
    dict of arrays [s] (compute, memory and comm summed over all passes)."""
    Bn, B = B, 1.0
    L, full = m.num_layers, window.full_layers(m.layer_groups)
    S, C = np.asarray(S, dtype=float), np.maximum(np.asarray(C, dtype=float), 1.0)
    n = np.ceil(S / C)
    nb = n - 1                        # full body chunks at k_i = i C
    s_last, k_last = S - nb * C, nb * C
    T = B * C
    a = sm.att_coef()
    # attention of body chunk i (s = C after k = i C): compute A0 + A1 i, memory M0 + M1 i
    # (full layers; StepModel.attention with LPp = (L - Lw)(C k + C(C+1)/2), LRp = (L - Lw) k)
    A0 = a["pp"] * B * full * C * (C + 1) / 2 + a["pt"] * L * T + a["pf"] * L
    A1 = (a["pp"] * C + a["pr"]) * B * full * C
    M0 = a["mem"] * B * L * C
    M1 = a["mem"] * B * full * C
    for lw, w in window.windowed(m.layer_groups):
        # windowed layers: mean per body chunk of their pairs (the body tiles 1..nb C) and of
        # their cached reads (mid-context form), ``window``
        wp = lw * window.pairs(1, np.maximum(nb * C, 1), w) / np.maximum(nb, 1)
        wr = lw * window.kept((nb - 1) * C / 2, w)
        A0 = A0 + a["pp"] * B * wp + a["pr"] * B * wr
        M0 = M0 + a["mem"] * B * wr
    dense, experts, _ = sm.operators(T, 0.0, 0.0, 0.0)
    if sm.roofline == "op":
        body = (nb * (np.maximum(*dense) + np.maximum(*experts))
                + latency.sum_max_affine(A0, A1, M0, M1, nb))
    else:
        body = latency.sum_max_affine(A0 + dense[0] + experts[0], A1,
                                      M0 + dense[1] + experts[1], M1, nb)
    body_c = nb * (dense[0] + experts[0]) + nb * A0 + A1 * nb * (nb - 1) / 2
    body_m = nb * (dense[1] + experts[1]) + nb * M0 + M1 * nb * (nb - 1) / 2
    comm_b = sm.comm_s(T) - _hop(sm, T)
    t_body = parallel.overlapped(body, nb * comm_b, sm.overlap)
    roof_l, c_l, m_l, comm_l = _pass(sm, m, B, s_last, k_last, B)
    hop_l = _hop(sm, B * s_last)
    t_last = parallel.overlapped(roof_l, comm_l - hop_l, sm.overlap)
    hop_b = np.where(pp > 1, hop_l / np.maximum(pp - 1, 1), 0.0)
    f = parallel.stage_share(m.num_layers, pp)
    ttft = sm.serial(Bn * (t_body + t_last) * f + (1 - f) * t_last + (pp - 1) * hop_b + Bn * n * sm.eager_s,
                     Bn * n * sm.step_overhead_s + Bn * sm.per_token_overhead_s
                     + Bn * S * sm.per_prefill_token_s, Bn * n) + per_request_s
    return dict(ttft_s=ttft, compute_s=Bn * (body_c + c_l), memory_s=Bn * (body_m + m_l),
                comm_s=Bn * (nb * sm.comm_s(T) + comm_l), passes=Bn * n,
                roof_s=Bn * (body + roof_l) * f)


def ttft(sm, m: ModelSpec, B, S, C, pp, mb, per_request_s):
    """TTFT for chunk size C (0 or >= S: single pass); dict of arrays [s]."""
    C = np.asarray(C, dtype=float)
    one = single_pass(sm, m, B, S, pp, mb, per_request_s)
    use = (C > 0) & (C < S)
    if not np.any(use):
        return one
    ch = chunked(sm, m, B, S, np.where(use, C, S), pp, per_request_s)
    return {k: np.where(use, ch[k], one[k]) for k in one}


def optimal_chunk(sm, m: ModelSpec, B, S, pp, mb, per_request_s, candidates):
    """C* and its TTFT: the candidate chunk size (or the single pass, C = S) with the least TTFT.
    Evaluated for all candidates at once on a trailing axis. Returns (C*, TTFT(C*)) [tokens, s]."""
    S_ = np.asarray(S, dtype=float)[..., None]
    cand = np.asarray(candidates, dtype=float)
    Cs = np.where(cand < S_, cand, S_)          # candidates >= S mean the single pass
    Cs = np.concatenate([Cs, np.broadcast_to(S_, Cs.shape[:-1] + (1,))], axis=-1)

    def ex(v):
        return np.asarray(v)[..., None] if np.ndim(v) else v

    sm_e = sm.__class__(**{k: ex(v) if isinstance(v, np.ndarray) else v
                           for k, v in sm.__dict__.items()})
    if sm.kern is not None:
        sm_e = replace(sm_e, kern=sm.kern.expand(ex))
    t = ttft(sm_e, m, ex(B), S_, Cs, ex(pp), ex(mb), ex(per_request_s))["ttft_s"]
    i = np.argmin(t, axis=-1)
    best_c = np.take_along_axis(np.broadcast_to(Cs, t.shape), i[..., None], -1)[..., 0]
    return best_c, np.take_along_axis(t, i[..., None], -1)[..., 0]
