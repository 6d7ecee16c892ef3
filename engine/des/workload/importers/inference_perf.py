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


def inference_perf_requests(cfg: dict, seed: int = 0, block_tokens: int = 512) -> pl.DataFrame:
    """The request stream an inference-perf config describes, as a trace in the Mooncake layout
    this module reads (timestamp ms, input_length, output_length, hash_ids). Column mapping:

        load.type          constant: arrivals every 1/rate s in each stage; poisson: exponential
                           gaps of mean 1/rate (the project's arrivals generator)
        load.stages[i]     rate (req/s) x duration (s) -> that many requests, the stages back to
                           back from t = 0 (concurrent stages: not an open-loop rate; rejected)
        data.type          random | synthetic: input_distribution -> input_length,
                           output_distribution -> output_length; shared_prefix: request k goes to
                           group k mod num_groups; input_length = system_prompt_len +
                           question (question_distribution or question_len); output from
                           output_distribution or output_len
        hash_ids           shared_prefix only: the group's system-prompt blocks
                           (floor(system_prompt_len / block_tokens) ids, shared within the
                           group) followed by ids unique to the request for its remaining full
                           blocks; other data types: empty lists (no shared prefix)
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
        sp = data.get("shared_prefix") or {}
        try:
            groups, sys_len = int(sp["num_groups"]), int(sp["system_prompt_len"])
        except (KeyError, TypeError, ValueError):
            raise SpecError("data.shared_prefix", sp, "num_groups and system_prompt_len") from None
        q = _ip_lengths(sp.get("question_distribution"), sp.get("question_len", 0), n, rng,
                        "data.shared_prefix.question_len")
        out = _ip_lengths(sp.get("output_distribution"), sp.get("output_len", 0), n, rng,
                          "data.shared_prefix.output_len")
        inp = sys_len + q
        g = np.arange(n) % groups
        nsys = sys_len // block_tokens
        hashes = []
        for k in range(n):
            nb = int(inp[k]) // block_tokens
            h = [int(g[k]) * nsys + b for b in range(min(nsys, nb))]
            base = groups * nsys + k * (nb + 1)
            hashes.append(h + [base + b for b in range(nsys, nb)])
    else:
        raise SpecError("data.type", dtype, "random, synthetic or shared_prefix (the types that fix "
                        "lengths without a dataset)")
    # the Mooncake layout needs its hash_ids column: empty lists when no prefix is shared
    cols = {"timestamp": arr * 1e3, "input_length": inp, "output_length": out,
            "hash_ids": hashes if hashes is not None else [[] for _ in range(n)]}
    return pl.DataFrame(cols, schema_overrides={"hash_ids": pl.List(pl.Int64)})


register("inference_perf", inference_perf_requests)

__all__ = ["inference_perf_requests"]
