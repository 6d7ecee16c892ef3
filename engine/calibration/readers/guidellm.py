"""GuideLLM's report (``benchmarks.json``): ``benchmarks[]``, each with ``requests.successful[]``
holding ``prompt_tokens``, ``output_tokens`` (v0.8+: ``input_metrics``/``output_metrics.text_tokens``)
and the times ``start_time``/``first_token_time``/``last_token_time`` [s] (v0.2-0.3), or
``info.timings.request_start``/``first_token_iteration``/``last_token_iteration`` (v0.4+); the
strategy (``args.strategy.type_``: synchronous, concurrent with ``streams``, throughput,
constant/poisson with ``rate``) gives the workload."""

from engine.calibration.readers.base import (Measurement, MeasurementError, _get, _load_json, _num, _table,
                                             _tpot, register, sha256_of)


def _guidellm_times(path, i, r):
    """(start, first, last) [s] of one GuideLLM request, v0.2-0.3 or v0.4+ layout."""
    timings = (r.get("info") or {}).get("timings") if isinstance(r.get("info"), dict) else None
    if "first_token_time" in r or "start_time" in r:
        keys = ("start_time", "first_token_time", "last_token_time")
        vals = [r.get(k) for k in keys]
    elif timings is not None:
        keys = ("info.timings.request_start", "info.timings.first_token_iteration",
                "info.timings.last_token_iteration")
        vals = [timings.get(k.rsplit(".", 1)[1]) for k in keys]
    else:
        raise MeasurementError(path, i, "first_token_time", None,
                               "start_time/first_token_time/last_token_time or info.timings")
    return [_num(path, i, k, v) for k, v in zip(keys, vals)]


def _guidellm_tokens(path, i, r, key, metrics):
    """Token count ``key`` of one GuideLLM request: top level (v0.2-0.7) or
    ``input_metrics``/``output_metrics.text_tokens`` (v0.8+)."""
    if key in r or not isinstance(r.get(metrics), dict):
        return _get(path, i, r, key)
    return _get(path, i, r[metrics], "text_tokens", f"{key} or {metrics}.text_tokens")



@register("guidellm", detect=lambda doc: "benchmarks" in doc, describe="a GuideLLM report (benchmarks)")
def read_guidellm(path, benchmark: int = 0) -> Measurement:
    doc = _load_json(path)
    benches = _get(path, None, doc, "benchmarks", "a list of benchmarks (GuideLLM report)")
    if not isinstance(benches, list) or not isinstance(benchmark, int) or not 0 <= benchmark < len(benches):
        raise MeasurementError(path, None, "benchmarks", f"{len(benches) if isinstance(benches, list) else benches}",
                               f"a list holding benchmark number {benchmark}")
    b = benches[benchmark]
    reqs = _get(path, None, _get(path, None, b, "requests"), "successful")
    if not isinstance(reqs, list):
        raise MeasurementError(path, None, "requests.successful", type(reqs).__name__, "a list of requests")
    rows = []
    for i, r in enumerate(reqs):
        inp = _num(path, i, "prompt_tokens", _guidellm_tokens(path, i, r, "prompt_tokens", "input_metrics"),
                   integer=True, positive=True)
        out = _num(path, i, "output_tokens", _guidellm_tokens(path, i, r, "output_tokens", "output_metrics"),
                   integer=True, positive=True)
        start, first, last = _guidellm_times(path, i, r)
        if not start <= first <= last:
            raise MeasurementError(path, i, "first_token_time", first,
                                   f"start ({start}) <= first token <= last token ({last})")
        rows.append((i, inp, out, start, (first - start) * 1e3, _tpot(first, last, out), (last - start) * 1e3))
    t0 = min((r[3] for r in rows), default=0.0)
    rows = [(a, bb, c, d - t0, e, f, g) for a, bb, c, d, e, f, g in rows]
    strat = None
    for holder in ("args", "config", "scheduler"):
        h = b.get(holder)
        if isinstance(h, dict) and isinstance(h.get("strategy"), dict):
            strat = h["strategy"]
            break
    strat = strat or {}
    kind = strat.get("type_", "") if isinstance(strat, dict) else ""
    wl: dict = {"num_requests": len(rows)}
    notes = []
    if kind == "synchronous":
        wl.update(arrival="closed_loop", concurrency=1)
    elif kind == "concurrent":
        wl.update(arrival="closed_loop", concurrency=_num(path, None, "strategy.streams",
                                                          strat.get("streams"), integer=True, positive=True))
    elif kind == "throughput":
        wl.update(arrival="batch")
    else:
        wl.update(arrival="trace")
        if kind in ("constant", "poisson"):
            wl["rate_rps"] = _num(path, None, "strategy.rate", strat.get("rate"), positive=True)
        notes.append(f"strategy {kind or 'not recorded'}: request start times replayed as arrivals")
    return Measurement(_table(rows), wl, None, str(path), "guidellm", sha256_of(path), notes)

