"""Energy of prefill and decode from the chip's power at the modelled utilisation.

A device draws P = TDP x (idle + (1 - idle) x u), with u = roofline-busy time / phase time in
[0, 1] (the share of the time a device spends at one of its roofs rather than waiting on links
or the host) and ``idle`` = engine.analytical.idle_power_fraction. TDP is the ceiling (u = 1).
    decode:  J per output token  = P_d x devices x cycle / tokens emitted per cycle
             (cycle = TPOT x tokens per sequence per cycle; B tokens, B E[A] with speculation)
    prefill: J per prompt token  = P_p x devices x t_prefill / (B S)
             J per request       = P_p x devices x t_prefill / B  +  (N - 1) x J per output token
A first-order model (the power of a memory-bound step is taken to equal a compute-bound one's);
no chip without a TDP figure gets a number (NaN). The discrete-event engine uses the same power
per iteration (engine.des.features.power) and attributes it to the requests in the iteration.
"""

import numpy as np


def power_w(tdp_w, idle_fraction, busy_s, step_s):
    """Average power of one device over a step [W]."""
    if tdp_w is None:
        return np.full_like(np.asarray(step_s, dtype=float), np.nan)
    u = np.clip(busy_s / step_s, 0.0, 1.0)
    return tdp_w * (idle_fraction + (1.0 - idle_fraction) * u)


def joules_per_token(power_w_per_device, devices, step_s, tokens_per_step):
    """Energy of one output token [J]: P x devices x step time / tokens per step."""
    return power_w_per_device * devices * step_s / tokens_per_step


def phase_energy(prefill_power_w, decode_power_w, devices, prefill_s, B, S, N, decode_j_per_token):
    """Prefill and per-request energy (module docstring) [J]: dict with prefill_j_per_token,
    prefill_j_per_request, decode_j_per_request, j_per_request."""
    e_pf = prefill_power_w * devices * prefill_s          # the whole batch's prefill [J]
    pf_req = e_pf / B
    dec_req = np.where(N >= 2, (N - 1) * decode_j_per_token, 0.0)
    return dict(prefill_j_per_token=e_pf / (B * S), prefill_j_per_request=pf_req,
                decode_j_per_request=dec_req, j_per_request=pf_req + dec_req)
