"""KernelModel: the time of one operator (GEMM, MoE block, attention, MLA, collective) on one chip
under one serving framework, from measured kernel tables or from transfer curves.

Backends (``engine.cost.registry``: ``kernel_model(hardware, framework, backend)`` looks the name up
in one registry; ``roofline`` is engine.cost.roofline):

* ``measured``: interpolate the chip's own measured tables (engine/cost/data/tables.npz) in log
  space (engine.cost.grid): exact at measured grid points (those not slower than a larger size,
  see below), piecewise power law between them,
  clamped below the smallest measured size (launch floor) and proportional to size above the
  largest (GEMM m, n, k; batch; decode context; collective bytes; prefill length squared), and
  made non-decreasing in every size (grid.padded_min).
  Shapes the tables do not hold (another head configuration or head_dim, another MoE
  configuration, more GPUs than 8) take the nearest measured shape and scale it by the ratio of
  the transfer model's times for the two shapes on this chip (its own peaks, fitted curves).
  When the HardwareSpec's peaks differ from the sheet the tables were measured on (a what-if such
  as ``hardware=h100_sxm hardware.hbm_bandwidth=8TB/s``), the measured times are multiplied by the
  ratio of the transfer model's times on the given figures and on the measured chip's figures.
* ``transfer``: the fitted roofline-efficiency curves of engine.cost.transfer applied to this
  chip's spec-sheet peaks (hardware.peak_flops, hbm_bandwidth_bytes_s, scaleup_bandwidth_bytes_s).
* ``auto``: measured when the chip names a table set holding this framework, else transfer.
* ``anchored`` (an addition to the three above): the measured backend of the nearest measured chip
  (in log dense bf16 peak and log HBM bandwidth; ``exclude`` honoured) times the ratio of the
  transfer model's times on this chip and on that one:
  t = t_measured(anchor) x t_transfer(this chip) / t_transfer(anchor). It keeps the anchor's own
  efficiency level (e.g. Hopper's higher share of bf16 peak) and moves it by the spec-sheet ratios.

All times are seconds per call on one GPU; token / batch / context / byte arguments may be numpy
arrays (the result broadcasts), shape arguments are Python ints; a zero token / batch / context /
byte count gives 0 s.
"""

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.cost import derive, grid, shapes, transfer
from engine.errors import SpecError
from engine.result import Assumption
from engine.spec import HardwareSpec

DATA = Path(__file__).resolve().parent / "data"
FRAMEWORKS = derive.FRAMEWORKS
GEMM_DTYPES = tuple(shapes.GEMM_DTYPES)
#: Measured-table dtype to use when a chip lacks one: nearest in bytes per weight and math rate.
GEMM_SUBSTITUTES = {
    "bf16": ("bf16", "fp16"), "fp16": ("fp16", "bf16"),
    "fp8": ("fp8", "fp8_block", "bf16"), "fp8_block": ("fp8_block", "fp8", "bf16"),
    "int8_wo": ("int8_wo", "fp8", "fp8_block", "bf16"),
    "int4_wo": ("int4_wo", "int8_wo", "nvfp4", "fp8", "fp8_block", "bf16"),
    "nvfp4": ("nvfp4", "fp8", "fp8_block", "bf16"),
}
MOE_SUBSTITUTES = {
    "bf16": ("bf16",), "fp16": ("bf16",), "fp8": ("fp8", "fp8_block", "bf16"),
    "fp8_block": ("fp8_block", "fp8", "bf16"), "int8_wo": ("fp8", "fp8_block", "bf16"),
    "int4_wo": ("int4_wo", "mxfp4_w4a16", "nvfp4", "fp8_block", "fp8", "bf16"),
    "nvfp4": ("nvfp4", "mxfp4_w4a8", "fp8", "fp8_block", "bf16"),
    "mxfp4_w4a16": ("mxfp4_w4a16", "int4_wo", "nvfp4", "fp8_block", "bf16"),
    "mxfp4_w4a8": ("mxfp4_w4a8", "nvfp4", "mxfp4_w4a16", "fp8", "fp8_block", "bf16"),
}
#: Where an op's tables are missing for the chosen framework, the other frameworks in this order.
FRAMEWORK_FALLBACK = ("trtllm", "sglang", "vllm")


@functools.lru_cache(maxsize=1)
def shipped_tables() -> dict:
    """The compact tables shipped in engine/cost/data/tables.npz (see engine.cost.derive), each
    array read on its first use (derive.LazyTables)."""
    return derive.LazyTables(DATA / "tables.npz")


@functools.lru_cache(maxsize=1)
def shipped_fits() -> dict:
    """The transfer-curve parameters shipped in engine/cost/data/transfer.json (per framework)."""
    return json.loads((DATA / "transfer.json").read_text())


@functools.lru_cache(maxsize=16)
def fits_for(framework: str, exclude: tuple = ()) -> dict:
    """Transfer fits for a framework: the shipped ones, or refitted without the ``exclude`` sets."""
    if not exclude:
        return shipped_fits()["fits"][framework]
    return transfer.fit_all(shipped_tables(), framework, exclude)


@functools.lru_cache(maxsize=512)
def _filled(key: str, axes: tuple, slopes: tuple, index: int | None = None):
    """(log axes, filled log latency) of one stored table (or one slice of it)."""
    t = shipped_tables()
    a = t[key] if index is None else t[key][index]
    lax = tuple(np.log(np.asarray(t[f"axes/{n}"], dtype=float)) for n in axes)
    return lax, grid.padded_min(grid.fill_missing(np.log(a.astype(np.float64)), lax, slopes), slopes)


def _lookup(key, axes, slopes, q, index=None):
    lax, lv = _filled(key, axes, slopes, index)
    return np.exp(grid.interp(lax, lv, tuple(np.log(np.maximum(np.asarray(x, dtype=float), 1e-30)) for x in q),
                              slopes))


def tables_for(hardware: HardwareSpec) -> str | None:
    """The measured table set a hardware config names (``hardware.kernel_tables``), or None."""
    return hardware.kernel_tables or None


def _peaks_of(hardware: HardwareSpec) -> dict:
    pk = {}
    for p in ("bf16", "fp8", "fp4", "int8"):
        try:
            pk[p] = hardware.peak_flops(p)
        except SpecError:
            pk[p] = None
    pk["hbm_bandwidth"] = hardware.hbm_bandwidth_bytes_s
    pk["scaleup_bandwidth"] = hardware.scaleup_bandwidth_bytes_s or hardware.scaleout_bandwidth_bytes_s
    return pk


def _check_dtype(field_name: str, value, allowed) -> None:
    if value not in allowed:
        raise SpecError(field_name, value, "one of " + ", ".join(allowed))


class _Transfer:
    """Transfer backend: fitted curves x this chip's peaks."""

    def __init__(self, peaks: dict, fits: dict, hw_name: str):
        self.pk, self.fits, self.hw_name = peaks, fits, hw_name
        self.notes = []
        self.gemm_class = {}
        for dt in GEMM_DTYPES:
            cls = "bf16" if dt == "fp16" else dt
            chain = {"int4_wo": ("int4_wo", "int8_wo", "bf16"), "int8_wo": ("int8_wo", "bf16"),
                     "nvfp4": ("nvfp4", "fp8", "bf16"), "fp8_block": ("fp8_block", "fp8", "bf16"),
                     "fp8": ("fp8", "bf16")}.get(cls, (cls,))
            use = next((c for c in chain if c in fits), None)
            self.gemm_class[dt] = use
            if use != cls and dt != "fp16":
                self.notes.append(Assumption(f"transfer gemm {dt}", f"curve of {use}",
                                             f"no usable {dt} GEMM tables among the fitted chips for this framework"))
        for prec in ("fp8", "fp4"):
            if peaks.get(prec) is None:
                self.notes.append(Assumption(f"peak {prec}", "next wider precision's peak",
                                             f"{hw_name} has no {prec} peak on its sheet: {prec} kernels run at the "
                                             "fp8 / bf16 rate"))

    def _op(self, cls, Tc, Tb, sc, sb, sx=1.0):
        th = self.fits[cls]["params"]
        return transfer.op_time(th, Tc, Tb, np.maximum(sc, 1e-9), np.maximum(sb, 1e-9), np.maximum(sx, 1e-9))

    def gemm_s(self, m, n, k, dtype):
        cls = self.gemm_class[dtype]
        F, Q = shapes.gemm(m, n, k, dtype)
        P = transfer.peak(self.pk, shapes.GEMM_DTYPES[dtype][0])
        return self._op(cls, F / P, Q / self.pk["hbm_bandwidth"], np.asarray(m, float), float(n) * k)

    def moe_s(self, tokens, hidden, inter, topk, num_experts, tp, ep, dtype):
        Tc, Tb, sc, sb = transfer.moe_ideal(self.pk, tokens, hidden, inter, topk, num_experts, tp, ep, dtype)
        return self._op("moe", Tc, Tb, sc, sb)

    def attn_prefill_s(self, batch, isl, heads, kv_heads, head_dim, kv_dtype):
        F, Q = shapes.attn_prefill(batch, isl, heads, kv_heads, head_dim, kv_dtype)
        b, s = np.asarray(batch, float), np.asarray(isl, float)
        return self._op("attn_prefill", F / self.pk["bf16"], Q / self.pk["hbm_bandwidth"], s, b * s)

    def attn_decode_s(self, batch, ctx, heads, kv_heads, head_dim, kv_dtype):
        F, Q = shapes.attn_decode(batch, ctx, heads, kv_heads, head_dim, kv_dtype)
        b, c = np.asarray(batch, float), np.asarray(ctx, float)
        return self._op("attn_decode", F / self.pk["bf16"], Q / self.pk["hbm_bandwidth"], c, b * kv_heads, c)

    def mla_prefill_s(self, batch, isl, heads, dtype):
        F, Q = shapes.mla_prefill(batch, isl, heads, dtype)
        b, s = np.asarray(batch, float), np.asarray(isl, float)
        return self._op("mla_prefill", F / self.pk["bf16"], Q / self.pk["hbm_bandwidth"], s, b * s)

    def mla_decode_s(self, batch, ctx, heads, dtype):
        F, Q = shapes.mla_decode(batch, ctx, heads, dtype)
        b, c = np.asarray(batch, float), np.asarray(ctx, float)
        return self._op("mla_decode", F / self.pk["bf16"], Q / self.pk["hbm_bandwidth"], c, b * c)

    def comm_s(self, op, message_bytes, n_gpus):
        s = np.asarray(message_bytes, float)
        if n_gpus <= 1:
            return np.zeros_like(s)
        link = shapes.scaleup_link(self.pk, self.hw_name, op, n_gpus)
        th = self.fits[op]["params"]
        return transfer.comm_time(th, shapes.collective_bus_bytes(op, s, n_gpus), n_gpus, link)


class _Anchored:
    """Nearest measured chip x transfer-model ratio (see the module docstring)."""

    def __init__(self, anchor, tr_target: _Transfer, tr_anchor: _Transfer):
        self.a, self.tt, self.ta = anchor, tr_target, tr_anchor

    def _r(self, name, *args):
        return getattr(self.a, name)(*args) * getattr(self.tt, name)(*args) / getattr(self.ta, name)(*args)

    def gemm_s(self, *a):
        return self._r("gemm_s", *a)

    def moe_s(self, *a):
        return self._r("moe_s", *a)

    def attn_prefill_s(self, *a):
        return self._r("attn_prefill_s", *a)

    def attn_decode_s(self, *a):
        return self._r("attn_decode_s", *a)

    def mla_prefill_s(self, *a):
        return self._r("mla_prefill_s", *a)

    def mla_decode_s(self, *a):
        return self._r("mla_decode_s", *a)

    def comm_keys(self, op, table=None) -> list:
        return self.a.comm_keys(op, table)

    def comm_s(self, op, message_bytes, n_gpus, table=None):
        if n_gpus <= 1:
            return np.zeros_like(np.asarray(message_bytes, float))
        return (self.a.comm_s(op, message_bytes, n_gpus, table) * self.tt.comm_s(op, message_bytes, n_gpus)
                / self.ta.comm_s(op, message_bytes, n_gpus))


def _nearest_set(pk: dict, framework: str, exclude: tuple) -> str | None:
    """The measured table set (with this framework's tables) nearest in log bf16 peak and log HBM
    bandwidth to the peaks ``pk``."""
    t = shipped_tables()
    best, dist = None, np.inf
    for c in _known_sets():
        if c in exclude or not any(k.startswith(f"{c}/{framework}/") for k in t):
            continue
        q = transfer.chip_peaks(t, c)
        d = np.log(q["bf16"] / pk["bf16"]) ** 2 + np.log(q["hbm_bandwidth"] / pk["hbm_bandwidth"]) ** 2
        if d < dist:
            best, dist = c, d
    return best


class _Measured:
    """Measured backend: interpolation in this chip's tables; the transfer model for scaling."""

    def __init__(self, chip: str, fw: str, tr: _Transfer):
        self.chip, self.fw, self.tr = chip, fw, tr
        t = shipped_tables()
        self.t = t
        self.notes = []
        order = (fw,) + tuple(f for f in FRAMEWORK_FALLBACK if f != fw)
        self.src = {}
        self._moe_cache = {}
        for op in ("gemm", "attn_prefill", "attn_decode", "mla_prefill", "mla_decode", "moe", "custom_allreduce"):
            use = next((f for f in order if any(k.startswith(f"{chip}/{f}/{op}/") or k == f"{chip}/{f}/{op}"
                                                for k in t if not k.endswith("/version"))), None)
            self.src[op] = use
            if use is None:
                self.notes.append(Assumption(f"kernels {op}", "transfer backend",
                                             f"no measured {op} tables for {chip} in any framework"))
            elif use != fw:
                self.notes.append(Assumption(f"kernels {op}", f"{chip}/{use} tables",
                                             f"{chip} has no {op} tables measured under {fw}"))
        gf = self.src["gemm"]
        self.gemm_table = {}
        for dt in GEMM_DTYPES:
            exact = next((f for f in order for c in GEMM_SUBSTITUTES[dt][:1] + (("bf16",) if dt == "fp16" else ())
                          if f"{chip}/{f}/gemm/{c}" in t and (f, c) not in transfer.SUSPECT), None)
            if exact is not None:
                use = (exact, dt if f"{chip}/{exact}/gemm/{dt}" in t else "bf16")
            elif gf is not None:
                c = next((c for c in GEMM_SUBSTITUTES[dt] if f"{chip}/{gf}/gemm/{c}" in t
                          and (gf, c) not in transfer.SUSPECT), None)
                use = (gf, c) if c else None
            else:
                use = None
            self.gemm_table[dt] = use
            if use is not None and use[1] != dt and not (dt == "fp16" and use[1] == "bf16"):
                self.notes.append(Assumption(f"gemm {dt} on {chip}", f"{use[0]} {use[1]} table",
                                             f"{dt} GEMMs were not measured on {chip}; nearest measured dtype"))
            elif use is not None and (fw, dt) in transfer.SUSPECT:
                self.notes.append(Assumption(f"gemm {dt} on {chip}", f"{use[0]} {use[1]} table",
                                             transfer.SUSPECT[(fw, dt)]))
            elif use is not None and use[0] != gf:
                self.notes.append(Assumption(f"gemm {dt} on {chip}", f"{use[0]} {use[1]} table",
                                             f"{dt} GEMMs were measured on {chip} under {use[0]} only"))

    # -- GEMM / MoE ---------------------------------------------------------------------------
    def gemm_s(self, m, n, k, dtype):
        use = self.gemm_table[dtype]
        if use is None:
            return self.tr.gemm_s(m, n, k, dtype)
        return _lookup(f"{self.chip}/{use[0]}/gemm/{use[1]}", ("gemm/m", "gemm/n", "gemm/k"), (1.0, 1.0, 1.0),
                       (m, n, k))

    def _moe_pick(self, hidden, inter, topk, num_experts, tp, ep, dtype):
        """(key, row, exact) of the MoE curve to use, from this framework's tables on this chip
        only: an exact configuration in the asked dtype first, then an exact one in a substitute
        dtype, then the nearest configuration (scaled by the transfer ratio in ``moe_s``); None
        (the framework's transfer curve) when the framework measured no MoE here. Other
        frameworks' MoE kernels are different implementations (Triton vs CUTLASS: 2-5x apart at
        the same shape on H100), so they are no proxy for this one."""
        ck = (hidden, inter, topk, num_experts, tp, ep, dtype)
        if ck in self._moe_cache:
            return self._moe_cache[ck]
        order = [self.fw]
        chain = MOE_SUBSTITUTES[dtype]
        want = np.log([hidden, inter / tp, topk, num_experts / ep, tp, ep])
        best = None
        for fr, f in enumerate(order):
            for cr, c in enumerate(chain):
                key = f"{self.chip}/{f}/moe/{c}"
                if key not in self.t:
                    continue
                cf = self.t[key + "/configs"].astype(float)
                have = np.log(np.column_stack([cf[:, 0], cf[:, 1] / cf[:, 4], cf[:, 2], cf[:, 3] / cf[:, 5],
                                               cf[:, 4], cf[:, 5]]))
                d = np.sum(np.square(have - want) * np.array([1, 1, 1, 1, 0.25, 0.25]), axis=1)
                i = int(np.argmin(d))
                score = (d[i] > 0, cr, d[i], fr)
                if best is None or score < best[0]:
                    best = (score, key, i, d[i] == 0 and c == dtype)
        self._moe_cache[ck] = None if best is None else best[1:]
        return self._moe_cache[ck]

    def moe_s(self, tokens, hidden, inter, topk, num_experts, tp, ep, dtype):
        pick = self._moe_pick(hidden, inter, topk, num_experts, tp, ep, dtype)
        if pick is None:
            return self.tr.moe_s(tokens, hidden, inter, topk, num_experts, tp, ep, dtype)
        key, i, exact = pick
        t = _lookup(key, ("moe/tokens",), (1.0,), (tokens,), index=i)
        if exact:
            return t
        h, it, tk, e, tpi, epi = (int(x) for x in self.t[key + "/configs"][i])
        use = key.rsplit("/", 1)[1]
        ratio = (self.tr.moe_s(tokens, hidden, inter, topk, num_experts, tp, ep, dtype)
                 / self.tr.moe_s(tokens, h, it, tk, e, tpi, epi, use))
        return t * ratio

    # -- attention ----------------------------------------------------------------------------
    def _attn(self, op, batch, length, heads, kv_heads, head_dim, kv_dtype):
        f = self.src[op]
        slopes = (1.0, 2.0) if op == "attn_prefill" else (1.0, 1.0)
        tr = self.tr.attn_prefill_s if op == "attn_prefill" else self.tr.attn_decode_s
        if f is None:
            return tr(batch, length, heads, kv_heads, head_dim, kv_dtype)
        kv = "bf16" if kv_dtype == "fp16" else kv_dtype
        base = f"{self.chip}/{f}/{op}"
        kvs = [k for k in (kv, "bf16", "fp8") if any(x.startswith(f"{base}/{k}/hd") for x in self.t)]
        kv_use = kvs[0]
        hds = [h for h in (64, 128, 256) if f"{base}/{kv_use}/hd{h}" in self.t]
        hd = min(hds, key=lambda h: (abs(np.log(h / head_dim)), -h))
        key = f"{base}/{kv_use}/hd{hd}"
        combos = self.t[key + "/combos"].astype(float)
        d = (np.log(combos[:, 0] / heads) ** 2 + np.log(combos[:, 1] / kv_heads) ** 2)
        i = int(np.argmin(d))
        t = _lookup(key, (f"{op}/batch", f"{op}/len"), slopes, (batch, length), index=i)
        if d[i] == 0.0 and hd == head_dim and kv_use == kv:
            return t
        h, g = (int(x) for x in combos[i])
        return t * tr(batch, length, heads, kv_heads, head_dim, kv) / tr(batch, length, h, g, hd, kv_use)

    def attn_prefill_s(self, batch, isl, heads, kv_heads, head_dim, kv_dtype):
        return self._attn("attn_prefill", batch, isl, heads, kv_heads, head_dim, kv_dtype)

    def attn_decode_s(self, batch, ctx, heads, kv_heads, head_dim, kv_dtype):
        return self._attn("attn_decode", batch, ctx, heads, kv_heads, head_dim, kv_dtype)

    def _mla(self, op, batch, length, heads, dtype):
        f = self.src[op]
        tr = self.tr.mla_prefill_s if op == "mla_prefill" else self.tr.mla_decode_s
        kv = "bf16" if dtype in ("bf16", "fp16") else "fp8"
        if f is None:
            return tr(batch, length, heads, dtype)
        key = next((k for k in (f"{self.chip}/{f}/{op}/{kv}", f"{self.chip}/{f}/{op}/bf16") if k in self.t))
        slopes = (1.0, 1.0, 2.0) if op == "mla_prefill" else (1.0, 1.0, 1.0)
        t = _lookup(key, ("mla/heads", f"{op}/batch", f"{op}/len"), slopes, (heads, batch, length))
        if not key.endswith("/" + kv):
            t = t * tr(batch, length, heads, kv) / tr(batch, length, heads, "bf16")
        return t

    def mla_prefill_s(self, batch, isl, heads, dtype):
        return self._mla("mla_prefill", batch, isl, heads, dtype)

    def mla_decode_s(self, batch, ctx, heads, dtype):
        return self._mla("mla_decode", batch, ctx, heads, dtype)

    # -- collectives --------------------------------------------------------------------------
    def comm_keys(self, op, table=None) -> list:
        """The measured tables of a collective: NCCL's and (all-reduce) the framework's custom
        kernel; ``table`` = "nccl" | "custom" keeps that one (None: both, the faster is taken)."""
        keys = [f"{self.chip}/nccl/{op}"] if table in (None, "nccl") else []
        if op == "all_reduce" and self.src["custom_allreduce"] and table in (None, "custom"):
            keys.append(f"{self.chip}/{self.src['custom_allreduce']}/custom_allreduce")
        return [k for k in keys if k in self.t]

    def comm_s(self, op, message_bytes, n_gpus, table=None):
        s = np.asarray(message_bytes, float)
        if n_gpus <= 1:
            return np.zeros_like(s)
        keys = self.comm_keys(op, table)
        if not keys:
            return self.tr.comm_s(op, s, n_gpus)
        n_max = float(self.t["axes/comm/n_gpus"][-1])
        n_tab = min(float(n_gpus), n_max)
        t = np.fmin.reduce([_lookup(k, ("comm/n_gpus", "comm/bytes"), (0.0, 1.0), (n_tab, s)) for k in keys])
        if n_gpus > n_max:
            t = t * self.tr.comm_s(op, s, n_gpus) / self.tr.comm_s(op, s, int(n_max))
        return t


def _zero_where_empty(t, *sizes):
    """An operator with no work (0 tokens, 0 sequences, 0 context, 0 bytes) takes no time."""
    empty = np.zeros(np.shape(t), dtype=bool)
    for x in sizes:
        empty = empty | (np.asarray(x) <= 0)
    return np.where(empty, 0.0, t) if empty.any() else t


@dataclass(frozen=True)
class KernelModel:
    """Operator times (seconds per call, one GPU) from one backend; immutable.

    ``name`` says which tables or which fit; ``assumptions`` every modelling choice that changes a
    number (clamped extrapolation, dtype substitutions, framework fallbacks, transfer choices).
    """

    name: str
    assumptions: tuple
    _impl: object = field(repr=False, compare=False)
    #: True for the roofline backend: the engines price its passes in closed form (StepModel's
    #: constants: operators aggregated before the max, calibrated peaks), not from these tables.
    closed_form: bool = False

    def gemm_s(self, m, n: int, k: int, dtype: str):
        """One GEMM (m x k) @ (k x n); m = tokens in the pass (array OK). Seconds."""
        _check_dtype("gemm dtype", dtype, GEMM_DTYPES)
        return _zero_where_empty(self._impl.gemm_s(m, n, k, dtype), m)

    def moe_s(self, tokens, hidden: int, inter: int, topk: int, num_experts: int, tp: int, ep: int, dtype: str):
        """Routed-expert block of one layer for ``tokens`` tokens (gate/up/down of the chosen
        experts, expert inter size split over tp, experts over ep; balanced routing). Seconds."""
        _check_dtype("moe dtype", dtype, tuple(MOE_SUBSTITUTES))
        return _zero_where_empty(self._impl.moe_s(tokens, hidden, inter, topk, num_experts, tp, ep, dtype), tokens)

    def attn_prefill_s(self, batch, isl, heads: int, kv_heads: int, head_dim: int, kv_dtype: str):
        """Causal prefill attention of one layer: batch prompts of isl tokens from scratch, heads
        and kv_heads per GPU. Seconds."""
        _check_dtype("model.kv_dtype", kv_dtype, tuple(shapes.KV_BYTES))
        return _zero_where_empty(self._impl.attn_prefill_s(batch, isl, heads, kv_heads, head_dim, kv_dtype), batch, isl)

    def attn_decode_s(self, batch, ctx, heads: int, kv_heads: int, head_dim: int, kv_dtype: str):
        """One decode step of one layer: batch sequences each attending over ctx cached tokens
        (heads, kv_heads per GPU). Seconds."""
        _check_dtype("model.kv_dtype", kv_dtype, tuple(shapes.KV_BYTES))
        return _zero_where_empty(self._impl.attn_decode_s(batch, ctx, heads, kv_heads, head_dim, kv_dtype), batch, ctx)

    def mla_prefill_s(self, batch, isl, heads: int, dtype: str):
        """DeepSeek-V3-shaped MLA prefill attention core of one layer (heads per GPU; q/k head dim
        192, v 128). The measured op (context_mla_perf) is the attention kernel only: the q/kv
        down/up projections and the output projection are GEMMs priced by ``gemm_s``. Seconds."""
        _check_dtype("model.kv_dtype", dtype, tuple(shapes.KV_BYTES))
        return _zero_where_empty(self._impl.mla_prefill_s(batch, isl, heads, dtype), batch, isl)

    def mla_decode_s(self, batch, ctx, heads: int, dtype: str):
        """DeepSeek-V3-shaped MLA decode attention core of one layer (absorbed form over the 576-wide
        latent KV cache; heads per GPU; ``dtype`` = KV cache dtype). generation_mla_perf covers the
        attention kernel only (the absorbed q/o BMMs, mla_bmm_perf, and the projections are not
        included: price them as GEMMs). Seconds."""
        _check_dtype("model.kv_dtype", dtype, tuple(shapes.KV_BYTES))
        return _zero_where_empty(self._impl.mla_decode_s(batch, ctx, heads, dtype), batch, ctx)

    def allreduce_s(self, message_bytes, n_gpus: int, table=None):
        """All-reduce of message_bytes (the buffer each GPU holds) over n_gpus; 0 for 1 GPU. Measured:
        the faster of NCCL and the framework's own all-reduce at that size, or the one ``table``
        names ("nccl" | "custom"; see ``has_allreduce_table``). Seconds."""
        t = self._impl.comm_s("all_reduce", message_bytes, n_gpus, table) if table else \
            self._impl.comm_s("all_reduce", message_bytes, n_gpus)
        return _zero_where_empty(t, message_bytes)

    def has_allreduce_table(self, table: str) -> bool:
        """True when this model prices the all-reduce of ``table`` ("nccl": NCCL's, "custom": the
        framework's custom kernel) from measured tables (measured, anchored backends)."""
        keys = getattr(self._impl, "comm_keys", None)
        return bool(keys and keys("all_reduce", table))

    def alltoall_s(self, message_bytes, n_gpus: int):
        """NCCL all-to-all of message_bytes per GPU. Seconds."""
        return _zero_where_empty(self._impl.comm_s("alltoall", message_bytes, n_gpus), message_bytes)

    def dtype_for(self, model) -> str:
        """The GEMM table dtype for a ModelSpec's weight / activation dtypes:

        | weight | activation | -> |
        |---|---|---|
        | bf16 / fp16 / fp32 | any | bf16 |
        | fp8 | fp8 | fp8_block if weight_group_size > 0 (block scales) else fp8 |
        | fp8 / int8 | bf16 / fp16 | int8_wo (8-bit weight-only, bf16 math) |
        | int8 | int8 / fp8 | fp8 (W8A8: same 1-byte operands and peak class) |
        | int4 / fp4 | bf16 / fp16 | int4_wo (4-bit weight-only, group-quantised or not) |
        | fp4 | fp4 / fp8 | nvfp4 |
        | int4 | fp8 / int8 | int4_wo |

        ``compute_dtype`` = bf16/fp16 forces a weight-only mapping for sub-16-bit weights.
        """
        w, a = model.weight_dtype, model.activation_dtype
        if getattr(model, "compute_dtype", "auto") in ("bf16", "fp16"):
            a = "bf16"
        if w in ("bf16", "fp16", "fp32"):
            return "bf16"
        if w == "fp8":
            if a == "fp8":
                return "fp8_block" if model.weight_group_size > 0 else "fp8"
            return "int8_wo" if a in ("bf16", "fp16", "fp32") else "fp8"
        if w == "int8":
            return "int8_wo" if a in ("bf16", "fp16", "fp32") else "fp8"
        if w == "fp4":
            return "nvfp4" if a in ("fp4", "fp8") else "int4_wo"
        if w == "int4":
            return "int4_wo"
        raise SpecError("model.weight_dtype", w, "bf16, fp16, fp32, fp8, int8, fp4 or int4")


_EXTRAPOLATION = Assumption(
    "kernel table extrapolation", "clamped below, power law above",
    "outside the measured grid: below the smallest size the edge time (launch floor); above the "
    "largest, time proportional to GEMM m/n/k, batch, decode context, MoE tokens, collective bytes, "
    "and to the square of the prefill length; NCCL beyond 8 GPUs scaled by the transfer model")
_PADDED = Assumption(
    "kernel tables made monotone", "t(x) = min over x' >= x of t(x')",
    "a smaller GEMM / batch / context / message can run as the larger one padded, so measured points "
    "slower than a larger size's (timing noise) are lowered to it")
_SHAPES = Assumption(
    "unmeasured kernel shapes", "nearest measured shape x transfer-model ratio",
    "head configurations / head_dim / MoE configurations not in the tables take the nearest measured "
    "one, scaled by the ratio of the fitted transfer model's times (this chip's peaks) for the two shapes")
_MOE = Assumption(
    "MoE configuration", "this framework's tables on this chip",
    "a routed-expert configuration (hidden, inter, top-k, experts, tp, ep, dtype) not measured under "
    "the chosen framework is scaled from its nearest measured configuration by the transfer-model ratio; "
    "no MoE tables for the framework on the chip: its transfer curve (other frameworks' MoE kernels "
    "are other implementations, 2-5x apart)")
_UNITS = Assumption(
    "collective message size", "bytes = elements x 2 (fp16/bf16)",
    "the source tables count message_size in elements; derived tables store bytes")


def _same_figure(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b))


def _fmt(v) -> str:
    return "none" if v is None else f"{v:.4g}"


def _known_sets() -> list:
    return shipped_tables()["chips"].tolist()
