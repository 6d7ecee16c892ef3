"""End to end through the console scripts (slow: they spawn processes, and the round trip runs
a few minutes of simulated serving at a slowed clock). All servers listen on 127.0.0.1.

Round trip (issue 16 item 3): ``simllm-serve`` with a hidden calibration (compute efficiency 0.5,
memory-bandwidth efficiency 0.6, step overhead 2 ms; the numbers chosen here), ``simllm-observe``
against it, then the project's calibrate on the observation should land within 10 % of each
(not met yet: an xfail with the measured values; the timing the server streams is checked). The
server runs at ``--time-scale 10`` (ten wall seconds per simulated second): the HTTP path's own
lateness (about 1-3 ms on a loaded 2-core machine, see benchmarks/bench_serve.py) is then 0.1-0.3 ms
of simulated time, below the 10 % of the 2 ms overhead the test asks for. The workload is a
closed loop of one user (prompts log-normal 128-4096, outputs 16-48), where the ITLs pin the
bandwidth and TTFT across prompt lengths pins compute and overhead.
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

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = {"compute_efficiency": 0.5, "memory_bandwidth_efficiency": 0.6, "step_overhead_s": 0.002}
HIDDEN_OVR = ["calibration=specsheet", "calibration.compute_efficiency=0.5",
              "calibration.memory_bandwidth_efficiency=0.6", "calibration.step_overhead=2ms"]
WORKLOAD = ["workload=closed_loop", "workload.concurrency=1", "workload.prompt_len=1024",
            "workload.prompt_dist.kind=lognormal", "workload.prompt_dist.sigma=0.7",
            "workload.prompt_dist.low=128", "workload.prompt_dist.high=4096", "workload.output_len=32",
            "workload.output_dist.kind=uniform", "workload.output_dist.low=16",
            "workload.output_dist.high=48"]


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
    """(measurement, fit, per-request DES replay at the hidden point) of one observed run."""
    import numpy as np

    from engine.calibration.fit import calibrate
    from engine.calibration.measurements import read_measurement, request_stream
    from engine.des import simulate
    from runner.convert import des_spec, specs_from_config
    from runner.tools.calibrate import compose

    port = _port()
    srv = _serve([*HIDDEN_OVR, "--time-scale", "10"], port)
    try:
        out = tmp_path_factory.mktemp("rt") / "obs.json"
        r = _observe([f"http://127.0.0.1:{port}", *WORKLOAD, "workload.num_requests=80", "-o", str(out),
                      "--token-ids", "--time-scale", "10"])
        assert r.returncode == 0, r.stderr
    finally:
        srv.terminate()
        srv.wait(10)
    m = read_measurement(out)
    hid = compose(HIDDEN_OVR)
    stream, order = request_stream(m)
    replay = simulate(specs_from_config(hid), des_spec(hid), stream=stream).result.table
    cfg = compose(["calibration=specsheet"])
    fit = calibrate(specs_from_config(cfg), des_spec(cfg), m, rounds=2)
    t = m.table
    d_ttft = t["ttft_ms"].to_numpy()[order] - replay["ttft_ms"].to_numpy()
    r_tpot = t["tpot_ms"].to_numpy()[order] / replay["tpot_ms"].to_numpy() - 1
    print("\n".join(f"{k}: hidden {v:.4g}, recovered {fit.params[k]:.4g} ({fit.params[k] / v - 1:+.1%})"
                    for k, v in HIDDEN.items()))
    return m, fit, float(np.median(d_ttft)), float(np.nanmedian(r_tpot))


@pytest.mark.slow
def test_round_trip_timing(round_trip):
    """The observed requests are the DES's at the hidden point (the replay of the same arrivals):
    TTFT within 1 ms of simulated time (the HTTP path's lateness / 10), TPOT within 1 %."""
    m, fit, d_ttft, r_tpot = round_trip
    assert len(m) == 80
    assert abs(d_ttft) < 1.0 and abs(r_tpot) < 0.01


@pytest.mark.slow
@pytest.mark.xfail(reason="calibrate at one user: bandwidth efficiency and step overhead trade along "
                          "a flat direction (both set the batch-1 decode step) and a 0.2-0.4 ms "
                          "residual TTFT lateness (time scale 10) moves the fit along it; measured "
                          "0.55 / 0.88 / 4.25 ms for 0.5 / 0.6 / 2 ms. Even exact data (the live "
                          "engine without HTTP, same 120 requests) fit 0.53 / 0.73 / 3.3 ms; "
                          "see the issue-16 note", strict=False)
def test_round_trip_recovers_within_10_percent(round_trip):
    _, fit, _, _ = round_trip
    for k, v in HIDDEN.items():
        assert fit.params[k] == pytest.approx(v, rel=0.10)


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
