"""TP all-reduce implementations (``framework.allreduce``), alpha-beta form. Seconds; vectorised.

M = message bytes each GPU holds, n = GPUs, W = per-GPU link bandwidth (bytes/s, one direction,
x comm_efficiency), alpha = per-step latency (s). Zero for n = 1.

    one_shot   alpha + (n-1) M / W
               vLLM custom all-reduce, 1 stage (csrc/custom_all_reduce.cuh
               cross_device_reduce_1stage; SGLang and TensorRT-LLM ONESHOT alike): every rank reads
               the whole buffer of each of the n-1 peers over NVLink (P2P, IPC handles) and sums
               locally; one barrier. vLLM runs it for world size 2, and on full NVLink for
               M < 512 KB (n <= 4) or < 256 KB (n <= 8).
    two_shot   2 alpha + 2 (n-1)/n M / W
               vLLM cross_device_reduce_2stage (TensorRT-LLM TWOSHOT): reduce-scatter (each rank
               reads its 1/n slice from the n-1 peers and sums), barrier, all-gather (reads the
               n-1 other reduced slices); ring bytes with two latency steps instead of 2(n-1).
    ring       2 (n-1) alpha + 2 (n-1)/n M / W     (NCCL ring; Thakur, Rabenseifner & Gropp 2005)
    tree       2 ceil(log2 n) alpha + 2 M / W      (NCCL double binary tree, NCCL 2.4; Sanders,
                                                    Speck & Traeff 2009)
    nccl       min(ring, tree): NCCL's tuner picks the faster algorithm per size

Custom all-reduce kernels need every peer in one NVLink (P2P) domain: a group that spans nodes
runs NCCL (``engine.analytical.parallel.tp_allreduce``). Where the chip has measured tables
(engine/cost/data/tables.npz), the engines price one_shot / two_shot by the framework's measured
custom all-reduce (``<chip>/<fw>/custom_allreduce``: the kernel as shipped, with its own
1-stage / 2-stage switch by size) and nccl by ``<chip>/nccl/all_reduce``; these formulas where not.
"""

import numpy as np

#: framework.allreduce values: analytical = the engine's own model (engine.analytical.allreduce on
#: the roofline path; the faster of NCCL and the custom kernel on measured tables), as before.
IMPLEMENTATIONS = ("analytical", "one_shot", "two_shot", "nccl")
#: Which measured table prices each implementation (None: the engine's choice, both tables).
TABLE = {"analytical": None, "one_shot": "custom", "two_shot": "custom", "nccl": "nccl"}


def ring_allreduce_time(message_bytes, n, link_bytes_s, latency_s):
    """Ring all-reduce [s]: reduce-scatter then all-gather, each n-1 steps moving M/n bytes:
    2 (n-1) alpha + 2 (n-1)/n M / W. Thakur, Rabenseifner & Gropp, "Optimization of Collective
    Communication Operations in MPICH" (2005)."""
    n = np.asarray(n, dtype=float)
    steps = 2.0 * (n - 1.0)
    return np.where(n > 1, steps * latency_s + steps / np.maximum(n, 1.0) * message_bytes / link_bytes_s,
                    0.0)


def tree_allreduce_time(message_bytes, n, link_bytes_s, latency_s):
    """Tree all-reduce (reduce up a binary tree, broadcast down; NCCL's double binary tree keeps
    every link busy in both directions) [s]: 2 ceil(log2 n) alpha + 2 M / W. Fewer latency hops
    than the ring (log n vs n), slightly more bytes per link, so it wins for small messages on many
    devices. Sanders, Speck & Traeff (2009); NCCL 2.4 tree all-reduce."""
    n = np.asarray(n, dtype=float)
    hops = 2.0 * np.ceil(np.log2(np.maximum(n, 1.0)))
    return np.where(n > 1, hops * latency_s + 2.0 * message_bytes / link_bytes_s, 0.0)


def one_shot_time(message_bytes, n, link_bytes_s, latency_s):
    """One-shot custom all-reduce [s]: alpha + (n-1) M / W (module docstring)."""
    n = np.asarray(n, dtype=float)
    return np.where(n > 1, latency_s + (n - 1.0) * message_bytes / link_bytes_s, 0.0)


def two_shot_time(message_bytes, n, link_bytes_s, latency_s):
    """Two-shot custom all-reduce [s]: 2 alpha + 2 (n-1)/n M / W (module docstring)."""
    n = np.asarray(n, dtype=float)
    return np.where(n > 1, 2.0 * latency_s + 2.0 * (n - 1.0) / np.maximum(n, 1.0) * message_bytes / link_bytes_s,
                    0.0)


def nccl_time(message_bytes, n, link_bytes_s, latency_s):
    """NCCL all-reduce [s]: the faster of ring and tree for each message."""
    return np.minimum(ring_allreduce_time(message_bytes, n, link_bytes_s, latency_s),
                      tree_allreduce_time(message_bytes, n, link_bytes_s, latency_s))


#: framework.allreduce -> alpha-beta time (``analytical`` is the engine's algorithm setting instead).
ALPHA_BETA = {"one_shot": one_shot_time, "two_shot": two_shot_time, "nccl": nccl_time}
