"""Lower bounds (the SimLLM seed's first check: DES prefill 1.2-1.5x its theoretical lower bound,
decode near the bandwidth bound): the same ``StepModel`` at the spec sheet's peaks (compute and
memory-bandwidth efficiency 1), roofline (no kernel tables), no host overheads:
    prefill_lb_ms  per request: its prompt alone in one pass (engine.analytical.prefill.single_pass)
    decode_lb_ms   one decode step at the simulated mean batch and mean mid-decode context
                   (engine.analytical.decode.tpot): the weights + KV bytes over peak HBM bandwidth
                   when memory-bound
    prefill_lb_ratio = mean TTFT / mean prefill_lb_ms (queueing included, as the seed's check);
    prefill_service_lb_ratio = mean (TTFT - queueing) / mean prefill_lb_ms (from first admission);
    decode_lb_ratio = mean TPOT / decode_lb_ms
over completed requests. With speculative decoding a
TPOT below the one-token bound (ratio < 1) is the speculation's gain.
"""

from dataclasses import replace

import numpy as np


def lower_bound_model(specs):
    """The StepModel of the lower bounds (module docstring): spec-sheet peaks, roofline, no
    overheads."""
    from engine.analytical import step
    p = specs.partition
    sm = step.build(specs, p.tp, p.pp, p.ep, p.sp, compute_efficiency=1.0, memory_bandwidth_efficiency=1.0)
    sm = replace(sm._as_floats(), kern=None, step_overhead_s=0.0, per_token_overhead_s=0.0,
                 per_prefill_token_s=0.0, eager_s=0.0,
                 frontend_s_per_token=0.0)
    return sm


def prefill_lb_s(sm, specs, prompts: np.ndarray) -> np.ndarray:
    """Per-request prefill lower bound [s]: the prompt alone, one pass, at the peaks (``sm`` the
    ``lower_bound_model``)."""
    from engine.analytical import prefill
    S = np.asarray(prompts, dtype=float)
    return np.asarray(prefill.single_pass(sm, specs.model, 1.0, S, float(specs.partition.pp), 1, 0.0)["ttft_s"]
                      * np.ones_like(S))


def decode_lb_s(sm, specs, batch: float, S: float, N: float) -> float:
    """Decode-step lower bound [s] at batch ``batch``, prompt S, output N (mean context; ``sm`` the
    ``lower_bound_model``)."""
    from engine.analytical import decode
    pp = float(specs.partition.pp)
    return float(decode.tpot(sm, specs.model, max(batch, 1.0), S, max(N, 2.0), pp,
                             specs.analytical.pp_microbatches)["tpot_s"])


__all__ = ["lower_bound_model", "prefill_lb_s", "decode_lb_s"]
