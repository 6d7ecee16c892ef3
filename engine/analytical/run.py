"""Entry points of the analytical engine: one point (``run``) and a grid (``sweep``)."""



import numpy as np
import polars as pl

from engine.analytical.params import param_counts
from engine.analytical.pipeline import GRID_AXES, evaluate
from engine.result import Assumption, RunResult
from engine.spec import DTYPE_BYTES, Specs


def assumptions(specs: Specs) -> list[Assumption]:
    """The modelling choices behind the analytical numbers for these specs."""
    hw, m, p, c = specs.hardware, specs.model, specs.partition, specs.calibration
    out = []
    if hw.compute_figures_sparse:
        out.append(Assumption("sparse TFLOPS converted to dense",
                              f"x {hw.sparse_to_dense_factor}",
                              "the sheet's compute figures are 2:4-sparse peaks"))
    out.append(Assumption("math precision", m.math_dtype,
                          f"wider of weights ({m.weight_dtype}) and activations ({m.activation_dtype})"))
    out.append(Assumption("effective compute", f"peak x {c.compute_efficiency}",
                          f"calibration '{c.name}'"))
    out.append(Assumption("effective HBM bandwidth", f"peak x {c.memory_bandwidth_efficiency}",
                          f"calibration '{c.name}'"))
    if p.devices_per_replica > 1:
        out.append(Assumption("effective link bandwidth", f"x {c.comm_efficiency}",
                              f"calibration '{c.name}'; ring all-reduce, alpha-beta model"))
        out.append(Assumption("compute/communication overlap", "none",
                              "phase time = max(compute, memory) + comm (upper end of the range)"))
    if p.pp > 1:
        out.append(Assumption("pipeline microbatching", "none",
                              "one batch walks the pp stages in turn; pp saves memory, not time"))
    if p.sp > 1:
        out.append(Assumption("sequence-parallel communication", "not modelled",
                              "attention KV exchange between sp ranks is left out in v1"))
    if m.num_params is not None:
        out.append(Assumption("parameter count", f"{m.num_params:.4g} (given)",
                              "spec-sheet style: 2*N FLOPs per token and all N weights streamed "
                              "per decode step; architecture fields feed attention and KV only"))
    else:
        pc = param_counts(m)
        out.append(Assumption("parameter count", f"{pc.total / 1e9:.3f} B (derived)",
                              "from the architecture: attention + FFN/experts + norms + embeddings"))
        out.append(Assumption("input embedding traffic", "ignored",
                              "a lookup of a few rows per step, not a streamed matrix"))
    if m.is_moe:
        out.append(Assumption("MoE routing", "uniform, independent top-k",
                              "decode streams E*(1-(1-k/E)^B) experts per layer"))
    out.append(Assumption("batch arrival", "all requests together, decode in lock-step",
                          "analytical lower bound: no queueing, p50 = p99"))
    out.append(Assumption("TPOT", "exact mean of max(compute, memory) over contexts S+1..S+N-1",
                          "KV read and attention FLOPs grow linearly with context"))
    out.append(Assumption("activation traffic", "each matmul reads its input and writes its output once",
                          "no cross-kernel fusion"))
    out.append(Assumption("KV cache capacity",
                          f"(HBM - weights - activations - {c.memory_reserve_bytes / 1e9:g} GB) "
                          f"x {c.kv_usable_fraction}",
                          f"calibration '{c.name}'"))
    out.append(Assumption("weight bytes", f"{DTYPE_BYTES[m.weight_dtype]} B/param ({m.weight_dtype})",
                          "no group-scale overhead in v1"))
    return out


def _scalar(v):
    v = np.asarray(v)
    item = v.item() if v.ndim == 0 else v.reshape(-1)[0]
    if isinstance(item, (np.bool_, bool)):
        return bool(item)
    if isinstance(item, (np.floating, float)):
        return float(item)
    if isinstance(item, (np.integer, int)):
        return int(item)
    return str(item)


def _summary(point: dict, specs: Specs) -> dict:
    """The result contract's flat summary from one evaluated point."""
    g = {k: _scalar(v) for k, v in point.items()}
    s = {
        "ttft_ms_p50": g["ttft_ms"], "ttft_ms_p99": g["ttft_ms"],
        "tpot_ms_p50": g["tpot_ms"], "tpot_ms_p99": g["tpot_ms"],
        "e2e_ms_p50": g["e2e_ms"], "e2e_ms_p99": g["e2e_ms"],
        "throughput_tok_s": g["throughput_tok_s"],
        "throughput_tok_s_per_gpu": g["throughput_tok_s_per_gpu"],
        "interactivity_tok_s_per_user": g["interactivity_tok_s_per_user"],
        "weights_gb": g["weights_gb"], "kv_cache_gb": g["kv_cache_gb"],
        "kv_capacity_gb": g["kv_capacity_gb"], "activation_gb": g["activation_gb"],
        "max_concurrent_seqs": g["max_concurrent_seqs"],
        "fits_in_memory": g["fits_in_memory"],
        "bound": g["decode_bound"], "prefill_bound": g["prefill_bound"],
        "decode_bound": g["decode_bound"],
        "ridge_flop_per_byte": g["ridge_flop_per_byte"],
        "prefill_intensity_flop_per_byte": g["prefill_intensity_flop_per_byte"],
        "decode_intensity_flop_per_byte": g["decode_intensity_flop_per_byte"],
        "batch_star": g["batch_star"], "params_b": g["params_b"], "devices": g["devices"],
    }
    if not s["fits_in_memory"]:
        cap = specs.hardware.hbm_capacity_bytes / 1e9
        s["memory_reason"] = (
            f"needs {g['weights_gb']:.1f} GB weights + {g['activation_gb']:.1f} GB activations + "
            f"{specs.calibration.memory_reserve_bytes / 1e9:.1f} GB reserve + {g['kv_cache_gb']:.1f} GB KV "
            f"per device; {cap:.1f} GB HBM leaves {g['kv_capacity_gb']:.1f} GB usable for KV")
        s["bound"] = "memory_capacity"
    else:
        s["memory_reason"] = "fits"
    return s


def run(specs: Specs) -> RunResult:
    """Evaluate one configuration: summary, a one-row table with the phase breakdown, assumptions."""
    point = evaluate(specs)
    table = pl.DataFrame({k: [_scalar(v)] for k, v in point.items()})
    return RunResult(summary=_summary(point, specs), table=table, assumptions=assumptions(specs))


def sweep(specs: Specs, **axes) -> pl.DataFrame:
    """Evaluate the cartesian product of ``axes`` (each a list/array of values) in one numpy pass.

    Axes not given keep the specs' values. Returns one row per grid point with the axis values and
    every metric of ``evaluate``.
    """
    names = [a for a in axes if a in GRID_AXES]
    values = [np.asarray(axes[a], dtype=float).reshape(-1) for a in names]
    mesh = np.meshgrid(*values, indexing="ij") if values else []
    flat = {n: v.reshape(-1) for n, v in zip(names, mesh)}
    res = evaluate(specs, **flat, **{k: v for k, v in axes.items() if k not in GRID_AXES})
    n = max((np.asarray(v).size for v in res.values()), default=1)
    cols = {k: np.broadcast_to(np.asarray(v), (n,)) for k, v in res.items()}
    return pl.DataFrame(cols)


__all__ = ["run", "sweep"]
