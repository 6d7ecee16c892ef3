"""Step-time functions of the event loop from the step model: one iteration's time for its exact
batch composition, a run of k pure decode steps priced as a line in the attended positions where
the step model is provably linear (``decode_line``), and swap preemption's transfer rate.

Both are ``engine.analytical.step.StepModel`` prices (the pass price both engines use), with an
optional ``noise`` callable (array of step times [s] -> array, its own seeded generator).
"""

from typing import Callable

import numpy as np

from engine.analytical.step import StepModel

Noise = Callable[[np.ndarray], np.ndarray]

#: Per-sequence contexts at which a decode step's time is probed for linearity in attn_pairs.
_PROBE_CTX = np.array([1.0, 64.0, 1024.0, 16384.0, 262144.0, 4194304.0])


def decode_line(sm: StepModel, batch: int):
    """(a, b, p_max) with ``sm.time(B, B, decode_seqs=B, decode_ctx=P) = a + b P`` for
    P <= p_max, or None.

    For a fixed batch B a decode step's time is a convex, piecewise-linear function of the
    attended positions P (sums of max(compute, memory) of affine terms, and the compute/
    communication overlap is convex in them). A convex function that meets its chord at an
    interior point is linear on the whole interval, so agreement of the probes with the line
    through the end points (to 1e-9) proves it. Then a run of k decode steps costs a few vector
    operations instead of a StepModel call. (Sliding windows bend the line at P = B W: None.)
    """
    B = float(batch)
    return probe_line(lambda P: sm.time(B, B, decode_seqs=B, decode_ctx=P), B)


def probe_line(f, batch: float):
    """(a, b, p_max) with f(P) = a + b P for P <= p_max, proven on the probes B x _PROBE_CTX
    (``decode_line``; f convex piecewise-linear in P), or None: ``probe_lines`` of one batch size."""
    return probe_lines(lambda _B, P: f(P), batch, 1)[0]


#: batch sizes whose lines ``line_memo`` proves together: 1-64, 65-128, ...
LINE_BLOCK = 64


def probe_lines(f, lo: int, m: int) -> list:
    """For each batch size B = lo, ..., lo + m - 1: (a, b, p_max) with f(B, P) = a + b P for
    P <= p_max, or None. The line through the end probes P = B x _PROBE_CTX[0] and [-1], proven by
    every probe agreeing with it to 1e-9 (f convex piecewise-linear in P: ``decode_line``). One
    evaluation of ``f`` on flat arrays of every batch's probes (B repeated) and row-wise float64
    arithmetic: numpy's per-call cost once per block instead of once per batch size."""
    Bs = np.arange(lo, lo + m, dtype=np.float64)
    P = Bs[:, None] * _PROBE_CTX
    y = np.asarray(f(np.repeat(Bs, len(_PROBE_CTX)), P.ravel()), dtype=np.float64).reshape(P.shape)
    b = (y[:, -1] - y[:, 0]) / (P[:, -1] - P[:, 0])
    a = y[:, 0] - b * P[:, 0]
    ok = np.isclose(a[:, None] + b[:, None] * P, y, rtol=1e-9, atol=0.0).all(axis=1)
    return [(float(a[i]), float(b[i]), float(P[i, -1])) if ok[i] else None for i in range(m)]


def line_memo(f) -> Callable[[int], tuple | None]:
    """B -> ``probe_line`` of f(B, P) at batch size B (an int >= 1), memoised; a miss proves the
    lines of its whole block of LINE_BLOCK batch sizes at once (``probe_lines``): a run meets
    tens of batch sizes, each of which would otherwise cost its own step-model evaluation."""
    lines: dict = {}

    def get(B):
        line = lines.get(B, 0)
        if line == 0:
            lo = (B - 1) // LINE_BLOCK * LINE_BLOCK + 1
            for i, ln in enumerate(probe_lines(f, lo, LINE_BLOCK)):
                lines.setdefault(lo + i, ln)
            line = lines[B]
        return line
    return get


def step_functions(sm: StepModel, noise: Noise | None):
    """(one-iteration time, decode-run times) from the step model, with the noise hook. The
    one-iteration function carries ``.roof``: the same iteration's roofline-busy seconds
    (``StepModel.pass_parts``, before noise), and ``.cold``, read from the same memo, so an iteration priced
    for its time and for its energy (engine.des.features.power) evaluates its operators once."""
    pass_parts, chunk_positions, decode_positions = sm.pass_parts, sm.chunk_positions, sm.decode_positions
    # decode_line of every batch size, a block at a time
    line_of = line_memo(lambda B, P: sm.time(B, B, decode_seqs=B, decode_ctx=P))
    memo: dict = {}   # StepModel.pass_parts is pure: repeated batch compositions (same prompt lengths) hit

    def price(key, T, n, chunks, nd, dctx):
        """(time, roof, cold extra) of one iteration, memoised under ``key``."""
        if len(memo) > 1_000_000:
            memo.clear()
        LPp = LRp = 0.0
        for c, k in chunks:
            p, r = chunk_positions(c, k)
            LPp += p
            LRp += r
        x, b, c = pass_parts(float(T), float(n), LPp, LRp, decode_positions(nd, float(dctx)), float(nd))
        v = memo[key] = (float(x), float(b), float(c))
        return v

    def one(T, n, chunks, nd, dctx):
        """One iteration: T tokens, n logits, prefill ``chunks`` ((chunk, cached), ...), ``nd``
        decoding sequences attending ``dctx`` positions in all."""
        key = (T, n, chunks, nd, dctx)
        v = memo.get(key)
        if v is None:
            v = price(key, T, n, chunks, nd, dctx)
        x = v[0]
        if noise is not None:
            x = float(noise(np.array([x]))[0])
        return x

    def roof(T, n, chunks, nd, dctx):
        """The roofline-busy seconds of the iteration ``one`` prices (same arguments)."""
        key = (T, n, chunks, nd, dctx)
        v = memo.get(key)
        if v is None:
            v = price(key, T, n, chunks, nd, dctx)
        return v[1]

    def cold(T, n, chunks, nd, dctx):
        """The seconds the iteration ``one`` prices takes beyond its price when an idle engine
        starts it (``StepModel.cold``: an overlap scheduler's host work with nothing to hide
        behind; 0 for a synchronous loop), before noise."""
        key = (T, n, chunks, nd, dctx)
        v = memo.get(key)
        if v is None:
            v = price(key, T, n, chunks, nd, dctx)
        return v[2]

    one.roof = roof
    one.cold = cold

    grows: dict = {}   # B -> B j for j = 0, 1, ... (exact integers as floats), grown on demand

    def run(B, p0, k):
        """Times of k decode steps of B sequences attending p0 + B j positions in all."""
        line = line_of(B)
        Bj = grows.get(B)
        if Bj is None or k > len(Bj):
            Bj = grows[B] = float(B) * np.arange(max(k, 64, 0 if Bj is None else 2 * len(Bj)),
                                                 dtype=np.float64)
        P = p0 + Bj[:k]
        if line is not None and P[-1] <= line[2]:
            x = line[0] + line[1] * P
        else:
            x = np.asarray(sm.time(float(B), float(B), decode_seqs=float(B), decode_ctx=P),
                           dtype=np.float64)
        return noise(x) if noise is not None else x

    return one, run


def swap_s_per_token(specs, des) -> float:
    """Seconds to move one token's KV between HBM and host memory (swap preemption): per device,
    its shard of the token's KV (kv_bytes_per_token / kv_split) over its own host link at
    ``des.scheduling.swap_bandwidth_gb_s``."""
    from engine.analytical import kvcache, memory
    m, p = specs.model, specs.partition
    shard = float(kvcache.kv_split(m, p.tp, p.pp, p.sp))
    return memory.kv_bytes_per_token(m) / shard / (des.scheduling.swap_bandwidth_gb_s * 1e9)


__all__ = ["decode_line", "line_memo", "probe_line", "probe_lines", "step_functions", "swap_s_per_token"]
