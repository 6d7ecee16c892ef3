"""The tensor-parallel degree of a deployment whose TP is not stated ("submitter-chosen").

Rule: the smallest power of two ``tp`` whose weights leave half of each GPU's memory for the KV
cache, ``weights / tp <= hbm / 2``, and that divides the attention heads, at most ``max_tp`` (the
GPUs the deployment has). Why half: serving benchmarks pick the fewest GPUs per replica that still
hold a useful KV cache at their concurrency; half of HBM is the usual margin (weights of
Llama-2-70B in 16-bit, 140 GB, on 80 GB GPUs: TP4, 35 GB of weights per GPU). Used by
``simllm-validate`` for measured rows that state the GPUs but not the layout.
"""

from engine.analytical.params import param_counts
from engine.spec import DTYPE_BYTES


def weight_bytes(model) -> float:
    """Bytes of the model's weights at its weight dtype (every parameter, dense and experts)."""
    return param_counts(model).total * DTYPE_BYTES[model.weight_dtype]


def auto_tp(weights_bytes: float, hbm_bytes: float, num_heads: int, max_tp: int) -> int:
    """The smallest power of two with ``weights_bytes / tp <= hbm_bytes / 2`` that divides
    ``num_heads``, at most ``max_tp`` (1 when ``max_tp`` <= 1); see the module docstring."""
    w, hbm = weights_bytes / 1e9, hbm_bytes / 1e9     # GB, as the rule is stated (same verdicts)
    tp = 1
    while tp < max_tp and (w / tp > 0.5 * hbm or num_heads % tp):
        tp *= 2
    return tp
