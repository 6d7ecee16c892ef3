"""Energy per output token from the chip's power at the modelled utilisation.

A device draws P = TDP x (idle + (1 - idle) x u), with u = roofline-busy time / step time in
[0, 1] (the share of the step a device spends at one of its roofs rather than waiting on links or
the host) and ``idle`` = engine.analytical.idle_power_fraction. TDP is the ceiling (u = 1).
    joules per output token = P x devices x TPOT / tokens emitted per step
A first-order model (the power of a memory-bound step is taken to equal a compute-bound one's);
no chip without a TDP figure gets a number (NaN).
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
