"""The ``simllm-serve`` console script: an OpenAI-compatible streaming server whose token timing
is the discrete-event simulator's.

    simllm-serve hardware=h100_sxm model=llama_3_1_8b calibration=specsheet --port 8000
    simllm-serve hardware=b200 model=llama_3_1_70b partition=tp4 --time-scale 2

The Hydra overrides compose the deployment as for ``simllm`` (engine=des: hardware, model,
partition, framework, calibration, engine.des.*). Each HTTP request joins a live
continuous-batching replica (engine.des.live.LiveEngine: the DES's scheduler, KV cache and
preemption, step times from StepModel with the calibration's noise) at the moment it arrives;
its tokens are streamed at their simulated times. Wall clock = simulated clock x ``time_scale``
(wall seconds per simulated second; 1 = real time, 10 = ten times slower than the hardware).

Endpoints (vLLM's OpenAI server is the model):
  POST /v1/completions, /v1/chat/completions   streaming (SSE) or not; ``stream_options.include_usage``
  GET  /v1/models, /health, /metrics           Prometheus text: vllm:num_requests_running/waiting,
                                               vllm:kv_cache_usage_perc, token and request counters,
                                               simllm:token_lag_seconds (lateness of delivery)
Token contents are placeholders (" tok"); the output is always ``max_tokens`` tokens (no EOS, like
vLLM's ``ignore_eos``; default 16 for completions as in the OpenAI API, ``--default-max-tokens`` for
chat). Prompt tokens: a list of token ids counts its length; text counts whitespace-separated
words (no tokenizer; ``simllm-observe`` synthesises one word per token); chat: the words of every
message's text content, no template tokens. Usage counts are exact under that rule.

Bounded: at most ``--max-requests`` requests in the engine (HTTP 503 beyond), bodies up to
``--max-body-bytes``, requests longer than the KV cache refused (400). Listens on 127.0.0.1 unless
``--host`` says otherwise. A client that disconnects aborts its simulated request, as vLLM aborts
it: dropped from the queue or the running batch with its KV blocks freed
(``LiveEngine.abort``), counted in ``simllm:requests_aborted_total``.
"""

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import sys
import time
import uuid

import numpy as np

from engine.errors import SpecError
from runner.tools.cli import guard

TOKEN_TEXT = " tok"


class Sim:
    """The LiveEngine bound to the wall clock: ``pump`` advances it and hands tokens to the
    waiting responses; requests join through ``submit``. Runs in the server's event loop only."""

    def __init__(self, engine, time_scale: float = 1.0):
        self.eng = engine
        self.scale = float(time_scale)
        self.w0 = time.monotonic()
        self.reqs: dict = {}             # rid -> asyncio.Queue of token counts (None: done)
        self.wake = asyncio.Event()
        self.lag_sum = 0.0               # simulated seconds tokens were delivered late, summed
        self.lag_max = 0.0
        self.lag_n = 0
        self.success = 0
        self.aborted = 0                 # requests whose client went away before their end
        self.task = None

    def sim_now(self) -> float:
        return (time.monotonic() - self.w0) / self.scale

    def step(self) -> None:
        """Advance the engine to now and hand out every final token."""
        now = self.sim_now()
        em = self.eng.advance(now)
        reqs = self.reqs
        for rid, ts in em.tokens:
            late = now - float(ts[0])
            self.lag_sum += late * len(ts)
            self.lag_n += len(ts)
            if late > self.lag_max:
                self.lag_max = late
            q = reqs.get(rid)
            if q is not None:
                q.put_nowait(len(ts))
        for rid in em.done:
            q = reqs.pop(rid, None)
            if q is not None:
                q.put_nowait(None)
            self.eng.release(rid)
            self.success += 1

    async def pump(self) -> None:
        while True:
            self.step()
            t_next = self.eng.next_time()
            self.wake.clear()
            if t_next == math.inf:
                await self.wake.wait()
                continue
            delay = self.w0 + t_next * self.scale - time.monotonic()
            if delay > 0:
                try:
                    await asyncio.wait_for(self.wake.wait(), delay)
                except TimeoutError:
                    pass

    def submit(self, prompt: int, output: int, units=None) -> tuple[int, asyncio.Queue]:
        """(engine request id, queue of token counts; None when it is done). ``units``: the
        prompt's tokens (ids or words, ``prompt_units``): with prefix caching on, their block
        hashes let the engine match a prefix it has seen."""
        self.step()
        hashes = (prefix_hashes(units, self.eng.block_tokens)
                  if units is not None and self.eng.des.kv.prefix_caching else None)
        rid = self.eng.submit(prompt, output, self.sim_now(), hashes=hashes)
        q: asyncio.Queue = asyncio.Queue()
        self.reqs[rid] = q
        self.step()              # the arrival enters the queue (plan, or end a decode run early)
        self.wake.set()
        return rid, q

    def abort(self, rid: int) -> bool:
        """The client of ``rid`` went away: drop it from the engine now (False if it completed
        first: ``step`` has released it, and its slot may already serve another request)."""
        self.step()
        q = self.reqs.pop(rid, None)
        if q is None:
            return False
        q.put_nowait(None)       # whoever still waits on it stops
        self.eng.abort(rid, self.sim_now())
        self.aborted += 1
        self.step()
        self.wake.set()
        return True

    async def watch(self, request, rid: int) -> None:
        """Abort ``rid`` when ``request``'s client disconnects before the response is complete
        (ASGI ``http.disconnect``; after a complete response the server reports the same
        message, and ``abort`` then finds the request gone and does nothing)."""
        while True:
            msg = await request.receive()
            if msg["type"] == "http.disconnect":
                self.abort(rid)
                return


def _error(status: int, message: str, param: str | None = None):
    from starlette.responses import JSONResponse

    kind = {400: "BadRequestError", 404: "NotFoundError", 413: "BadRequestError",
            503: "ServiceUnavailableError"}.get(status, "Error")
    return JSONResponse({"object": "error", "message": message, "type": kind, "param": param,
                         "code": status}, status_code=status)


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.param, self.status = param, status


def _words(text) -> int:
    if isinstance(text, list):    # chat content parts
        return sum(_words(p.get("text", "")) for p in text if isinstance(p, dict))
    if not isinstance(text, str):
        raise BadRequest(f"prompt text must be a string, got {type(text).__name__}", "prompt")
    return len(text.split())


def prompt_units(body: dict, chat: bool) -> list:
    """The prompt's tokens under the server's counting rule: its token ids, or its
    whitespace-separated words (chat: every message's text content, in order)."""
    def words(text):
        if isinstance(text, list):
            return [w for part in text if isinstance(part, dict) for w in words(part.get("text", ""))]
        return text.split() if isinstance(text, str) else []
    if chat:
        return [w for m in body.get("messages") or () if isinstance(m, dict) for w in words(m.get("content") or "")]
    p = body.get("prompt")
    if isinstance(p, list) and p and all(isinstance(x, int) for x in p):
        return list(p)
    if isinstance(p, list) and len(p) == 1:
        return list(p[0]) if isinstance(p[0], list) else words(p[0])
    return words(p)


def prefix_hashes(units: list, block_tokens: int) -> np.ndarray:
    """One hash per whole block of ``block_tokens`` prompt tokens, each covering the prompt up to
    the end of its block (a chained BLAKE2b digest, as vLLM's block hashes chain the parent's):
    two prompts share their first k hashes exactly when their first k blocks are the same tokens."""
    h = hashlib.blake2b(digest_size=8)
    out = []
    for i in range(len(units) // block_tokens):
        h.update(json.dumps(units[i * block_tokens:(i + 1) * block_tokens]).encode())
        out.append(int.from_bytes(h.copy().digest(), "little") >> 1)
    return np.asarray(out, dtype=np.int64)


def prompt_tokens(body: dict, chat: bool) -> int:
    """Prompt tokens of a request under the server's counting rule (module docstring)."""
    if chat:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest("'messages' must be a non-empty list", "messages")
        n = sum(_words(m.get("content") or "") for m in msgs if isinstance(m, dict))
    else:
        p = body.get("prompt")
        if isinstance(p, list) and p and all(isinstance(x, int) for x in p):
            n = len(p)
        elif isinstance(p, list) and len(p) == 1:
            n = len(p[0]) if isinstance(p[0], list) else _words(p[0])
        elif isinstance(p, str):
            n = _words(p)
        else:
            raise BadRequest("'prompt' must be a string, a list of token ids, or a list of one of "
                             "those (one prompt per request)", "prompt")
    if n < 1:
        raise BadRequest("the prompt has no tokens", "messages" if chat else "prompt")
    return n


def output_tokens(body: dict, chat: bool, default_chat: int) -> int:
    key = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    v = body.get(key)
    if v is None:
        return default_chat if chat else 16
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise BadRequest(f"'{key}' must be an integer >= 1, got {v!r}", key)
    return v


def make_app(engine, model_name: str, *, time_scale: float = 1.0, default_max_tokens: int = 256,
             max_body_bytes: int = 8 << 20):
    """The Starlette application serving ``engine`` (an engine.des.live.LiveEngine)."""
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
    from starlette.routing import Route

    from engine.des.live import EngineFull

    state: dict = {}
    created = int(time.time())
    max_len = engine.max_tokens

    @asynccontextmanager
    async def lifespan(app):
        sim = Sim(engine, time_scale)
        sim.task = asyncio.get_running_loop().create_task(sim.pump())
        state["sim"] = sim
        try:
            yield
        finally:
            sim.task.cancel()

    async def models(request):
        return JSONResponse({"object": "list", "data": [
            {"id": model_name, "object": "model", "created": created, "owned_by": "simllm",
             "root": model_name, "max_model_len": max_len}]})

    async def health(request):
        return Response(status_code=200)

    async def metrics(request):
        sim, eng = state["sim"], engine
        g = eng.gauges()
        lab = f'{{model_name="{model_name}"}}'
        rows = [
            ("vllm:num_requests_running", "gauge", "Requests in the running batch", g["running"]),
            ("vllm:num_requests_waiting", "gauge", "Requests waiting to be scheduled", g["waiting"]),
            ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage (1 = full)", g["kv_usage"]),
            ("vllm:gpu_cache_usage_perc", "gauge", "KV-cache usage (1 = full; vLLM v0 name)", g["kv_usage"]),
            ("vllm:prompt_tokens_total", "counter", "Prompt tokens admitted", eng.prompt_tokens),
            ("vllm:generation_tokens_total", "counter", "Tokens generated", eng.generation_tokens),
            ("vllm:num_preemptions_total", "counter", "Preemptions", g["preemptions"]),
            ("vllm:request_success_total", "counter", "Requests finished", sim.success),
            ("simllm:requests_aborted_total", "counter", "Requests aborted: the client went away",
             sim.aborted),
            ("simllm:simulated_time_seconds", "gauge", "Simulated clock", sim.sim_now()),
            ("simllm:kv_cache_blocks", "gauge", "KV blocks per replica", eng.blocks),
        ]
        out = []
        for name, kind, doc, v in rows:
            out += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}", f"{name}{lab} {float(v)}"]
        out += ["# HELP simllm:token_lag_seconds Simulated seconds tokens were handed out after "
                "their simulated time (server overhead)", "# TYPE simllm:token_lag_seconds summary",
                f"simllm:token_lag_seconds_sum{lab} {sim.lag_sum}",
                f"simllm:token_lag_seconds_count{lab} {sim.lag_n}",
                f"simllm:token_lag_seconds_max{lab} {sim.lag_max}"]
        return PlainTextResponse("\n".join(out) + "\n",
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    async def _body(request) -> dict:
        raw = await request.body()
        if len(raw) > max_body_bytes:
            raise BadRequest(f"request body of {len(raw)} bytes is over the limit of "
                             f"{max_body_bytes}", status=413)
        try:
            body = json.loads(raw)
        except ValueError as e:
            raise BadRequest(f"request body is not valid JSON ({e})") from None
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        return body

    def handler(chat: bool):
        obj = "chat.completion" if chat else "text_completion"

        async def endpoint(request):
            try:
                body = await _body(request)
                m = body.get("model", model_name)
                if m not in (model_name, None, ""):
                    raise BadRequest(f"the model '{m}' does not exist; this server serves "
                                     f"'{model_name}'", "model", 404)
                if body.get("n", 1) != 1:
                    raise BadRequest("'n' must be 1", "n")
                p = prompt_tokens(body, chat)
                o = output_tokens(body, chat, default_max_tokens)
                erid, q = state["sim"].submit(p, o, prompt_units(body, chat))
            except BadRequest as e:
                return _error(e.status, str(e), e.param)
            except SpecError as e:
                return _error(400, f"This model's maximum context is {max_len} tokens: {e}",
                              "max_tokens")
            except EngineFull as e:
                return _error(503, f"server busy: {e}; retry later")
            rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
            usage = {"prompt_tokens": p, "completion_tokens": o, "total_tokens": p + o}
            stream = bool(body.get("stream"))
            head = json.dumps({"id": rid, "object": obj + (".chunk" if chat and stream else ""),
                               "created": int(time.time()), "model": model_name})[:-1]
            sim = state["sim"]
            watcher = asyncio.get_running_loop().create_task(sim.watch(request, erid))
            if not stream:
                got = 0
                try:
                    while (k := await q.get()) is not None:
                        got += k
                finally:     # cancelled when the client went away: drop the request
                    watcher.cancel()
                    if erid in sim.reqs and sim.reqs[erid] is q:
                        sim.abort(erid)
                text = TOKEN_TEXT * got
                choice = ({"index": 0, "message": {"role": "assistant", "content": text},
                           "finish_reason": "length"} if chat else
                          {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"})
                return Response(head + f', "choices": [{json.dumps(choice)}], "usage": '
                                f'{json.dumps(usage)}}}', media_type="application/json")
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            tok = json.dumps(TOKEN_TEXT)
            if chat:
                first = f'data: {head}, "choices": [{{"index": 0, "delta": {{"role": "assistant", ' \
                        f'"content": {tok}}}, "finish_reason": null}}]}}\n\n'
                mid = f'data: {head}, "choices": [{{"index": 0, "delta": {{"content": {tok}}}, ' \
                      f'"finish_reason": null}}]}}\n\n'
                last = f'data: {head}, "choices": [{{"index": 0, "delta": {{"content": {tok}}}, ' \
                       f'"finish_reason": "length"}}]}}\n\n'
            else:
                mid = first = f'data: {head}, "choices": [{{"index": 0, "text": {tok}, ' \
                              f'"logprobs": null, "finish_reason": null}}]}}\n\n'
                last = f'data: {head}, "choices": [{{"index": 0, "text": {tok}, ' \
                       f'"logprobs": null, "finish_reason": "length"}}]}}\n\n'
            tail = (f'data: {head}, "choices": [], "usage": {json.dumps(usage)}}}\n\n'
                    if include_usage else "") + "data: [DONE]\n\n"

            async def events():
                sent = 0
                try:
                    while (k := await q.get()) is not None:
                        parts = []
                        for _ in range(k):
                            sent += 1
                            parts.append(first if sent == 1 else (last if sent == o else mid))
                        yield "".join(parts)
                    yield tail
                finally:     # the client went away (send failed or the stream was cancelled)
                    watcher.cancel()
                    if erid in sim.reqs and sim.reqs[erid] is q:
                        sim.abort(erid)

            return StreamingResponse(events(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        return endpoint

    routes = [Route("/v1/completions", handler(False), methods=["POST"]),
              Route("/v1/chat/completions", handler(True), methods=["POST"]),
              Route("/v1/models", models), Route("/health", health), Route("/metrics", metrics)]
    return Starlette(routes=routes, lifespan=lifespan)


@contextlib.contextmanager
def in_thread(app, host: str = "127.0.0.1", port: int = 0):
    """Serve ``app`` with uvicorn in a background thread (tests, benchmarks); yields the base URL
    (port 0: a free port). Stops the server on exit."""
    import socket
    import threading

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    th = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    th.start()
    t_end = time.monotonic() + 30
    while not server.started and th.is_alive() and time.monotonic() < t_end:
        time.sleep(0.01)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        th.join(10)
        sock.close()


def build(overrides: list[str], capacity: int):
    """(LiveEngine, served model name, one-line description) for the composed deployment."""
    from engine.des.live import LiveEngine
    from runner.convert import des_spec, specs_from_config
    from runner.tools.calibrate import compose

    cfg = compose(overrides)
    specs = specs_from_config(cfg)
    eng = LiveEngine(specs, des_spec(cfg), capacity=capacity,
                     block_tokens=specs.workload.trace.block_tokens)
    p = cfg.partition
    d = eng.des
    desc = (f"{cfg.hardware.name} / {cfg.model.name} / tp{p.tp} pp{p.pp} dp{p.dp} / calibration "
            f"{specs.calibration.name} / {specs.framework.name}: {d.scheduling.scheduler} scheduler, max_num_seqs "
            f"{d.scheduling.max_num_seqs}, {eng.blocks} KV blocks of {d.kv.block_size} per replica, "
            f"{len(eng.replicas)} replica(s)")
    return eng, str(cfg.model.name), desc


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="simllm-serve", description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of the deployment (hardware=..., "
                                                 "model=..., calibration=..., engine.des.*=...)")
    ap.add_argument("--host", default="127.0.0.1", help="listen address (default loopback only)")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="wall seconds per simulated second (1 = real time)")
    ap.add_argument("--served-model-name", default=None, help="model id (default: the model config's name)")
    ap.add_argument("--max-requests", type=int, default=1024,
                    help="requests in the server at once (running + waiting); 503 beyond")
    ap.add_argument("--default-max-tokens", type=int, default=256,
                    help="output tokens of a chat request without max_tokens")
    ap.add_argument("--max-body-bytes", type=int, default=8 << 20)
    ap.add_argument("--access-log", action="store_true")
    return ap


@guard("simllm-serve")
def main(argv=None) -> int:
    args = parser().parse_intermixed_args(argv)
    if not (args.time_scale > 0 and math.isfinite(args.time_scale)):
        print(f"simllm-serve: error: --time-scale {args.time_scale}: expected a finite number > 0",
              file=sys.stderr)
        return 2
    for name in ("port", "max_requests", "default_max_tokens", "max_body_bytes"):
        v = getattr(args, name)
        if v < (0 if name == "port" else 1) or (name == "port" and v > 65535):
            raise SpecError(f"--{name.replace('_', '-')}", v, "a port 0-65535" if name == "port"
                            else "an integer >= 1")
    eng, name, desc = build(args.overrides, args.max_requests)
    import uvicorn

    name = args.served_model_name or name
    app = make_app(eng, name, time_scale=args.time_scale, default_max_tokens=args.default_max_tokens,
                   max_body_bytes=args.max_body_bytes)
    print(f"simllm-serve: {desc}; model '{name}', time scale {args.time_scale:g}; "
          f"http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning",
                access_log=args.access_log, limit_concurrency=args.max_requests + 64)
    return 0


if __name__ == "__main__":
    sys.exit(main())
