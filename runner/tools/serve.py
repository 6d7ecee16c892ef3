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

Bounded: at most ``--max-requests`` requests in the engine, running or waiting in its queue
(beyond: HTTP 503 with ``Retry-After``, the engine's own admission); open connections up to
``--max-connections`` (default: the file-descriptor limit less a reserve); bodies up to
``--max-body-bytes``, refused (413) by their Content-Length before any byte is read, or once that
many bytes have streamed in; requests longer than the model's context
(``model.context_length``) or one replica's KV cache refused (400). Every bad request is a 4xx
with a JSON message naming the field. Listens on 127.0.0.1 unless ``--host`` says otherwise. A
client that disconnects aborts its simulated request, as vLLM aborts it: dropped from the queue or
the running batch with its KV blocks freed (``LiveEngine.abort``), counted in
``simllm:requests_aborted_total``, and logged as one line on stderr.
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
                if self.abort(rid):
                    log(f"{_client(request)} disconnected: its request aborted before its last token")
                return


#: Seconds a refused client is told to wait (``Retry-After`` of a 503 when the engine is full).
RETRY_AFTER_S = 1


def _error(status: int, message: str, param: str | None = None, headers: dict | None = None):
    from starlette.responses import JSONResponse

    kind = {400: "BadRequestError", 404: "NotFoundError", 411: "BadRequestError", 413: "BadRequestError",
            503: "ServiceUnavailableError"}.get(status, "Error")
    return JSONResponse({"object": "error", "message": message, "type": kind, "param": param,
                         "code": status}, status_code=status, headers=headers)


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.param, self.status = param, status


def log(message: str) -> None:
    """One line on stderr (the server's log: uvicorn's own is at warning level)."""
    print(f"simllm-serve: {message}", file=sys.stderr, flush=True)


def _client(request) -> str:
    c = request.client
    return f"{c.host}:{c.port}" if c else "a client"


async def read_body(request, limit: int) -> bytes | None:
    """The request body, refused past ``limit`` bytes before it is read: by its Content-Length
    header (413 at once), and while it streams in (a chunked body, or one longer than it said).
    None when the client went away before the body was complete (logged as one line)."""
    from starlette.requests import ClientDisconnect

    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise BadRequest(f"Content-Length {declared[:40]!r} is not a byte count")
        if int(declared) > limit:
            raise BadRequest(f"request body of {int(declared)} bytes (Content-Length) is over the limit of "
                             f"{limit} bytes (--max-body-bytes)", status=413)
    parts, got = [], 0
    try:
        async for chunk in request.stream():
            got += len(chunk)
            if got > limit:
                raise BadRequest(f"request body over the limit of {limit} bytes (--max-body-bytes): refused "
                                 f"after {got} bytes", status=413)
            parts.append(chunk)
    except ClientDisconnect:
        log(f"{_client(request)} disconnected while sending its request body ({got} bytes received"
            + (f" of {declared})" if declared is not None else ")"))
        return None
    return b"".join(parts)


def parse_body(raw: bytes) -> dict:
    """The JSON object of a request body; BadRequest for anything else (not JSON, not UTF-8,
    nested deeper than Python's parser goes, not an object)."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise BadRequest("request body is JSON nested too deeply to parse") from None
    except ValueError as e:        # JSONDecodeError, UnicodeDecodeError
        raise BadRequest(f"request body is not valid JSON ({str(e)[:200]})") from None
    if not isinstance(body, dict):
        raise BadRequest(f"request body must be a JSON object, got a JSON {type(body).__name__}")
    return body


def _typed(body: dict, key: str, kinds, what: str):
    """``body[key]`` (None when absent or null) if it is one of ``kinds``; else BadRequest."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    v = body.get(key)
    if v is not None and (not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds)):
        raise BadRequest(f"'{key}' must be {what}, got {json.dumps(v)[:80]}", key)
    return v


def request_options(body: dict) -> tuple[bool, bool]:
    """(stream, include_usage) of a request, each field type-checked (OpenAI's types)."""
    _typed(body, "model", str, "a string")
    n = _typed(body, "n", int, "an integer")
    if n not in (None, 1):
        raise BadRequest("'n' must be 1", "n")
    stream = _typed(body, "stream", bool, "true or false")
    opts = _typed(body, "stream_options", dict, "an object such as {\"include_usage\": true}") or {}
    usage = _typed(opts, "include_usage", bool, "true or false")
    return bool(stream), bool(usage)


def _token_id(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _words(text) -> int:
    if isinstance(text, list):    # chat content parts
        if not all(isinstance(p, dict) for p in text):
            raise BadRequest("message content parts must be objects such as {\"type\": \"text\", "
                             "\"text\": ...}", "messages")
        return sum(_words(p.get("text") or "") for p in text)
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
        for i, m in enumerate(msgs):
            if not isinstance(m, dict):
                raise BadRequest(f"messages[{i}] must be an object with a role and a content", "messages")
        n = sum(_words(m.get("content") or "") for m in msgs)
    else:
        p = body.get("prompt")
        if isinstance(p, list) and p and all(_token_id(x) for x in p):
            n = len(p)
        elif isinstance(p, list) and len(p) == 1 and isinstance(p[0], list):
            if not all(_token_id(x) for x in p[0]):
                raise BadRequest("a prompt given as a list of token ids holds integers >= 0 only", "prompt")
            n = len(p[0])
        elif isinstance(p, list) and len(p) == 1:
            n = _words(p[0])
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

    def handler(chat: bool):
        obj = "chat.completion" if chat else "text_completion"

        async def endpoint(request):
            try:
                raw = await read_body(request, max_body_bytes)
                if raw is None:            # the client went away (logged)
                    return Response(status_code=400)
                body = parse_body(raw)
                stream, include_usage = request_options(body)
                m = body.get("model", model_name)
                if m not in (model_name, None, ""):
                    raise BadRequest(f"the model '{m}' does not exist; this server serves "
                                     f"'{model_name}'", "model", 404)
                p = prompt_tokens(body, chat)
                o = output_tokens(body, chat, default_max_tokens)
                erid, q = state["sim"].submit(p, o, prompt_units(body, chat))
            except BadRequest as e:
                return _error(e.status, str(e), e.param)
            except SpecError as e:         # longer than the context or one replica's KV cache
                return _error(400, f"This model's maximum context length is {max_len} tokens; this request "
                              f"asks for {p + o} ({p} in the prompt, {o} in max_tokens): {e}", "max_tokens")
            except EngineFull as e:        # the engine's own admission: come back later
                return _error(503, f"server busy: {e}; retry after {RETRY_AFTER_S} s", None,
                              {"Retry-After": str(RETRY_AFTER_S)})
            rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
            usage = {"prompt_tokens": p, "completion_tokens": o, "total_tokens": p + o}
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
                    if erid in sim.reqs and sim.reqs[erid] is q and sim.abort(erid):
                        log(f"{_client(request)} went away: {rid} aborted after {got} of {o} tokens")
                text = TOKEN_TEXT * got
                choice = ({"index": 0, "message": {"role": "assistant", "content": text},
                           "finish_reason": "length"} if chat else
                          {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"})
                return Response(head + f', "choices": [{json.dumps(choice)}], "usage": '
                                f'{json.dumps(usage)}}}', media_type="application/json")
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
                    if erid in sim.reqs and sim.reqs[erid] is q and sim.abort(erid):
                        log(f"{_client(request)} went away: {rid} aborted after {sent} of {o} tokens")

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
                    help="requests in the engine at once (running + waiting: the engine's own queue); "
                         "beyond, 503 with Retry-After")
    ap.add_argument("--max-connections", type=int, default=0,
                    help="open connections at once (0: what the process's file-descriptor limit allows, "
                         "less a reserve); uvicorn answers 503 beyond")
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
    for name in ("port", "max_requests", "max_connections", "default_max_tokens", "max_body_bytes"):
        v = getattr(args, name)
        if v < (0 if name in ("port", "max_connections") else 1) or (name == "port" and v > 65535):
            raise SpecError(f"--{name.replace('_', '-')}", v, "a port 0-65535" if name == "port"
                            else "an integer >= 0" if name == "max_connections" else "an integer >= 1")
    connections = args.max_connections or connection_limit()
    eng, name, desc = build(args.overrides, args.max_requests)
    import uvicorn

    name = args.served_model_name or name
    app = make_app(eng, name, time_scale=args.time_scale, default_max_tokens=args.default_max_tokens,
                   max_body_bytes=args.max_body_bytes)
    print(f"simllm-serve: {desc}; model '{name}', time scale {args.time_scale:g}; "
          f"{args.max_requests} requests in the engine, {connections} connections; "
          f"http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True)
    # connections are bounded by file descriptors, not by the engine's admission: a client over
    # --max-requests gets the engine's own 503 + Retry-After, never a refusal of every connection
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning",
                access_log=args.access_log, limit_concurrency=connections, backlog=min(connections, 4096))
    return 0


#: File descriptors kept back from connections (the listening socket, logs, the MLflow store,
#: Python's own files).
FD_RESERVE = 64


def connection_limit() -> int:
    """Connections the process can hold open: its file-descriptor limit (the soft limit raised to
    the hard one first, as servers do) less ``FD_RESERVE``."""
    try:
        import resource
    except ImportError:               # not POSIX: uvicorn's own default of no limit
        return 1 << 16
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
    return max(soft - FD_RESERVE, 1)


if __name__ == "__main__":
    sys.exit(main())
