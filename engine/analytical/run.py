"""Entry points of the analytical engine: one point (``run``), a grid (``sweep``) and, when
``engine.analytical.pareto.enabled``, the partition Pareto sweep (``run`` returns its table)."""

import os
import shutil
from pathlib import Path

import numpy as np
import polars as pl

from engine.analytical import pareto
from engine.analytical.params import param_counts
from engine.analytical.pipeline import GRID_AXES, evaluate
from engine.analytical.precision import weight_bytes_per_param
from engine.result import Assumption, RunResult
from engine.spec import Specs


def assumptions(specs: Specs) -> list[Assumption]:
    """The modelling choices behind the analytical numbers for these specs."""
    hw, m, p, c, a = specs.hardware, specs.model, specs.partition, specs.calibration, specs.analytical
    out = []
    if hw.compute_figures_sparse:
        out.append(Assumption("sparse TFLOPS converted to dense",
                              f"x {hw.sparse_to_dense_factor}",
                              "the sheet's compute figures are 2:4-sparse peaks"))
    why = ("set by model.compute_dtype" if m.compute_dtype != "auto" else
           f"wider of weights ({m.weight_dtype}) and activations ({m.activation_dtype})")
    out.append(Assumption("math precision", m.math_dtype, why + "; picks the compute peak"))
    out.append(Assumption("effective compute", f"peak x {c.compute_efficiency}",
                          f"calibration '{c.name}'"))
    out.append(Assumption("effective HBM bandwidth", f"peak x {c.memory_bandwidth_efficiency}",
                          f"calibration '{c.name}'"))
    from engine.analytical import kernels
    out.extend(kernels.build(specs, p.tp, p.ep, p.sp)[1])
    out.append(Assumption("roofline granularity", a.roofline,
                          "op: dense matmuls, routed experts and attention each bound by their own roof, "
                          "summed" if a.roofline == "op" else
                          "pass: one max over a pass's total FLOPs and bytes (a looser bound)"))
    if p.devices_per_replica > 1:
        out.append(Assumption("effective link bandwidth", f"x {c.comm_efficiency}",
                              f"calibration '{c.name}'; alpha-beta model, {a.allreduce} all-reduce; "
                              "scale-up link when a group fits in one node, else scale-out"))
        out.append(Assumption("compute/communication overlap", f"{a.overlap:g}",
                              "time = roof + comm - overlap x min(roof, comm) (0 none, 1 full)"))
    if p.pp > 1:
        out.append(Assumption("pipeline microbatching", f"{a.pp_microbatches or p.pp} microbatches",
                              "decode: TPOT = max(pp (t_stage + hop), m t_stage); prefill: "
                              "(pp + m - 1) t_stage warm-up; the largest stage (ceil(L/pp) layers) "
                              "sets the pace; LM head spread over the stages"))
    if p.ep > 1:
        out.append(Assumption("expert parallelism", f"ep={p.ep}",
                              "experts split max(tp, ep) ways; 2 all-to-alls per MoE layer replace the "
                              "FFN all-reduce; balanced routing (no straggler expert)"))
    if p.ep_groups > 1:
        out.append(Assumption("EP as a device factor (ep_layout=extra)", p.label,
                              f"{p.ep_groups} data-parallel attention groups per stage, experts over "
                              f"tp x ep = {p.ep} devices; priced as the shared layout with sp={p.sp}, "
                              f"ep={p.ep} (adds a K/V all-gather per layer over the groups and splits a "
                              "single prompt's prefill over them)"))
    if p.sp > 1:
        out.append(Assumption("sequence parallelism", f"sp={p.sp}",
                              "tokens and KV split sp ways; one K/V all-gather per layer (Llama 3 "
                              "context parallelism); the decode partial-softmax combine is not modelled"))
    if m.num_params is not None:
        out.append(Assumption("parameter count", f"{m.num_params:.4g} (given)",
                              "spec-sheet style: 2*N FLOPs per token and all N weights streamed "
                              "per decode step; architecture fields feed attention and KV only"))
    else:
        pc = param_counts(m)
        out.append(Assumption("parameter count", f"{pc.total / 1e9:.3f} B (derived)",
                              "from the architecture: attention (MLA if set) + FFN/experts + norms + "
                              "embeddings"))
        out.append(Assumption("input embedding traffic", "ignored",
                              "a lookup of a few rows per step, not a streamed matrix"))
    if m.is_moe:
        out.append(Assumption("MoE routing", "uniform, independent top-k",
                              "a pass of T tokens streams E*(1-(1-k/E)^T) experts per MoE layer; "
                              "B* found by bisection"))
    if m.attention == "mla":
        out.append(Assumption("MLA attention", "latent KV cache, replicated over TP",
                              "prefill attends with per-head keys (naive form), decode with "
                              "absorbed weights over the 576-wide latent"))
    from engine.analytical import window
    for n, w in window.windowed(m.layer_groups):     # one line per windowed layer group
        out.append(Assumption("sliding-window layers", f"{n} x {w}",
                              "windows taken at the mid-decode context; mean per chunk in chunked prefill"))
    if c.step_overhead_s or c.launch_overhead_s or c.per_token_overhead_s or c.per_request_overhead_s:
        out.append(Assumption("framework overheads",
                              f"scheduler {c.step_overhead_s * 1e6:g} us + launch/graph "
                              f"{c.launch_overhead_s * 1e6:g} us per pass, {c.per_token_overhead_s * 1e6:g} us "
                              f"per emitted token, {c.per_request_overhead_s * 1e6:g} us per request",
                              f"calibration '{c.name}'; added to the roofline time"))
    from engine.spec.framework import host_costs_text
    if host_costs_text(specs.framework):
        out.append(Assumption("framework host costs", host_costs_text(specs.framework),
                              f"profile '{specs.framework.name}'; on top of the calibration's"))
    out.append(Assumption("batch arrival", "all requests together, decode in lock-step",
                          "analytical lower bound: no queueing, p50 = p99"))
    out.append(Assumption("TPOT", "exact mean over contexts S+1..S+N-1",
                          "KV read and attention FLOPs grow linearly with context"))
    if a.prefill_chunk:
        out.append(Assumption("chunked prefill", f"C = {a.prefill_chunk} tokens",
                              "each chunk re-reads the weights and attends to all cached tokens"))
    out.append(Assumption("activation traffic", "each matmul reads its input and writes its output once",
                          "no cross-kernel fusion"))
    out.append(Assumption("KV cache capacity",
                          f"(HBM - weights - activations - {c.memory_reserve_bytes / 1e9:g} GB) "
                          f"x {specs.kv_usable_fraction}; blocks of {a.kv_block_tokens} tokens",
                          f"calibration '{c.name}'; paged KV, last block partly empty"))
    out.append(Assumption("weight bytes", f"{weight_bytes_per_param(m):.4g} B/param ({m.weight_dtype}"
                          + (f", a {m.weight_scale_dtype} scale per {m.weight_group_size})"
                             if m.weight_group_size else ")"),
                          "group-scale overhead included" if m.weight_group_size else
                          "per-channel scales, counted as 0"))
    out.append(Assumption("energy", f"P = TDP x ({a.idle_power_fraction} + (1 - "
                          f"{a.idle_power_fraction}) x busy fraction)",
                          "busy = roofline time / step time; TDP as the ceiling"))
    if a.spec_decode.method != "none":
        from engine.analytical import specdec
        sd = a.spec_decode
        out.append(Assumption("speculative decoding",
                              f"{sd.method}, gamma={sd.gamma}, acceptance={sd.acceptance}",
                              f"i.i.d. acceptance; {specdec.draft_label(specs)}; headline TTFT, TPOT "
                              "and throughput include it (tpot_no_spec_ms without)"))
    out.append(Assumption("SRAM", f"{specs.hardware.sram_bytes / 1e6:g} MB on chip: unused",
                          "weights, KV and activations are all streamed from HBM (no on-chip "
                          "residency or fusion credit)"))
    if a.disagg.enabled:
        d = a.disagg
        out.append(Assumption("disaggregated prefill/decode",
                              f"prefill tp={d.prefill_tp or p.tp} pp={d.prefill_pp or p.pp} "
                              f"sp={d.prefill_sp or p.sp}, x{d.prefill_replicas}",
                              f"KV hand-off alpha + bytes/W + WRs x t_wr, re-layout eta={d.relayout_factor}, "
                              f"overlap rho={d.overlap}"))
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


#: Extra point metrics copied to the summary when present.
_OPTIONAL = ("batch_star_matmul", "kv_fragmentation", "energy_j_per_token", "power_w_per_gpu", "decode_microbatches",
             "energy_decode_j_per_token", "energy_prefill_j_per_token", "energy_prefill_j_per_request",
             "energy_decode_j_per_request", "energy_j_per_request", "power_prefill_w_per_gpu",
             "spec_verify_ms", "spec_draft_ms", "spec_ttft_add_ms", "tpot_no_spec_ms", "spec_speedup",
             "prefill_passes", "chunk_star", "ttft_at_chunk_star_ms", "spec_expected_tokens",
             "spec_tpot_ms", "spec_interactivity_tok_s_per_user", "spec_throughput_tok_s_per_gpu",
             "disagg_prefill_fits", "disagg_ttft_ms", "disagg_prefill_ttft_ms", "disagg_handoff_ms",
             "disagg_exposed_handoff_ms", "disagg_throughput_tok_s_per_gpu", "disagg_devices",
             "disagg_tpot_ms", "colocated_ttft_ms", "colocated_tpot_ms",
             "colocated_throughput_tok_s_per_gpu",
             "decode_throughput_tok_s_per_gpu")


def op_shares(specs: Specs) -> dict:
    """Share of time per operator class (``StepModel.breakdown``) of the batch's prefill pass
    (all B prompts, single pass) and of a decode step at the mid-decode context:
    ``prefill_share_<class>`` and ``decode_share_<class>`` (fractions summing to 1)."""
    from engine.analytical.attention import prefill_layer_pairs
    from engine.analytical.step import StepModel

    w, p = specs.workload, specs.partition
    sm = StepModel.from_specs(specs)
    B, S, N = float(w.batch_size), float(w.prompt_len), float(w.output_len)
    Bm = B / max(min(p.pp, B), 1) if p.pp > 1 else B
    pre = sm.breakdown(Bm * S, Bm, Bm * float(prefill_layer_pairs(specs.model, S, 0.0)),
                       0.0, 0.0, 0.0)
    c = S + max(N, 2) / 2.0
    dec = sm.breakdown(Bm, Bm, 0.0, 0.0, float(sm.decode_positions(Bm, Bm * c)), Bm)
    out = {}
    for tag, parts in (("prefill", pre), ("decode", dec)):
        tot = sum(parts.values()) or 1.0
        out.update({f"{tag}_share_{k}": v / tot for k, v in parts.items()})
    return out


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
    s.update({k: g[k] for k in _OPTIONAL if k in g})
    s.update(op_shares(specs))
    if not s["fits_in_memory"]:
        cap = specs.hardware.visible_bytes / 1e9
        s["memory_reason"] = (
            f"needs {g['weights_gb']:.1f} GB weights + {g['activation_gb']:.1f} GB activations + "
            f"{specs.calibration.memory_reserve_bytes / 1e9:.1f} GB reserve + {g['kv_cache_gb']:.1f} GB KV "
            f"per device; {cap:.1f} GB HBM (as the runtime reports it) leaves {g['kv_capacity_gb']:.1f} GB usable for KV")
        s["bound"] = "memory_capacity"
    else:
        s["memory_reason"] = "fits"
    return s


def run_pareto(specs: Specs) -> RunResult:
    """The Pareto sweep of ``engine.analytical.pareto`` as a RunResult: table = every valid point
    (``on_frontier`` marks the frontier), summary = counts and the two corners of the frontier."""
    pa = specs.analytical.pareto
    x_metric = ("decode_throughput_tok_s_per_gpu" if pa.throughput == "decode"
                else "throughput_tok_s_per_gpu")
    table, frontier, dropped = pareto.sweep(specs, pa.devices, pa.batches, pa.chunks,
                                            pa.max_tp, pa.max_pp, pa.max_sp, x_metric=x_metric)
    s = {"pareto_points": table.height, "pareto_frontier_points": frontier.height,
         "pareto_dropped": sum(dropped.values()), "devices": pa.devices}
    s.update({f"pareto_dropped_{k.replace(' ', '_')}": v for k, v in dropped.items()})
    if frontier.height:
        hi_thr, hi_int = frontier.row(-1, named=True), frontier.row(0, named=True)
        s.update(max_throughput_tok_s_per_gpu=hi_thr[x_metric],
                 max_throughput_partition=hi_thr["partition"],
                 max_throughput_batch=int(hi_thr["batch_size"]),
                 max_interactivity_tok_s_per_user=hi_int["interactivity_tok_s_per_user"],
                 max_interactivity_partition=hi_int["partition"])
    notes = [Assumption("Pareto sweep", f"{pa.devices} devices, batches {list(pa.batches)}, "
                        f"chunks {list(pa.chunks)}, frontier of {x_metric} vs interactivity",
                        "every (PP, TP, EP, SP) dividing the devices; invalid points dropped: "
                        + (", ".join(f"{k}: {v}" for k, v in dropped.items()) or "none"))]
    return RunResult(summary=s, table=table, assumptions=notes + assumptions(specs))


def run(specs: Specs) -> RunResult:
    """Evaluate one configuration: summary, a one-row table with the phase breakdown, assumptions.
    With ``engine.analytical.pareto.enabled`` the partition Pareto sweep instead (``run_pareto``)."""
    if specs.analytical.pareto.enabled:
        return run_pareto(specs)
    point = evaluate(specs)
    table = pl.DataFrame({k: [_scalar(v)] for k, v in point.items()})
    return RunResult(summary=_summary(point, specs), table=table, assumptions=assumptions(specs))


def sweep_chunks(specs: Specs, points_per_pass: int = pareto.POINTS_PER_PASS,
                 columns=None, **axes):
    """Yield the grid of ``sweep`` as polars frames of at most ``points_per_pass`` rows each, in
    grid order (row-major over the axes as given).

    ``evaluate`` holds ~1.1 KB of arrays per point while it runs; a chunk bounds that working set.
    Every point is an elementwise function of its own axis values, so no number depends on the
    chunking. ``columns`` (names of ``evaluate``'s outputs) keeps only those columns besides the
    swept axes; an unknown name raises ValueError naming it and the valid ones.
    """
    names = [a for a in axes if a in GRID_AXES]
    extra = {k: v for k, v in axes.items() if k not in GRID_AXES}
    values = [np.asarray(axes[a], dtype=float).reshape(-1) for a in names]
    shape = tuple(v.size for v in values)
    total = int(np.prod(shape)) if values else 1
    step = max(1, int(points_per_pass))
    keep = None
    for lo in range(0, total, step):
        # the grid points lo .. lo+step of the row-major ("ij") mesh, without building the mesh
        idx = np.unravel_index(np.arange(lo, min(lo + step, total)), shape) if values else ()
        flat = {n: v[i] for n, v, i in zip(names, values, idx)}
        res = evaluate(specs, **flat, **extra)
        if keep is None:
            keep = list(res) if columns is None else _sweep_columns(res, names, columns)
        n = max((np.asarray(v).size for v in res.values()), default=1)
        yield pl.DataFrame({k: np.broadcast_to(np.asarray(res[k]), (n,)) for k in keep})
        del res


def _sweep_columns(res: dict, names: list, columns) -> list:
    """The output columns of a narrowed sweep: the swept axes, then ``columns`` in ``res`` order."""
    want = [columns] if isinstance(columns, str) else list(columns)
    bad = [c for c in want if c not in res]
    if bad:
        raise ValueError(f"sweep: columns={bad!r} are not outputs of the analytical engine; "
                         f"expected some of {sorted(res)}")
    return [k for k in res if k in names or k in want]


def sweep(specs: Specs, points_per_pass: int = pareto.POINTS_PER_PASS, columns=None, out=None,
          stream_mb=None, **axes):
    """Evaluate the cartesian product of ``axes`` (each a list/array of values) with numpy,
    ``points_per_pass`` grid points at a time (``sweep_chunks``).

    Axes not given keep the specs' values. Returns one row per grid point (in grid order) with
    the axis values and every metric of ``evaluate`` (only the swept axes and ``columns`` when
    ``columns`` is given).

    Memory: the working set is one chunk (~1.1 KB a point of 16,384); the result is ~8 bytes per
    row and column (58 columns: 464 MB for 10^6 points). ``out=DIR`` writes each chunk as
    ``DIR/part-NNNNNN.parquet`` (parts in grid order) and returns ``polars.scan_parquet`` of them,
    a LazyFrame with the same rows: the process holds one chunk at a time. The parts are written
    into ``DIR.partial`` and renamed to ``DIR`` when the last one is written, so an interrupted
    sweep leaves no ``DIR`` behind; an existing ``DIR`` is refused (ValueError) rather than
    mixed with. Without ``out``, a result that would hold more than ``stream_mb`` MB (default
    ``specs.analytical.sweep_stream_mb``; the first chunk's size per row x the grid's points;
    0 = never) is streamed the same way into ``DIR = <new temporary folder>/grid`` (Python's
    ``tempfile.mkdtemp``, prefix ``simllm-sweep-``; the parts stay there for the LazyFrame, remove
    the folder when done); a smaller one is returned as one DataFrame, as before.
    """
    chunks = sweep_chunks(specs, points_per_pass, columns, **axes)
    if out is None:
        limit = specs.analytical.sweep_stream_mb if stream_mb is None else float(stream_mb)
        first = next(chunks, None)
        total = int(np.prod([np.asarray(axes[a]).size for a in axes if a in GRID_AXES]))
        if (first is None or not limit
                or first.estimated_size() / max(first.height, 1) * total <= limit * 1e6):
            frames = [] if first is None else [first, *chunks]
            return frames[0] if len(frames) == 1 else pl.concat(frames, rechunk=False)
        import itertools
        import tempfile

        out = os.path.join(tempfile.mkdtemp(prefix="simllm-sweep-"), "grid")
        chunks = itertools.chain([first], chunks)
    return _write_parts(Path(out), chunks)


def _write_parts(out: Path, chunks) -> pl.LazyFrame:
    """Write the frames of ``chunks`` as ``out/part-NNNNNN.parquet`` (into ``out.partial``, renamed
    to ``out`` after the last; removed on any error) and return their LazyFrame (``sweep``)."""
    if out.exists():
        raise ValueError(f"sweep: out={str(out)!r} exists; expected a new directory for the parquet parts")
    part = out.with_name(out.name + ".partial")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    try:
        for i, frame in enumerate(chunks):
            frame.write_parquet(part / f"part-{i:06d}.parquet")
            del frame
        os.replace(part, out)
    except BaseException:
        shutil.rmtree(part, ignore_errors=True)
        raise
    return pl.scan_parquet(out / "part-*.parquet")


__all__ = ["run", "sweep", "sweep_chunks", "run_pareto"]
