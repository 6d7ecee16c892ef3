"""ServeGen per-client data -> a DES trace in the Vidur layout (``simllm-import servegen``)."""

from pathlib import Path

import numpy as np
import polars as pl

from engine.des.workload.arrivals import arrivals
from engine.errors import SpecError
from engine.des.workload.importers import register


_SERVEGEN_KINDS = {"weibull": "weibull", "gamma": "gamma"}


def _servegen_pdf(text, where: str) -> tuple[np.ndarray, np.ndarray]:
    """A ServeGen length pdf cell ("{224: 0.0003, 225: ...}", token length -> probability) as
    (lengths, probabilities normalised to 1)."""
    import ast
    try:
        d = ast.literal_eval(text) if isinstance(text, str) else text
        v = np.array([int(k) for k in d], dtype=np.int64)
        p = np.array([float(x) for x in d.values()], dtype=np.float64)
    except (ValueError, SyntaxError, TypeError, AttributeError):
        raise SpecError(where, str(text)[:60], "a mapping {token length: probability}") from None
    if not v.size or (p < 0).any() or p.sum() <= 0:
        raise SpecError(where, str(text)[:60], "a non-empty mapping with probabilities >= 0")
    return v, p / p.sum()


def _shape_cv(kind: str, shape: float) -> float:
    """Coefficient of variation of gamma (1/sqrt(shape)) or Weibull (shape k:
    sqrt(G(1 + 2/k) / G(1 + 1/k)^2 - 1)) gaps."""
    if kind == "gamma":
        return 1.0 / np.sqrt(shape)
    if kind == "weibull":
        from scipy.special import gammaln
        return float(np.sqrt(np.expm1(gammaln(1 + 2 / shape) - 2 * gammaln(1 + 1 / shape))))
    return 1.0


def servegen_requests(directory, *, start_s: float = 0.0, duration_s: float = 3600.0,
                      rate: float = 0.0, rate_scale: float = 1.0, seed: int = 0) -> pl.DataFrame:
    """A request trace (arrived_at s, num_prefill_tokens, num_decode_tokens, client) from a
    ServeGen client-pool directory (github.com/alibaba/ServeGen data/<category>/<model>/: the
    per-client files ``chunk-<id>-trace.csv`` and ``chunk-<id>-dataset.json`` that its ClientPool
    loads). Column mapping:

        chunk-<id>-trace.csv   rows "timestamp,rate,cv,pattern,shape,scale" (no header): client
                               <id> sends ``rate`` req/s in the window [timestamp, next timestamp)
                               (the last window runs to the end of the span); pattern Gamma |
                               Weibull with the fitted ``shape`` is the gap law. As ServeGen's
                               construct.generate_workload: n = ceil(rate x window) gaps are
                               drawn (here by the project's arrivals generator,
                               engine.des.workload.arrivals, at the coefficient of variation the
                               shape implies: gamma 1/sqrt(shape), Weibull
                               sqrt(G(1 + 2/k) / G(1 + 1/k)^2 - 1)), rescaled to sum to the
                               window, and the arrivals before its end kept: the window's count
                               is the recorded rate's, its burstiness the fitted shape's (the
                               ``cv`` column, an empirical figure, and ``scale`` are not used);
                               an empty pattern: the client is silent
        chunk-<id>-dataset.json {timestamp: {"input_tokens": "{len: p, ...}", "output_tokens":
                               ...}}: each request of a trace window draws its prompt
                               (input_tokens) and output (output_tokens) length from the dataset
                               window with the largest timestamp <= the trace window's (as
                               ClientPool does); other fields (reason_ratio, multimodal
                               image/audio/video tokens) are not read; a dataset without
                               input_tokens/output_tokens (multimodal pools: text_tokens) is an error
        start_s, duration_s    the span [start, start + duration) of the pool's day, re-based to 0
        rate                   > 0: every window's client rates scaled so they sum to ``rate``
                               req/s (ServeGen's get_constant_rate_fn); else x ``rate_scale``
                               (get_scaled_rate_fn)
        client                 the chunk id (a column for analysis; the DES reads times and lengths)
    Draws from ``seed`` (one numpy Generator, clients in id order; not ServeGen's RandomState
    draws, so the same statistics, not the same requests). Prefix hashes: none (ServeGen does not
    record prompt content)."""
    import json
    import re

    d = Path(directory)
    if not d.is_dir():
        raise SpecError("servegen directory", str(directory), "a ServeGen data/<category>/<model> directory")
    ids = sorted(int(m.group(1)) for f in d.iterdir() if (m := re.fullmatch(r"chunk-(\d+)-trace\.csv", f.name)))
    if not ids:
        raise SpecError("servegen directory", str(directory), "chunk-<id>-trace.csv files (a ServeGen client pool)")
    if not duration_s > 0:
        raise SpecError("--duration", duration_s, "a span > 0 s")
    end = start_s + duration_s
    windows = []      # (client, t0, t1, rate, cv, kind, dataset window)
    for cid in ids:
        tpath = d / f"chunk-{cid}-trace.csv"
        rows = []
        for k, line in enumerate(tpath.read_text().splitlines()):
            if not line.strip():
                continue
            parts = line.strip().split(",")
            try:
                ts, r, pat = int(float(parts[0])), float(parts[1]), parts[3].strip()
                shape = float(parts[4]) if pat else 0.0
            except (ValueError, IndexError):
                raise SpecError(f"{tpath.name}:{k + 1}", line[:60], "timestamp,rate,cv,pattern,arg1,arg2") from None
            if pat and pat.lower() not in _SERVEGEN_KINDS:
                raise SpecError(f"{tpath.name}:{k + 1}", pat, "Gamma or Weibull (ServeGen's ArrivalPat)")
            if pat and not shape > 0:
                raise SpecError(f"{tpath.name}:{k + 1}", shape, f"a {pat} shape > 0")
            rows.append((ts, r, _shape_cv(pat.lower(), shape) if pat else 1.0, pat.lower()))
        rows.sort()
        for j, (ts, r, cv, pat) in enumerate(rows):
            t1 = rows[j + 1][0] if j + 1 < len(rows) else end
            lo, hi = max(ts, start_s), min(t1, end)
            if hi > lo and pat and r > 0:
                windows.append([cid, lo, hi, r, cv, _SERVEGEN_KINDS[pat], ts])
    if rate > 0:          # per window start: the client rates sum to ``rate``
        tot: dict = {}
        for w in windows:
            tot[w[1]] = tot.get(w[1], 0.0) + w[3]
        for w in windows:
            w[3] *= rate / tot[w[1]]
    elif rate_scale != 1.0:
        if not rate_scale > 0:
            raise SpecError("--rate-scale", rate_scale, "a factor > 0")
        for w in windows:
            w[3] *= rate_scale
    rng = np.random.default_rng(seed)
    cols = {"arrived_at": [], "num_prefill_tokens": [], "num_decode_tokens": [], "client": []}
    data, data_id = {}, None
    for cid, lo, hi, r, cv, kind, ts in windows:       # clients in id order, windows in time order
        if cid != data_id:                             # one client's dataset in memory at a time
            dpath = d / f"chunk-{cid}-dataset.json"
            if not dpath.exists():
                raise SpecError("servegen directory", str(dpath.name), f"the dataset of client {cid} "
                                "next to its trace (ServeGen's ClientPool needs both)")
            data = {int(k): v for k, v in json.loads(dpath.read_text()).items()}
            dts, data_id, pdfs = sorted(data), cid, {}
        k = int(np.searchsorted(dts, ts, side="right")) - 1
        if k < 0:
            continue                   # no length distribution yet (ClientPool: no dataset window)
        W = hi - lo
        # ServeGen: ceil(rate x W) gaps rescaled to sum to W, the arrivals before W kept
        n = int(np.ceil(r * W))
        t = arrivals(kind, n + 1, r, cv, rng=rng)[1:]
        t = t * (W / t[-1]) if n and t[-1] > 0 else t
        t = t[t < W]
        if not t.size:
            continue
        if dts[k] not in pdfs:
            win = data[dts[k]]
            where = f"chunk-{cid}-dataset.json[{dts[k]}]"
            if "input_tokens" not in win or "output_tokens" not in win:
                raise SpecError(where, sorted(win), "input_tokens and output_tokens length pdfs "
                                "(language / reason pools; multimodal pools are not supported)")
            pdfs[dts[k]] = (_servegen_pdf(win["input_tokens"], where + ".input_tokens"),
                            _servegen_pdf(win["output_tokens"], where + ".output_tokens"))
        (iv, ip), (ov, op) = pdfs[dts[k]]
        cols["arrived_at"].append(lo - start_s + t)
        cols["num_prefill_tokens"].append(rng.choice(iv, size=t.size, p=ip))
        cols["num_decode_tokens"].append(rng.choice(ov, size=t.size, p=op))
        cols["client"].append(np.full(t.size, cid, np.int64))
    if not cols["arrived_at"]:
        raise SpecError("servegen span", f"[{start_s}, {end})", "a span in which some client sends requests")
    df = pl.DataFrame({k: np.concatenate(v) for k, v in cols.items()})
    # lengths of 0 (a pdf's bin 0) are not requests the DES can serve
    df = df.with_columns(pl.col("num_prefill_tokens").clip(1), pl.col("num_decode_tokens").clip(1))
    return df.sort("arrived_at", maintain_order=True)


register("servegen", servegen_requests)

__all__ = ["servegen_requests"]
