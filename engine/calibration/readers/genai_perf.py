"""Perf Analyzer's ``profile_export.json`` as written by genai-perf: ``experiments[]``, each with
``experiment.mode`` (concurrency | request_rate) and ``.value``, and ``requests[]`` with
``timestamp`` [ns], ``response_timestamps`` [ns] and ``request_inputs.payload``. The file has no
token counts: every streamed response is taken as one output token, and the prompt length comes
from ``input_len`` (the run's --synthetic-input-tokens-mean) or, failing that, 4 characters per
token of the payload's prompt text (stated in notes)."""

import json

import numpy as np

from engine.calibration.readers.base import (Measurement, MeasurementError, _get, _load_json, _num, _table,
                                             _tpot, median_gaps_ms, register, sha256_of)


def _payload_chars(payload) -> int:
    """Characters of the prompt text in a genai-perf request payload (OpenAI chat/completions)."""
    try:
        p = json.loads(payload) if isinstance(payload, str) else payload
    except ValueError:
        return len(payload)
    if isinstance(p, dict):
        if "messages" in p:
            return sum(len(str(m.get("content", ""))) for m in p["messages"] if isinstance(m, dict))
        if "prompt" in p:
            return len(str(p["prompt"]))
        if "text_input" in p:
            return len(str(p["text_input"]))
    return len(json.dumps(p))



@register("genai_perf", detect=lambda doc: "experiments" in doc,
          describe="a genai-perf profile_export.json (experiments)")
def read_genai_perf(path, input_len: int | None = None, experiment: int = 0) -> Measurement:
    doc = _load_json(path)
    exps = _get(path, None, doc, "experiments", "a list of experiments (genai-perf profile_export.json)")
    if not isinstance(exps, list) or not exps:
        raise MeasurementError(path, None, "experiments", exps, "a non-empty list")
    if input_len is not None:
        input_len = _num(path, None, "input_len", input_len, integer=True, positive=True)
    if not isinstance(experiment, int) or not 0 <= experiment < len(exps):
        raise MeasurementError(path, None, "experiments", f"{len(exps)} experiments",
                               f"an experiment number {experiment}")
    exp = exps[experiment]
    mode = _get(path, None, _get(path, None, exp, "experiment"), "mode")
    value = _get(path, None, exp["experiment"], "value")
    reqs = _get(path, None, exp, "requests")
    if not isinstance(reqs, list):
        raise MeasurementError(path, None, "requests", type(reqs).__name__, "a list of requests")
    rows, itls, notes = [], [], []
    t0 = None
    for i, r in enumerate(reqs):
        ts = _num(path, i, "timestamp", _get(path, i, r, "timestamp"))
        rts = _get(path, i, r, "response_timestamps")
        if not isinstance(rts, list) or not rts:
            raise MeasurementError(path, i, "response_timestamps", rts, "a non-empty list of ns")
        t = np.array([_num(path, i, "response_timestamps", x) for x in rts], dtype=np.float64)
        if np.any(np.diff(t) < 0) or t[0] < ts:
            raise MeasurementError(path, i, "response_timestamps", rts[:3],
                                   "non-decreasing times after the request timestamp")
        out = len(t)
        if input_len is not None:
            inp = int(input_len)
        else:
            payload = (r.get("request_inputs") or {}).get("payload", "")
            inp = max(1, round(_payload_chars(payload) / 4))
        t0 = ts if t0 is None else min(t0, ts)
        rows.append((i, inp, out, ts, (t[0] - ts) * 1e-6, _tpot(t[0] * 1e-9, t[-1] * 1e-9, out),
                     (t[-1] - ts) * 1e-6))
        itls.append(np.diff(t) * 1e-6)
    rows = [(a, b, c, (d - t0) * 1e-9, e, f, g) for a, b, c, d, e, f, g in rows]
    notes.append("output tokens = streamed responses (one token per response)")
    if input_len is None:
        notes.append("input tokens ~ prompt characters / 4 (no token counts in profile_export.json)")
    wl = {"num_requests": len(rows)}
    if mode == "concurrency":
        wl.update(arrival="closed_loop", concurrency=_num(path, None, "experiment.value", value,
                                                            integer=True, positive=True))
    elif mode == "request_rate":
        wl.update(arrival="poisson", rate_rps=_num(path, None, "experiment.value", value, positive=True))
    else:
        raise MeasurementError(path, None, "experiment.mode", mode, "concurrency or request_rate")
    return Measurement(_table(rows), wl, np.concatenate(itls) if itls else None, str(path),
                       "genai_perf", sha256_of(path), notes, itl_p50_ms=median_gaps_ms(itls))

