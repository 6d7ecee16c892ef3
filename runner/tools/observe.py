"""The ``simllm-observe`` console script: benchmark an OpenAI-compatible endpoint with a simllm
workload and record what it did, in the measurement format ``simllm-calibrate`` reads.

    simllm-observe http://127.0.0.1:8000 workload=poisson_chat workload.num_requests=200 -o run.json
    simllm-observe http://gpu-box:8000 workload=closed_loop --endpoint chat --duration 120 -o cl.json
    simllm-calibrate run.json --name mine hardware=h100_sxm model=llama_3_1_8b

The workload comes from the Hydra ``workload`` group and its overrides (engine.des.workload.
build_stream: trace rows, Poisson/gamma/batch arrivals or a closed loop of ``concurrency`` users
with ``think_time_s``, fixed or distributed lengths, seeded). Each request asks for its drawn
output length (``max_tokens``, plus vLLM's ``ignore_eos`` unless ``--no-ignore-eos``) and sends a
prompt synthesised to its drawn length (one common English word per token; the token counts
recorded are the server's ``usage`` when it reports them). Requests stream (SSE) through aiohttp.

Recorded per request: send time, first-token time, every token's arrival (each SSE event with
text counts as one arrival), end, prompt and output tokens, error. Written as a vLLM
``benchmark_serving --save-result --save-detailed`` JSON (``input_lens``, ``output_lens``,
``ttfts``, ``itls``, ``start_times``, ``errors``, ``request_rate``/``burstiness``/
``max_concurrency``; engine/calibration/measurements.py ``read_vllm``) plus ``token_times`` (every
arrival [s] after the send) and a ``simllm_observe`` block (endpoint, workload, time scale).

Bounded by the request count and ``--duration`` (no request sent after it; one in flight gets
``--timeout`` more). A failed request (HTTP error, timeout, broken stream) is recorded with its
error and the run goes on; when the server cannot be reached any more the run stops sending,
writes every completed request and says so (exit 1). ``--time-scale s``: the server's wall clock
runs s times slower than the simulated one (``simllm-serve --time-scale s``): recorded times are
divided by s. The file is written atomically; ``--tracking-uri`` logs it to MLflow as a run
(summary metrics + the JSON as an artifact).
"""

import argparse
import asyncio
import datetime as _dt
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.errors import SpecError
from runner.tools.cli import guard, show_progress

#: Prompt text: words that are one token in the common BPE vocabularies (GPT-2/Llama/Qwen).
WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at "
         "which but have an had they you were their one all we can her has there been if more "
         "when will would who so no").split()


@dataclass
class Record:
    """One request as observed (times in seconds on the client's monotonic clock)."""

    index: int
    prompt_sent: int
    output_asked: int
    send: float = math.nan
    tokens: list = field(default_factory=list)      # arrival time of every streamed text event
    end: float = math.nan
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    error: str = ""


def prompt_text(n: int, offset: int) -> str:
    """``n`` words (one token each in common vocabularies), rotated by ``offset`` so that prompts
    do not share a prefix."""
    k = len(WORDS)
    return " ".join(WORDS[(offset + i * 7) % k] for i in range(n))


class ServerGone(Exception):
    """The endpoint cannot be reached (connection refused or reset before any response)."""


def _payload(rec: Record, chat: bool, model: str, ignore_eos: bool, ids: bool) -> dict:
    body: dict = {"model": model, "max_tokens": rec.output_asked, "stream": True,
                  "stream_options": {"include_usage": True}}
    if ignore_eos:
        body["ignore_eos"] = True
    if chat:
        body["messages"] = [{"role": "user", "content": prompt_text(rec.prompt_sent, rec.index)}]
    elif ids:
        body["prompt"] = [(rec.index * 31 + i * 7) % 1000 + 1000 for i in range(rec.prompt_sent)]
    else:
        body["prompt"] = prompt_text(rec.prompt_sent, rec.index)
    return body


async def one_request(session, url: str, rec: Record, body: dict, timeout: float, t0: float) -> None:
    """Send one streaming request and fill ``rec``; raises ServerGone if the server is unreachable."""
    import aiohttp

    rec.send = time.monotonic() - t0
    try:
        async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            if resp.status != 200:
                text = (await resp.text())[:300]
                rec.error = f"HTTP {resp.status}: {text}"
                return
            async for line in resp.content:
                if not line.startswith(b"data:"):
                    continue
                now = time.monotonic() - t0
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                try:
                    ev = json.loads(data)
                except ValueError:
                    rec.error = f"malformed stream event: {data[:100]!r}"
                    return
                if ev.get("usage"):
                    u = ev["usage"]
                    rec.prompt_tokens = u.get("prompt_tokens")
                    rec.output_tokens = u.get("completion_tokens")
                for ch in ev.get("choices") or ():
                    text = ch.get("text") if "text" in ch else (ch.get("delta") or {}).get("content")
                    if text:
                        rec.tokens.append(now)
            rec.end = time.monotonic() - t0
            if not rec.tokens:
                rec.error = "stream ended without any token"
    except asyncio.TimeoutError:
        rec.error = f"timeout after {timeout:g} s ({len(rec.tokens)} tokens received)"
    except (aiohttp.ClientConnectorError, ConnectionRefusedError) as e:
        rec.error = f"cannot connect: {e}"
        raise ServerGone(str(e)) from None
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError,
            aiohttp.ClientOSError) as e:
        rec.error = f"connection lost mid-stream: {type(e).__name__}: {e}"
        raise ServerGone(str(e)) from None
    except aiohttp.ClientError as e:
        rec.error = f"{type(e).__name__}: {e}"


async def drive(url: str, stream, *, chat: bool, model: str, duration: float, timeout: float,
                ignore_eos: bool = True, ids: bool = False, progress: bool = True,
                max_in_flight: int = 4096) -> tuple[list, dict]:
    """Run the request stream against ``url`` (base, e.g. http://127.0.0.1:8000); returns the
    records of every request sent and a status dict (stopped: why the run stopped early)."""
    import aiohttp

    path = "/v1/chat/completions" if chat else "/v1/completions"
    base = url.rstrip("/")
    full = (base[:-3] if base.endswith("/v1") else base) + path     # http://h:p or http://h:p/v1
    n = len(stream)
    recs = [Record(i, int(stream.prompt[i]), int(stream.output[i])) for i in range(n)]
    status = {"stopped": ""}
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=n, unit="req", desc="simllm-observe", mininterval=0.5, file=sys.stderr)
    t0 = time.monotonic()
    deadline = t0 + duration if duration > 0 else math.inf
    gone = asyncio.Event()
    sem = asyncio.Semaphore(max_in_flight)

    async def run_one(session, rec):
        async with sem:
            try:
                await one_request(session, full, rec,
                                  _payload(rec, chat, model, ignore_eos, ids), timeout, t0)
            except ServerGone as e:
                if not gone.is_set():
                    status["stopped"] = f"server at {url} unreachable ({e})"
                    gone.set()
            if bar is not None:
                bar.update(1)

    def stop_sending() -> bool:
        if gone.is_set():
            return True
        if time.monotonic() >= deadline:
            status["stopped"] = status["stopped"] or f"duration {duration:g} s reached"
            return True
        return False

    conn = aiohttp.TCPConnector(limit=0, force_close=False)
    sent: list = []
    async with aiohttp.ClientSession(connector=conn) as session:
        if stream.users:
            queue = iter(recs)

            async def user(u):
                first = True
                for rec in queue:
                    if not first and stream.think_time_s > 0:
                        await asyncio.sleep(stream.think_time_s)
                    first = False
                    if stop_sending():
                        return
                    sent.append(rec)
                    await run_one(session, rec)
            await asyncio.gather(*(user(u) for u in range(min(stream.users, n))))
        else:
            order = np.argsort(stream.arrival_s, kind="stable")
            a0 = float(stream.arrival_s[order[0]]) if n else 0.0
            tasks = []
            for i in order:
                wait = t0 + float(stream.arrival_s[i]) - a0 - time.monotonic()
                if wait > 0:
                    try:
                        await asyncio.wait_for(gone.wait(), wait)
                    except asyncio.TimeoutError:
                        pass
                if stop_sending():
                    break
                sent.append(recs[i])
                tasks.append(asyncio.create_task(run_one(session, recs[i])))
            if tasks:
                await asyncio.gather(*tasks)
    if bar is not None:
        bar.close()
    status["wall_s"] = time.monotonic() - t0
    return sorted(sent, key=lambda r: r.send), status


def to_measurement(recs: list, stream, meta: dict, time_scale: float = 1.0) -> dict:
    """The vLLM --save-result JSON (+ token_times and a simllm_observe block) of the records."""
    s = 1.0 / time_scale
    t_first = min((r.send for r in recs), default=0.0)
    inp, out, ttft, itl, start, errs, toks = [], [], [], [], [], [], []
    for r in recs:
        ok = not r.error and r.tokens
        p = r.prompt_tokens if r.prompt_tokens else r.prompt_sent
        o = r.output_tokens if r.output_tokens else len(r.tokens)
        inp.append(int(p))
        out.append(int(o) if ok else 0)
        start.append((r.send - t_first) * s)
        ttft.append((r.tokens[0] - r.send) * s if ok else 0.0)
        itl.append((np.diff(r.tokens) * s).tolist() if ok else [])
        toks.append([(t - r.send) * s for t in r.tokens])
        errs.append(r.error if not ok else "")
    good = [i for i, e in enumerate(errs) if not e]
    dur = max(((recs[i].end - t_first) * s for i in good), default=0.0)
    tt = np.array([ttft[i] for i in good]) * 1e3
    tp = np.array([sum(itl[i]) / (out[i] - 1) * 1e3 for i in good if out[i] > 1])
    gaps = np.concatenate([np.array(itl[i]) for i in good]) * 1e3 if good else np.array([])
    pct = lambda v, q: float(np.percentile(v, q)) if len(v) else float("nan")  # noqa: E731
    wl = meta["workload"]
    if wl.get("arrival") == "closed_loop":
        rate, burst, conc = "inf", 1.0, int(wl.get("concurrency", 0))
    elif wl.get("arrival") in ("poisson", "gamma"):
        cv = float(wl.get("arrival_cv", 1.0)) if wl["arrival"] == "gamma" else 1.0
        rate, burst, conc = float(wl.get("rate_rps", 0.0)) * time_scale, 1.0 / cv ** 2, None
    else:
        rate, burst, conc = "inf", 1.0, None
    tot_out = int(sum(out[i] for i in good))
    return {
        "date": _dt.datetime.now().strftime("%Y%m%d-%H%M%S"), "backend": "openai-chat"
        if meta["endpoint"] == "chat" else "openai", "model_id": meta["model"],
        "num_prompts": len(recs), "request_rate": rate, "burstiness": burst, "max_concurrency": conc,
        "duration": dur, "completed": len(good), "failed": len(recs) - len(good),
        "total_input_tokens": int(sum(inp[i] for i in good)), "total_output_tokens": tot_out,
        "request_throughput": len(good) / dur if dur > 0 else 0.0,
        "output_throughput": tot_out / dur if dur > 0 else 0.0,
        "mean_ttft_ms": float(tt.mean()) if tt.size else float("nan"),
        "median_ttft_ms": pct(tt, 50), "p99_ttft_ms": pct(tt, 99),
        "mean_tpot_ms": float(tp.mean()) if tp.size else float("nan"),
        "median_tpot_ms": pct(tp, 50), "p99_tpot_ms": pct(tp, 99),
        "mean_itl_ms": float(gaps.mean()) if gaps.size else float("nan"),
        "median_itl_ms": pct(gaps, 50), "p99_itl_ms": pct(gaps, 99),
        "input_lens": inp, "output_lens": out, "ttfts": ttft, "itls": itl, "start_times": start,
        "errors": errs, "token_times": toks,
        "simllm_observe": {**meta, "time_scale": time_scale},
    }


def write_atomic(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(doc, default=float))
    os.replace(tmp, path)


def _model_of(url: str, timeout: float) -> str:
    """The first model id the server lists at /v1/models."""
    import urllib.request

    base = url.rstrip("/")
    base = base if base.endswith("/v1") else base + "/v1"
    try:
        with urllib.request.urlopen(base + "/models", timeout=timeout) as r:
            data = json.loads(r.read())
        return str(data["data"][0]["id"])
    except Exception as e:  # noqa: BLE001 - any failure: the user names the model
        raise SpecError("--model", None, f"a model id (GET {base}/models failed: {e})") from None


def run(args) -> dict:
    from engine.des.workload import build_stream
    from runner.convert import specs_from_config
    from runner.tools.calibrate import compose

    cfg = compose(args.overrides)
    wl_spec = specs_from_config(cfg).workload
    stream = build_stream(wl_spec)
    model = args.model or _model_of(args.url, min(args.timeout, 30.0))
    from dataclasses import asdict
    wl = {k: v for k, v in asdict(wl_spec).items() if isinstance(v, (int, float, str))}
    meta = {"url": args.url, "endpoint": args.endpoint, "model": model, "workload": wl,
            "requests_planned": len(stream), "duration_limit_s": args.duration,
            "timeout_s": args.timeout, "ignore_eos": not args.no_ignore_eos}
    print(f"simllm-observe: {len(stream)} requests ({wl_spec.arrival}) to {args.url} "
          f"/v1/{'chat/' if args.endpoint == 'chat' else ''}completions, model '{model}'",
          file=sys.stderr)
    recs, status = asyncio.run(drive(args.url, stream, chat=args.endpoint == "chat", model=model,
                                     duration=args.duration, timeout=args.timeout,
                                     ignore_eos=not args.no_ignore_eos, ids=args.token_ids,
                                     progress=show_progress(args.no_progress)))
    meta["stopped"] = status["stopped"]
    doc = to_measurement(recs, stream, meta, args.time_scale)
    out = Path(args.output)
    write_atomic(out, doc)
    failed = doc["failed"]
    line = (f"simllm-observe: {doc['completed']} requests completed, {failed} failed, "
            f"{len(stream) - len(recs)} not sent; p50 TTFT {doc['median_ttft_ms']:.2f} ms, "
            f"p50 TPOT {doc['median_tpot_ms']:.3f} ms, {doc['request_throughput']:.2f} req/s, "
            f"{doc['output_throughput']:.0f} tok/s -> {out}")
    print(line, file=sys.stderr)
    if failed:
        first = next(e for e in doc["errors"] if e)
        print(f"simllm-observe: first error: {first}", file=sys.stderr)
    if args.tracking_uri:
        from runner import tracking
        from runner.job import flatten, git_commit

        summary = {k: doc[k] for k in ("completed", "failed", "duration", "request_throughput",
                                       "output_throughput", "median_ttft_ms", "p99_ttft_ms",
                                       "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms")}
        params = {**flatten({"workload": wl}), "url": args.url, "endpoint": args.endpoint,
                  "model": model, "time_scale": args.time_scale}
        art = out.parent / f".{out.stem}-mlflow"
        art.mkdir(exist_ok=True)
        (art / out.name).write_text(out.read_text())
        try:
            rid = tracking.log_job(args.tracking_uri, args.experiment, f"observe:{model}", params, summary,
                                   {"simllm.kind": "observation", "simllm.git_commit": git_commit(),
                                    "simllm.stopped": status["stopped"] or "no"}, art)
            print(f"MLflow run {rid} ({args.tracking_uri}, experiment {args.experiment})", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - the file is written; tracking is best effort
            print(f"simllm-observe: warning: MLflow logging failed ({e}); the measurement is {out}",
                  file=sys.stderr)
        finally:
            for f in art.iterdir():
                f.unlink()
            art.rmdir()
    if status["stopped"] and not status["stopped"].startswith("duration"):
        print(f"simllm-observe: error: run stopped early: {status['stopped']}; the "
              f"{doc['completed']} completed requests are in {out}", file=sys.stderr)
        doc["_exit"] = 1
    return doc


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="simllm-observe", description=__doc__.split("\n\n")[0])
    ap.add_argument("url", help="the server's base URL, e.g. http://127.0.0.1:8000")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides: workload=..., workload.num_requests=...")
    ap.add_argument("-o", "--output", required=True, help="measurement JSON to write")
    ap.add_argument("--endpoint", choices=["completions", "chat"], default="completions")
    ap.add_argument("--model", default=None, help="model id (default: the first of /v1/models)")
    ap.add_argument("--duration", type=float, default=0.0, help="send no request after this many "
                                                                "seconds (0: no limit)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one request may take")
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="the server's wall seconds per simulated second (simllm-serve --time-scale)")
    ap.add_argument("--token-ids", action="store_true", help="completions: send prompts as token ids")
    ap.add_argument("--no-ignore-eos", action="store_true", help="do not send vLLM's ignore_eos")
    ap.add_argument("-q", "--quiet", "--no-progress", dest="no_progress", action="store_true",
                    help="no progress bar (also SIMLLM_QUIET=1; drawn only on a terminal's stderr)")
    ap.add_argument("--tracking-uri", default=None, help="log the observation to this MLflow store")
    ap.add_argument("--experiment", default="observations")
    return ap


@guard("simllm-observe")
def main(argv=None) -> int:
    args = parser().parse_intermixed_args(argv)
    for name in ("time_scale", "timeout"):
        v = getattr(args, name)
        if not (v > 0 and math.isfinite(v)):
            print(f"simllm-observe: error: --{name.replace('_', '-')} {v}: expected a finite number > 0",
                  file=sys.stderr)
            return 2
    if args.duration < 0:
        print(f"simllm-observe: error: --duration {args.duration}: expected >= 0", file=sys.stderr)
        return 2
    doc = run(args)
    return doc.get("_exit", 0)


if __name__ == "__main__":
    sys.exit(main())
