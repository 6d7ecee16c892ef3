"""Operator costs: the time of one GEMM, MoE block, attention, MLA or collective on one GPU, from
measured kernel tables (interpolated) or from roofline-efficiency curves transferred to any chip.

    from engine.cost import kernel_model, KernelModel, tables_for
    km = kernel_model(hardware, "trtllm")            # auto: measured if the chip has tables
    km.gemm_s(tokens, n, k, km.dtype_for(model))     # seconds

Modules: ``grid`` (log-space interpolation), ``shapes`` (FLOPs and bytes of each op), ``derive``
(measured parquet -> compact shipped tables), ``transfer`` (fitted curves), ``model`` (the API).
"""

from engine.cost.model import KernelModel, kernel_model, tables_for

__all__ = ["KernelModel", "kernel_model", "tables_for"]
