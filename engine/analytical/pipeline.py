"""The analytical pipeline: specs (+ optional grid axes as numpy arrays) -> per-point metrics.

memory -> flops -> traffic -> comm -> latency, each from its own module. All quantities SI;
reported metrics carry their unit in the name. Any axis in ``GRID_AXES`` may be an array; arrays
broadcast against each other, so a whole grid is evaluated in one pass.

Per-device time of one phase on a replica of tp x pp x sp devices (pp stages run one after
another for a given batch, so pp does not shorten a step; tp and sp split the work):
    compute = FLOPs / (tp * sp) / (peak * compute_efficiency)
    memory  = (weights / tp + KV / (min(tp, nkv) * sp) + activations / (tp * sp))
              / (HBM bandwidth * memory_bandwidth_efficiency)
    comm    = 2 L ring_allreduce(tokens * h * act_bytes, tp) + (pp - 1) p2p(tokens * h * act_bytes)
    time    = max(compute, memory) + comm            (no compute/comm overlap in v1)
Framework overheads (calibration): every forward pass adds step_overhead + B x per_token_overhead
(B sequences emit a token); TTFT and E2E add per_request_overhead once.
"""

import numpy as np

from engine.analytical import attention, comm, flops, latency, memory, traffic
from engine.analytical.params import param_counts
from engine.errors import SpecError
from engine.spec import DTYPE_BYTES, Specs

#: Quantities that may be given as numpy arrays to evaluate a grid in one pass.
GRID_AXES = ("batch_size", "prompt_len", "output_len", "tp", "pp", "sp", "dp",
             "peak_flops_s", "hbm_bandwidth_bytes_s", "hbm_capacity_bytes",
             "compute_efficiency", "memory_bandwidth_efficiency")


def _axes(specs: Specs, overrides: dict) -> dict:
    """Scalar values from the specs, replaced by any array given in ``overrides``."""
    unknown = set(overrides) - set(GRID_AXES)
    if unknown:
        raise SpecError("engine.grid", sorted(unknown), "axes among " + ", ".join(GRID_AXES))
    hw, w, p, c = specs.hardware, specs.workload, specs.partition, specs.calibration
    base = dict(
        batch_size=w.batch_size, prompt_len=w.prompt_len, output_len=w.output_len,
        tp=p.tp, pp=p.pp, sp=p.sp, dp=p.dp,
        peak_flops_s=hw.peak_flops(specs.model.math_dtype),
        hbm_bandwidth_bytes_s=hw.hbm_bandwidth_bytes_s, hbm_capacity_bytes=hw.hbm_capacity_bytes,
        compute_efficiency=c.compute_efficiency,
        memory_bandwidth_efficiency=c.memory_bandwidth_efficiency,
    )
    base.update(overrides)
    return {k: np.asarray(v, dtype=float) for k, v in base.items()}


def _link(specs: Specs, devices_per_replica):
    """(bytes/s, latency s) of the link a replica's collectives use: scale-up when the replica fits
    in one node (devices_per_replica <= devices_per_node), else scale-out; x comm_efficiency."""
    hw, eff = specs.hardware, specs.calibration.comm_efficiency
    needs = np.any(devices_per_replica > 1)
    up_bw = hw.scaleup_bandwidth_bytes_s
    out_bw = hw.scaleout_bandwidth_bytes_s
    in_node = devices_per_replica <= hw.devices_per_node
    if needs and up_bw is None and np.any(in_node & (devices_per_replica > 1)):
        raise SpecError("hardware.scaleup_bandwidth", None,
                        f"a scale-up link bandwidth for {hw.name} (the partition spans devices)")
    if needs and out_bw is None and np.any(~in_node):
        raise SpecError("hardware.scaleout_bandwidth", None,
                        f"a scale-out bandwidth for {hw.name}: the replica spans "
                        f"more than devices_per_node={hw.devices_per_node} devices")
    bw = np.where(in_node, up_bw or np.nan, out_bw or np.nan) * eff
    lat = np.where(in_node, hw.scaleup_latency_s, hw.scaleout_latency_s)
    return bw, lat


def evaluate(specs: Specs, **overrides) -> dict:
    """All metrics of the analytical model for the specs, broadcast over any array ``overrides``.

    Returns a dict of numpy arrays (SI inside, units in the names). Points that do not fit in
    memory carry NaN latencies and throughputs and ``fits_in_memory = False``.
    """
    m = specs.model
    x = _axes(specs, overrides)
    B, S, N = x["batch_size"], x["prompt_len"], x["output_len"]
    tp, pp, sp, dp = x["tp"], x["pp"], x["sp"], x["dp"]
    peak = x["peak_flops_s"] * x["compute_efficiency"]
    bw = x["hbm_bandwidth_bytes_s"] * x["memory_bandwidth_efficiency"]
    wbytes = DTYPE_BYTES[m.weight_dtype]
    act_bytes = DTYPE_BYTES[m.activation_dtype]
    pc = param_counts(m)
    L, nh, dh, h = m.num_layers, m.num_heads, m.head_dim, m.hidden_size

    # --- memory (per device) ---
    weights_total = pc.total * wbytes
    weights_dev = weights_total / (tp * pp)
    kvpt = memory.kv_bytes_per_token(m)
    kv_layer = memory.kv_bytes_per_layer_token(m)
    kv_split = memory.kv_shard_factor(memory.kv_heads(m), tp, pp, sp)
    kv_seq = memory.kv_layer_positions(m, S + N) * kv_layer  # bytes of one finished sequence
    kv_dev = B * kv_seq / kv_split
    act_dev = memory.activation_peak_bytes(m, B * S / sp, B, tp)
    reserve = specs.calibration.memory_reserve_bytes
    kv_cap = memory.kv_capacity_bytes(x["hbm_capacity_bytes"], weights_dev, act_dev, reserve,
                                      specs.calibration.kv_usable_fraction)
    fits = (weights_dev + act_dev + reserve <= x["hbm_capacity_bytes"]) & (kv_dev <= kv_cap)
    max_seqs = np.floor(kv_cap / (kv_seq / kv_split))

    # --- per-replica link ---
    link_bw, link_lat = _link(specs, tp * pp * sp)

    def comm_time(tokens):
        msg = tokens * h * act_bytes
        return (2 * L * comm.ring_allreduce_time(msg, tp, link_bw, link_lat)
                + np.where(pp > 1, comm.p2p_time(msg, pp - 1, link_bw, link_lat), 0.0))

    act_elems = traffic.activation_elems_per_token(m)
    kv_read_split = np.minimum(tp, memory.kv_heads(m)) * sp  # KV of a layer split over these devices

    # --- prefill: B prompts of S tokens in one pass ---
    pf_flops = B * (2.0 * pc.per_token_matmul * S + 2.0 * pc.lm_head
                    + attention.pair_flops_per_layer(m, "prefill") * attention.prefill_layer_pairs(m, S))
    pf_weight_bytes = traffic.weight_bytes_streamed(
        weights_total, pc.experts * wbytes, pc.embedding * wbytes, m.num_experts,
        m.experts_per_token, B * S)
    pf_bytes = pf_weight_bytes + B * S * (kvpt + act_elems * act_bytes)
    pf_compute_s = pf_flops / (tp * sp) / peak
    pf_memory_s = (pf_weight_bytes / tp + B * S * kvpt / kv_read_split
                   + B * S * act_elems * act_bytes / (tp * sp)) / bw
    pf_comm_s = comm_time(B * S / sp)
    cal = specs.calibration
    step_oh = cal.step_overhead_s + B * cal.per_token_overhead_s
    ttft_s = np.maximum(pf_compute_s, pf_memory_s) + pf_comm_s + step_oh + cal.per_request_overhead_s

    # --- decode: B sequences, one token each, context c in [S+1, S+N-1] ---
    dc_weight_bytes = traffic.weight_bytes_streamed(
        weights_total, pc.experts * wbytes, pc.embedding * wbytes, m.num_experts,
        m.experts_per_token, B)
    # attention layer-pairs and KV layer-positions at context c are affine in c: full layers
    # give the slope, sliding-window layers min(c, W) taken at the mid-decode context (exact
    # whenever the prompt already fills the window, S + 1 >= W).
    c0, c1 = S + 1, S + np.maximum(N - 1, 1)
    c_mid = (c0 + c1) / 2
    lw = m.sliding_window_layers
    win = lw * np.minimum(c_mid, m.sliding_window) if lw else 0.0
    pf_dec = attention.pair_flops_per_layer(m, "decode")
    fa = B * (2.0 * (pc.per_token_matmul + pc.lm_head) + pf_dec * win)
    fb = B * pf_dec * (L - lw)
    kv_a = B * kv_layer * win          # bytes read per step independent of c (windowed layers)
                                       # (+ B * kvpt written for the new token, below)
    kv_b = B * kv_layer * (L - lw)     # bytes read per step per position of context
    # compute time a_c + b_c * c ; memory time a_m + b_m * c   (per device, seconds)
    a_c = fa / tp / peak
    b_c = fb / (tp * sp) / peak
    a_m = ((dc_weight_bytes / tp + (kv_a + B * kvpt) / kv_read_split + B * act_elems * act_bytes / tp)
           / bw)
    b_m = kv_b / kv_read_split / bw
    dc_comm_s = comm_time(B)
    tpot_s = latency.mean_of_max_affine(a_c, b_c, a_m, b_m, c0, c1) + dc_comm_s + step_oh
    tpot_s = np.where(N >= 2, tpot_s, np.nan)
    dc_compute_s = a_c + b_c * c_mid
    dc_memory_s = a_m + b_m * c_mid
    dc_flops = fa + fb * c_mid
    dc_bytes = dc_weight_bytes + kv_a + kv_b * c_mid + B * kvpt + B * act_elems * act_bytes

    # B* at the mid-decode context (dense weights stream the same bytes whatever the batch).
    per_seq_c = (a_c + b_c * c_mid) / B
    per_seq_m = ((kv_a + kv_b * c_mid + B * kvpt) / kv_read_split + B * act_elems * act_bytes / tp) / bw / B
    w_time = (dc_weight_bytes / tp) / bw
    bstar = latency.batch_star(w_time, per_seq_m, per_seq_c)
    if m.is_moe:
        bstar = np.full_like(bstar, np.nan)  # touched experts grow with B: no closed form (v1)

    e2e_s = ttft_s + np.where(N >= 2, (N - 1) * tpot_s, 0.0)
    devices = tp * pp * sp * dp
    thr = dp * B * N / e2e_s

    def bound(cmp, mem, com):
        return np.where(com > np.maximum(cmp, mem), "comm", np.where(cmp >= mem, "compute", "memory"))

    nan_if_not_fit = lambda v: np.where(fits, v, np.nan)  # noqa: E731
    out = dict(x)
    out.update(
        fits_in_memory=fits,
        weights_gb=weights_dev / 1e9,
        kv_cache_gb=kv_dev / 1e9,
        kv_capacity_gb=kv_cap / 1e9,
        activation_gb=act_dev / 1e9,
        max_concurrent_seqs=max_seqs,
        params_b=np.full_like(B, pc.total / 1e9),
        kv_bytes_per_token=np.full_like(B, kvpt),
        ttft_ms=nan_if_not_fit(ttft_s * 1e3),
        tpot_ms=nan_if_not_fit(tpot_s * 1e3),
        e2e_ms=nan_if_not_fit(e2e_s * 1e3),
        throughput_tok_s=nan_if_not_fit(thr),
        throughput_tok_s_per_gpu=nan_if_not_fit(thr / devices),
        interactivity_tok_s_per_user=nan_if_not_fit(1.0 / tpot_s),
        prefill_flops=pf_flops, prefill_bytes=pf_bytes,
        prefill_compute_ms=pf_compute_s * 1e3, prefill_memory_ms=pf_memory_s * 1e3,
        prefill_comm_ms=pf_comm_s * 1e3,
        prefill_bound=bound(pf_compute_s, pf_memory_s, pf_comm_s),
        prefill_intensity_flop_per_byte=pf_flops / pf_bytes,
        decode_flops=dc_flops, decode_bytes=dc_bytes,
        decode_compute_ms=dc_compute_s * 1e3, decode_memory_ms=dc_memory_s * 1e3,
        decode_comm_ms=dc_comm_s * 1e3,
        decode_bound=bound(dc_compute_s, dc_memory_s, dc_comm_s),
        decode_intensity_flop_per_byte=dc_flops / dc_bytes,
        ridge_flop_per_byte=x["peak_flops_s"] / x["hbm_bandwidth_bytes_s"],
        batch_star=bstar,
        devices=devices,
    )
    return out
