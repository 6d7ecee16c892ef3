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


def tree_allreduce_time(message_bytes, n, link_bytes_s, latency_s):
    """Tree all-reduce (reduce up a binary tree, broadcast down; NCCL's double binary tree keeps
    every link busy in both directions) of ``message_bytes`` over ``n`` devices [s]:
        2 ceil(log2 n) alpha + 2 M / W
    Fewer latency hops than the ring (log n vs n), slightly more bytes per link (M vs (n-1)/n M
    each way), so it wins for small messages on many devices. Zero for n = 1.
    Source: Sanders, Speck & Traeff, "Two-tree algorithms for full bandwidth broadcast, reduction
    and scan" (2009); NCCL 2.4 tree all-reduce.
    """
    n = np.asarray(n, dtype=float)
    hops = 2.0 * np.ceil(np.log2(np.maximum(n, 1.0)))
    return np.where(n > 1, hops * latency_s + 2.0 * message_bytes / link_bytes_s, 0.0)


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
