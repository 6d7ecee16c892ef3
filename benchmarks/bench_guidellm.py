"""A third-party client's report against simllm-serve, next to the DES's own prediction.

    python benchmarks/bench_guidellm.py [--streams 16] [--requests 300] [--prompt 512] [--output 64]
                                        [--venv DIR] [-- HYDRA_OVERRIDES...]

GuideLLM (PyPI ``guidellm``, the vLLM project's benchmark tool; a venv holding it: ``--venv``,
``$SIMLLM_GUIDELLM_VENV`` or ``~/.cache/simllm/guidellm-venv``, which tests/live/test_guidellm.py
creates with ``SIMLLM_INSTALL_GUIDELLM=1``) runs a concurrent profile of ``--streams`` streams with
synthetic prompts against ``simllm-serve`` (127.0.0.1, time scale 1; deployment from the Hydra
overrides, default Llama-3.1-8B on one H100 SXM, calibration=specsheet). Its JSON report is read
by ``simllm-calibrate``'s reader (``read_measurement``), and the DES replays the same requests
(GuideLLM's recorded send times and token counts) at the server's calibration: the prediction
for exactly the load GuideLLM offered. Printed: p50/p90/p99 of TTFT, TPOT and E2E on both sides,
and the per-request differences (median and 5-95 %). The server's own delivery lag
(``simllm:token_lag_seconds`` from /metrics) is the noise floor of the comparison; GuideLLM's
client overhead on a shared 2-core machine shows in TTFT (its request preparation and the HTTP
round trip happen before the first token) and cancels in TPOT.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live.test_guidellm import TOKENIZER  # noqa: E402  (the local word-level tokenizer)
from tests.live.test_live_cli import _port, _serve  # noqa: E402


def _venv(arg: str | None) -> Path:
    for v in (arg, os.environ.get("SIMLLM_GUIDELLM_VENV"), str(Path.home() / ".cache/simllm/guidellm-venv")):
        if v and (Path(v) / "bin" / "guidellm").exists():
            return Path(v)
    raise SystemExit("bench_guidellm: no GuideLLM venv: pass --venv DIR, set SIMLLM_GUIDELLM_VENV, or run "
                     "SIMLLM_INSTALL_GUIDELLM=1 python -m pytest tests/live/test_guidellm.py once to create one")


def _lag_ms(port: int) -> tuple[float, float]:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    vals = {line.split("{")[0].split(" ")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("simllm:token_lag_seconds")}
    s, n = vals.get("simllm:token_lag_seconds_sum", 0.0), vals.get("simllm:token_lag_seconds_count", 0.0)
    return (1e3 * s / n if n else float("nan")), n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--output", type=int, default=64)
    ap.add_argument("--venv", default=None)
    ap.add_argument("--json", default=str(ROOT / "benchmarks/results/bench_guidellm.json"))
    ap.add_argument("overrides", nargs="*", default=["calibration=specsheet"])
    args = ap.parse_args(argv)
    venv = _venv(args.venv)

    from engine.calibration.measurements import read_measurement
    from engine.des import simulate
    from engine.des.workload import RequestStream
    from runner.convert import des_spec, specs_from_config
    from runner.tools.calibrate import compose

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run([str(venv / "bin" / "python"), "-c", TOKENIZER, str(tmp / "tok")], check=True, timeout=300)
        port = _port()
        srv = _serve(list(args.overrides), port)
        report = tmp / "guidellm.json"
        t0 = time.time()
        try:
            r = subprocess.run(
                [str(venv / "bin" / "guidellm"), "run",
                 "--backend", f"kind=openai_http,target=http://127.0.0.1:{port},model=llama_3_1_8b",
                 "--profile", f"kind=concurrent,streams={args.streams}",
                 "--data", f"kind=synthetic_text,prompt_tokens={args.prompt},output_tokens={args.output}",
                 "--tokenizer", f"kind=huggingface_auto,model={tmp / 'tok'}",
                 "--constraint", f"kind=max_requests,count={args.requests}",
                 "--output", f"kind=json,path={report}", "--disable-progress"],
                capture_output=True, text=True, timeout=1800, cwd=tmp, env={**os.environ, "HF_HUB_OFFLINE": "1"})
            wall = time.time() - t0
            lag_ms, tokens = _lag_ms(port)
        finally:
            srv.terminate()
            srv.wait(10)
        if r.returncode != 0:
            raise SystemExit(f"bench_guidellm: guidellm failed:\n{r.stderr[-3000:]}")
        m = read_measurement(report)
    cfg = compose(list(args.overrides))
    t = m.table
    order = np.argsort(t["arrival_s"].to_numpy(), kind="stable")
    stream = RequestStream(arrival_s=t["arrival_s"].to_numpy()[order], prompt=t["input_len"].to_numpy()[order],
                           output=t["output_len"].to_numpy()[order], priority=np.ones(len(m), np.int8))
    sim = simulate(specs_from_config(cfg), des_spec(cfg), stream=stream).result.table
    print(f"GuideLLM {args.streams} streams, {len(m)} requests (prompt {int(np.median(t['input_len'].to_numpy()))} "
          f"tokens as served, output {args.output}) against simllm-serve {' '.join(args.overrides)}: "
          f"{wall:.1f} s wall; server token lag mean {lag_ms:.2f} ms over {tokens:.0f} tokens")
    rows = []
    print(f"{'metric':<10}{'GuideLLM':>12}{'DES replay':>12}{'difference':>12}")
    for col in ("ttft_ms", "tpot_ms", "e2e_ms"):
        meas = t[col].to_numpy()[order].astype(float)
        pred = sim[col].to_numpy().astype(float)
        for q in (50, 90, 99):
            a, b = float(np.nanpercentile(meas, q)), float(np.nanpercentile(pred, q))
            diff = f"{a - b:+.1f} ms" if col == "ttft_ms" else f"{a / b - 1:+.1%}"
            print(f"{col[:-3].upper() + f' p{q}':<10}{a:>12.2f}{b:>12.2f}{diff:>12}")
            rows.append({"metric": col, "q": q, "guidellm": a, "des": b})
        d = meas - pred
        lo, med, hi = np.nanpercentile(d, [5, 50, 95])
        print(f"{col[:-3].upper() + ' per request':<22} median {med:+.2f} ms, 5-95 % {lo:+.2f} .. {hi:+.2f} ms")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"requests": len(m), "streams": args.streams, "wall_s": wall,
                                           "token_lag_ms_mean": lag_ms, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
