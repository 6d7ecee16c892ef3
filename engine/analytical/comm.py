"""Communication time with the alpha-beta model. Seconds; vectorised.

A message of M bytes over a link of bandwidth W bytes/s with per-hop latency alpha takes
alpha + M / W. Sources: Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
Operations in MPICH" (2005) for the ring all-reduce cost.
"""

import numpy as np


def ring_allreduce_time(message_bytes, n, link_bytes_s, latency_s):
    """Ring all-reduce of ``message_bytes`` over ``n`` devices [s].

    Reduce-scatter then all-gather, each n-1 steps moving M/n bytes per step:
        2 (n-1) alpha + 2 (n-1)/n * M / W
    Zero for n = 1.
    """
    n = np.asarray(n, dtype=float)
    steps = 2.0 * (n - 1.0)
    return np.where(n > 1, steps * latency_s + steps / np.maximum(n, 1.0) * message_bytes / link_bytes_s,
                    0.0)


def p2p_time(message_bytes, hops, link_bytes_s, latency_s):
    """``hops`` sequential point-to-point sends of ``message_bytes`` each [s]:
    hops * (alpha + M / W). Pipeline stages hand activations on this way (pp - 1 hops)."""
    return hops * (latency_s + message_bytes / link_bytes_s)
