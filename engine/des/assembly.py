"""The one assembly of a DES deployment: replicas, their KV pools and prefix caches, the step
functions and the optional features, built from the specs. ``engine.des.run.simulate`` (offline,
a whole request stream) and ``engine.des.live.LiveEngine`` (requests one by one, an outside
clock) both build through ``assemble``, so ``simllm-serve`` serves exactly the system that
``engine=des`` simulates: the same KV blocks (a speculative draft's weights and KV taken off,
engine.des.kv.replica_blocks), prefix caching (HBM, tiered with kv_host_gb / kv_disk_gb),
speculative decoding, the power model and its throttle, swap preemption.

What a caller still owns: the request stream (``stream``; the live engine passes one of
``capacity`` reusable slots), the event loop or the clock, the routers.
"""

from dataclasses import dataclass

from engine.analytical.step import StepModel
from engine.des import features
from engine.des.config import DesSpec
from engine.des.cluster import cache_factory, pool_size
from engine.des.kv import KvCapacity, kv_capacity, replica_blocks
from engine.des.noise import make_noise
from engine.des.pricing import step_functions, swap_s_per_token
from engine.des.replica import Replica
from engine.des.state import State
from engine.des.workload import RequestStream
from engine.errors import SpecError
from engine.spec import Specs


@dataclass
class Assembly:
    """What ``assemble`` built (``des`` resolved against the framework profile)."""

    specs: Specs
    des: DesSpec
    stream: RequestStream
    cap: KvCapacity          # engine.des.kv.kv_capacity of one replica
    blocks: int              # KV blocks per replica (0 or less: the deployment does not fit)
    n_rep: int               # replicas serving at the start (des.cluster.replicas or partition.dp)
    sm: StepModel
    noise: object            # step-time noise hook or None
    st: State
    reps: list               # pool_size(des, n_rep) replicas (the autoscaler's ceiling)
    feats: dict              # engine.des.features.build: speculation, power models
    make_cache: object       # () -> a replica's prefix cache, or None (prefix caching off)


def assemble(specs: Specs, des: DesSpec, stream: RequestStream, noise=None) -> Assembly:
    """Build the replicas of deployment (``specs``, resolved ``des``) for ``stream``: KV blocks
    from the memory left beside the weights and activations (``des.kv.num_kv_blocks`` overrides;
    a speculative draft's share off), one prefix cache each when prefix caching is on, swap
    preemption's transfer rate, the step model with the calibration's noise (``noise`` replaces
    it), and the enabled features attached (engine.des.features.build). Disaggregated pools: the
    first ``prefill_replicas`` replicas get role ``prefill``, the others ``decode``."""
    cap = kv_capacity(specs, des.kv.block_size, des.scheduling.max_num_batched_tokens, des.scheduling.max_num_seqs)
    blocks = des.kv.num_kv_blocks or replica_blocks(specs, des, cap)
    n_rep = des.cluster.replicas or specs.partition.dp
    if des.cluster.prefill_replicas and des.cluster.prefill_replicas >= n_rep:
        raise SpecError("engine.des.cluster.prefill_replicas", des.cluster.prefill_replicas,
                        f"fewer than the {n_rep} replicas (at least one must decode)")
    sm = StepModel.from_specs(specs)
    if noise is None:  # the calibration's jump-diffusion noise (None when calibration.noise is off)
        noise = make_noise(specs.calibration.noise, des.seed)
    one, many = step_functions(sm, noise)
    st = State(stream)
    reps = []
    make_cache = cache_factory(specs, des, stream)     # HBM prefix cache, tiered with kv_*_gb
    for i in range(pool_size(des, n_rep)):
        pc = make_cache() if make_cache is not None else None
        reps.append(Replica(i, st, des, blocks, one, many, pc, stream.block_tokens))
        if des.scheduling.preemption == "swap":
            reps[-1].swap_s_per_token = swap_s_per_token(specs, des)
    feats = features.build(specs, des, sm, noise, reps, st)
    if des.cluster.prefill_replicas:
        for r in reps[:des.cluster.prefill_replicas]:
            r.role = "prefill"
        for r in reps[des.cluster.prefill_replicas:]:
            r.role = "decode"
    return Assembly(specs, des, stream, cap, blocks, n_rep, sm, noise, st, reps, feats, make_cache)


__all__ = ["Assembly", "assemble"]
