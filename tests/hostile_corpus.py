"""The hostile-input corpus: every reader and console script fed files it should refuse (or, for a
few valid-but-unusual files, read correctly), generated into a temporary folder at test time.

Each :class:`Case` writes its own files, calls one reader or tool and says what it expects:

- ``expect="error"``: a non-zero exit with one ``<tool>: error: ...`` line (no traceback) that
  contains every string of ``names`` (the file, row or field at fault and what was expected);
- ``expect="ok"``: exit 0, and ``check(tmp, out)`` (the printed output) returns None; otherwise it
  returns what was wrong (a value silently altered or a fact left unsaid).

:func:`classify` runs a case and files it as ``clear`` (the expectation met), ``traceback`` (an
exception escaped, or "Traceback" was printed), ``silent`` (an error case that exited 0, or an ok
case whose check failed: a value silently changed), ``refused`` (a valid input refused) or
``unclear`` (refused, but the line misses a name). tests/runner/test_hostile_corpus.py asserts every case
is ``clear``; the same module counts the outcomes of any version of the code (``python -m
tests.hostile_corpus``).

Readers are called in-process (a clear error is the project's own SpecError / SheetError /
HFConfigError, printed as the tool prints it); the console scripts through their ``main(argv)``;
``simllm`` itself in a subprocess (the Hydra app owns its process).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]

MEAS_HEAD = "request_id,input_len,output_len,ttft_ms,tpot_ms\n"
SHEET_HEAD = "param,value,unit,precision,source\n"
SHEET_ROWS = ("peak_bf16_tflops,512,TFLOPS,bf16,p24\nhbm_bandwidth,4096,GB/s,,p25\n"
              "hbm_capacity,192,GB,,p25\n")
TRACE_HEAD = "arrived_at,num_prefill_tokens,num_decode_tokens\n"
#: Llama-3.1-8B's config.json architecture (tests/data/model_configs/llama-3.1-8b.json), the base
#: the hostile HF configs perturb one key of.
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
         "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
         "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
         "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
VLLM_OK = {"input_lens": [10, 20], "output_lens": [5, 5], "ttfts": [0.1, 0.1], "itls": [[0.01] * 4, [0.01] * 4]}


@dataclass
class Case:
    id: str
    tool: str
    files: dict                       # name -> bytes or str, written into the case's folder
    call: Callable                    # (tmp: Path) -> exit status (may raise SystemExit)
    expect: str = "error"             # "error" | "ok"
    names: list = field(default_factory=list)
    check: Callable | None = None     # ok cases: (tmp, printed text) -> None or what was wrong


# ----------------------------------------------------------------------------------- callers
def _reader(tool: str, fn):
    """A reader call: the project's input errors are printed as its tools print them (exit 2)."""
    def call(tmp):
        from engine.errors import SpecError
        from engine.ingest.hf_config import HFConfigError
        from engine.ingest.hwcsv import SheetError

        try:
            out = fn(tmp)
        except (SpecError, SheetError, HFConfigError) as e:
            print(f"{tool}: error: {e}", file=sys.stderr)
            return 2
        if out is not None:
            print(out)
        return 0
    return call


def _calibrate(*argv):
    def call(tmp):
        from runner.tools import calibrate
        return calibrate.main([*[str(tmp / a) if (tmp / a).exists() else a for a in argv], "--name", "hostile",
                               "--no-tracking", "--conf-dir", str(tmp / "conf"), "--output-dir", str(tmp / "cal")])
    return call


def _import(kind, name):
    def call(tmp):
        from runner.tools import import_cli
        return import_cli.main([kind, str(tmp / name), "--name", "hostile", "--out", str(tmp / "out.yaml")])
    return call


def _validate(name):
    def call(tmp):
        from runner.tools import validate
        return validate.main(["--csv", str(tmp / name), "--no-tracking", "--output-dir", str(tmp / "val")])
    return call


def _simllm(*overrides):
    """``simllm`` in a subprocess (its job dir in the case folder); its output is printed back."""
    def call(tmp):
        env = {**os.environ, "SIMLLM_QUIET": "1"}
        p = subprocess.run([sys.executable, "-m", "runner.app", *[o.replace("{tmp}", str(tmp)) for o in overrides],
                            "tracking=none", f"hydra.run.dir={tmp / 'job'}"],
                           capture_output=True, text=True, env=env, cwd=tmp, timeout=300)
        sys.stdout.write(p.stdout)
        sys.stderr.write(p.stderr)
        return p.returncode
    return call


def _serve(body: bytes, headers=None):
    """One request to ``simllm-serve``'s app (Llama-3.1-8B on one H100, in a thread on 127.0.0.1);
    prints the status and the JSON reply; exit 2 for a 4xx with a JSON message, 1 for anything else."""
    def call(tmp):
        import http.client

        url = _server()
        host, port = url.rsplit("/", 1)[-1].split(":")
        c = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            c.request("POST", "/v1/completions", body=body,
                      headers={"Content-Type": "application/json", **(headers or {})})
            r = c.getresponse()
            text = r.read().decode("utf-8", "replace")
        finally:
            c.close()
        if 400 <= r.status < 500:
            try:
                msg = json.loads(text)["message"]
            except (ValueError, KeyError, TypeError):
                print(f"simllm-serve: HTTP {r.status} without a JSON message: {text[:200]}", file=sys.stderr)
                return 1
            print(f"simllm-serve: error: HTTP {r.status}: {msg}", file=sys.stderr)
            return 2
        if r.status >= 500:
            print(f"Traceback-like: HTTP {r.status}: {text[:200]}", file=sys.stderr)
            return 1
        print(text[:2000])
        return 0
    return call


_SERVER: dict = {}


def _server() -> str:
    """The corpus's one server (started on first use, stopped at exit)."""
    if "url" not in _SERVER:
        import atexit

        from engine.des.live import LiveEngine
        from runner.compose import compose_specs
        from runner.tools.serve import in_thread, make_app

        specs = compose_specs(["engine=des", "framework=generic"], experiments=False)
        cm = in_thread(make_app(LiveEngine(specs, capacity=8), "llama_3_1_8b", time_scale=0.01,
                                max_body_bytes=1 << 20))
        _SERVER["url"] = cm.__enter__()
        atexit.register(cm.__exit__, None, None, None)
    return _SERVER["url"]


# -------------------------------------------------------------------------------------- checks
def _yaml_has(*lines):
    def check(tmp, out):
        text = (tmp / "out.yaml").read_text()
        missing = [ln for ln in lines if not any(row.split("#")[0].strip() == ln for row in text.splitlines())]
        return f"out.yaml lacks {missing}" if missing else None
    return check


def _printed(*parts):
    def check(tmp, out):
        missing = [p for p in parts if p not in out]
        return f"output lacks {missing}" if missing else None
    return check


def _summary(**want):
    def check(tmp, out):
        s = json.loads((tmp / "job" / "summary.json").read_text())["summary"]
        bad = {k: s.get(k) for k, v in want.items() if s.get(k) != v}
        return f"summary.json {bad}, expected {want}" if bad else None
    return check


def _both(*checks):
    def check(tmp, out):
        return next((r for c in checks if (r := c(tmp, out))), None)
    return check


def _hf(**change) -> str:
    cfg = {**LLAMA, **change}
    return json.dumps({k: v for k, v in cfg.items() if v is not None})


def _read_meas(name):
    def fn(tmp):
        from engine.calibration.measurements import read_measurement
        m = read_measurement(tmp / name)
        return f"rows {len(m)} input_len {m.table['input_len'].to_list()} ttft_ms {m.table['ttft_ms'].to_list()}"
    return fn


def _read_trace(name, fmt="auto"):
    def fn(tmp):
        from engine.des.trace import load_trace
        from engine.spec.workload import TraceSpec
        t = load_trace(TraceSpec(path=str(tmp / name), format=fmt))
        return (f"rows {len(t)} prompt {t.prompt.tolist()} output {t.output.tolist()} "
                f"arrival {None if t.arrival_s is None else t.arrival_s.tolist()}")
    return fn


def _read_sheet(name):
    def fn(tmp):
        from engine.ingest.hwcsv import read_sheet
        spec = read_sheet(tmp / name, "hostile").hardware_spec()
        return f"sram_bytes {spec.sram_bytes!r} hbm_capacity_bytes {spec.hbm_capacity_bytes!r}"
    return fn


# --------------------------------------------------------------------------------------- cases
def cases() -> list[Case]:
    C = []

    def add(*a, **k):
        C.append(Case(*a, **k))

    # simllm-calibrate: measurement files
    add("calibrate-header-only", "simllm-calibrate", {"m.csv": MEAS_HEAD}, _calibrate("m.csv"),
        names=["m.csv", "at least one"])
    add("calibrate-empty-file", "simllm-calibrate", {"m.csv": ""}, _calibrate("m.csv"), names=["m.csv"])
    add("calibrate-all-errored", "simllm-calibrate",
        {"v.json": json.dumps({**VLLM_OK, "errors": ["timeout", "timeout"]})}, _calibrate("v.json"),
        names=["v.json", "at least one"])
    add("calibrate-vllm-short-outputs", "simllm-calibrate",
        {"v.json": json.dumps({**VLLM_OK, "output_lens": [5]})}, _calibrate("v.json"), names=["v.json", "output_lens"])
    add("calibrate-vllm-short-errors", "simllm-calibrate",
        {"v.json": json.dumps({**VLLM_OK, "errors": [""]})}, _calibrate("v.json"), names=["v.json", "errors"])
    add("calibrate-vllm-top-level-list", "simllm-calibrate", {"v.json": "[1, 2]"}, _calibrate("v.json"),
        names=["v.json"])
    add("calibrate-latin1", "simllm-calibrate",
        {"m.csv": MEAS_HEAD.encode() + "0,100,10,50,5\n1,100,10,50,5 \xe9\n".encode("latin-1")},
        _calibrate("m.csv"), names=["m.csv", "UTF-8"])
    add("calibrate-128kib-field", "simllm-calibrate", {"m.csv": MEAS_HEAD + "0," + "9" * (128 * 1024 + 10) + ",10,50,5\n"},
        _calibrate("m.csv"), names=["m.csv", "input_len"])
    add("calibrate-negative-ttft", "simllm-calibrate", {"m.csv": MEAS_HEAD + "0,100,10,-50,5\n"},
        _calibrate("m.csv"), names=["m.csv", "ttft_ms"])
    add("calibrate-inf-tpot", "simllm-calibrate", {"m.csv": MEAS_HEAD + "0,100,10,50,inf\n"},
        _calibrate("m.csv"), names=["m.csv", "tpot_ms"])
    add("calibrate-non-numeric-len", "simllm-calibrate", {"m.csv": MEAS_HEAD + "0,abc,10,50,5\n"},
        _calibrate("m.csv"), names=["m.csv", "input_len"])
    add("calibrate-fractional-len", "simllm-calibrate", {"m.csv": MEAS_HEAD + "0,100.5,10,50,5\n"},
        _calibrate("m.csv"), names=["m.csv", "input_len"])
    add("calibrate-missing-column", "simllm-calibrate",
        {"m.csv": "request_id,input_len,output_len,tpot_ms\n0,100,10,5\n"}, _calibrate("m.csv"), names=["m.csv", "ttft_ms"])
    add("measurement-utf8-bom", "simllm-calibrate", {"m.csv": "\ufeff" + MEAS_HEAD + "0,100,10,50,5\n1,200,10,60,5\n"},
        _reader("simllm-calibrate", _read_meas("m.csv")), expect="ok",
        check=_printed("rows 2 input_len [100, 200] ttft_ms [50.0, 60.0]"))

    # simllm-import hfconfig
    add("hfconfig-top-level-list", "simllm-import", {"c.json": "[1, 2, 3]"}, _import("hfconfig", "c.json"),
        names=["c.json", "JSON object"])
    add("hfconfig-zero-heads", "simllm-import", {"c.json": _hf(num_attention_heads=0)}, _import("hfconfig", "c.json"),
        names=["c.json", "num_attention_heads"])
    add("hfconfig-fractional-hidden", "simllm-import", {"c.json": _hf(hidden_size=4096.5)},
        _import("hfconfig", "c.json"), names=["c.json", "hidden_size", "4096.5"])
    add("hfconfig-vocab-1e30", "simllm-import", {"c.json": _hf(vocab_size=1e30)}, _import("hfconfig", "c.json"),
        names=["c.json", "vocab_size"])
    add("hfconfig-fractional-kv-heads", "simllm-import", {"c.json": _hf(num_key_value_heads=4.5)},
        _import("hfconfig", "c.json"), names=["c.json", "num_key_value_heads", "4.5"])
    add("hfconfig-string-ffn", "simllm-import", {"c.json": _hf(intermediate_size="big")},
        _import("hfconfig", "c.json"), names=["c.json", "intermediate_size"])
    add("hfconfig-bool-layers", "simllm-import", {"c.json": _hf(num_hidden_layers=True)},
        _import("hfconfig", "c.json"), names=["c.json", "num_hidden_layers"])
    add("hfconfig-negative-head-dim", "simllm-import", {"c.json": _hf(head_dim=-1)},
        _import("hfconfig", "c.json"), names=["c.json", "head_dim"])
    add("hfconfig-zero-context", "simllm-import", {"c.json": _hf(max_position_embeddings=0)},
        _import("hfconfig", "c.json"), names=["c.json", "max_position_embeddings"])
    add("hfconfig-string-context", "simllm-import", {"c.json": _hf(max_position_embeddings="131072")},
        _import("hfconfig", "c.json"), names=["c.json", "max_position_embeddings"])
    add("hfconfig-float64-dtype", "simllm-import", {"c.json": _hf(torch_dtype="float64")},
        _import("hfconfig", "c.json"), names=["c.json", "torch_dtype"])
    add("hfconfig-latin1", "simllm-import", {"c.json": _hf().replace("LlamaForCausalLM", "Llam\xe9").encode("latin-1")},
        _import("hfconfig", "c.json"), names=["c.json"])
    add("hfconfig-context-carried", "simllm-import", {"c.json": _hf()}, _import("hfconfig", "c.json"),
        expect="ok", check=_yaml_has("context_length: 131072", "vocab_size: 128256"))
    add("hfconfig-utf8-bom", "simllm-import", {"c.json": "\ufeff" + _hf()}, _import("hfconfig", "c.json"),
        expect="ok", check=_yaml_has("hidden_size: 4096", "context_length: 131072"))

    # simllm-import hwcsv: spec sheets
    add("sheet-utf8-bom", "simllm-import", {"s.csv": "\ufeff" + SHEET_HEAD + SHEET_ROWS},
        _reader("simllm-import", _read_sheet("s.csv")), expect="ok", check=_printed("hbm_capacity_bytes 192000000000.0"))
    add("sheet-kilobytes", "simllm-import", {"s.csv": SHEET_HEAD + SHEET_ROWS + "sram_capacity,1,KB,,p26\n"},
        _reader("simllm-import", _read_sheet("s.csv")), expect="ok", check=_printed("sram_bytes 1000.0"))
    add("sheet-kilobytes-cli", "simllm-import", {"s.csv": SHEET_HEAD + SHEET_ROWS + "sram_capacity,64,KB,,p26\n"},
        _import("hwcsv", "s.csv"), expect="ok", check=_yaml_has("sram: 0.064 MB"))
    add("sheet-latin1", "simllm-import", {"s.csv": (SHEET_HEAD + SHEET_ROWS).encode() + "tdp,350,W,,p\xe9\n".encode("latin-1")},
        _import("hwcsv", "s.csv"), names=["s.csv", "UTF-8"])
    add("sheet-empty", "simllm-import", {"s.csv": ""}, _import("hwcsv", "s.csv"), names=["s.csv"])
    add("sheet-header-only", "simllm-import", {"s.csv": SHEET_HEAD}, _import("hwcsv", "s.csv"), names=["s.csv"])
    add("sheet-negative-capacity", "simllm-import",
        {"s.csv": SHEET_HEAD + SHEET_ROWS.replace("hbm_capacity,192", "hbm_capacity,-192")},
        _import("hwcsv", "s.csv"), names=["s.csv", "-192"])
    add("sheet-inf-bandwidth", "simllm-import",
        {"s.csv": SHEET_HEAD + SHEET_ROWS.replace("hbm_bandwidth,4096", "hbm_bandwidth,inf")},
        _import("hwcsv", "s.csv"), names=["s.csv", "inf"])
    add("sheet-nan-flops", "simllm-import",
        {"s.csv": SHEET_HEAD + SHEET_ROWS.replace("peak_bf16_tflops,512", "peak_bf16_tflops,nan")},
        _import("hwcsv", "s.csv"), names=["s.csv", "nan"])
    add("sheet-unknown-unit", "simllm-import", {"s.csv": SHEET_HEAD + SHEET_ROWS + "tdp,350,lbs,,p28\n"},
        _import("hwcsv", "s.csv"), names=["s.csv", "lbs"])

    # simllm-import simple: the flat spec-sheet form
    simple = ("model:\n  name: m\n  num_params: {n}\n  dtype_bits: 16\nhardware:\n  compute_tflops_bf16: {c}\n"
              "  memory_bandwidth_gbps: 4096\n  memory_capacity_gb: 192\n")

    def _simple(name):
        def call(tmp):
            from runner.tools import import_cli
            return import_cli.main(["simple", str(tmp / name), "--name", "hostile", "--conf-dir", str(tmp / "conf")])
        return call

    add("simple-utf8-bom", "simllm-import", {"s.yaml": "\ufeff" + simple.format(n="7e9", c=512)}, _simple("s.yaml"),
        expect="ok", check=lambda tmp, out: None if "512" in (tmp / "conf" / "hardware" / "hostile.yaml").read_text()
        else "conf/hardware/hostile.yaml lacks the 512 TFLOPS")
    add("simple-inf-compute", "simllm-import", {"s.yaml": simple.format(n="7e9", c=".inf")}, _simple("s.yaml"),
        names=["compute_tflops_bf16", "inf"])
    add("simple-negative-params", "simllm-import", {"s.yaml": simple.format(n="-7e9", c=512)}, _simple("s.yaml"),
        names=["num_params", "-7"])
    add("simple-top-level-list", "simllm-import", {"s.yaml": "- 1\n- 2\n"}, _simple("s.yaml"), names=["s.yaml", "list"])

    # request traces (workload.trace.*)
    tr = lambda body: TRACE_HEAD + body                                  # noqa: E731
    for cid, body, names in (
            ("negative-length", "0.0,100,20\n0.5,-200,30\n1.0,50,10\n", ["num_prefill_tokens", "row 2", "-200"]),
            ("non-numeric-length", "0.0,100,20\n0.5,abc,30\n1.0,50,10\n", ["num_prefill_tokens", "row 2", "abc"]),
            ("inf-arrival", "0.0,100,20\ninf,200,30\n1.0,50,10\n", ["arrived_at", "row 2", "inf"]),
            ("nan-length", "0.0,100,20\n0.5,200,nan\n", ["num_decode_tokens", "row 2", "nan"]),
            ("fractional-length", "0.0,100,20\n0.5,200.5,30\n", ["num_prefill_tokens", "row 2", "200.5"]),
            ("empty-cell", "0.0,100,20\n0.5,,30\n", ["num_prefill_tokens", "row 2"]),
            ("zero-output", "0.0,100,0\n0.5,200,30\n", ["num_decode_tokens", "row 1", "0"]),
            ("negative-arrival", "0.0,100,20\n-5,200,30\n", ["arrived_at", "row 2", "-5"]),
            ("header-only", "", ["t.csv"])):
        add(f"trace-{cid}", "simllm", {"t.csv": tr(body)}, _reader("simllm", _read_trace("t.csv")),
            names=["workload.trace", "t.csv", *names])
    add("trace-jsonl-string-length", "simllm",
        {"t.jsonl": '{"timestamp": 0, "input_length": 10, "output_length": 5}\n'
                    '{"timestamp": 5, "input_length": "lots", "output_length": 5}\n'},
        _reader("simllm", _read_trace("t.jsonl")), names=["workload.trace", "t.jsonl", "input_length"])
    add("trace-valid", "simllm", {"t.csv": tr("0.0,100,20\n0.5,200,30\n1.0,50,10\n")},
        _reader("simllm", _read_trace("t.csv")), expect="ok",
        check=_printed("rows 3 prompt [100, 200, 50] output [20, 30, 10] arrival [0.0, 0.5, 1.0]"))
    add("trace-utf8-bom", "simllm", {"t.csv": "\ufeff" + tr("0.0,100,20\n0.5,200,30\n")},
        _reader("simllm", _read_trace("t.csv")), expect="ok", check=_printed("rows 2 prompt [100, 200]"))
    add("trace-latin1", "simllm", {"t.csv": tr("0.0,100,20\n").encode() + "0.5,200,30,\xe9\n".encode("latin-1")},
        _reader("simllm", _read_trace("t.csv")), names=["workload.trace", "t.csv"])

    # simllm-validate --csv
    add("validate-empty-csv", "simllm-validate", {"v.csv": ""}, _validate("v.csv"), names=["--csv", "v.csv"])
    add("validate-header-only", "simllm-validate",
        {"v.csv": "id,model,hardware,num_gpus,tp,pp,batch_or_concurrency,input_len,output_len,metric,value,unit\n"},
        _validate("v.csv"), names=["--csv", "v.csv"])
    add("validate-latin1", "simllm-validate", {"v.csv": "id,model\n".encode() + "x,\xe9\n".encode("latin-1")},
        _validate("v.csv"), names=["--csv", "v.csv", "UTF-8"])

    # simllm: runs whose answer is "nothing was served", and lengths against the model's context
    add("des-every-request-rejected", "simllm", {},
        _simllm("engine=des", "model=llama_3_1_70b", "partition=tp2", "workload.batch_size=4",
                "workload.prompt_len=100000", "workload.output_len=16"),
        expect="ok", check=_both(_printed("0 of 4 requests served", "4 rejected"), _summary(fits_in_memory=False)))
    add("des-output-len-1", "simllm", {}, _simllm("engine=des", "workload.batch_size=4", "workload.output_len=1"),
        expect="ok", check=_summary(num_completed=4, output_tokens=4))
    add("analytical-prompt-over-context", "simllm", {}, _simllm("workload.prompt_len=200000"),
        names=["workload.prompt_len", "200000", "131072"])
    add("des-prompt-over-context", "simllm", {}, _simllm("engine=des", "workload.prompt_len=200000"),
        names=["workload.prompt_len", "200000", "131072"])
    add("des-length-support-over-context", "simllm", {},
        _simllm("engine=des", "workload.prompt_dist.kind=uniform", "workload.prompt_dist.high=140000"),
        names=["workload.prompt_dist.high", "140000", "131072"])
    add("des-trace-row-over-context", "simllm",
        {"t.csv": tr("0.0,100,20\n0.5,4000,200\n1.0,50,10\n")},
        _simllm("engine=des", "model=llama_2_7b", "workload.trace.path={tmp}/t.csv", "workload.arrival=trace"),
        names=["t.csv", "row 2", "4000", "4096"])

    # simllm-serve: bad requests are a 4xx with a JSON message
    add("serve-prompt-over-context", "simllm-serve", {},
        _serve(json.dumps({"prompt": [1] * 200000, "max_tokens": 16}).encode()),
        names=["131072", "max_tokens"])
    add("serve-stream-options-not-object", "simllm-serve", {},
        _serve(json.dumps({"prompt": "a b", "stream": True, "stream_options": [1]}).encode()),
        names=["stream_options"])
    add("serve-deeply-nested", "simllm-serve", {}, _serve(b'{"prompt": ' + b"[" * 100000 + b"]" * 100000 + b"}"),
        names=["JSON"])
    add("serve-content-length-over-limit", "simllm-serve", {},
        _serve(b'{"prompt": "a"}', {"Content-Length": str(2 << 20)}), names=["limit"])
    add("serve-stream-not-bool", "simllm-serve", {},
        _serve(json.dumps({"prompt": "a b", "stream": "yes"}).encode()), names=["stream"])
    add("serve-token-ids-not-ints", "simllm-serve", {},
        _serve(json.dumps({"prompt": [["a", {"b": 1}]]}).encode()), names=["prompt"])
    return C


# ------------------------------------------------------------------------------------ classify
def classify(case: Case, tmp: Path) -> tuple[str, str]:
    """(outcome, detail): clear | traceback | silent | refused | unclear."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name, data in case.files.items():
        (tmp / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    out, err = io.StringIO(), io.StringIO()
    rc = 0
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = case.call(tmp)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - anything else escaping a tool is a traceback
        return "traceback", traceback.format_exc(limit=-3).strip().splitlines()[-1]
    finally:
        os.chdir(cwd)
    rc = rc or 0
    e_txt = err.getvalue()
    lines = [ln for ln in e_txt.splitlines() if ln.strip() and "Warning" not in ln and not ln.startswith("  ")]
    if "Traceback" in e_txt:
        return "traceback", e_txt.strip().splitlines()[-1][:300]
    if case.expect == "ok":
        if rc != 0:
            return "refused", (lines[-1] if lines else f"exit {rc}")[:300]
        wrong = case.check(tmp, out.getvalue()) if case.check else None
        return ("silent", wrong) if wrong else ("clear", "")
    if rc == 0:
        return "silent", f"exit 0: {out.getvalue().strip()[-200:]}"
    errs = [ln for ln in lines if ": error: " in ln]
    line = errs[-1] if errs else (lines[-1] if lines else "")
    missing = [n for n in case.names if n not in line]
    if len(errs) != 1 or missing or len(line) > 600:
        return "unclear", f"{len(errs)} error lines; missing {missing}: {line[:300]}"
    return "clear", line[:300]


def run_all(base: Path, only=None) -> list[tuple[Case, str, str]]:
    return [(c, *classify(c, base / c.id)) for c in cases() if only is None or only in c.id]


if __name__ == "__main__":                # python -m tests.hostile_corpus [TMPDIR] [ID-SUBSTRING]
    import collections
    import tempfile

    base = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="hostile-"))
    res = run_all(base, sys.argv[2] if len(sys.argv) > 2 else None)
    for c, outcome, detail in res:
        print(f"{outcome:<9} {c.id:<36} {detail}")
    n = collections.Counter(o for _, o, _ in res)
    print(f"corpus {len(res)}: " + ", ".join(f"{k} {n[k]}" for k in ("clear", "unclear", "traceback", "silent", "refused")))
