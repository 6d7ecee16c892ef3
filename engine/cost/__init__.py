"""Operator costs: the time of one GEMM, MoE block, attention, MLA or collective on one GPU, from
measured kernel tables (interpolated) or from roofline-efficiency curves transferred to any chip.

    from engine.cost import kernel_model, KernelModel, tables_for
    km = kernel_model(hardware, "trtllm")            # auto: measured if the chip has tables
    km.gemm_s(tokens, n, k, km.dtype_for(model))     # seconds

Backends, one registry (engine.cost.registry.BACKENDS, name -> factory): "roofline" (spec-sheet
peaks, engine.cost.roofline; the engines price its passes in closed form) | "measured" |
"transfer" | "anchored" | "auto" (see engine.cost.model). Units and
meanings of the arguments:

* every result is seconds per call on ONE GPU; array arguments broadcast; 0 work -> 0 s;
* gemm_s(m, n, k): (m x k) @ (k x n), m = tokens in the pass; n, k already divided by TP;
* moe_s(tokens, ...): tokens entering the MoE layer on this GPU's replica (before top-k), expert
  ``inter`` un-split (the ``tp`` argument splits it), experts split over ``ep``; balanced routing;
* attention: heads and kv_heads PER GPU; prefill = batch prompts of isl tokens from scratch (causal);
  decode = one step of batch sequences each at context ctx; kv_dtype "bf16" | "fp16" | "fp8";
* MLA: the DeepSeek-V3 attention core only (context_mla_perf / generation_mla_perf): projections
  and the absorbed-q/o BMMs are GEMMs for gemm_s; ``dtype`` = the KV-cache dtype;
* collectives: message_bytes in BYTES (the source tables count elements; converted); all-reduce =
  min(NCCL, framework custom all-reduce); beyond 8 GPUs scaled by the transfer model.

Modules: ``grid`` (log-space interpolation), ``shapes`` (FLOPs and bytes of each op), ``derive``
(measured parquet -> compact shipped tables), ``transfer`` (fitted curves), ``model`` (the
KernelModel API and the measured / transfer / anchored implementations), ``roofline``,
``registry`` (backend name -> factory; ``kernel_model``).
"""

from engine.cost.model import KernelModel, tables_for
from engine.cost.registry import BACKENDS, kernel_model, resolve

__all__ = ["BACKENDS", "KernelModel", "kernel_model", "resolve", "tables_for"]
