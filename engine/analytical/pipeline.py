"""The analytical pipeline: specs (+ optional grid axes as numpy arrays) -> per-point metrics.

memory/kvcache -> step constants (flops, traffic, comm) -> prefill -> decode -> B*, energy,
speculative decoding, disaggregation; each from its own module. All quantities SI; reported
metrics carry their unit in the name. Any axis in ``GRID_AXES`` may be an array; arrays broadcast
against each other, so a whole grid is evaluated in one pass.

Per-device time of a pass on a replica of tp x sp devices per stage and pp stages
(``engine.analytical.step``): per operator (dense matmuls, routed experts, attention core)
    compute = FLOPs / (tp sp) / (peak[math dtype] x compute_efficiency)
    memory  = (weights / tp [experts / max(tp, ep)] + KV / (min(tp, KV heads) sp)
               + activations / (tp sp)) / (HBM bandwidth x memory_bandwidth_efficiency)
    roof    = sum over operators of max(compute, memory)   (roofline = op; "pass": max of sums)
    time    = roof + comm - overlap x min(roof, comm)       (``parallel``)
TTFT: ``prefill`` (single pass with pipeline warm-up, or chunked); TPOT: ``decode`` (exact mean
over the decode contexts, pipeline microbatching). Framework overheads (calibration): every
forward pass adds step_overhead, every emitted token per_token_overhead, TTFT and E2E add
per_request_overhead once.
"""

from dataclasses import replace

import numpy as np

from engine.analytical import decode, disagg, energy, kvcache, memory, prefill, specdec, step
from engine.analytical.params import param_counts
from engine.errors import SpecError
from engine.spec import Specs

#: Quantities that may be given as numpy arrays to evaluate a grid in one pass.
GRID_AXES = ("batch_size", "prompt_len", "output_len", "tp", "pp", "ep", "sp", "dp",
             "prefill_chunk", "peak_flops_s", "hbm_bandwidth_bytes_s", "hbm_capacity_bytes",
             "compute_efficiency", "memory_bandwidth_efficiency")


def _axes(specs: Specs, overrides: dict) -> dict:
    """Scalar values from the specs, replaced by any array given in ``overrides``."""
    unknown = set(overrides) - set(GRID_AXES)
    if unknown:
        raise SpecError("engine.grid", sorted(unknown), "axes among " + ", ".join(GRID_AXES))
    hw, w, p, c = specs.hardware, specs.workload, specs.partition, specs.calibration
    base = dict(
        batch_size=w.batch_size, prompt_len=w.prompt_len, output_len=w.output_len,
        tp=p.tp, pp=p.pp, ep=p.ep, sp=p.sp, dp=p.dp,
        prefill_chunk=specs.analytical.prefill_chunk,
        peak_flops_s=hw.peak_flops(specs.model.math_dtype),
        hbm_bandwidth_bytes_s=hw.hbm_bandwidth_bytes_s, hbm_capacity_bytes=hw.hbm_capacity_bytes,
        compute_efficiency=c.compute_efficiency,
        memory_bandwidth_efficiency=c.memory_bandwidth_efficiency,
    )
    base.update(overrides)
    return {k: np.asarray(v, dtype=float) for k, v in base.items()}


def _visible_hbm(specs: Specs, x: dict):
    """Device memory the runtime reports [bytes] at this grid point: the point's ``hbm_capacity``
    x the chip's ``hbm_visible_fraction`` (``HardwareSpec``; 1 when its sheet gives no
    ``hbm_visible``). Every memory rule (KV room, fit) sizes against it."""
    return x["hbm_capacity_bytes"] * specs.hardware.hbm_visible_fraction


#: What bounds a phase, indexed by ``_bound``'s codes.
_BOUND_LABELS = np.array(["compute", "memory", "comm"])


def _bound(cmp, mem, com):
    """'comm' where comm exceeds both compute and memory seconds, else 'compute' where compute >=
    memory, else 'memory'; a numpy string array gathered from integer codes (one comparison per
    label instead of string-valued ``np.where``s, the same strings)."""
    code = np.where(com > np.maximum(cmp, mem), 2, np.where(cmp >= mem, 0, 1))
    return _BOUND_LABELS[code] if code.ndim else np.asarray(_BOUND_LABELS[code])


def _disagg(specs: Specs, x: dict, sm_d, ttft_co_s, tpot_s, fits, out: dict) -> None:
    """Disaggregated vs co-located prefill/decode metrics (``disagg``) added to ``out`` in place;
    NaN where the decode partition (``fits``) or the prefill replica does not fit."""
    d, m, opt = specs.analytical.disagg, specs.model, specs.analytical
    B, S, N = x["batch_size"], x["prompt_len"], x["output_len"]
    tp, pp, sp = x["tp"], x["pp"], x["sp"]
    ptp = d.prefill_tp or tp
    ppp = d.prefill_pp or pp
    psp = d.prefill_sp or sp
    pep = np.minimum(x["ep"], ptp * psp)
    sm_p = step.build(specs, ptp, ppp, pep, psp, x["peak_flops_s"], x["hbm_bandwidth_bytes_s"],
                      x["compute_efficiency"], x["memory_bandwidth_efficiency"])
    req = specs.request_overhead_s(S)
    pf = prefill.ttft(sm_p, m, B, S, x["prefill_chunk"], ppp, opt.pp_microbatches, req)
    one_p = prefill.ttft(sm_p, m, 1.0, S, x["prefill_chunk"], ppp, opt.pp_microbatches, 0.0)["ttft_s"]
    one_co = prefill.ttft(sm_d, m, 1.0, S, x["prefill_chunk"], pp, opt.pp_microbatches, 0.0)["ttft_s"]
    p_dev, d_dev = ptp * ppp * psp, tp * pp * sp
    cal = specs.calibration
    chunk = np.where((x["prefill_chunk"] > 0) & (x["prefill_chunk"] < S), x["prefill_chunk"], S)
    p_mem = kvcache.footprint(m, B, S, ptp, ppp, pep, psp, np.where(chunk < S, chunk, B * S),
                              _visible_hbm(specs, x),
                              cal.memory_reserve_bytes, specs.kv_usable_fraction, opt.kv_block_tokens)
    mismatch = ((ptp != tp) | (ppp != pp) | (psp != sp)).astype(float)
    hand = disagg.handoff_s(B, S, memory.kv_bytes_per_token(m), m.num_layers, opt.kv_block_tokens,
                            np.minimum(p_dev, d_dev), d.link_bandwidth_bytes_s, d.link_latency_s,
                            d.per_wr_s, d.relayout_factor, mismatch)
    exposed = disagg.exposed_s(hand, pf["ttft_s"], d.overlap)
    tpot_co = disagg.colocated_tpot(tpot_s, B, N, one_co)
    thr_d = disagg.throughput(B, N, tpot_s, one_p, d.prefill_replicas)
    ok = p_mem["fits"] & fits
    out.update(
        disagg_prefill_fits=ok,
        disagg_ttft_ms=np.where(ok, (pf["ttft_s"] + exposed) * 1e3, np.nan),
        disagg_prefill_ttft_ms=np.where(ok, pf["ttft_s"] * 1e3, np.nan),
        disagg_handoff_ms=hand * 1e3, disagg_exposed_handoff_ms=exposed * 1e3,
        disagg_tpot_ms=np.where(ok, tpot_s * 1e3, np.nan),
        disagg_throughput_tok_s_per_gpu=np.where(ok, thr_d / (d_dev + d.prefill_replicas * p_dev), np.nan),
        disagg_devices=(d_dev + d.prefill_replicas * p_dev) * x["dp"],
        colocated_ttft_ms=np.where(fits, ttft_co_s * 1e3, np.nan),
        colocated_tpot_ms=np.where(fits, tpot_co * 1e3, np.nan),
        colocated_throughput_tok_s_per_gpu=np.where(fits, B / tpot_co / d_dev, np.nan),
    )


#: The outputs read from the roofline's prefill evaluation (a second one under kernel pricing).
_PREFILL_ROOF_KEYS = ("prefill_compute_ms", "prefill_memory_ms", "prefill_comm_ms", "prefill_bound")
#: The energy model's outputs (``energy``), evaluated only when one is needed.
_ENERGY_KEYS = ("power_w_per_gpu", "energy_j_per_token", "energy_decode_j_per_token",
                "energy_prefill_j_per_token", "energy_prefill_j_per_request",
                "energy_decode_j_per_request", "energy_j_per_request", "power_prefill_w_per_gpu")


def evaluate(specs: Specs, *, lean: bool = False, need=None, sm=None, **overrides) -> dict:
    """All metrics of the analytical model for the specs, broadcast over any array ``overrides``.

    Returns a dict of numpy arrays (SI inside, units in the names). Points that do not fit in
    memory carry NaN latencies and throughputs and ``fits_in_memory = False``. ``lean`` skips
    B*, the FLOP/byte totals, C* search, speculative decoding and disaggregation (for big sweeps).
    ``need`` (a collection of output names, None = all): the prefill's bound columns
    (``_PREFILL_ROOF_KEYS``; under kernel pricing the roofline's prefill pass) and the energy
    columns (``_ENERGY_KEYS``) are evaluated only when one of them is needed; without it those keys
    are absent. ``sm``: the StepModel of these points when the caller built it already
    (``step.build`` of the same partition, peaks and efficiencies, e.g. once per distinct partition
    of a sweep and ``StepModel.take`` per pass). No other number changes.
    """
    m, cal, opt = specs.model, specs.calibration, specs.analytical
    x = _axes(specs, overrides)
    B, S, N, C = x["batch_size"], x["prompt_len"], x["output_len"], x["prefill_chunk"]
    tp, pp, ep, sp, dp = x["tp"], x["pp"], x["ep"], x["sp"], x["dp"]
    pc = param_counts(m)
    if sm is None:
        sm = step.build(specs, tp, pp, ep, sp, x["peak_flops_s"], x["hbm_bandwidth_bytes_s"],
                        x["compute_efficiency"], x["memory_bandwidth_efficiency"])
    want = (lambda keys: True) if need is None else (lambda keys: any(k in need for k in keys))  # noqa: E731

    # --- memory (per device) ---
    # tokens of the largest pass: a chunk (the token budget) or all B prompts in one pass
    pass_tokens = np.where((C > 0) & (C < S), C, B * S)
    # KV room by the framework profile's own rule (kvcache.framework_rule: the one the DES sizes
    # its KV blocks with), the activations at this batch's pass
    rule = kvcache.framework_rule(specs.framework, specs.framework.max_num_batched_tokens)
    mem = kvcache.footprint(m, B, S + N, tp, pp, ep, sp, pass_tokens, _visible_hbm(specs, x),
                            cal.memory_reserve_bytes, specs.kv_usable_fraction, opt.kv_block_tokens,
                            rule)
    if opt.spec_decode.method != "none":     # the draft's weights and KV share the HBM (specdec)
        mem = _with_draft_memory(specs, mem, x)
    fits = mem["fits"]

    # --- prefill ---
    req = specs.request_overhead_s(S)
    pf = prefill.ttft(sm, m, B, S, C, pp, opt.pp_microbatches, req)
    ttft_s = pf["ttft_s"]

    # --- decode ---
    dc = decode.tpot(sm, m, B, S, N, pp, opt.pp_microbatches)
    tpot_s = np.where(N >= 2, dc["tpot_s"], np.nan)
    # what bounds a phase, B* and FLOP/byte are the roofline's physics whatever prices the pass:
    # under kernel pricing the roofline's compute, memory and comm seconds of the same passes
    # (decode.bound_parts: no second time evaluation; the prefill's only when its columns are read)
    sm_r = replace(sm, kern=None) if sm.kern is not None else sm
    pf_r = None
    if sm_r is not sm:
        if want(_PREFILL_ROOF_KEYS):
            pf_r = prefill.ttft(sm_r, m, B, S, C, pp, opt.pp_microbatches, req)
        dc_r = decode.bound_parts(sm_r, m, B, S, N, pp, opt.pp_microbatches)
    else:
        dc_r = dc
        if want(_PREFILL_ROOF_KEYS):
            pf_r = pf
    bstar = np.nan if lean else decode.batch_star(sm_r, m, S, N)

    # --- speculative decoding (specdec): the headline TTFT/TPOT/throughput with it enabled ---
    sd = opt.spec_decode
    spec = _spec_decode(specs, x, sm, dc, pf) if sd.method != "none" else None
    # decode cycle: its time, the devices' roofline-busy time in it, tokens per sequence per cycle
    cyc_s, cyc_busy_s, per_cycle = dc["tpot_s"], dc["roof_s"], 1.0
    if spec is not None:
        tpot_plain_s = tpot_s
        tpot_s = np.where(N >= 2, spec["tpot_s"], np.nan)
        ttft_s = ttft_s + spec["ttft_add_s"]
        cyc_s, cyc_busy_s, per_cycle = spec["cycle_s"], spec["busy_s"], spec["tokens"]

    e2e_s = ttft_s + np.where(N >= 2, (N - 1) * tpot_s, 0.0)
    dev_rep = tp * pp * sp
    devices = dev_rep * dp
    thr = dp * B * N / e2e_s

    def nan_if_not_fit(v):
        return np.where(fits, v, np.nan)

    # --- energy (energy.py): decode per output token (v1 metric), prefill per prompt token ---
    energy_out = {}
    if want(_ENERGY_KEYS):
        tdp, idle = specs.hardware.tdp_w, opt.idle_power_fraction
        pw = energy.power_w(tdp, idle, cyc_busy_s, cyc_s)
        j_tok = energy.joules_per_token(pw, dev_rep, cyc_s, B * per_cycle)
        # device time of the prefill: TTFT less the per-request (host/client) overhead, plus the
        # draft's pass over the prompt with speculation
        pf_s = pf["ttft_s"] - req
        pf_busy = pf["roof_s"]
        if spec is not None:
            pf_s, pf_busy = pf_s + spec["ttft_add_s"], pf_busy + spec["ttft_add_busy_s"]
        pw_pf = energy.power_w(tdp, idle, pf_busy, pf_s)
        ej = energy.phase_energy(pw_pf, pw, dev_rep, pf_s, B, S, N, j_tok)
        energy_out = dict(
            power_w_per_gpu=nan_if_not_fit(pw),
            energy_j_per_token=nan_if_not_fit(j_tok),
            energy_decode_j_per_token=nan_if_not_fit(j_tok),
            energy_prefill_j_per_token=nan_if_not_fit(ej["prefill_j_per_token"]),
            energy_prefill_j_per_request=nan_if_not_fit(ej["prefill_j_per_request"]),
            energy_decode_j_per_request=nan_if_not_fit(ej["decode_j_per_request"]),
            energy_j_per_request=nan_if_not_fit(ej["j_per_request"]),
            power_prefill_w_per_gpu=nan_if_not_fit(pw_pf))

    out = dict(x)
    out.update(
        fits_in_memory=fits,
        weights_gb=mem["weights"] / 1e9,
        kv_cache_gb=mem["kv"] / 1e9,
        kv_capacity_gb=mem["kv_capacity"] / 1e9,
        activation_gb=mem["activations"] / 1e9,
        max_concurrent_seqs=mem["max_seqs"],
        kv_fragmentation=mem["fragmentation"],
        params_b=np.full_like(B, pc.total / 1e9),
        kv_bytes_per_token=np.full_like(B, memory.kv_bytes_per_token(m)),
        ttft_ms=nan_if_not_fit(ttft_s * 1e3),
        tpot_ms=nan_if_not_fit(tpot_s * 1e3),
        e2e_ms=nan_if_not_fit(e2e_s * 1e3),
        throughput_tok_s=nan_if_not_fit(thr),
        throughput_tok_s_per_gpu=nan_if_not_fit(thr / devices),
        interactivity_tok_s_per_user=nan_if_not_fit(1.0 / tpot_s),
        decode_throughput_tok_s_per_gpu=nan_if_not_fit(B * per_cycle / cyc_s / dev_rep),
        prefill_passes=pf["passes"],
        decode_compute_ms=dc_r["compute_s"] * 1e3, decode_memory_ms=dc_r["memory_s"] * 1e3,
        decode_comm_ms=dc_r["comm_s"] * 1e3,
        decode_bound=_bound(dc_r["compute_s"], dc_r["memory_s"], dc_r["comm_s"]),
        decode_microbatches=dc["microbatches"],
        ridge_flop_per_byte=x["peak_flops_s"] / x["hbm_bandwidth_bytes_s"],
        batch_star=bstar,
        batch_star_matmul=decode.batch_star_matmul(sm_r, m) + 0.0 * B,
        **energy_out,
        devices=devices,
    )
    if pf_r is not None:
        out.update(prefill_compute_ms=pf_r["compute_s"] * 1e3, prefill_memory_ms=pf_r["memory_s"] * 1e3,
                   prefill_comm_ms=pf_r["comm_s"] * 1e3,
                   prefill_bound=_bound(pf_r["compute_s"], pf_r["memory_s"], pf_r["comm_s"]))
    if spec is not None:
        out.update(spec_expected_tokens=np.full_like(B, specdec.expected_tokens(sd.acceptance, sd.gamma)),
                   spec_tpot_ms=nan_if_not_fit(spec["tpot_s"] * 1e3),
                   spec_verify_ms=spec["verify_s"] * 1e3,
                   spec_draft_ms=spec["draft_s"] * 1e3,
                   spec_ttft_add_ms=spec["ttft_add_s"] * 1e3,
                   tpot_no_spec_ms=nan_if_not_fit(tpot_plain_s * 1e3),
                   spec_speedup=nan_if_not_fit(tpot_plain_s / tpot_s),
                   spec_interactivity_tok_s_per_user=nan_if_not_fit(1.0 / spec["tpot_s"]),
                   spec_throughput_tok_s_per_gpu=nan_if_not_fit(B / spec["tpot_s"] / dev_rep))
    if lean:
        return out
    _flops_bytes(specs, sm_r, x, out)
    if opt.chunk_search:
        c_star, t_star = prefill.optimal_chunk(sm, m, B, S, pp, opt.pp_microbatches, req,
                                               opt.chunk_candidates)
        out.update(chunk_star=c_star, ttft_at_chunk_star_ms=nan_if_not_fit(t_star * 1e3))
    if opt.disagg.enabled:
        _disagg(specs, x, sm, ttft_s, tpot_s, fits, out)
    return out


def _with_draft_memory(specs: Specs, mem: dict, x: dict) -> dict:
    """The footprint with the draft's weights and KV beside the target's (specdec.draft_memory):
    weights + draft weights, KV room less the draft weights x usable fraction, KV per sequence
    target + draft (the draft's at the same paged context)."""
    w_d, kvd = specdec.draft_memory(specs, x["tp"], x["ep"], x["sp"])
    B, ctx = x["batch_size"], x["prompt_len"] + x["output_len"]
    blk = specs.analytical.kv_block_tokens
    seq_t = mem["kv"] / B
    seq_d = kvcache.paged_tokens(ctx, blk) * kvd
    cap = np.maximum(mem["kv_capacity"] - w_d * specs.kv_usable_fraction, 0.0)
    w = mem["weights"] + w_d
    kv = mem["kv"] + B * seq_d
    fits = ((w + mem["activations"] + specs.calibration.memory_reserve_bytes <= _visible_hbm(specs, x))
            & (kv <= cap))
    return dict(mem, weights=w, kv=kv, kv_capacity=cap, fits=fits,
                max_seqs=np.floor(cap / (seq_t + seq_d)))


def _spec_decode(specs: Specs, x: dict, sm, dc: dict, pf: dict) -> dict:
    """Speculative decoding (``specdec``): per cycle of B sequences, gamma draft passes (the
    draft model's or the MTP head's own StepModel; or a fixed fraction of a target step) plus
    one verify pass of gamma + 1 query tokens; TPOT = cycle / E[tokens]. Also the draft's pass
    over the prompt added to TTFT. Dict of arrays [s]."""
    m, opt = specs.model, specs.analytical
    sd = opt.spec_decode
    B, S, N, C = x["batch_size"], x["prompt_len"], x["output_len"], x["prefill_chunk"]
    tp, pp, ep, sp = x["tp"], x["pp"], x["ep"], x["sp"]
    ver = decode.tpot(sm, m, B, S, N, pp, opt.pp_microbatches, q=sd.gamma + 1.0)
    dsp = specdec.draft_specs(specs)
    if dsp is None:         # a fixed fraction of one target step; nothing added to TTFT
        draft_s = sd.gamma * sd.draft_cost_fraction * dc["tpot_s"]
        draft_busy = sd.gamma * sd.draft_cost_fraction * dc["roof_s"]
        ttft_add = ttft_add_busy = np.zeros_like(draft_s)
    else:
        dm = dsp.model
        if sd.method == "mtp":
            tp_d, ep_d = tp, ep
        else:   # the target's tp where the draft's heads divide, else 1
            ok = ((dm.num_heads % tp == 0) & ((dm.num_kv_heads % tp == 0) | (tp % dm.num_kv_heads == 0)))
            tp_d, ep_d = np.where(ok, tp, 1.0), 1.0
        # the draft runs at the peak of its own math dtype (a bf16 draft beside an fp8 target: the
        # bf16 peak), moved by the same what-if factor as the target's peak in a sweep
        hw = specs.hardware
        peak_d = x["peak_flops_s"] * (hw.peak_flops(dm.math_dtype) / hw.peak_flops(m.math_dtype))
        sm_d = step.build(dsp, tp_d, 1.0, ep_d, sp, peak_d, x["hbm_bandwidth_bytes_s"],
                          x["compute_efficiency"], x["memory_bandwidth_efficiency"])
        dd = decode.tpot(sm_d, dm, B, S, N, 1.0, 1)
        draft_s, draft_busy = sd.gamma * dd["tpot_s"], sd.gamma * dd["roof_s"]
        dp_ = prefill.ttft(sm_d, dm, B, S, C, 1.0, 1, 0.0)
        ttft_add, ttft_add_busy = dp_["ttft_s"], dp_["roof_s"]
    e = specdec.expected_tokens(sd.acceptance, sd.gamma)
    cycle = draft_s + ver["tpot_s"]
    return dict(tpot_s=cycle / e, cycle_s=cycle, busy_s=draft_busy + ver["roof_s"], tokens=e,
                verify_s=ver["tpot_s"], draft_s=draft_s, ttft_add_s=ttft_add, ttft_add_busy_s=ttft_add_busy)


def _flops_bytes(specs: Specs, sm, x: dict, out: dict) -> None:
    """FLOPs and HBM bytes of the (single-pass) prefill and of a mid-context decode step, per
    replica, for the intensity figures (FLOP/byte)."""
    m = specs.model
    B, S, N = x["batch_size"], x["prompt_len"], x["output_len"]
    tp, sp = x["tp"], x["sp"]
    peak_rep = x["peak_flops_s"] * x["compute_efficiency"] * tp * sp
    bw = x["hbm_bandwidth_bytes_s"] * x["memory_bandwidth_efficiency"]
    _, cmp_p, mem_p, _ = prefill._pass(sm, m, B, S, 0.0, B)
    _, cmp_d, mem_d = decode.step_parts(sm, m, B, S, N)
    # memory seconds are per device: x devices sharing the bytes gives replica bytes (approx.:
    # weights split tp ways, KV min(tp, kv heads) ways)
    out.update(prefill_flops=cmp_p * peak_rep, prefill_bytes=mem_p * bw * tp * sp,
               decode_flops=cmp_d * peak_rep, decode_bytes=mem_d * bw * tp * sp)
    out["prefill_intensity_flop_per_byte"] = out["prefill_flops"] / out["prefill_bytes"]
    out["decode_intensity_flop_per_byte"] = out["decode_flops"] / out["decode_bytes"]
