"""KV cache in paged blocks (PagedAttention, Kwon et al., SOSP 2023): footprint per device,
fragmentation, capacity and the number of sequences that fit. Bytes; vectorised.

A sequence of n tokens occupies ceil(n / b) blocks of b tokens (``kv_block_tokens``); the unused
tail of its last block is internal fragmentation, 1 - n / (b ceil(n/b)). Per device the cache is
split min(tp, KV heads) x sp ways and the largest pipeline stage holds ceil(L/pp) of the L
layers (``parallel.stage_share``; 1/pp of them when pp divides L).
    capacity per device = (HBM - weights - activations - reserve) x kv_usable_fraction
    max concurrent sequences at context n = floor(capacity / per-sequence bytes per device)
Weights per device: (non-expert weights / tp + routed experts / max(tp, ep)) x ceil(L/pp)/L,
with group-scale overhead (``precision``).

How much of the HBM the KV cache gets is each serving framework's own rule (``KvRule``,
``kv_room``): the form above (``free_fraction``, the neutral profile's and TensorRT-LLM's), vLLM's
share of all HBM (``total_fraction``) or SGLang's static share (``static_fraction``).
"""

from dataclasses import dataclass

import numpy as np

from engine.analytical import memory, parallel
from engine.analytical.params import param_counts
from engine.analytical.precision import weight_bytes_per_param
from engine.spec import ModelSpec


def paged_tokens(context_len, block_tokens):
    """Tokens' worth of KV a sequence of ``context_len`` tokens holds in whole blocks:
    b ceil(n / b)."""
    return np.ceil(np.asarray(context_len, dtype=float) / block_tokens) * block_tokens


def fragmentation(context_len, block_tokens):
    """Fraction of a sequence's KV blocks left empty: 1 - n / (b ceil(n/b))."""
    return 1.0 - np.asarray(context_len, dtype=float) / paged_tokens(context_len, block_tokens)


def sequence_bytes(model: ModelSpec, context_len, block_tokens):
    """KV bytes one sequence of ``context_len`` tokens holds in paged blocks (all layer groups;
    sliding-window layers keep at most the window: ``memory.sequence_kv_bytes``)."""
    return memory.sequence_kv_bytes(model, paged_tokens(context_len, block_tokens))


def weights_per_device(model: ModelSpec, tp, pp, ep):
    """Weight bytes one device of the largest stage holds:
    ((total - experts) / tp + experts / max(tp, ep)) x ceil(L/pp)/L."""
    pc = param_counts(model)
    wb = weight_bytes_per_param(model)
    share = parallel.stage_share(model.num_layers, pp)
    return ((pc.total - pc.experts) * wb / tp + pc.experts * wb / parallel.expert_shard(tp, ep)) * share


def kv_split(model: ModelSpec, tp, pp, sp):
    """Ways one token's KV is split over a replica's devices: min(tp, KV heads) x L / ceil(L/pp)
    x sp (MLA: one KV head, the latent is whole on every TP rank; the largest stage holds
    ceil(L/pp) of the L layers)."""
    return memory.kv_shard_factor(memory.kv_heads(model), tp,
                                  1.0 / parallel.stage_share(model.num_layers, pp), sp)


MIB = 2.0 ** 20      # bytes per MiB (SGLang sizes its reserve in MiB)


@dataclass(frozen=True)
class KvRule:
    """How a serving framework sizes its KV cache (``kv_room``; the fields of
    ``engine.spec.framework.FrameworkSpec``'s memory block).

    kind: free_fraction | total_fraction | static_fraction (``kv_room``);
    fraction: free_fraction: the share of the free memory (0 = the caller's usable fraction);
        total_fraction: vLLM gpu_memory_utilization; static_fraction: SGLang mem_fraction_static
        (0 = SGLang's own default, ``sglang_mem_fraction_static``);
    runtime_reserve_bytes: memory outside the framework's accounting [bytes/device] (CUDA context,
        NCCL and cuBLAS workspaces): vLLM's non-torch memory growth, SGLang's memory in use before
        the weights load;
    cuda_graph_reserve_bytes: CUDA-graph pool counted before the KV cache is sized [bytes/device];
    chunk_tokens, graph_max_bs: SGLang's chunked_prefill_size and cuda_graph_max_bs (inputs of its
        default mem_fraction_static).
    """

    kind: str = "free_fraction"
    fraction: float = 0.0
    runtime_reserve_bytes: float = 0.0
    cuda_graph_reserve_bytes: float = 0.0
    chunk_tokens: int = 0
    graph_max_bs: int = 0


#: today's rule: (HBM - weights - activations - reserve) x usable fraction
FREE_FRACTION = KvRule()


def framework_rule(fw, max_batched_tokens: int) -> KvRule:
    """The ``KvRule`` of a framework profile (``engine.spec.FrameworkSpec``): its memory block, with
    SGLang's chunked_prefill_size (``chunk_size``, else the token budget) and cuda_graph_max_bs
    (the largest captured size)."""
    frac = {"free_fraction": 0.0, "total_fraction": fw.gpu_memory_utilization,
            "static_fraction": fw.mem_fraction_static}[fw.kv_rule]
    return KvRule(kind=fw.kv_rule, fraction=frac, runtime_reserve_bytes=fw.runtime_reserve_bytes,
                  cuda_graph_reserve_bytes=fw.cuda_graph_reserve_bytes,
                  chunk_tokens=int(fw.chunk_size or max_batched_tokens),
                  graph_max_bs=int(max(fw.cuda_graph_sizes)) if fw.cuda_graph_sizes else 0)


def sglang_mem_fraction_static(hbm_bytes, chunk_tokens, graph_max_bs, tp, pp):
    """SGLang's default mem_fraction_static (``ServerArgs._handle_gpu_memory_settings``,
    sgl-project/sglang python/sglang/srt/server_args.py, 0.4.x-0.5.x), the share of the GPU's
    memory for weights + KV pool; the rest is kept for activations and CUDA graphs:
        reserved [MiB] = 512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x cuda_graph_max_bs
                         + 1024 x tp x pp / 8,   at least 10 GiB on a GPU of more than 60 GiB
        mem_fraction_static = round((G - reserved) / G, 3),   G = GPU memory [MiB]
    (DP attention, speculative drafts and piecewise CUDA graphs add to the reserve: not modelled).
    H100 (G = 80 GB / MiB = 76,294), TP1, chunk 8192, max bs 160: reserved = 512 + 12,288 + 320
    + 128 = 13,248 MiB, fraction round(63,046 / 76,294, 3) = 0.826."""
    g = np.asarray(hbm_bytes, dtype=float) / MIB
    reserved = (512.0 + 1.5 * np.maximum(chunk_tokens, 2048) + 2.0 * graph_max_bs
                + 1024.0 * np.asarray(tp, dtype=float) * pp / 8.0)
    reserved = np.where(g > 60 * 1024, np.maximum(reserved, 10 * 1024.0), reserved)
    return np.round((g - reserved) / g, 3)


def kv_room(rule: KvRule, hbm_bytes, weights_bytes, activation_bytes, reserve_bytes,
            usable_fraction, tp=1, pp=1):
    """KV bytes per device by the framework's rule (negative -> 0):

    free_fraction    (HBM - weights - activations - reserve) x f, f = rule.fraction or
                     ``usable_fraction`` (the calibration's); TensorRT-LLM's
                     KvCacheConfig.free_gpu_memory_fraction of the memory free after the engine and
                     its runtime buffers (tensorrt_llm/_torch/pyexecutor/_util.py,
                     KvCacheCreator: a profiling forward of max_num_tokens, then free x fraction)
    total_fraction   HBM x gpu_memory_utilization - weights - activations - runtime reserve
                     - CUDA-graph reserve; vLLM V1 (vllm/v1/worker/gpu_worker.py,
                     Worker.determine_available_memory: requested = total x utilisation; KV =
                     requested - (weights + torch peak of profile_run at max_num_batched_tokens
                     tokens and max_num_seqs sampled rows + non-torch growth); vLLM <= 0.12
                     captures CUDA graphs after the KV cache is allocated, outside this budget)
    static_fraction  (HBM - runtime reserve) x mem_fraction_static - weights; SGLang
                     (python/sglang/srt/model_executor/model_runner.py, profile_max_num_token:
                     rest = memory free after the weights load - total x (1 - mem_fraction_static),
                     total = memory free before it); activations and CUDA graphs live in the
                     1 - mem_fraction_static left over, so they do not come off here
    [bytes]; the calibration's ``reserve_bytes`` enters the free_fraction rule only."""
    hbm = np.asarray(hbm_bytes, dtype=float)
    if rule.kind == "free_fraction":
        f = rule.fraction or usable_fraction
        return memory.kv_capacity_bytes(hbm, weights_bytes, activation_bytes, reserve_bytes, f)
    if rule.kind == "total_fraction":
        room = (hbm * rule.fraction - weights_bytes - activation_bytes
                - rule.runtime_reserve_bytes - rule.cuda_graph_reserve_bytes)
    elif rule.kind == "static_fraction":
        f = rule.fraction or sglang_mem_fraction_static(hbm, rule.chunk_tokens, rule.graph_max_bs,
                                                        tp, pp)
        room = (hbm - rule.runtime_reserve_bytes) * f - weights_bytes
    else:
        raise ValueError(f"unknown KV rule {rule.kind!r}")
    return np.maximum(room, 0.0)


def capacity(model: ModelSpec, tp, pp, ep, sp, pass_tokens, batch, hbm_bytes, reserve_bytes,
             usable_fraction, rule: KvRule = FREE_FRACTION):
    """The KV room of a replica; dict of arrays. The one footprint both engines use.

    weights      per device of the largest stage (``weights_per_device``: expert shard,
                 group scales, uneven stages)
    activations  per device at a pass of ``pass_tokens`` tokens and ``batch`` sequences
    kv_capacity  per device by the framework's ``rule`` (``kv_room``; default: (HBM - weights
                 - activations - reserve) x usable fraction) [bytes]
    split        ways one token's KV is split over the replica's devices:
                 min(tp, KV heads) x L / ceil(L/pp) x sp (MLA: 1 KV head, the latent is whole
                 on every TP rank)
    tokens       full-attention tokens of KV the replica holds: kv_capacity x split / KV bytes
                 per token (sliding-window layers counted whole: a lower bound)
    """
    split = kv_split(model, tp, pp, sp)
    w = weights_per_device(model, tp, pp, ep)
    act = memory.activation_peak_bytes(model, pass_tokens / sp, batch, tp)
    cap = kv_room(rule, hbm_bytes, w, act, reserve_bytes, usable_fraction, tp, pp)
    return dict(weights=w, activations=act, kv_capacity=cap, split=split,
                tokens=cap * split / memory.kv_bytes_per_token(model))


def footprint(model: ModelSpec, B, context_len, tp, pp, ep, sp, pass_tokens, hbm_bytes,
              reserve_bytes, usable_fraction, block_tokens, rule: KvRule = FREE_FRACTION):
    """Per-device memory of a batch of B sequences at ``context_len`` tokens; dict of arrays.

    weights, activations (of a pass of ``pass_tokens`` tokens), kv (paged), kv_capacity, fits,
    max_seqs (concurrent sequences the capacity holds at this context), fragmentation."""
    c = capacity(model, tp, pp, ep, sp, pass_tokens, B, hbm_bytes, reserve_bytes, usable_fraction,
                 rule)
    w, act, cap = c["weights"], c["activations"], c["kv_capacity"]
    seq = sequence_bytes(model, context_len, block_tokens) / c["split"]
    kv = B * seq
    if rule.kind == "free_fraction":
        fits = (w + act + reserve_bytes <= hbm_bytes) & (kv <= cap)
    else:       # the framework's own rule left no room: it refuses to start
        fits = (cap > 0) & (kv <= cap)
    return dict(weights=w, activations=act, kv=kv, kv_capacity=cap, fits=fits,
                max_seqs=np.floor(cap / seq), fragmentation=fragmentation(context_len, block_tokens))
