"""Sliding-window attention positions: the one home of their formulas. Positions; vectorised.

A layer with window W (Mistral 7B, arXiv 2310.06825; gpt-oss's "sliding_attention" layers) lets
the query at position i (1-based, causal: it could see positions 1..i) attend only the last
min(i, W) of them, and keeps only the last min(n, W) tokens' K/V rows of an n-token sequence.
W = 0 stands for a full-attention layer: every min(x, 0) below reads x.

    kept(n, W)       = min(n, W)       K/V rows a windowed layer keeps for an n-token sequence,
                                       and the positions one decode query at context n attends
    pairs(a, b, W)   = sum_{i=a}^{b} min(i, W)
                     = (t - a + 1)(a + t)/2 + W (b - max(t, a - 1)),  t = max(min(b, W), a - 1)
                       (the i <= W part is an arithmetic series a..t; each of the remaining
                       b - t terms contributes W); a prefill chunk of s tokens after c cached
                       attends pairs(c + 1, c + s, W) [full layer: s c + s(s + 1)/2]
    decode_kept(C, Bd, W) = min(C, Bd W)
                       the positions Bd decode queries with contexts summing to C attend:
                       sum_j min(c_j, W), exact when all or none of the c_j exceed W (Bd W or C)
    mid-context form:  mean over contexts c in [c0, c1] of min(c, W) taken as kept(c_mid, W),
                       c_mid = (c0 + c1)/2: exact when the window lies outside [c0, c1] (min is
                       then linear in c); otherwise an upper bound (min is concave: Jensen)
    body chunks:       nb chunks of C tokens after i C cached (i = 0..nb-1) attend
                       sum_i pairs(iC + 1, (i+1) C, W) = pairs(1, nb C, W) (the ranges tile
                       1..nb C), and read kept(i C, W) cached rows each, whose mean is taken as
                       kept((nb - 1) C / 2, W) (the mid-context form)

A model's layers come in groups (``ModelSpec.layer_groups``: kind, count, window, KV bytes);
the ``*_positions`` aggregates sum count x positions over them (layer-positions, layer-pairs).
Integers in, exact (every term is an integer or half-integer far below 2^53 in float64).
"""

import numpy as np


def kept(n, w):
    """min(n, W): K/V rows a layer of window ``w`` keeps for an ``n``-token sequence (w = 0:
    full attention, n); also the positions a decode query at context n attends."""
    if not w:
        return n
    return min(n, w) if isinstance(n, (int, float)) else np.minimum(n, w)


def pairs(a, b, w):
    """sum_{i=a}^{b} min(i, W) for integers a <= b (module docstring; arrays broadcast). Python
    ints in: a Python float out (the discrete-event engine's per-iteration path)."""
    if type(a) is int and type(b) is int and type(w) is int:
        top = max(min(b, w), a - 1)        # last index i <= W in a..b (a - 1 if none)
        return (top - a + 1) * (a + top) / 2.0 + w * max(b - max(top, a - 1), 0)
    a, b, w = (np.asarray(v, dtype=float) for v in (a, b, w))
    top = np.maximum(np.minimum(b, w), a - 1)
    low = (top - a + 1) * (a + top) / 2.0  # sum a..top
    return low + w * np.maximum(b - np.maximum(top, a - 1), 0.0)


def chunk_pairs(s, c, w):
    """(query, position) pairs of a prefill chunk of ``s`` tokens after ``c`` cached in one layer
    of window ``w``: pairs(c + 1, c + s, W); full layer (w = 0) s c + s(s + 1)/2."""
    if not w:
        return s * c + s * (s + 1) / 2.0
    return pairs(c + 1, c + s, w)


def decode_kept(C, Bd, w):
    """Positions ``Bd`` decode queries with contexts summing to ``C`` attend in one layer of
    window ``w``: min(C, Bd W) (exact when all or none of the contexts exceed W); w = 0: C."""
    if not w:
        return C
    return min(C, Bd * w) if isinstance(C, (int, float)) and isinstance(Bd, (int, float)) else np.minimum(C, Bd * w)


def full_layers(groups) -> int:
    """Layers of ``groups`` (``ModelSpec.layer_groups``) that attend every position."""
    return sum(g.count for g in groups if not g.window)


def windowed(groups) -> list:
    """(count, window) of the groups with a sliding window."""
    return [(g.count, g.window) for g in groups if g.window]


def kept_positions(groups, n):
    """Layer-positions a sequence of ``n`` tokens keeps: sum over groups of count x kept(n, W)
    [(L - Lw) n + Lw min(n, W) with one windowed group]. (The three group sums are plain loops:
    the discrete-event engine calls them per iteration.)"""
    tot = 0
    for g in groups:
        tot = tot + g.count * (kept(n, g.window) if g.window else n)
    return tot


def chunk_positions(groups, s, c):
    """Layer-pairs of a prefill chunk of ``s`` tokens after ``c`` cached: sum over groups of
    count x chunk_pairs(s, c, W)."""
    full = s * c + s * (s + 1) / 2.0
    tot = 0
    for g in groups:
        tot = tot + g.count * (pairs(c + 1, c + s, g.window) if g.window else full)
    return tot


def decode_positions(groups, Bd, C):
    """Layer-positions of ``Bd`` decode queries attending ``C`` positions in all: sum over groups
    of count x decode_kept(C, Bd, W) [(L - Lw) C + Lw min(C, Bd W)]."""
    tot = 0
    for g in groups:
        tot = tot + g.count * (decode_kept(C, Bd, g.window) if g.window else C)
    return tot


def mid_windowed_positions(groups, c_mid):
    """Layer-positions the windowed groups attend per decode query at the mid context (the
    mid-context form): sum over windowed groups of count x min(c_mid, W); 0.0 without windows."""
    w = windowed(groups)
    return sum(n * np.minimum(c_mid, W) for n, W in w) if w else 0.0
