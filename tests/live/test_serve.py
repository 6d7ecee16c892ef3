"""simllm-serve's HTTP surface and simllm-observe against it, on 127.0.0.1 with a few requests.

Expected numbers are what the request asked for (max_tokens, prompt length under the server's
counting rule: token ids count their length, text its whitespace-separated words), the OpenAI /
vLLM wire format, and the engine's own counters; no wall-clock assertions (timing accuracy is the
slow round trip's and the benchmark's business).
"""

import asyncio
import json
import urllib.error
import urllib.request

import numpy as np
import pytest

from engine.calibration.measurements import read_measurement
from engine.des import DesSpec
from engine.des.live import LiveEngine
from engine.des.workload import RequestStream
from runner.tools import observe
from runner.tools.serve import in_thread, make_app


def _get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read().decode()


def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture(scope="module")
def server(base_specs):
    eng = LiveEngine(base_specs, DesSpec(kv=dict(num_kv_blocks=400)), capacity=32)
    with in_thread(make_app(eng, "sim-8b", time_scale=0.2)) as url:
        yield url, eng


def _events(text):
    return [json.loads(line[6:]) for line in text.split("\n")
            if line.startswith("data: ") and line != "data: [DONE]"]


def test_models_health_metrics(server):
    url, eng = server
    st, body = _get(url + "/v1/models")
    assert st == 200 and json.loads(body)["data"][0]["id"] == "sim-8b"
    assert _get(url + "/health")[0] == 200
    st, text = _get(url + "/metrics")
    vals = {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}
    for k in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
              "vllm:prompt_tokens_total", "vllm:generation_tokens_total"):
        assert k in vals
    assert vals["simllm:kv_cache_blocks"] == 400


def test_streaming_completion_and_chat(server):
    url, eng = server
    before = eng.generation_tokens
    st, text = _post(url + "/v1/completions", {"model": "sim-8b", "prompt": list(range(37)),
                                               "max_tokens": 9, "stream": True,
                                               "stream_options": {"include_usage": True}})
    assert st == 200 and text.rstrip().endswith("data: [DONE]")
    ev = _events(text)
    toks = [e for e in ev if e["choices"]]
    assert len(toks) == 9 and toks[-1]["choices"][0]["finish_reason"] == "length"
    assert ev[-1]["usage"] == {"prompt_tokens": 37, "completion_tokens": 9, "total_tokens": 46}
    assert eng.generation_tokens - before == 9
    st, text = _post(url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "a b  c\nd"}],
                                                    "max_tokens": 3, "stream": True})
    ev = _events(text)
    assert [e["choices"][0]["delta"]["content"] for e in ev] == [" tok"] * 3
    assert ev[0]["choices"][0]["delta"]["role"] == "assistant" and "usage" not in ev[-1]
    st, text = _post(url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "a b c d"}],
                                                    "max_tokens": 5})
    doc = json.loads(text)
    assert doc["usage"]["prompt_tokens"] == 4 and doc["choices"][0]["message"]["content"] == " tok" * 5


@pytest.mark.parametrize("body,status,field", [
    ({"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ({"prompt": "x", "max_tokens": "5"}, 400, "max_tokens"),
    ({"prompt": {"a": 1}}, 400, "prompt"),
    ({"prompt": "x", "model": "other"}, 404, "model"),
    ({"prompt": "x", "max_tokens": 400 * 16}, 400, "max_tokens"),     # beyond the 400-block cache
])
def test_bad_requests(server, body, status, field):
    st, text = _post(server[0] + "/v1/completions", body)
    doc = json.loads(text)
    assert st == status and doc["param"] == field and doc["object"] == "error"


def test_observe_records_every_token(server, base_specs, tmp_path):
    """observe.drive against the server: every request's token count equals what it asked, and
    the written file reads back through simllm-calibrate's reader with the same counts."""
    url, _ = server
    rng = np.random.default_rng(3)
    n = 12
    stream = RequestStream(arrival_s=np.sort(rng.uniform(0, 0.05, n)),
                           prompt=rng.integers(5, 300, n), output=rng.integers(2, 20, n),
                           priority=np.ones(n, np.int8))
    recs, status = asyncio.run(observe.drive(url, stream, chat=False, model="sim-8b", duration=0,
                                             timeout=60, ids=True, progress=False))
    assert status["stopped"] == "" and len(recs) == n
    for r in recs:
        assert not r.error and len(r.tokens) == r.output_asked == r.output_tokens
        assert r.prompt_tokens == r.prompt_sent
        assert r.send <= r.tokens[0] and np.all(np.diff(r.tokens) >= 0)
    meta = {"endpoint": "completions", "model": "sim-8b", "workload": {"arrival": "poisson", "rate_rps": 4.0}}
    path = tmp_path / "obs.json"
    observe.write_atomic(path, observe.to_measurement(recs, stream, meta, time_scale=0.2))
    m = read_measurement(path)
    assert m.format == "vllm" and len(m) == n
    assert sorted(m.table["output_len"].to_list()) == sorted(stream.output.tolist())
    assert m.itl_ms.size == int(stream.output.sum()) - n


def test_engine_full_is_503(base_specs):
    eng = LiveEngine(base_specs, capacity=1)
    with in_thread(make_app(eng, "m", time_scale=50.0)) as url:
        async def two():
            import aiohttp
            async with aiohttp.ClientSession() as s:
                body = {"prompt": "a b", "max_tokens": 200, "stream": True}
                r1 = await s.post(url + "/v1/completions", json=body)
                r2 = await s.post(url + "/v1/completions", json=body)
                out = (r1.status, r2.status, await r2.json())
                r1.close()
                return out
        s1, s2, doc = asyncio.run(two())
    assert (s1, s2) == (200, 503) and "busy" in doc["message"]


def test_observe_cli_logs_to_mlflow(server, tmp_path, mlflow_uri):
    """simllm-observe's main: workload from the Hydra group (fixed lengths, 6 requests in a closed
    loop of 2), the file written, and one FINISHED MLflow run holding its summary and the file."""
    from mlflow.tracking import MlflowClient

    url, _ = server
    out = tmp_path / "o.json"
    rc = observe.main([url, "workload=closed_loop", "workload.concurrency=2", "workload.num_requests=6",
                       "workload.prompt_dist.kind=fixed", "workload.prompt_len=40",
                       "workload.output_dist.kind=fixed", "workload.output_len=7", "-o", str(out),
                       "--endpoint", "chat", "--no-progress", "--tracking-uri", mlflow_uri,
                       "--experiment", "obs-test"])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["input_lens"] == [40] * 6 and doc["output_lens"] == [7] * 6
    assert doc["max_concurrency"] == 2 and doc["request_rate"] == "inf"
    c = MlflowClient(tracking_uri=mlflow_uri)
    runs = c.search_runs([c.get_experiment_by_name("obs-test").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.metrics["completed"] == 6
    assert [a.path for a in c.list_artifacts(runs[0].info.run_id)] == ["o.json"]


def test_observe_refuses_bad_arguments(capsys):
    assert observe.main(["http://127.0.0.1:9", "-o", "x.json", "--timeout", "0"]) == 2
    assert "--timeout 0.0: expected a finite number > 0" in capsys.readouterr().err


@pytest.mark.parametrize("stream", [True, False])
def test_client_disconnect_aborts_the_request(base_specs, stream):
    """A client that goes away mid-request (streaming: after its first tokens; non-streaming:
    while it waits) has its simulated request dropped, as vLLM aborts it: the engine ends with no
    request in it, no KV block in use, fewer tokens generated than asked, and the abort counted in
    /metrics; a request sent afterwards is served in full (the freed slot is reused). Expected
    values: what the requests asked for and the engine's own counters; waits are bounded by
    polling, not asserted."""
    import time

    import aiohttp

    eng = LiveEngine(base_specs, DesSpec(kv=dict(num_kv_blocks=400)), capacity=1)
    with in_thread(make_app(eng, "m", time_scale=5.0)) as url:   # 5 wall s per simulated s
        async def leave():
            async with aiohttp.ClientSession() as s:
                body = {"prompt": list(range(64)), "max_tokens": 2000, "stream": stream}
                if not stream:          # no headers before the end: give up after 1 s
                    with pytest.raises(asyncio.TimeoutError):
                        await asyncio.wait_for(s.post(url + "/v1/completions", json=body), 1.0)
                    return 200
                r = await s.post(url + "/v1/completions", json=body)
                await r.content.readline()                        # the first token has come
                r.close()
            return r.status
        assert asyncio.run(leave()) == 200
        t_end = time.monotonic() + 20
        while eng.in_engine and time.monotonic() < t_end:
            time.sleep(0.05)
        assert eng.in_engine == 0 and eng.aborted == 1
        assert eng.gauges()["kv_usage"] == 0.0 and eng.gauges()["running"] == 0
        assert eng.generation_tokens < 2000
        st, text = _get(url + "/metrics")
        assert 'simllm:requests_aborted_total{model_name="m"} 1.0' in text
        st, text = _post(url + "/v1/completions", {"prompt": "a b", "max_tokens": 3})
        assert st == 200 and json.loads(text)["usage"]["completion_tokens"] == 3


def test_prefix_hashes_chain_whole_blocks():
    """Block i's hash covers the prompt up to the end of block i: prompts sharing their first two
    blocks of 4 tokens share exactly two hashes; a trailing partial block has none."""
    from runner.tools.serve import prefix_hashes

    a = prefix_hashes(list(range(10)), 4)                     # 2 whole blocks, 2 tokens left over
    b = prefix_hashes(list(range(8)) + [99, 98, 97, 96], 4)   # same 2 blocks, a different third
    c = prefix_hashes([1] + list(range(1, 8)), 4)             # differs in the first token
    assert len(a) == 2 and len(b) == 3 and list(a) == list(b[:2]) and b[2] not in a
    assert c[0] != a[0] and c[1] != a[1]                       # the chain carries the first block


def test_served_prompt_reuses_its_cached_prefix(base_specs):
    """With prefix caching on, the second request of the same 64-word prompt (4 blocks of 16
    tokens) finds the blocks the first one left, up to the engine's rule that the prompt's last
    token is always computed (engine.des.admission: (64 - 1) // 16 = 3 blocks): 48 cached tokens,
    where without hashes it was 0."""
    eng = LiveEngine(base_specs, DesSpec(kv=dict(num_kv_blocks=400, prefix_caching=True)), capacity=8,
                     block_tokens=16)
    prompt = " ".join(f"w{i}" for i in range(64))
    with in_thread(make_app(eng, "sim-8b", time_scale=0.05)) as url:
        for _ in range(2):
            st, _ = _post(url + "/v1/completions", {"model": "sim-8b", "prompt": prompt, "max_tokens": 2})
            assert st == 200
    assert sorted(int(x) for x in eng.st.cached_tokens[:2]) == [0, 48]
