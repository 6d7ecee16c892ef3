"""Precision: bytes per stored element and the compute peak a math dtype gets.

Weights, KV cache and activations each carry their own dtype (``ModelSpec``). Group-quantised
weights (GPTQ/AWQ int4, MXFP4/NVFP4, DeepSeek's 128x128-block fp8) store one scale per group of
g weights, so

    bytes per weight = DTYPE_BYTES[weight_dtype] + DTYPE_BYTES[weight_scale_dtype] / g

(g = weight_group_size; 0 = per-channel scales, counted as 0). int4 with g=128 and bf16 scales:
0.5 + 2/128 = 0.515625 B (3 % over 4 bits); MXFP4 (g=32, 8-bit e8m0 scale, given as fp8): 0.53125 B.
Source: Frantar et al., GPTQ (2022); OCP Microscaling Formats (MX) v1.0 (2023).
"""

from engine.spec import DTYPE_BYTES, ModelSpec


def weight_bytes_per_param(model: ModelSpec) -> float:
    """Bytes one stored weight costs, group scales included (module docstring)."""
    b = DTYPE_BYTES[model.weight_dtype]
    if model.weight_group_size:
        b += DTYPE_BYTES[model.weight_scale_dtype] / model.weight_group_size
    return b
