"""A bounded HTTP fuzz of simllm-serve on 127.0.0.1: hostile request bodies (property-based, a
fixed seed and example budget), oversized bodies by Content-Length and by streaming, and clients
that go away mid-body. Every reply is a 2xx, or a 4xx whose JSON names what was wrong; never a
5xx, never an exception logged by the server, and the server still answers afterwards."""

import http.client
import json
import logging
import socket
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.des import DesSpec
from engine.des.live import LiveEngine
from runner.tools.serve import in_thread, make_app

LIMIT = 64 << 10          # --max-body-bytes of the fuzzed server

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def server(base_specs):
    eng = LiveEngine(base_specs, DesSpec(kv=dict(num_kv_blocks=400)), capacity=16)
    with in_thread(make_app(eng, "sim-8b", time_scale=0.001, max_body_bytes=LIMIT)) as url:
        host, port = url.rsplit("/", 1)[-1].split(":")
        yield host, int(port), eng


def _request(server, body: bytes, path="/v1/completions", headers=None):
    host, port, _ = server
    c = http.client.HTTPConnection(host, port, timeout=60)
    try:
        c.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def _check(status: int, raw: bytes):
    assert status < 500, (status, raw[:300])
    if status >= 400:
        msg = json.loads(raw)
        assert msg["object"] == "error" and msg["message"] and msg["code"] == status, msg


@pytest.fixture(autouse=True)
def no_server_errors(caplog):
    """uvicorn logs an exception escaping the app at ERROR on ``uvicorn.error``: none may."""
    caplog.set_level(logging.ERROR, logger="uvicorn.error")
    yield
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text[-2000:]


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 40), st.floats(allow_nan=False),
                      st.text(max_size=12))
json_any = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                        max_leaves=12)
prompt = st.one_of(st.text(max_size=30), st.lists(st.integers(-2, 50_000), max_size=20),
                   st.lists(st.lists(st.integers(-2, 100), max_size=5), max_size=2), json_any)
message = st.one_of(st.fixed_dictionaries({"role": st.sampled_from(["user", "system"]),
                                           "content": st.one_of(st.text(max_size=20), json_any)}), json_any)
fields = {"prompt": prompt, "messages": st.lists(message, max_size=3), "max_tokens": json_any,
          "max_completion_tokens": json_any, "stream": json_any, "stream_options": json_any, "n": json_any,
          "model": st.one_of(st.just("sim-8b"), json_any)}


#: a valid request of each endpoint; the fuzz replaces some of its fields (so the others pass and
#: the replaced ones reach the code that reads them)
BASE = {False: {"prompt": "a b c", "max_tokens": 4, "stream": True},
        True: {"messages": [{"role": "user", "content": "a b"}], "max_tokens": 4, "stream": True}}


@SETTINGS
@given(change=st.fixed_dictionaries({}, optional=fields), chat=st.booleans())
def test_fuzzed_fields(server, change, chat):
    body = {**BASE[chat], **change}
    for k in ("max_tokens", "max_completion_tokens"):   # keep generated outputs short (the fuzz is of types)
        if isinstance(body.get(k), int):
            body[k] = min(body[k], 40)
    _check(*_request(server, json.dumps(body).encode(), "/v1/chat/completions" if chat else "/v1/completions"))


@SETTINGS
@given(data=st.one_of(st.binary(max_size=200), st.text(max_size=100).map(str.encode),
                      json_any.map(lambda v: json.dumps(v).encode())))
def test_fuzzed_bytes(server, data):
    _check(*_request(server, data))


@pytest.mark.parametrize("depth", [50, 5_000, 30_000])
def test_deep_nesting_is_a_400(server, depth):
    status, raw = _request(server, b'{"prompt": ' + b"[" * depth + b"]" * depth + b"}")
    _check(status, raw)
    assert status == 400


def test_oversized_by_content_length_is_refused_unread(server):
    """A Content-Length over the limit: 413 at once, before the body is sent (the request goes out
    with its headers only; a server reading first would wait for the body and time out)."""
    host, port, _ = server
    c = http.client.HTTPConnection(host, port, timeout=20)
    c.putrequest("POST", "/v1/completions")
    c.putheader("Content-Type", "application/json")
    c.putheader("Content-Length", str(200 << 20))
    c.endheaders()
    r = c.getresponse()
    raw = r.read()
    c.close()
    _check(r.status, raw)
    assert r.status == 413 and str(200 << 20) in json.loads(raw)["message"]


def test_oversized_while_streaming_is_refused(server):
    """A chunked body (no Content-Length) refused once LIMIT bytes have come in: 413."""
    host, port, _ = server
    c = http.client.HTTPConnection(host, port, timeout=20)
    chunks = (b"[" + b"1," * 2047 + b"1]" for _ in range(1000))      # ~4 MB offered, 64 KiB allowed
    c.request("POST", "/v1/completions", body=chunks, headers={"Content-Type": "application/json"},
              encode_chunked=True)
    r = c.getresponse()
    raw = r.read()
    c.close()
    _check(r.status, raw)
    assert r.status == 413


def test_disconnect_mid_body_is_one_line(server, capsys):
    """A client that sends half its declared body and hangs up: one log line, no traceback; the
    server still serves the next request (16 tokens asked, 16 counted in the usage)."""
    host, port, _ = server
    s = socket.create_connection((host, port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000\r\n\r\n" + b'{"prompt": "' + b"a " * 100)
    s.close()
    status, raw = _request(server, json.dumps({"prompt": "a b c", "max_tokens": 16}).encode())
    assert status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 16
    err = ""
    for _ in range(500):            # the server thread notices the hang-up in its own time
        err += capsys.readouterr().err
        if "disconnected" in err:
            break
        time.sleep(0.02)
    lines = [ln for ln in err.splitlines() if "disconnected" in ln]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "1000" in lines[0]


def test_engine_full_is_503_with_retry_after(base_specs):
    """capacity 1: a second request while the first runs is refused by the engine's admission,
    503 with Retry-After and a JSON message; the first is served."""
    import threading

    eng = LiveEngine(base_specs, DesSpec(kv=dict(num_kv_blocks=400)), capacity=1)
    with in_thread(make_app(eng, "sim-8b", time_scale=1.0)) as url:
        host, port = url.rsplit("/", 1)[-1].split(":")
        srv = (host, int(port), eng)
        first = {}
        t = threading.Thread(target=lambda: first.update(r=_request(srv, json.dumps(
            {"prompt": "a", "max_tokens": 200}).encode())))
        t.start()
        while eng.in_engine == 0 and t.is_alive():
            t.join(0.01)
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": "b", "max_tokens": 4}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read()
        c.close()
        t.join(60)
    assert r.status == 503 and r.getheader("Retry-After") == "1"
    assert "busy" in json.loads(raw)["message"]
    assert first["r"][0] == 200
