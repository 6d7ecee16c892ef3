"""Transfer curves: how far below its roofline each operator runs, learned on the measured chips
and applied to any chip's spec-sheet peaks.

Operator model (one form for every compute/memory operator; units: seconds, FLOP, byte)::

    T_c = F / P        ideal compute time at the chip's dense peak P (FLOP/s) for the op's precision
    T_b = Q / B        ideal memory time at the chip's HBM bandwidth B (byte/s)
    t   = t0 + ( (T_c (1 + s_c0 / s_c) / eta_c)^q + (T_b (1 + s_b0 / s_b)(1 + s_x0 / s_x) / eta_b)^q )^(1/q)

* ``t0``: a fixed launch/latency floor (s) — kernels never run faster than this;
* ``eta_c``, ``eta_b``: the asymptotic achieved fraction of peak FLOP/s and of peak bandwidth;
* ``s_c / (s_c + s_c0)`` and ``s_b / (s_b + s_b0)``: saturating size factors — efficiency rises with
  the work size s (GEMM: s_c = m tokens, s_b = n k weight elements; attention: s_c = sequence length,
  s_b = tokens or cached rows; MoE: s_c = tokens per expert) and is half its asymptote at s0;
* decode attention has a second size factor on its memory term: s_b = parallel work units
  (sequences x kv heads: too few cannot keep all memory channels busy) and s_x = the
  context length (a fixed per-sequence cost, worth s_x0 tokens of KV reads); other ops have none;
* ``q >= 1``: a smooth maximum of the two bounds (q -> infinity is the hard roofline max; q = 1 adds
  them, no overlap). The arithmetic intensity relative to the ridge point enters through T_c / T_b.

Collectives (per GPU, ring algorithms; L = scale-up link bandwidth per direction, byte/s)::

    alpha = a0 + a1 (n - 1)                 latency (s): fixed + per extra GPU
    beta  = bus_bytes / (L eta)             transfer time (s); bus_bytes from engine.cost.shapes
    t = alpha + beta + 2 gamma sqrt(alpha beta)

The cross term is the cost of a chunked pipeline: with c chunks a pipelined collective takes
about (alpha c + beta / c)... minimised at c = sqrt(beta / alpha), giving (sqrt(alpha) + sqrt(beta))^2
= alpha + beta + 2 sqrt(alpha beta); gamma (fitted) scales that mid-size penalty (gamma = 0: the
plain latency-bandwidth model). It is what makes mid-size messages slower than both asymptotes.

Parameters are fitted on all measured chips at once (not per chip) by least squares on log time
(soft-L1 loss, so a few odd kernels do not pull the curve), per framework and op class, from the
compact tables; `fit_all` refits from the shipped tables (used by ``exclude``) in about a CPU-second per framework.
"""

import numpy as np

from engine.cost import shapes
from engine.cost.derive import GRIDS, PEAK_KEYS

#: Parameter names of the operator model and of the collective model, in vector order.
OP_PARAMS = ("t0", "eta_c", "eta_b", "q", "s_c0", "s_b0", "s_x0")
COMM_PARAMS = ("a0", "a1", "eta", "gamma")
_OP_LO = np.log([1e-7, 0.01, 0.01, 1.0, 1e-3, 1e-3, 1e-3])
_OP_HI = np.log([2e-4, 1.5, 1.5, 12.0, 1e12, 1e14, 1e6])
_OP_X0 = np.log([8e-6, 0.7, 0.7, 3.0, 10.0, 1e5, 100.0])
#: Op classes with the second memory size factor (s_x0, s_x = context length).
X_CLASSES = ("attn_decode",)
_COMM_LO, _COMM_HI, _COMM_X0 = (np.log([1e-7, 1e-9, 0.01, 1e-3]), np.log([1e-3, 1e-4, 3.0, 10.0]),
                                np.log([1e-5, 1e-6, 0.6, 0.5]))
#: Convergence of every transfer fit: least_squares stops when the cost, the step and the
#: projected gradient all change by less than FIT_TOL (relative), within MAX_NFEV evaluations.
#: The fits stop on these criteria, never on the evaluation budget, so a refit lands on the same
#: minimum whatever the numpy/scipy build or processor: starting every fit 0.1 % away (log
#: coordinates) moves the fitted times by at most ~2e-6 in log on the shipped tables, where the
#: old budget-limited fits (ftol 1e-8, 100 evaluations) moved them by up to 1.4e-4 and parameters
#: along flat directions (e.g. a saturation size far below every measured size) by 40x.
FIT_TOL = 1e-12
MAX_NFEV = 2000
#: Points per chip per fit (a deterministic stride through the measured grid points).
MAX_POINTS_PER_CHIP = 800
#: Collective curves are fitted on chips with a peer-to-peer scale-up fabric only (NVLink-class,
#: >= 100 GB/s per direction). L40S (PCIe, no NVLink) is left out: its measured 8-GPU all-reduce
#: reaches ~2 GB/s bus bandwidth, 16x below its PCIe figure (host-staged), so its times say nothing
#: about a link's spec bandwidth.
MIN_FABRIC_BYTES_S = 100e9
#: A chip whose own median |log(predicted / measured)| exceeds this after the pooled fit is
#: dropped from that class's fit (see fit_class); 0.5 = a factor 1.65.
OUTLIER_LOG_ERROR = 0.5
#: (framework, op class) tables that do not measure kernel time and are neither fitted nor used by
#: the measured backend (another framework's table of the same chip is used instead):
#: vLLM's fp8_block GEMMs take 55-60 us (H100/H200), 155 us (B200), 250-790 us (GB200) and 280 us
#: (L40S) per call for a 4096 x 4096 GEMM at m = 1, where TRT-LLM and SGLang take ~9-16 us on the
#: same chips: a per-call floor (activation quantisation / launch path), not the GEMM.
SUSPECT = {("vllm", "fp8_block"): "vLLM fp8_block GEMM tables: 55-790 us per-call floor, not kernel time"}
GEMM_CLASSES = ("bf16", "fp8", "fp8_block", "int8_wo", "int4_wo", "nvfp4")
OP_CLASSES = GEMM_CLASSES + ("attn_prefill", "attn_decode", "mla_prefill", "mla_decode", "moe")
COMM_CLASSES = ("all_reduce", "all_gather", "alltoall")


def peak(peaks: dict, precision: str) -> float:
    """Dense peak FLOP/s for a precision, falling back to the next wider one the chip has
    (fp4 -> fp8 -> bf16; int8 -> fp8 -> bf16): a chip without fp8 runs fp8 kernels at bf16 rate."""
    chain = {"fp4": ("fp4", "fp8", "bf16"), "fp8": ("fp8", "bf16"), "int8": ("int8", "fp8", "bf16"),
             "bf16": ("bf16",), "fp16": ("bf16",)}[precision]
    for p in chain:
        v = peaks.get(p)
        if v is not None and np.isfinite(v) and v > 0:
            return float(v)
    raise KeyError(precision)


def op_time(theta: dict, Tc, Tb, sc, sb, sx=None):
    """The operator model above (seconds) for ideal times Tc, Tb (s) and sizes sc, sb (, sx)."""
    q = theta["q"]
    c = Tc * (1.0 + theta["s_c0"] / sc) / theta["eta_c"]
    b = Tb * (1.0 + theta["s_b0"] / sb) / theta["eta_b"]
    if "s_x0" in theta:
        b = b * (1.0 + theta["s_x0"] / sx)
    m = np.maximum(c, b)
    safe = np.where(m > 0, m, 1.0)            # zero work: the q-norm of (0, 0) is 0
    return theta["t0"] + m * np.power(np.power(c / safe, q) + np.power(b / safe, q), 1.0 / q)


def comm_time(theta: dict, bus_bytes, n_gpus, link_bytes_s: float):
    """Collective model above (seconds)."""
    alpha = theta["a0"] + theta["a1"] * (np.asarray(n_gpus, dtype=float) - 1.0)
    beta = np.asarray(bus_bytes, dtype=float) / (link_bytes_s * theta["eta"])
    return alpha + beta + 2.0 * theta.get("gamma", 0.0) * np.sqrt(alpha * beta)


def chip_peaks(tables: dict, chip: str) -> dict:
    """The spec-sheet peaks stored with a table set, as a dict (PEAK_KEYS)."""
    return dict(zip(PEAK_KEYS, tables[f"peaks/{chip}"].tolist()))


# ---- roofline quantities of the grid points of each table -------------------------------------

def _stride(n: int) -> np.ndarray:
    step = max(1, int(np.ceil(n / MAX_POINTS_PER_CHIP)))
    return np.arange(0, n, step)


def op_points(tables: dict, chip: str, fw: str, cls: str, thin: bool = True):
    """Measured grid points of one op class on one chip: (Tc, Tb, sc, sb, sx, t) arrays, or None.

    Ideal times use the chip's own peaks. ``thin`` keeps at most MAX_POINTS_PER_CHIP points.
    """
    pk = chip_peaks(tables, chip)
    B = pk["hbm_bandwidth"]
    rows = []
    if cls in GEMM_CLASSES:
        key = f"{chip}/{fw}/gemm/{cls}"
        if key not in tables:
            return None
        a = tables[key]
        m, n, k = np.meshgrid(GRIDS["gemm/m"], GRIDS["gemm/n"], GRIDS["gemm/k"], indexing="ij")
        ok = np.isfinite(a)
        m, n, k, t = m[ok].astype(float), n[ok].astype(float), k[ok].astype(float), a[ok].astype(float)
        F, Q = shapes.gemm(m, n, k, cls)
        P = peak(pk, shapes.GEMM_DTYPES[cls][0])
        rows.append((F / P, Q / B, m, n * k, np.ones_like(t), t))
    elif cls in ("attn_prefill", "attn_decode"):
        bg, lg = GRIDS[f"{cls}/batch"], GRIDS[f"{cls}/len"]
        for kv in ("bf16", "fp8"):
            for hd in (64, 128, 256):
                key = f"{chip}/{fw}/{cls}/{kv}/hd{hd}"
                if key not in tables:
                    continue
                arr, combos = tables[key], tables[key + "/combos"]
                for (h, g), a in zip(combos.tolist(), arr):
                    b, s = np.meshgrid(bg, lg, indexing="ij")
                    ok = np.isfinite(a)
                    b, s, t = b[ok].astype(float), s[ok].astype(float), a[ok].astype(float)
                    fn = shapes.attn_prefill if cls == "attn_prefill" else shapes.attn_decode
                    F, Q = fn(b, s, h, g, hd, kv)
                    sb = b * s if cls == "attn_prefill" else b * g
                    rows.append((F / pk["bf16"], Q / B, s, sb, s, t))
    elif cls in ("mla_prefill", "mla_decode"):
        for kv in ("bf16", "fp8"):
            key = f"{chip}/{fw}/{cls}/{kv}"
            if key not in tables:
                continue
            a = tables[key]
            h, b, s = np.meshgrid(GRIDS["mla/heads"], GRIDS[f"{cls}/batch"], GRIDS[f"{cls}/len"], indexing="ij")
            ok = np.isfinite(a)
            h, b, s, t = h[ok].astype(float), b[ok].astype(float), s[ok].astype(float), a[ok].astype(float)
            fn = shapes.mla_prefill if cls == "mla_prefill" else shapes.mla_decode
            F, Q = fn(b, s, h, kv)
            rows.append((F / pk["bf16"], Q / B, s, b * s, s, t))
    elif cls == "moe":
        for dt in shapes.MOE_DTYPES:
            key = f"{chip}/{fw}/moe/{dt}"
            if key not in tables:
                continue
            for cfg, a in zip(tables[key + "/configs"].tolist(), tables[key]):
                Tc, Tb, sc, sb = moe_ideal(pk, np.asarray(GRIDS["moe/tokens"], float), *cfg, dt)
                ok = np.isfinite(a)
                rows.append((Tc[ok], Tb[ok], sc[ok], sb[ok], np.ones(int(ok.sum())), a[ok].astype(float)))
    if not rows:
        return None
    out = [np.concatenate([r[i] for r in rows]) for i in range(6)]
    if thin:
        idx = _stride(len(out[0]))
        out = [x[idx] for x in out]
    return tuple(out)


def moe_ideal(pk: dict, tokens, hidden, inter, topk, experts, tp, ep, dtype):
    """(Tc, Tb, s_c, s_b) of the routed-expert block: s_c = token-expert pairs per local expert,
    s_b = weight elements touched."""
    F, Q = shapes.moe(tokens, hidden, inter, topk, experts, tp, ep, dtype)
    P = peak(pk, shapes.MOE_DTYPES[dtype][0])
    active = shapes.moe_active_experts(tokens, topk, experts, ep)
    sc = np.maximum(np.asarray(tokens, float) * topk / experts, 1e-3)
    sb = np.maximum(active * 3.0 * hidden * inter / tp, 1.0)
    return F / P, Q / pk["hbm_bandwidth"], sc, sb


def comm_points(tables: dict, chip: str, fw: str, cls: str):
    """(bus_bytes, n_gpus, link_bytes_s, t) of one collective on one chip (all-reduce: the faster of
    NCCL and the framework's own kernel at each point), or None."""
    link = chip_peaks(tables, chip)["scaleup_bandwidth"]
    arrs = [tables[k] for k in (f"{chip}/nccl/{cls}",) + ((f"{chip}/{fw}/custom_allreduce",) if cls == "all_reduce" else ())
            if k in tables]
    if not arrs or not np.isfinite(link):
        return None
    a = np.fmin.reduce(arrs) if len(arrs) > 1 else arrs[0]
    n, s = np.meshgrid(GRIDS["comm/n_gpus"], GRIDS["comm/bytes"], indexing="ij")
    ok = np.isfinite(a)
    n, s, t = n[ok].astype(float), s[ok].astype(float), a[ok].astype(float)
    return shapes.collective_bus_bytes(cls, s, n), n, np.full_like(t, link), t


# ---- fitting ------------------------------------------------------------------------------------

def _fit_op(pts, with_x: bool):
    Tc, Tb, sc, sb, sx, t = pts
    lt = np.log(t)
    k = len(OP_PARAMS) if with_x else len(OP_PARAMS) - 1
    names = OP_PARAMS[:k]

    def res(x):
        th = dict(zip(names, np.exp(x)))
        return np.log(op_time(th, Tc, Tb, sc, sb, sx)) - lt

    from scipy.optimize import least_squares   # here: scipy.optimize costs ~0.1 CPU-s to import

    r = least_squares(res, _OP_X0[:k], bounds=(_OP_LO[:k], _OP_HI[:k]), loss="soft_l1", f_scale=0.2,
                      max_nfev=MAX_NFEV, ftol=FIT_TOL, xtol=FIT_TOL, gtol=FIT_TOL)
    return dict(zip(names, np.exp(r.x).tolist())), float(np.median(np.abs(r.fun)))


def _fit_comm(pts):
    bus, n, link, t = pts
    lt = np.log(t)

    def res(x):
        th = dict(zip(COMM_PARAMS, np.exp(x)))
        return np.log(comm_time(th, bus, n, link)) - lt

    from scipy.optimize import least_squares

    r = least_squares(res, _COMM_X0, bounds=(_COMM_LO, _COMM_HI), loss="soft_l1", f_scale=0.2,
                      max_nfev=MAX_NFEV, ftol=FIT_TOL, xtol=FIT_TOL, gtol=FIT_TOL)
    return dict(zip(COMM_PARAMS, np.exp(r.x).tolist())), float(np.median(np.abs(r.fun)))


def fit_class(tables: dict, fw: str, cls: str, chips) -> dict | None:
    """Fit one op class of one framework on ``chips`` at once. Returns {"params", "chips",
    "points", "median_abs_log_error", "dropped"} or None when no chip has the class.

    Outlier chips: after a first fit on all chips, a chip whose own median |log error| exceeds
    OUTLIER_LOG_ERROR (its kernels are a different class, e.g. vLLM's Triton fp8-block GEMM on L40S,
    3-5x slower than the CUTLASS/DeepGEMM kernels elsewhere) is dropped and the rest refitted, as
    long as two chips remain; ``dropped`` names them with their median |log error|.
    """
    if cls in COMM_CLASSES:
        parts = [(c, comm_points(tables, c, fw, cls)) for c in chips
                 if chip_peaks(tables, c)["scaleup_bandwidth"] >= MIN_FABRIC_BYTES_S]
    else:
        parts = [(c, op_points(tables, c, fw, cls)) for c in chips]
    parts = [(c, p) for c, p in parts if p is not None and len(p[0])]
    if not parts:
        return None
    fit = _fit_comm if cls in COMM_CLASSES else (lambda pts: _fit_op(pts, cls in X_CLASSES))
    model = comm_time if cls in COMM_CLASSES else op_time
    dropped = {}
    for _ in range(2):
        pts = tuple(np.concatenate([p[i] for _, p in parts]) for i in range(len(parts[0][1])))
        params, err = fit(pts)
        per_chip = {c: float(np.median(np.abs(np.log(model(params, *p[:-1]) / p[-1])))) for c, p in parts}
        bad = {c: e for c, e in per_chip.items() if e > OUTLIER_LOG_ERROR}
        if dropped or not bad or len(parts) - len(bad) < 2:
            break
        dropped = bad
        parts = [(c, p) for c, p in parts if c not in bad]
    return {"params": params, "chips": [c for c, _ in parts], "points": int(len(pts[0])),
            "median_abs_log_error": err, "dropped": dropped}


def fit_all(tables: dict, fw: str, exclude=()) -> dict:
    """All op classes of one framework, fitted on every table set except ``exclude``."""
    chips = [c for c in tables["chips"].tolist() if c not in exclude]
    out = {}
    for cls in OP_CLASSES + COMM_CLASSES:
        if (fw, cls) in SUSPECT:
            continue
        f = fit_class(tables, fw, cls, chips)
        if f is not None:
            out[cls] = f
    return out
