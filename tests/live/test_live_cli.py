"""End to end through the console scripts (slow: they spawn processes, and the round trip runs
a few minutes of simulated serving at a slowed clock). All servers listen on 127.0.0.1.

Round trip: ``simllm-serve`` with a hidden calibration (compute efficiency 0.5,
memory-bandwidth efficiency 0.6, step overhead 2 ms, per-request overhead 5 ms; the numbers chosen
here), ``simllm-observe`` against it, then ``simllm-calibrate`` on the observation must recover
each within 10 % (the per-request overhead plus the observer's own lateness, below). The
server and observer run at ``--time-scale 10`` (ten wall seconds per simulated second), so
the HTTP path's own jitter (about 1-3 ms wall on a loaded 2-core machine, see
benchmarks/bench_serve.py) is 0.1-0.3 ms of simulated time; the observer's TTFT lateness is
larger (below).

Why this workload identifies the four: a closed loop of one user (no batching, so each request's
steps are its own), Llama-2-7B (multi-head attention: 0.5 MB of KV per token against 13.5 GB of
weights), prompts log-normal 128-4000 tokens, outputs 8-24 tokens, 80 requests.
- TTFT = per-request overhead + step overhead + prefill(prompt): its slope across prompt lengths
  is the compute efficiency, its intercept the sum of the two overheads.
- A request's median inter-token gap = step overhead + (weights + KV(context)) / (bandwidth x
  efficiency): the KV read grows with the context (up to 15 % of the weights at 4000 tokens), so
  the steps of short- and long-context requests give the bandwidth efficiency apart from the
  constant step overhead; then TTFT's intercept gives the per-request overhead. One global ITL
  p50 would only give the sum overhead + weights/(bandwidth x eff). The model is chosen for that
  slope: with a grouped-query model (Llama-3.1-8B, KV 3 % of the weights at 4096 tokens) the
  slope is ~0.2 ms across the whole range, and on a loaded machine (load 8 on 2 cores) the
  observer's per-request scatter of ~0.1 ms moved the fitted bandwidth efficiency by -10 % and
  the step overhead by -43 %; the multi-head model's slope is ~1 ms.
- The observer's own path (HTTP, client event loop) makes every TTFT a little late (0.4 ms
  simulated on an idle machine, more under load): physically that is per-request time as a
  client sees it, and the fit puts it there (checked below against the lateness measured by
  replaying the same requests in the DES at the hidden point); the hidden 5 ms is a
  tokenise-admit-respond overhead of the order real servers show.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures import NO_HOST_OVERRIDES

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = {"compute_efficiency": 0.5, "memory_bandwidth_efficiency": 0.6, "step_overhead_s": 0.002,
          "per_request_overhead_s": 0.005}
#: the default profile's fitted host terms off: the hidden point is the calibration's alone, and the
#: fit recovers the calibration's factors (profile terms on top would be confounded with them)
NO_HOST = list(NO_HOST_OVERRIDES)
HIDDEN_OVR = ["model=llama_2_7b", "calibration=specsheet", "calibration.compute_efficiency=0.5",
              "calibration.memory_bandwidth_efficiency=0.6", "calibration.step_overhead=2ms",
              "calibration.per_request_overhead=5ms", *NO_HOST]
WORKLOAD = ["workload=closed_loop", "workload.concurrency=1", "workload.prompt_len=1024",
            "workload.prompt_dist.kind=lognormal", "workload.prompt_dist.sigma=0.7",
            "workload.prompt_dist.low=128", "workload.prompt_dist.high=4000", "workload.output_len=16",
            "workload.output_dist.kind=uniform", "workload.output_dist.low=8",
            "workload.output_dist.high=24"]


def _port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def _serve(args, port):
    proc = subprocess.Popen([sys.executable, "-m", "runner.tools.serve", *args, "--port", str(port)],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    import urllib.request
    for _ in range(900):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return proc
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read())
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("simllm-serve did not come up in 90 s")


def _observe(args, timeout=900):
    return subprocess.run([sys.executable, "-m", "runner.tools.observe", *args, "--no-progress"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    """(measurement, simllm-calibrate's fit.json, median TTFT lateness [ms], median TPOT ratio - 1,
    (mean TTFT lateness, its standard error) [ms]) of one observed run; the lateness and ratio are
    against the DES replay of the same requests at the hidden point."""
    import numpy as np

    from engine.calibration.measurements import read_measurement, request_stream
    from engine.des import simulate
    from runner.convert import des_spec, specs_from_config
    from runner.tools.calibrate import compose

    port = _port()
    srv = _serve([*HIDDEN_OVR, "--time-scale", "10"], port)
    tmp = tmp_path_factory.mktemp("rt")
    out = tmp / "obs.json"
    try:
        r = _observe([f"http://127.0.0.1:{port}", *WORKLOAD, "workload.num_requests=80", "-o", str(out),
                      "--token-ids", "--time-scale", "10"])
        assert r.returncode == 0, r.stderr
    finally:
        srv.terminate()
        srv.wait(10)
    c = subprocess.run([sys.executable, "-m", "runner.tools.calibrate", str(out), "--name", "rt16",
                        "model=llama_2_7b", "calibration=specsheet", *NO_HOST, "--conf-dir", str(tmp / "conf"),
                        "--output-dir", str(tmp / "out"), "--no-tracking"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert c.returncode == 0, c.stderr
    fit = json.loads(next((tmp / "out").glob("rt16-*/fit.json")).read_text())
    m = read_measurement(out)
    hid = compose(HIDDEN_OVR)
    stream, order = request_stream(m)
    replay = simulate(specs_from_config(hid), des_spec(hid), stream=stream).result.table
    t = m.table
    d_ttft = t["ttft_ms"].to_numpy()[order] - replay["ttft_ms"].to_numpy()
    r_tpot = t["tpot_ms"].to_numpy()[order] / replay["tpot_ms"].to_numpy() - 1
    print("\n".join(f"{k}: hidden {v:.4g}, recovered {fit['params'][k]:.4g} ({fit['params'][k] / v - 1:+.1%}), "
                    f"95 % range {fit['ranges_95'][k]['low']:.4g}..{fit['ranges_95'][k]['high']:.4g}"
                    for k, v in HIDDEN.items()))
    lat = (float(np.mean(d_ttft)), float(np.std(d_ttft, ddof=1) / np.sqrt(len(d_ttft))))
    print(f"TTFT lateness vs replay: median {np.median(d_ttft):.3f} ms, mean {lat[0]:.3f} +- {lat[1]:.3f} ms")
    return m, fit, float(np.median(d_ttft)), float(np.nanmedian(r_tpot)), lat


@pytest.mark.slow
def test_round_trip_timing(round_trip):
    """The observed requests are the DES's at the hidden point (the replay of the same requests):
    TTFT within 2 ms of simulated time (the HTTP path's lateness / 10: 0.4 ms measured on an idle
    2-core machine, 1.2 ms at load 8), TPOT within 1 %."""
    m, fit, d_ttft, r_tpot, _ = round_trip
    assert len(m) == 80
    assert m.workload["arrival"] == "closed_loop"        # replayed as the closed loop it was
    assert abs(d_ttft) < 2.0 and abs(r_tpot) < 0.01


@pytest.mark.slow
def test_round_trip_recovers_within_10_percent(round_trip):
    """simllm-calibrate on the observation: each hidden parameter within 10 % and reported as
    pinned by the data; the per-request overhead fitted on its own (``auto``: the file has each
    request's ITLs). The observer's lateness is per-request time as its client sees it, so the
    per-request overhead the fit should find is the hidden 5 ms plus that lateness, measured
    independently against the DES replay at the hidden point (0.4 ms on an idle 2-core machine,
    0.7 ms at load 5, 1.2 ms at load 8: a fixed 5 ms target would fail on a busy machine for a
    fit that is right). Cross-check: the fitted overheads' sum exceeds the hidden sum (7 ms) by
    that lateness. The fit's loss is soft-L1 on log ratios, so its intercept lies between the
    lateness's median and its mean, which differ under load (the lateness is right-skewed: a
    loaded run had 0.37 ms median against a fitted 0.48 ms excess); the excess must lie in that
    interval widened by 0.1 ms or three standard errors of the mean, whichever is larger."""
    _, fit, d_ttft, _, (lat_mean, lat_se) = round_trip
    p = fit["params"]
    expect = {**HIDDEN, "per_request_overhead_s": HIDDEN["per_request_overhead_s"] + d_ttft * 1e-3}
    for k, v in expect.items():
        assert p[k] == pytest.approx(v, rel=0.10), (k, p[k], v)
        assert fit["ranges_95"][k]["identifiable"], (k, fit["ranges_95"][k])
    excess_ms = (p["step_overhead_s"] + p["per_request_overhead_s"] - 0.007) * 1e3
    tol = max(0.1, 3 * lat_se)
    assert min(d_ttft, lat_mean) - tol <= excess_ms <= max(d_ttft, lat_mean) + tol, \
        (excess_ms, d_ttft, lat_mean, lat_se)


@pytest.mark.slow
def test_server_dies_mid_run(tmp_path):
    """The server is killed while requests are in flight: observe stops sending, says why, exits 1
    and the file holds every request that completed before (each with its full token count)."""
    port = _port()
    srv = _serve(["calibration=specsheet", "--time-scale", "1"], port)
    out = tmp_path / "obs.json"
    obs = subprocess.Popen([sys.executable, "-m", "runner.tools.observe", f"http://127.0.0.1:{port}",
                            "workload=closed_loop", "workload.concurrency=2", "workload.num_requests=400",
                            "workload.prompt_dist.kind=fixed", "workload.output_dist.kind=fixed",
                            "workload.output_len=40", "-o", str(out), "--no-progress"],
                           cwd=ROOT, stderr=subprocess.PIPE, text=True)
    time.sleep(12)
    srv.send_signal(signal.SIGKILL)
    srv.wait(10)
    err = obs.communicate(timeout=120)[1]
    assert obs.returncode == 1, err
    assert "run stopped early" in err and "unreachable" in err
    doc = json.loads(out.read_text())
    done = [i for i, e in enumerate(doc["errors"]) if not e]
    assert 0 < len(done) < 400
    assert all(doc["output_lens"][i] == 40 for i in done)
    assert any(doc["errors"])           # the requests cut off are recorded with their error
    assert not os.path.exists(str(out) + ".part")
