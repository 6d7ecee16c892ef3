"""Communication time with the alpha-beta model. Seconds; vectorised.

A message of M bytes over a link of bandwidth W bytes/s with per-hop latency alpha takes
alpha + M / W. Sources: Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
Operations in MPICH" (2005) for the ring all-reduce cost.
"""

import numpy as np

# the all-reduce algorithms live with the other TP all-reduce implementations (engine.cost.allreduce)
from engine.cost.allreduce import ring_allreduce_time, tree_allreduce_time  # noqa: F401


def p2p_time(message_bytes, hops, link_bytes_s, latency_s):
    """``hops`` sequential point-to-point sends of ``message_bytes`` each [s]:
    hops * (alpha + M / W). Pipeline stages hand activations on this way (pp - 1 hops)."""
    return hops * (latency_s + message_bytes / link_bytes_s)


def allreduce_time(message_bytes, n, link_bytes_s, latency_s, algorithm="ring"):
    """All-reduce with the named algorithm: ring, tree, or auto (the faster for each message)."""
    ring = ring_allreduce_time(message_bytes, n, link_bytes_s, latency_s)
    if algorithm == "ring":
        return ring
    tree = tree_allreduce_time(message_bytes, n, link_bytes_s, latency_s)
    return tree if algorithm == "tree" else np.minimum(ring, tree)


def all_gather_time(message_bytes, n, link_bytes_s, latency_s):
    """Ring all-gather where each of ``n`` devices contributes ``message_bytes`` [s]:
        (n-1) alpha + (n-1) M / W      (each device receives the n-1 other shards)
    Zero for n = 1."""
    n = np.asarray(n, dtype=float)
    return np.where(n > 1, (n - 1.0) * (latency_s + message_bytes / link_bytes_s), 0.0)


def all_to_all_time(message_bytes, n, link_bytes_s, latency_s):
    """All-to-all where each of ``n`` devices holds ``message_bytes`` spread evenly over all
    destinations (itself included), on a non-blocking switch (NVSwitch, NVLink Switch) where a
    device sends to all n-1 peers at once [s]:
        alpha + (n-1)/n M / W     (one round of concurrent sends; the 1/n kept locally never moves)
    (A ring of pairwise exchanges would pay (n-1) alpha instead; Thakur et al. 2005.) MoE expert
    parallelism pays two per MoE layer: dispatch tokens to their experts, combine the results.
    Zero for n = 1."""
    n = np.asarray(n, dtype=float)
    return np.where(n > 1, latency_s + (n - 1.0) / np.maximum(n, 1.0) * message_bytes / link_bytes_s,
                    0.0)
