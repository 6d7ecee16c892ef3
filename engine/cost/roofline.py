"""The roofline backend: each operator at the chip's spec-sheet peaks, no measured data.

    t = max(F / P, Q / B)          F = the operator's FLOPs, Q = its HBM bytes (engine.cost.shapes),
                                   P = the dense peak of its math precision (fp4 -> fp8 -> bf16
                                   fallback, transfer.peak), B = HBM bandwidth   [s]
    collective  t = bus bytes / W  (ring bytes per GPU, shapes.collective_bus_bytes; W = the
                                   scale-up link, no latency term)               [s]

Williams, Waterman & Patterson, "Roofline: an insightful visual performance model" (CACM 2009).
These are lower bounds per call, with no efficiency factor: the engines price a roofline *pass* in
closed form instead (``engine.analytical.step``: calibrated peaks, the dense matmuls, experts and
attention each summed before one max, alpha-beta collectives on the partition's links), which no
per-kernel table reproduces; ``KernelModel.closed_form`` says so. This backend is what a notebook
asks for one operator's bound with, and the reference the fitted curves' efficiencies are taken
against (transfer.op_time with t0 = 0 and unit efficiencies).
"""

import numpy as np

from engine.cost import shapes, transfer


class Roofline:
    """Per-operator spec-sheet roofline (module docstring); ``peaks`` as engine.cost.model._peaks_of."""

    def __init__(self, peaks: dict, hw_name: str):
        self.pk, self.hw_name, self.notes = peaks, hw_name, []

    def _bound(self, F, Q, precision="bf16"):
        return np.maximum(F / transfer.peak(self.pk, precision), Q / self.pk["hbm_bandwidth"])

    def gemm_s(self, m, n, k, dtype):
        F, Q = shapes.gemm(m, n, k, dtype)
        return self._bound(F, Q, shapes.GEMM_DTYPES[dtype][0])

    def moe_s(self, tokens, hidden, inter, topk, num_experts, tp, ep, dtype):
        Tc, Tb, _, _ = transfer.moe_ideal(self.pk, tokens, hidden, inter, topk, num_experts, tp, ep, dtype)
        return np.maximum(Tc, Tb)

    def attn_prefill_s(self, batch, isl, heads, kv_heads, head_dim, kv_dtype):
        return self._bound(*shapes.attn_prefill(batch, isl, heads, kv_heads, head_dim, kv_dtype))

    def attn_decode_s(self, batch, ctx, heads, kv_heads, head_dim, kv_dtype):
        return self._bound(*shapes.attn_decode(batch, ctx, heads, kv_heads, head_dim, kv_dtype))

    def mla_prefill_s(self, batch, isl, heads, dtype):
        return self._bound(*shapes.mla_prefill(batch, isl, heads, dtype))

    def mla_decode_s(self, batch, ctx, heads, dtype):
        return self._bound(*shapes.mla_decode(batch, ctx, heads, dtype))

    def comm_s(self, op, message_bytes, n_gpus):
        s = np.asarray(message_bytes, float)
        if n_gpus <= 1:
            return np.zeros_like(s)
        link = shapes.scaleup_link(self.pk, self.hw_name, op, n_gpus)
        return shapes.collective_bus_bytes(op, s, n_gpus) / link
