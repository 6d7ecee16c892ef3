"""The price of a pass from per-kernel costs (measured or transferred): ``KernelPass``.

``engine.cost`` says what one kernel (a GEMM, an attention call, an MoE block, a collective) costs
on a chip; this module turns that into the few functions a pass needs, once per configuration,
so both engines price a pass the same way (``StepModel.kern``):

    dense(T)    sum over the body's matmuls (``params.gemm_shapes``: (name, n, k, layers)) of
                layers x gemm(m = T/sp, n, k)                                  [s]
    lm_head(n)  gemm(m = n logits, V/tp, h)                                    [s]
    experts(T)  MoE layers x moe(T/sp tokens, h, f_e, top-k, E, tp/ep, ep)      [s]
    comm(T)     the pass's TP all-reduces (``framework.allreduce``: parallel.tp_allreduce, the
                measured table of that implementation or its alpha-beta form) and EP
                all-to-alls from the measured/transferred collectives, plus SP all-gathers
                (alpha-beta), PP hand-offs excluded: ``parallel.pass_collectives``   [s]

Each is tabulated on a grid of token counts (every integer to 128, then steps of 2^(1/16),
i.e. 4.4 %, to 2^24) and read back by linear interpolation (``Curve``): the DES reads a table
instead of interpolating every kernel at every iteration, and the vectorised sweeps gather rows
per partition. Beyond the grid a curve continues along its last segment (time linear in tokens).

Attention is priced per layer by lines fitted to the kernel costs (weighted least squares on
relative error, non-negative coefficients; the fit's median error is stated as an assumption):
    prefill (batch b of s tokens from scratch)  pf + pt b s + pp b s(s+1)/2
    decode  (b sequences at context c)          df + ds b + dp b c
so a pass's attention stays a function of its layer aggregates (``StepModel.attention``): floors
once per layer per pass, pairs and positions summed over the batch. Heads are per GPU (nh/tp,
max(nkv/tp, 1) KV heads); sequence parallelism divides tokens, pairs and positions by sp.
"""

import hashlib
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.analytical import parallel
from engine.analytical.params import gemm_shapes, layer_split
from engine.errors import SpecError
from engine.persist import JsonCache
from engine.result import Assumption
from engine.spec import Specs

#: Token counts the tables hold: 0..128 exactly, then a geometric grid of ratio 2^(1/16) to 2^24.
#: (sorted distinct values, as np.unique gives them; np.unique would import numpy.ma, ~0.01 CPU-s
#: of a process that needs nothing else of it)
GRID = np.array(sorted(set(np.concatenate([np.arange(0, 129, dtype=float),
                                           np.round(2.0 ** (np.arange(7 * 16, 24 * 16 + 1) / 16.0))]).tolist())))


@dataclass(frozen=True)
class Curve:
    """A tabulated function of a token count, one row per configuration: piecewise linear on
    ``grid`` (values ``vals[row]``), extended along the last segment beyond it. ``row`` is an int
    or an int array (one row per grid point of a vectorised sweep)."""

    grid: np.ndarray
    vals: np.ndarray      # (rows, len(grid)) [s]
    row: Any = 0
    #: the grid and the row's values as Python lists, built on the first scalar read
    _lists: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __call__(self, x):
        """The curve at ``x`` (a token count or an array of them) [s]. A Python number on a
        single row is read in plain Python (``bisect`` on the grid): the same float64
        interpolation as the array path, ~20x cheaper than numpy's per-call overhead on a
        one-element array (the DES prices one pass at a time)."""
        if x.__class__ is float or x.__class__ is int:
            if self.row.__class__ is int:
                return self._scalar(float(x))
        return self.at(self.locate(x))

    def locate(self, x):
        """(segment index, weight in it) of the token counts ``x`` on the grid: what ``at`` reads
        any curve on the same grid with (one search for the several tables a pass reads at the
        same tokens)."""
        x = np.asarray(x, dtype=float)
        g = self.grid
        j = np.clip(np.searchsorted(g, x, side="right") - 1, 0, len(g) - 2)
        g0 = g[j]
        return j, (x - g0) / (g[j + 1] - g0)

    def at(self, pos):
        """The curve at a ``locate`` result (of a curve on the same grid) [s]."""
        j, w = pos
        v0 = self.vals[self.row, j]
        return v0 + (self.vals[self.row, j + 1] - v0) * w

    def _scalar(self, x: float) -> float:
        """``__call__`` for one Python float on an integer row: bisect_right on the grid is
        numpy's ``searchsorted(side="right")``, the index clipped the same way, and the
        interpolation the same float64 operations in the same order (identical results)."""
        lists = self._lists
        if not lists:
            lists["g"] = self.grid.tolist()
            lists["v"] = self.vals[self.row].tolist()
            lists["last"] = len(lists["g"]) - 2
        g, v = lists["g"], lists["v"]
        j = bisect_right(g, x) - 1
        if j < 0:
            j = 0
        elif j > lists["last"]:
            j = lists["last"]
        g0 = g[j]
        v0 = v[j]
        return v0 + (v[j + 1] - v0) * ((x - g0) / (g[j + 1] - g0))


@dataclass(frozen=True)
class KernelPass:
    """Per-configuration kernel costs of a pass (module docstring). Attention coefficients are
    per layer, in seconds (floats or arrays of one value per sweep point)."""

    dense: Curve
    lm_head: Curve
    experts: Curve
    comm: Curve
    att_pf: Any
    att_pt: Any
    att_pp: Any
    att_df: Any
    att_ds: Any
    att_dp: Any
    source: str
    fit_error: float      # median |relative error| of the attention lines on their samples

    def expand(self, fn) -> "KernelPass":
        """The same tables with ``fn`` applied to every per-point array (the curves' row index
        and the attention coefficients), e.g. a trailing axis for a candidate search."""
        def f(v):
            return fn(v) if isinstance(v, np.ndarray) else v

        kw = {k: f(v) for k, v in self.__dict__.items() if k.startswith("att_")}
        for k in ("dense", "lm_head", "experts", "comm"):
            c = getattr(self, k)
            kw[k] = Curve(c.grid, c.vals, f(c.row))
        return KernelPass(source=self.source, fit_error=self.fit_error, **kw)


def backend(specs: Specs) -> str:
    """The operator-cost backend a job prices with (``engine.cost.registry.resolve``): the
    calibration's ``kernels`` with ``auto`` meaning roofline when the framework names no kernel
    tables (measured or transfer otherwise - ``engine.cost`` decides and names it). Raises SpecError
    for measured/transfer/anchored when the framework names none."""
    from engine.cost import resolve
    return resolve(specs.calibration.kernels, specs.framework.kernel_tables)


def kernel_model(specs: Specs):
    """The ``engine.cost`` model of the job's chip, framework and backend, one registry for all
    (the roofline's has ``closed_form``: the pass is then StepModel's closed form); transfer curves
    fitted without ``calibration.transfer_exclude``."""
    from engine.cost import kernel_model as km
    return km(specs.hardware, specs.framework.kernel_tables, backend(specs),
              tuple(specs.calibration.transfer_exclude))


#: The fits' results across processes (engine.persist), keyed by the exact bytes of their inputs:
#: a run whose kernel tables were fitted before does not import scipy.optimize (~0.1-0.6 CPU-s
#: of a process here). Stamped with scipy's installed copy and this module's source.
_FITS = JsonCache("attention-fits", packages=("scipy",), sources=(Path(__file__).resolve(),))


def _fit_lines(cols, t):
    """Non-negative least squares of t on the columns, weighted by 1/t (relative error); returns
    (coefficients, median |relative error|). The same inputs (byte for byte) give the stored
    result of their first fit (``_FITS``)."""
    A = np.column_stack(cols) / t[:, None]
    h = hashlib.sha256(np.ascontiguousarray(A).tobytes())
    h.update(np.ascontiguousarray(t).tobytes())
    key = f"{A.shape[0]}x{A.shape[1]}:{h.hexdigest()}"
    hit = _FITS.get(key)
    if hit is not None and len(hit) == A.shape[1] + 1:
        return np.array(hit[:-1], dtype=np.float64), float(hit[-1])
    from scipy.optimize import nnls

    coef, _ = nnls(A, np.ones_like(t))
    pred = np.column_stack(cols) @ coef
    err = float(np.median(np.abs(pred / t - 1.0)))
    _FITS.put(key, [float(c) for c in coef] + [err])
    return coef, err


#: Attention samples: batches and lengths where the lines are fitted (serving shapes).
_PF_B = np.array([1, 2, 4, 8, 16], dtype=float)
_PF_S = 2.0 ** np.arange(4, 16)            # 16 .. 32k tokens
_DC_B = 2.0 ** np.arange(0, 9)             # 1 .. 256 sequences
_DC_C = 2.0 ** np.arange(6, 18)            # 64 .. 128k positions


def _attention(km, m, tp: int, sp: int):
    """(pf, pt, pp, df, ds, dp, fit error) per layer for heads per GPU (module docstring)."""
    nh = m.num_heads // tp
    b, s = np.meshgrid(_PF_B, _PF_S)
    keep = b * s <= 65536
    b, s = b[keep], s[keep]
    bd, c = (v.ravel() for v in np.meshgrid(_DC_B, _DC_C))
    keep_d = bd * c <= 2 ** 22
    bd, c = bd[keep_d], c[keep_d]
    if m.attention == "mla":
        tp_ = np.asarray(km.mla_prefill_s(b, s, nh, m.kv_dtype), dtype=float)
        td = np.asarray(km.mla_decode_s(bd, c, nh, m.kv_dtype), dtype=float)
    else:
        nkv = max(m.num_kv_heads // tp, 1)
        tp_ = np.asarray(km.attn_prefill_s(b, s, nh, nkv, m.head_dim, m.kv_dtype), dtype=float)
        td = np.asarray(km.attn_decode_s(bd, c, nh, nkv, m.head_dim, m.kv_dtype), dtype=float)
    (pf, pt, pp), e1 = _fit_lines([np.ones_like(b), b * s, b * s * (s + 1) / 2], tp_)
    (df, ds, dp), e2 = _fit_lines([np.ones_like(bd), bd, bd * c], td)
    return pf, pt / sp, pp / sp, df, ds, dp / sp, max(e1, e2)


def _row(specs: Specs, km, tp: int, ep: int, sp: int, memo: dict | None = None):
    """Tabulated dense, LM head, experts and comm, and the attention lines, of one partition.
    ``memo`` (one dict for the rows of one kernel model) keeps the parts that depend on (tp, sp)
    alone - the dense matmuls, the LM head, the attention lines - for the partitions that differ
    only in ep: the same pure functions of the same inputs, computed once."""
    m = specs.model
    dt = km.dtype_for(m)
    T = GRID / sp
    hit = None if memo is None else memo.get((tp, sp))
    if hit is None:
        dense = np.zeros_like(GRID)
        for _, n, k, layers in gemm_shapes(m, tp):
            dense += layers * np.asarray(km.gemm_s(T, n, k, dt), dtype=float)
        dense[0] = 0.0
        lm = np.asarray(km.gemm_s(GRID, -(-m.vocab_size // tp), m.hidden_size, dt), dtype=float)
        lm[0] = 0.0
        hit = (dense, lm, _attention(km, m, tp, sp))
        if memo is not None:
            memo[(tp, sp)] = hit
    dense, lm, att = hit
    _, l_moe = layer_split(m)
    experts = np.zeros_like(GRID)
    if l_moe:
        experts = l_moe * np.asarray(km.moe_s(T, m.hidden_size, m.expert_ffn_size,
                                              m.experts_per_token, m.num_experts,
                                              max(tp // ep, 1), ep, dt), dtype=float)
        experts[0] = 0.0
    total, hops = parallel.pass_collectives(
        specs, tp, 1, ep, sp, "ring",
        allreduce=parallel.tp_allreduce(specs, km),
        alltoall=lambda b, n: km.alltoall_s(b, int(n)) if n > 1 else 0.0 * b)
    comm = np.asarray(total(GRID) - hops(GRID), dtype=float) * np.ones_like(GRID)
    comm[0] = 0.0
    return dense, lm, experts, comm, att


_CACHE: dict = {}


def _cached(specs: Specs, parts: tuple):
    """(kernel model, table rows) per chip, model, links, backend and partitions; a small
    process-wide memo (tables cost milliseconds to build, a sweep asks for them repeatedly)."""
    key = (specs.hardware, specs.model, specs.calibration.comm_efficiency,
           specs.framework.kernel_tables, specs.framework.allreduce, backend(specs),
           specs.calibration.transfer_exclude, parts)
    hit = _CACHE.get(key)
    if hit is None:
        if len(_CACHE) > 64:
            _CACHE.clear()
        km = kernel_model(specs)
        memo: dict = {}
        hit = _CACHE[key] = (km, [_row(specs, km, *p, memo=memo) for p in parts])
    return hit


def _distinct_rows(*cols):
    """(distinct rows of the integer columns in lexicographic order, index of each row's
    distinct row): ``np.unique(np.stack(cols, 1), axis=0, return_inverse=True)``, computed on
    one packed int64 key per row (column i's value minus its minimum, in mixed radix): a 1-D
    unique of int64 sorts ~40x faster than numpy's row-wise unique (a structured-dtype sort),
    and the packed order is the rows' lexicographic order. Columns whose spans do not fit 63 bits
    together take numpy's row-wise path."""
    lo = [int(c.min()) if c.size else 0 for c in cols]
    span = [int(c.max()) - m + 1 if c.size else 1 for c, m in zip(cols, lo)]
    total = 1
    for s in span:
        total *= s
    if total >= 2 ** 62:
        return np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
    key = np.zeros(cols[0].shape, dtype=np.int64)
    for c, m, s in zip(cols, lo, span):
        key = key * s + (c.astype(np.int64) - m)
    u, inv = np.unique(key, return_inverse=True)
    rows = np.empty((u.size, len(cols)), dtype=np.int64)
    for i in range(len(cols) - 1, -1, -1):
        u, rows[:, i] = np.divmod(u, span[i])
        rows[:, i] += lo[i]
    return rows, inv


def build(specs: Specs, tp, ep, sp) -> tuple[KernelPass | None, list]:
    """KernelPass of the job's kernel model for the partitions (scalars or arrays broadcast: one
    table row per distinct (tp, ep, sp)), and its assumptions; (None, []) for the roofline, whose
    passes StepModel prices in closed form (``KernelModel.closed_form``)."""
    if getattr(kernel_model(specs), "closed_form", False):
        return None, []
    tp, ep, sp = np.broadcast_arrays(*(np.asarray(v, dtype=int) for v in (tp, ep, sp)))
    parts, inv = _distinct_rows(tp.ravel(), ep.ravel(), sp.ravel())
    km, rows = _cached(specs, tuple(tuple(int(v) for v in p) for p in parts))
    row = int(inv.ravel()[0]) if tp.ndim == 0 else inv.reshape(tp.shape)

    def curve(i):
        return Curve(GRID, np.stack([r[i] for r in rows]), row)

    att = np.array([r[4] for r in rows])        # (rows, 7)
    pick = (lambda j: float(att[0, j])) if tp.ndim == 0 else (lambda j: att[row, j])
    kp = KernelPass(dense=curve(0), lm_head=curve(1), experts=curve(2), comm=curve(3),
                    att_pf=pick(0), att_pt=pick(1), att_pp=pick(2), att_df=pick(3),
                    att_ds=pick(4), att_dp=pick(5), source=km.name,
                    fit_error=float(att[:, 6].max()))
    notes = list(getattr(km, "assumptions", ())) + [
        Assumption("operator costs", km.name,
                   "per-kernel times tabulated over the pass's tokens (engine.analytical.kernels); "
                   f"GEMMs in {km.dtype_for(specs.model)}; element-wise kernels (norms, rotary, "
                   "gated activation: traffic.elementwise_elems_per_token), SP all-gathers and PP "
                   "hand-offs at the roofline"),
        Assumption("attention lines", f"median |error| {kp.fit_error:.1%}",
                   "per-layer floor + per-token/sequence + per-pair/position lines fitted to the "
                   "attention kernels at serving shapes")]
    return kp, notes
