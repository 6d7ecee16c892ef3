"""Disaggregated prefill/decode (llm_perf's DisaggSpec; Splitwise, DistServe): prefill replicas
compute the prompt's KV and hand it to a decode replica over a network link.

KV hand-off of a batch of B prompts of S tokens, sent by the prefill replica's devices in
parallel over n_links = min(prefill devices, decode devices) links:
    bytes   = B S kvpt                      (all layers, full attention: kv_bytes_per_token)
    WRs     = B L ceil(S / block)           (one RDMA work request per layer per KV block)
    t_xfer  = alpha + bytes / (n_links W) + WRs x t_wr / n_links
    t_hand  = t_xfer x (1 + eta x [partitions differ])      (decode-side re-layout, eta)
    exposed = t_hand - rho x min(t_hand, TTFT_prefill)        (overlap with the prefill, rho)
    TTFT_disagg = TTFT on the prefill partition + exposed
Steady state with B sequences in flight, each generating N tokens: every decode step B/N new
requests need their prefill (t_1 = one prompt's prefill on its partition).
    co-located (prefill iterations interrupt decoding, vLLM-style):
        TPOT_co = TPOT + (B / N) t_1,co          throughput = B / TPOT_co over the replica's devices
    disaggregated (decode undisturbed; R prefill replicas must keep up):
        TPOT_d = TPOT                            throughput = min(B / TPOT, N R / t_1,p)
        over decode + R x prefill devices.
"""

import numpy as np


def handoff_s(B, S, kv_bytes_per_token, num_layers, block_tokens, n_links, bw, latency_s,
              per_wr_s, relayout_factor, mismatch):
    """KV hand-off time of a batch [s] (module docstring)."""
    bytes_ = B * S * kv_bytes_per_token
    wrs = B * num_layers * np.ceil(S / block_tokens)
    xfer = latency_s + bytes_ / (n_links * bw) + wrs * per_wr_s / n_links
    return xfer * (1.0 + relayout_factor * mismatch)


def exposed_s(handoff, prefill_s, overlap):
    """Part of the hand-off not hidden behind the prefill: t - rho min(t, prefill) [s]."""
    return handoff - overlap * np.minimum(handoff, prefill_s)


def colocated_tpot(tpot_s, B, N, prefill_one_s):
    """Co-located TPOT with prefill interference: TPOT + (B / N) x one prompt's prefill [s]."""
    return tpot_s + B / N * prefill_one_s


def throughput(B, N, tpot_s, prefill_one_s, prefill_replicas):
    """Disaggregated steady-state tokens/s of one decode replica fed by R prefill replicas:
    min(B / TPOT, N R / t_1)."""
    return np.minimum(B / tpot_s, N * prefill_replicas / prefill_one_s)
