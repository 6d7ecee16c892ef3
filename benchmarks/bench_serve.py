"""How much load simllm-serve sustains before its own overhead distorts the simulated timing.

    python benchmarks/bench_serve.py                       # rates 10 20 40 80 160 req/s, 8 s each
    python benchmarks/bench_serve.py --rates 50 100 --seconds 5 -- hardware=h200

Starts ``simllm-serve`` (a subprocess on 127.0.0.1, time scale 1) for the deployment in the Hydra
overrides (default Llama-3.1-8B on one H100 SXM, calibration=specsheet), then drives it with
``simllm-observe``'s client (this process) at each Poisson rate for ``--seconds``: prompts of
``--prompt`` token ids, ``--output`` output tokens. Per rate it prints the completed requests/s and
streamed tokens/s the client saw, the server's CPU-seconds and wall time over the level (from
/proc), the server's peak resident memory, and the server's token lag (simllm:token_lag_seconds
from /metrics: how late, in simulated seconds, tokens were handed out after their simulated time;
mean and max over the level). The "sustained" line names the highest rate whose mean lag stays
under ``--max-lag-ms`` and whose completed rate is within 10 % of the offered one (Poisson counts over a few seconds vary by ~5 %): beyond it the
server's Python/HTTP work per token delays delivery and the observed timing is no longer the
simulated one (use --time-scale > 1 there). Both processes share the machine's cores.
"""

import argparse
import asyncio
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.des.workload import RequestStream, arrivals  # noqa: E402
from runner.tools import observe  # noqa: E402


def _metrics(url: str) -> dict:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    return {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def _cpu_s(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _peak_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", type=float, nargs="+", default=[10, 20, 40, 80, 160])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--output", type=int, default=64)
    ap.add_argument("--port", type=int, default=18777)
    ap.add_argument("--max-lag-ms", type=float, default=1.0)
    ap.add_argument("overrides", nargs="*", default=["calibration=specsheet"])
    a = ap.parse_args(argv)
    url = f"http://127.0.0.1:{a.port}"
    srv = subprocess.Popen([sys.executable, "-m", "runner.tools.serve", *a.overrides, "--port",
                            str(a.port), "--max-requests", "8192"], cwd=ROOT,
                           stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            try:
                _metrics(url)
                break
            except OSError:
                if srv.poll() is not None:
                    print(srv.stderr.read(), file=sys.stderr)
                    return 1
                time.sleep(0.1)
        print(f"bench_serve: {a.overrides}, prompt {a.prompt} tokens, output {a.output}, "
              f"{a.seconds:g} s per rate, server pid {srv.pid}")
        print(f"{'offered':>8} {'done/s':>8} {'tok/s':>8} {'srv CPU-s':>9} {'wall s':>7} "
              f"{'CPU %':>6} {'lag mean ms':>11} {'lag max ms':>10} {'TPOT p50 ms':>11} {'peak MB':>8}")
        sustained = None
        for rate in a.rates:
            n = max(1, int(rate * a.seconds))
            stream = RequestStream(arrival_s=arrivals("poisson", n, rate, rng=int(rate)),
                                   prompt=np.full(n, a.prompt), output=np.full(n, a.output),
                                   priority=np.ones(n, np.int8))
            m0, c0, w0 = _metrics(url), _cpu_s(srv.pid), time.monotonic()
            recs, status = asyncio.run(observe.drive(url, stream, chat=False, model="", duration=0,
                                                     timeout=120, ids=True, progress=False))
            wall = time.monotonic() - w0
            m1, c1 = _metrics(url), _cpu_s(srv.pid)
            ok = [r for r in recs if not r.error]
            span = max(r.end for r in ok) - min(r.send for r in ok) if ok else float("nan")
            toks = sum(len(r.tokens) for r in ok)
            key = "simllm:token_lag_seconds"
            dn = m1[key + "_count"] - m0[key + "_count"]
            lag = (m1[key + "_sum"] - m0[key + "_sum"]) / dn * 1e3 if dn else float("nan")
            tpot = [(r.tokens[-1] - r.tokens[0]) / (len(r.tokens) - 1) * 1e3 for r in ok if len(r.tokens) > 1]
            done_rate = len(ok) / span if span > 0 else 0.0
            print(f"{rate:8.1f} {done_rate:8.1f} {toks / span:8.0f} {c1 - c0:9.2f} {wall:7.2f} "
                  f"{100 * (c1 - c0) / wall:6.0f} {lag:11.3f} {m1[key + '_max'] * 1e3:10.2f} "
                  f"{np.median(tpot):11.3f} {_peak_mb(srv.pid):8.0f}"
                  + (f"  ({len(recs) - len(ok)} failed: {next(r.error for r in recs if r.error)[:60]})"
                     if len(ok) < len(recs) else ""))
            if lag <= a.max_lag_ms and len(ok) == n and done_rate >= 0.9 * rate:
                sustained = (rate, done_rate, toks / span)
        if sustained:
            print(f"sustained: {sustained[0]:g} req/s offered, {sustained[1]:.1f} req/s and "
                  f"{sustained[2]:.0f} streamed tok/s with mean token lag <= {a.max_lag_ms:g} ms")
        else:
            print(f"sustained: none of the rates kept the mean token lag <= {a.max_lag_ms:g} ms")
        print(f"server peak RSS {_peak_mb(srv.pid):.0f} MB; client CPU-s "
              f"{time.process_time():.2f} (this process)")
    finally:
        srv.terminate()
        srv.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
