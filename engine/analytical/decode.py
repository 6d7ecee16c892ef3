"""Decode: step time, TPOT with pipeline microbatching, and B* (the batch where decode turns
compute-bound). Seconds; vectorised over numpy arrays.

A decode step of B sequences, each with q query tokens (q = 1; q = gamma + 1 when verifying
speculative drafts) at context c (layer-weighted with sliding windows, ``attention``):
    dense, expert operators: T = B q tokens, B q logits (``StepModel.operators``)
    attention: compute  decode pair FLOPs x B q x LP(c);   memory  KV x B (LP(c) + L q)
    LP(c) = (L - Lw) c + Lw min(c, W) (over the model's layer groups); windows are taken at the
    mid-decode context (``window``'s mid-context form: exact when the prompt already fills the
    window).
TPOT is the exact mean over contexts c in [S+1, S+N-1] of the step time: every operator's compute
and memory are affine in c, so ``latency.mean_of_max_affine`` gives the mean of each maximum.

Pipeline parallelism (llm_perf's decode microbatching): the batch is cut into m microbatches
(engine.analytical.pp_microbatches, 0 = pp; m <= B) that chase each other round the pp stages.
The largest stage (ceil(L/pp) of L layers, ``parallel.stage_share``) spends
t_s = t_pass(B/m) x ceil(L/pp)/L on a microbatch; a sequence gets its next token after a full
round of all stages and pp hand-offs, and the largest stage serves m microbatches per round:
    TPOT = max(t_pass + pp hop, m t_s) + m step_overhead + B per_token_overhead
(equal stages: max(pp (t_s + hop), m t_s)). m < pp leaves bubbles; m > pp queues microbatches.
pp = 1: the single-pass time.
"""

import numpy as np

from engine.analytical import latency, parallel, window
from engine.spec import ModelSpec


def _attention_lines(sm, m: ModelSpec, B, q, c_mid):
    """(a_c, b_c, a_m, b_m): attention compute a_c + b_c c and memory a_m + b_m c of a step [s]."""
    L = m.num_layers
    full = window.full_layers(m.layer_groups)          # layers whose positions grow with c
    win = window.mid_windowed_positions(m.layer_groups, c_mid)   # windowed: constant at c_mid
    a = sm.att_coef()      # per layer-pair / layer-position / sequence-layer / floor (StepModel)
    a_c = a["dp"] * B * q * win + a["ds"] * L * B + a["df"] * L
    b_c = a["dp"] * B * q * full
    a_m = a["mem"] * B * (win + L * q)
    b_m = a["mem"] * B * full
    return a_c, b_c, a_m, b_m


def step_parts(sm, m: ModelSpec, B, S, N, q=1.0, roof=True):
    """Mean roofline time of one decode step of B sequences over contexts S+1..S+N-1, plus the
    step's total compute and memory seconds at the mid context. Returns (roof, compute, memory);
    ``roof=False`` skips the mean (roof None) when only the compute and memory are read."""
    c0, c1 = S + 1, S + np.maximum(N - 1, 1)
    c_mid = (c0 + c1) / 2
    T = B * q
    a_c, b_c, a_m, b_m = _attention_lines(sm, m, B, q, c_mid)
    Tg = sm.graph_tokens(T, B) if q == 1.0 else T     # CUDA-graph padding of a decode step
    dense, experts, _ = sm.operators(Tg, Tg, 0.0, 0.0)
    const_c = dense[0] + experts[0]
    const_m = dense[1] + experts[1]
    if not roof:
        roof = None
    elif sm.roofline == "op":
        roof = (np.maximum(*dense) + np.maximum(*experts)
                + latency.mean_of_max_affine(a_c, b_c, a_m, b_m, c0, c1))
    else:
        roof = latency.mean_of_max_affine(const_c + a_c, b_c, const_m + a_m, b_m, c0, c1)
    return roof, const_c + a_c + b_c * c_mid, const_m + a_m + b_m * c_mid


def microbatches(pp, B, requested):
    """Microbatches in flight: ``requested`` (0 = pp), at most B, at least 1."""
    want = np.where(np.asarray(requested) > 0, requested, pp)
    return np.clip(np.minimum(want, B), 1, None)


def tpot(sm, m: ModelSpec, B, S, N, pp, mb, q=1.0):
    """Decode cycle time (TPOT for q = 1) and its parts; dict of arrays [s].

    keys: tpot_s, roof_s (busy time of one device per cycle), compute_s, memory_s, comm_s
    (per cycle, all microbatches), microbatches."""
    mbs = microbatches(pp, B, mb)
    Bm = B / mbs
    roof, cmp, mem = step_parts(sm, m, Bm, S, N, q)
    T = Bm * q
    comm = sm.comm_s(sm.graph_tokens(T, Bm) if q == 1.0 else T)
    hop = sm.hop_latency_s + sm.hop_s_per_token * T
    f = parallel.stage_share(m.num_layers, pp)
    t_pass = parallel.overlapped(roof, comm - hop, sm.overlap)
    hop_b = np.where(pp > 1, hop / np.maximum(pp - 1, 1), 0.0)
    # a decode step no captured CUDA graph holds launches its kernels eagerly (StepModel.launch_s)
    # the host's per-pass and per-token work adds to the cycle, or hides behind it under an
    # overlap scheduler (StepModel.wall)
    cycle = sm.wall(np.maximum(t_pass + pp * hop_b, mbs * t_pass * f) + mbs * sm.launch_s(Bm, Bm),
                    mbs * sm.step_overhead_s + B * q * sm.per_token_overhead_s)
    if sm.frontend_s_per_token:     # the front end streams B q tokens per cycle at most this fast
        cycle = np.maximum(cycle, B * q * sm.frontend_s_per_token)
    return dict(tpot_s=cycle, roof_s=mbs * roof * f, compute_s=mbs * cmp * f,
                memory_s=mbs * mem * f, comm_s=mbs * comm, microbatches=mbs)


def bound_parts(sm, m: ModelSpec, B, S, N, pp, mb):
    """The compute, memory and comm seconds of a decode cycle (q = 1) that ``tpot`` returns, without
    its time: what bounds the step, read from the roofline's StepModel beside a kernel-priced
    one (whose tables price the time). The same expressions as ``tpot``'s (identical numbers);
    the mean-of-max roof and the cycle are not evaluated. Dict of arrays [s]."""
    mbs = microbatches(pp, B, mb)
    Bm = B / mbs
    _, cmp, mem = step_parts(sm, m, Bm, S, N, roof=False)
    comm = sm.comm_s(sm.graph_tokens(Bm, Bm))
    f = parallel.stage_share(m.num_layers, pp)
    return dict(compute_s=mbs * cmp * f, memory_s=mbs * mem * f, comm_s=mbs * comm)


def batch_star(sm, m: ModelSpec, S, N):
    """B*: the decode batch at which a step's total compute time reaches its memory time, at the
    mid-decode context [sequences]; inf if never.

    Dense: compute B x, memory w + B y meet at B* = w / (x - y) (``latency.batch_star``).
    MoE: the experts touched grow with B, so B* is found by bisection on log2 B in [0, 30]
    (40 halvings, vectorised); inf when compute is still below memory at 2^30.
    """
    if not m.is_moe:
        _, c1, m1 = step_parts(sm, m, 1.0, S, N)
        w = sm.dense_weight_s
        return latency.batch_star(w, m1 - w, c1)

    def gap(b):
        _, c, mem = step_parts(sm, m, b, S, N)
        return c - mem

    shape = np.broadcast(np.asarray(S), np.asarray(sm.dense_weight_s)).shape
    lo, hi = np.zeros(shape), np.full(shape, 30.0)
    never = gap(2.0 ** hi) < 0
    first = gap(np.ones(shape)) >= 0
    for _ in range(40):
        mid = (lo + hi) / 2
        up = gap(2.0 ** mid) >= 0
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    return np.where(never, np.inf, np.where(first, 1.0, 2.0 ** hi))


def batch_star_matmul(sm, m: ModelSpec):
    """B* of the dense matmuls alone [sequences]: the batch at which streaming the non-expert
    weights (w) stops dominating their FLOPs: B x = w + B a  ->  B* = w / (x - a), with x the
    dense FLOP seconds per sequence (body + LM head) and a its activation traffic. The classic
    "ridge" batch, blind to KV reads (which can keep decode memory-bound at any batch)."""
    x = sm.flops_per_token - sm.expert_flops_per_token + sm.flops_per_logit
    return latency.batch_star(sm.dense_weight_s, sm.act_s_per_token, x)

