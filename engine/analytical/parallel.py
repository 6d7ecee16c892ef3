"""Parallel layout: which link each collective uses, and the communication of one forward pass.

A replica is tp x sp devices per stage times pp stages (``PartitionSpec``). Groups are laid out
innermost first: a TP group is tp consecutive devices, a stage's tp x sp devices hold the SP and
EP groups, and the pp stages follow. A group uses the scale-up link (NVLink, ICI) when it fits in
one node (group size <= devices_per_node), else the scale-out network; x comm_efficiency.

Communication of one pass of T tokens through all L layers (seconds, alpha-beta, ``comm``):
    TP   2 all-reduces per dense layer (after attention, after the FFN) of (T/sp) h act bytes;
         MoE layers with ep = 1 the same, with ep > 1 one (attention) plus
    EP   2 all-to-alls per MoE layer (dispatch, combine) over ep devices, each device sending its
         T k / ep routed token copies of h act bytes (concurrent sends over a switch: one alpha);
    SP   1 all-gather per layer of the new tokens' K/V over sp devices, (T/sp) x KV bytes per layer
         per TP rank (context parallelism as in Llama 3, arXiv 2407.21783 sec. 3.3.2);
    PP   (pp - 1) point-to-point hand-offs of (T/sp) h act bytes.
Every term is affine in T (alpha terms + bytes/W), so a pass's communication is c0 + c1 T.

EP as a device factor (``partition.ep_layout = extra``, llm_perf's PP x TP x EP x SP devices) reaches
these functions as its equivalent shared layout, ep' = tp ep and sp' = sp ep (``PartitionSpec``):
the all-to-all spans the tp ep devices of a stage and each device holds T / (sp ep) tokens.
"""

import numpy as np

from engine.analytical import comm, memory
from engine.analytical.params import layer_split
from engine.errors import SpecError
from engine.spec import DTYPE_BYTES, Specs


def link(specs: Specs, group_devices):
    """(bytes/s, latency s) of the link a group of ``group_devices`` devices uses: scale-up when
    the group fits in one node, else scale-out; bandwidth x comm_efficiency. Raises SpecError when
    a needed link has no figure."""
    hw, eff = specs.hardware, specs.calibration.comm_efficiency
    g = np.asarray(group_devices, dtype=float)
    in_node = g <= hw.devices_per_node
    multi = g > 1
    if hw.scaleup_bandwidth_bytes_s is None and np.any(in_node & multi):
        raise SpecError("hardware.scaleup_bandwidth", None,
                        f"a scale-up link bandwidth for {hw.name} (the partition spans devices)")
    if hw.scaleout_bandwidth_bytes_s is None and np.any(~in_node & multi):
        raise SpecError("hardware.scaleout_bandwidth", None,
                        f"a scale-out bandwidth for {hw.name}: a group spans more than "
                        f"devices_per_node={hw.devices_per_node} devices")
    up = hw.scaleup_bandwidth_bytes_s or np.nan
    out = hw.scaleout_bandwidth_bytes_s or np.nan
    bw = np.where(in_node, up, out) * eff
    lat = np.where(in_node, hw.scaleup_latency_s, hw.scaleout_latency_s)
    return bw, lat


def tp_allreduce(specs: Specs, km=None, algorithm: str = "ring"):
    """The TP all-reduce of the job's ``framework.allreduce`` as a function (bytes, n) -> s
    (engine.cost.allreduce: formulas and sources):

    analytical  as before profiles named one: the measured / transferred collective of the kernel
                model ``km`` (the faster of NCCL and the custom kernel), or without one the
                alpha-beta ``algorithm`` (engine.analytical.allreduce: ring | tree);
    one_shot, two_shot  the framework's measured custom all-reduce where ``km`` has the table,
                else the one-/two-shot alpha-beta form; a group beyond one node runs NCCL;
    nccl        the measured NCCL table where ``km`` has it, else min(ring, tree) alpha-beta.
    Alpha-beta terms use the group's link (``link``: x comm_efficiency)."""
    from engine.cost import allreduce as impls

    impl = specs.framework.allreduce
    if impl == "analytical" and km is not None:
        return lambda b, n: km.allreduce_s(b, int(n)) if n > 1 else 0.0 * b

    def price(b, n):
        bw, lat = link(specs, n)
        if impl == "analytical":
            return comm.allreduce_time(b, n, bw, lat, algorithm)
        use = impl if np.all(np.asarray(n) <= specs.hardware.devices_per_node) else "nccl"
        tab = impls.TABLE[use]
        if km is not None and np.ndim(n) == 0 and km.has_allreduce_table(tab):
            return km.allreduce_s(b, int(n), tab) if n > 1 else 0.0 * b
        return impls.ALPHA_BETA[use](b, n, bw, lat)

    return price


def pass_collectives(specs: Specs, tp, pp, ep, sp, algorithm: str, allreduce=None, alltoall=None):
    """Communication of one pass as two functions of its tokens T: (total(T), hops(T)) [s] -
    all of TP, EP, SP and the PP hand-offs, and the PP hand-offs alone (module docstring).

    ``allreduce(bytes, n)`` and ``alltoall(bytes, n)`` price one collective of a message over n
    devices; default: ``tp_allreduce`` (framework.allreduce; analytical: the alpha-beta
    ``algorithm``, ring or tree) and the alpha-beta all-to-all of ``comm`` on the group's link.
    Kernel backends pass measured or transferred collectives."""
    m = specs.model
    tp, pp, ep, sp = (np.asarray(v, dtype=float) for v in (tp, pp, ep, sp))
    act = DTYPE_BYTES[m.activation_dtype]
    h = m.hidden_size
    l_dense, l_moe = layer_split(m)
    link(specs, tp)                     # SpecError now when the TP group's link has no figure
    st_bw, st_lat = link(specs, tp * sp)
    rp_bw, rp_lat = link(specs, tp * sp * pp)
    if allreduce is None:
        allreduce = tp_allreduce(specs, None, algorithm)
    if alltoall is None:
        def alltoall(b, n):
            return comm.all_to_all_time(b, n, st_bw, st_lat)

    def ar(T):
        return allreduce(T / sp * h * act, tp)

    def a2a(T):
        return alltoall(T * max(m.experts_per_token, 1) / ep * h * act, ep)

    kv_rank = memory.kv_bytes_per_layer_token(m) / np.minimum(tp, memory.kv_heads(m))

    def ag(T):
        return comm.all_gather_time(T / sp * kv_rank, sp, st_bw, st_lat)

    def hops(T):
        return np.where(pp > 1, comm.p2p_time(T / sp * h * act, pp - 1, rp_bw, rp_lat), 0.0)

    def total(T):
        moe = np.where(ep > 1, ar(T) + 2 * a2a(T), 2 * ar(T))
        return 2 * l_dense * ar(T) + l_moe * moe + m.num_layers * ag(T) + hops(T)

    return total, hops


def pass_comm(specs: Specs, tp, pp, ep, sp, algorithm: str):
    """Communication of one pass as affine coefficients: returns (c0, c1, hop0, hop1) with
    comm(T) = c0 + c1 T for T > 0 (all of TP, EP, SP and the PP hand-offs) and the PP hand-offs
    alone hop(T) = hop0 + hop1 T. ``algorithm`` is the all-reduce's (ring or tree)."""
    total, hops = pass_collectives(specs, tp, pp, ep, sp, algorithm)

    def affine(f):
        zero = f(0.0)
        return zero, f(1.0) - zero

    c0, c1 = affine(total)
    h0, h1 = affine(hops)
    return c0, c1, h0, h1


def overlapped(roof_s, comm_s, overlap):
    """Time of a phase whose communication is partly hidden behind compute/memory time [s]:
        roof + comm - overlap x min(roof, comm)
    overlap 0: roof + comm (none); 1: max(roof, comm) (full); between: that fraction of the
    shorter one hidden. An assumption of the job (engine.analytical.overlap)."""
    return roof_s + comm_s - overlap * np.minimum(roof_s, comm_s)


def stage_share(num_layers: int, pp):
    """Share of the model's layers on the largest pipeline stage: ceil(L / pp) / L (= 1/pp when
    pp divides L). Stages are filled as evenly as possible; the largest one sets the pace and holds
    the most weights and KV (DeepSeek-V3's 61 layers on pp = 4: 16/61 instead of 1/4)."""
    pp = np.asarray(pp, dtype=float)
    return np.ceil(num_layers / pp) / num_layers


def expert_shard(tp, ep):
    """Ways each MoE layer's routed experts are split over a stage: max(tp, ep) - whole experts
    over ep devices, each tensor-split over the tp/ep devices left (ep | tp x sp required; with
    ep_layout = extra ep arrives as tp x ep, so the split is tp x ep)."""
    return np.maximum(tp, ep)


def invalid_reasons(specs: Specs, tp, pp, ep, sp):
    """Boolean masks (arrays) of why a partition is invalid for the model: a dict reason -> mask."""
    m = specs.model
    tp, pp, ep, sp = (np.asarray(v) for v in (tp, pp, ep, sp))
    nkv = memory.kv_heads(m)
    reasons = {
        "heads not divisible by tp": (m.num_heads % tp) != 0,
        "kv heads neither divide nor are a multiple of tp": ((nkv % tp) != 0) & ((tp % nkv) != 0),
        "more stages than layers": pp > m.num_layers,
        "ep > 1 on a dense model" if not m.is_moe else "experts not divisible by ep":
            (ep > 1) if not m.is_moe else (m.num_experts % ep) != 0,
        "ep does not divide tp x sp": ((tp * sp) % ep) != 0,
        "prompt not divisible by sp": (specs.workload.prompt_len % sp) != 0,
    }
    return reasons
