"""inference-perf workload config -> a DES trace in the Mooncake layout (``simllm-import inference-perf``)."""

from pathlib import Path

import numpy as np
import polars as pl

from engine.des.workload.arrivals import arrivals
from engine.errors import SpecError
from engine.des.workload.importers import register


def _ip_lengths(dist: dict | None, default: int, n: int, rng, key: str) -> np.ndarray:
    """Token lengths of an inference-perf distribution {min, max, mean, std_dev}: normal draws
    (mean, std_dev) rounded and clipped to [min, max] (inference-perf's synthetic generator draws
    a normal and clips it); a missing distribution: ``default`` for every request."""
    if not dist:
        if not default or default < 1:
            raise SpecError(key, default, "a positive token length (or a distribution)")
        return np.full(n, int(default), np.int64)
    try:
        lo, hi = int(dist.get("min", 1)), int(dist["max"])
        mean, sd = float(dist["mean"]), float(dist.get("std_dev", 0.0))
    except (KeyError, TypeError, ValueError):
        raise SpecError(key, dist, "a mapping with max, mean (and min, std_dev)") from None
    if not 1 <= lo <= mean <= hi:
        raise SpecError(key, dist, "1 <= min <= mean <= max")
    return np.clip(np.rint(rng.normal(mean, sd, n)), lo, hi).astype(np.int64)


#: inference-perf's own defaults of the shared_prefix lengths (config/datagen/config.py SharedPrefix)
SP_DEFAULTS = {"system_prompt_len": 100, "question_len": 50, "output_len": 50,
               "num_unique_system_prompts": 10, "num_users_per_system_prompt": 10}


def _sp_field(sp: dict, new: str, old: str) -> int:
    """A shared_prefix count under its current name (inference-perf since early 2026) or its
    former one (config/datagen/config.py accepts both: AliasChoices(new, old)); neither: the
    tool's default, 10 (``SP_DEFAULTS``)."""
    for k in (new, old):
        if k in sp:
            v = sp[k]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SpecError(f"data.shared_prefix.{k}", v, "a positive integer")
            return v
    return SP_DEFAULTS[new]


def _sp_lengths(sp: dict, key: str, legacy: str, n: int, rng) -> np.ndarray:
    """``n`` lengths of a shared_prefix length field: an integer, an inline distribution
    {min, max, mean, std_dev} (current inference-perf) or the legacy ``<x>_distribution``; absent:
    inference-perf's default (``SP_DEFAULTS``)."""
    v = sp.get(key, None if sp.get(legacy) else SP_DEFAULTS[key])
    if isinstance(v, dict):
        return _ip_lengths(v, 0, n, rng, f"data.shared_prefix.{key}")
    return _ip_lengths(sp.get(legacy), v or 0, n, rng, f"data.shared_prefix.{key}")


def _shared_prefix(sp: dict, n: int, rng, block_tokens: int):
    """(input lengths, output lengths, prefix hash ids) of ``n`` requests of an inference-perf
    ``shared_prefix`` data block, as its generator builds them (kubernetes-sigs/inference-perf
    ``inference_perf/datagen/synthetic/shared_prefix_datagen.py``, 2026):

    * a pool of G x U prompts: G = num_unique_system_prompts (formerly num_groups) system prompts
      of system_prompt_len tokens (drawn once per group), each with U = num_users_per_system_prompt
      (formerly num_prompts_per_group) questions of question_len tokens and an output length drawn
      once per prompt; the pool is shuffled (seeded) and request i sends prompt i mod (G U) -- a
      repeat is the same token sequence, so all its full blocks hit the prefix cache;
    * enable_multi_turn_chat: prompt j is user j's session; request i is round i // (G U) of user
      i mod (G U). The session's context starts as the system prompt and each round sends
      context + ' ' + prompt (prompt = system prompt + question) and then keeps
      context = that input + ' ' + response (``apis/user_session.py``): round r's input is
      sys + (r + 1)(sys + q) + r out tokens, and every earlier round's input and output is a
      prefix of it.

    Hash ids: one id per full block of ``block_tokens``; a group's whole system-prompt blocks are
    shared by the group's prompts (a session's context starts with them), a prompt's (or a
    session's token sequence's) other blocks are its own."""
    G = _sp_field(sp, "num_unique_system_prompts", "num_groups")
    U = _sp_field(sp, "num_users_per_system_prompt", "num_prompts_per_group")
    multi = sp.get("enable_multi_turn_chat", False)
    if not isinstance(multi, bool):
        raise SpecError("data.shared_prefix.enable_multi_turn_chat", multi, "true or false")
    P = G * U
    sys_len = _sp_lengths(sp, "system_prompt_len", "system_prompt_distribution", G, rng)
    q = _sp_lengths(sp, "question_len", "question_distribution", P, rng)
    o = _sp_lengths(sp, "output_len", "output_distribution", P, rng)
    group = np.repeat(np.arange(G), U)
    perm = rng.permutation(P)                 # the generator's seeded shuffle of the pool
    q, o, group = q[perm], o[perm], group[perm]
    j = np.arange(n) % P                      # request i -> prompt i mod P
    bt = block_tokens
    sys_blocks = np.cumsum(np.r_[0, sys_len // bt])     # group g's blocks: ids sys_blocks[g] ...
    top = int(sys_blocks[-1])
    inp = np.empty(n, np.int64)
    hashes = []
    if not multi:
        plen = sys_len[group] + q                      # prompt p's tokens
        stride = int(plen.max()) // bt + 1             # ids per prompt (no two prompts collide)
        for k in range(n):
            p, g = int(j[k]), int(group[j[k]])
            ns, nb = int(sys_len[g]) // bt, int(plen[p]) // bt
            # whole blocks of the system prompt are the group's; the rest are prompt p's own
            # (a block straddling prefix and question belongs to the prompt)
            hashes.append([int(sys_blocks[g]) + b for b in range(ns)]
                          + [top + p * stride + b for b in range(ns, nb)])
        return plen[j].astype(np.int64), o[j], hashes
    rnd = np.arange(n) // P
    span = 0
    lens = []
    for k in range(n):
        p, g, r = int(j[k]), int(group[j[k]]), int(rnd[k])
        s, qq, oo = int(sys_len[g]), int(q[p]), int(o[p])
        inp[k] = s + (r + 1) * (s + qq) + r * oo
        lens.append(int(inp[k]))
        span = max(span, int(inp[k]) + oo)
    stride = span // bt + 1                   # ids per user's token sequence
    for k in range(n):
        p, g = int(j[k]), int(group[j[k]])
        ns = int(sys_len[g]) // bt            # the context starts with the group's system prompt
        hashes.append([int(sys_blocks[g]) + b for b in range(ns)]
                      + [top + p * stride + b for b in range(ns, lens[k] // bt)])
    return inp, o[j], hashes


def inference_perf_requests(cfg: dict, seed: int = 0, block_tokens: int = 512) -> pl.DataFrame:
    """The request stream an inference-perf config describes, as a trace in the Mooncake layout
    this module reads (timestamp ms, input_length, output_length, hash_ids). Column mapping:

        load.type          constant: arrivals every 1/rate s in each stage; poisson: exponential
                           gaps of mean 1/rate (the project's arrivals generator)
        load.stages[i]     rate (req/s) x duration (s) -> that many requests, the stages back to
                           back from t = 0 (concurrent stages: not an open-loop rate; rejected)
        data.type          random | synthetic: input_distribution -> input_length,
                           output_distribution -> output_length; shared_prefix: a pool of
                           prompts cycled as inference-perf cycles it (``_shared_prefix``)
        hash_ids           shared_prefix only: prompt blocks (a group's system prompt shared
                           within the group, a repeated prompt identical: a full prefix hit);
                           other data types: empty lists (no shared prefix)
        load.base_seed     the seed (else ``seed``)

    Everything else in the file (api, server, metrics, report) does not describe the workload and
    is ignored."""
    load, data = cfg.get("load") or {}, cfg.get("data") or {}
    kind = load.get("type", "constant")
    if kind not in ("constant", "poisson"):
        raise SpecError("load.type", kind, "constant or poisson (an open-loop rate)")
    stages = load.get("stages") or []
    if not stages:
        raise SpecError("load.stages", stages, "a list of {rate, duration} stages")
    rng = np.random.default_rng(int(load.get("base_seed", seed)))
    times = []
    t0 = 0.0
    for i, s in enumerate(stages):
        try:
            rate, dur = float(s["rate"]), float(s["duration"])
        except (KeyError, TypeError, ValueError):
            raise SpecError(f"load.stages[{i}]", s, "rate (req/s) and duration (s)") from None
        if rate <= 0 or dur <= 0:
            raise SpecError(f"load.stages[{i}]", s, "rate > 0 and duration > 0")
        n = int(round(rate * dur))
        if kind == "constant":
            a = np.arange(n) / rate
        else:
            a = arrivals("poisson", n + 1, rate, rng=rng)[1:]
            a = a[a < dur]
        times.append(t0 + a)
        t0 += dur
    arr = np.concatenate(times)
    n = len(arr)
    dtype = data.get("type", "random")
    hashes = None
    if dtype in ("random", "synthetic"):
        inp = _ip_lengths(data.get("input_distribution"), 0, n, rng, "data.input_distribution")
        out = _ip_lengths(data.get("output_distribution"), 0, n, rng, "data.output_distribution")
    elif dtype == "shared_prefix":
        inp, out, hashes = _shared_prefix(data.get("shared_prefix") or {}, n, rng, block_tokens)
    else:
        raise SpecError("data.type", dtype, "random, synthetic or shared_prefix (the types that fix "
                        "lengths without a dataset)")
    # the Mooncake layout needs its hash_ids column: empty lists when no prefix is shared
    cols = {"timestamp": arr * 1e3, "input_length": inp, "output_length": out,
            "hash_ids": hashes if hashes is not None else [[] for _ in range(n)]}
    return pl.DataFrame(cols, schema_overrides={"hash_ids": pl.List(pl.Int64)})


register("inference_perf", inference_perf_requests)

__all__ = ["inference_perf_requests"]
