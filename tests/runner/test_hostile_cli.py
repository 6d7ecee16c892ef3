"""Hostile input at every console script's boundary: one line, exit status 2, never a traceback.

Each case calls a tool's ``main(argv)`` in-process (fast: most fail before any compose), captures
stderr and asserts exit 2, a single ``<tool>: error: ...`` line, and that the line names the
file or field at fault (the strings in ``names``). Input files are written by the test itself.
The progress helpers are tested at the end: bars go to stderr only, and only on a terminal
without --quiet / SIMLLM_QUIET; the DES bar shows from an expected 2 s of simulation.
"""

import io
import json
import sys
import tomllib
from pathlib import Path

import pytest

from runner.tools import bundle, calibrate, import_cli, kernels, observe, plan, report, serve, study, validate

ROOT = Path(__file__).resolve().parents[2]

GUIDELLM = {"benchmarks": [{"args": {"strategy": {"type_": "synchronous"}}, "requests": {"successful": [
    {"prompt_tokens": 100, "output_tokens": 10, "start_time": 0.0, "first_token_time": 0.05,
     "last_token_time": 0.5}]}}]}
CSV_HEAD = "request_id,input_len,output_len,ttft_ms,tpot_ms\n"


def _files(tmp: Path) -> dict:
    """The hostile inputs, by name."""
    f = {}

    def put(name, data):
        p = tmp / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        f[name] = str(p)

    put("guidellm.json", json.dumps(GUIDELLM))
    put("good.csv", CSV_HEAD + "0,100,10,50,5\n")
    put("header_only.csv", CSV_HEAD)
    put("latin1.csv", CSV_HEAD.encode() + "0,100,10,50,5 \xe9t\xe9\n".encode("latin-1"))
    put("huge_cell.csv", CSV_HEAD + "0," + "9" * (128 * 1024 + 10) + ",10,50,5\n")
    put("all_errored.json", json.dumps({"input_lens": [10, 20], "output_lens": [5, 5], "ttfts": [0.1, 0.1],
                                        "itls": [[], []], "errors": ["timeout", "timeout"]}))
    put("short_errors.json", json.dumps({"input_lens": [10, 20], "output_lens": [5, 5], "ttfts": [0.1, 0.1],
                                         "itls": [[], []], "errors": [""]}))
    put("short_outputs.json", json.dumps({"input_lens": [10, 20], "output_lens": [5], "ttfts": [0.1, 0.1],
                                          "itls": [[], []]}))
    put("notjson", "this is not JSON\n")
    put("list.json", "[1, 2, 3]")
    put("zero_heads.json", json.dumps({"num_hidden_layers": 32, "hidden_size": 4096,
                                       "num_attention_heads": 0, "intermediate_size": 11008,
                                       "vocab_size": 32000}))
    put("sheet_latin1.csv", "param,value,unit,precision,source\n".encode() + "tdp,350,W,,p\xe9\n".encode("latin-1"))
    (tmp / "empty_dir").mkdir()
    f["empty_dir"] = str(tmp / "empty_dir")
    f["missing"] = str(tmp / "missing.json")
    return f


def _calibrate(*argv):
    return lambda tmp, f: calibrate.main([*[f.get(a, a) for a in argv], "--name", "hostile", "--no-tracking",
                                          "--conf-dir", str(tmp / "conf"), "--output-dir", str(tmp / "out")])


def _with_files(fn, *argv):
    return lambda tmp, f: fn([f.get(a, a) for a in argv])


# (id, tool name, call(tmp, files) -> exit status, strings the error line must contain)
CASES = [
    ("calibrate-input-len-guidellm", "simllm-calibrate", _calibrate("guidellm.json", "--input-len", "512"),
     ["--input-len", "512", "genai-perf"]),
    ("calibrate-input-len-csv", "simllm-calibrate", _calibrate("good.csv", "--input-len", "512"),
     ["--input-len", "genai-perf"]),
    ("calibrate-rate-guidellm", "simllm-calibrate", _calibrate("guidellm.json", "--rate", "4"),
     ["--rate", "csv"]),
    ("calibrate-rate-and-concurrency", "simllm-calibrate",
     _calibrate("good.csv", "--rate", "4", "--concurrency", "2"), ["--concurrency", "--rate"]),
    ("calibrate-header-only", "simllm-calibrate", _calibrate("header_only.csv"),
     ["header_only.csv", "requests", "at least one"]),
    ("calibrate-all-errored", "simllm-calibrate", _calibrate("all_errored.json"),
     ["all_errored.json", "requests", "at least one"]),
    ("calibrate-short-errors-list", "simllm-calibrate", _calibrate("short_errors.json"),
     ["short_errors.json", "errors", "2 entries"]),
    ("calibrate-short-outputs-list", "simllm-calibrate", _calibrate("short_outputs.json"),
     ["short_outputs.json", "output_lens", "2 entries"]),
    ("calibrate-latin1", "simllm-calibrate", _calibrate("latin1.csv"), ["latin1.csv", "UTF-8"]),
    ("calibrate-huge-cell", "simllm-calibrate", _calibrate("huge_cell.csv"),
     ["huge_cell.csv", "input_len"]),
    ("calibrate-missing", "simllm-calibrate", _calibrate("missing"), ["missing.json", "existing file"]),
    ("plan-override-needs-experiment", "simllm-plan", _with_files(plan.main, "plan.target_rps=5"),
     ["plan.target_rps", "experiment=capacity"]),
    ("plan-from-json-not-json", "simllm-plan", _with_files(plan.main, "--from-json", "notjson"),
     ["--from-json", "notjson", "plan.json"]),
    ("import-hfconfig-not-json", "simllm-import", _with_files(import_cli.main, "hfconfig", "notjson", "--name", "q"),
     ["notjson", "JSON"]),
    ("import-hfconfig-list", "simllm-import", _with_files(import_cli.main, "hfconfig", "list.json", "--name", "q"),
     ["list.json", "JSON list", "JSON object"]),
    ("import-hfconfig-zero-heads", "simllm-import",
     _with_files(import_cli.main, "hfconfig", "zero_heads.json", "--name", "q"),
     ["zero_heads.json", "num_attention_heads", "= 0", "positive integer"]),
    ("import-hfconfig-missing", "simllm-import", _with_files(import_cli.main, "hfconfig", "missing", "--name", "q"),
     ["missing.json", "existing"]),
    ("import-hwcsv-latin1", "simllm-import", _with_files(import_cli.main, "hwcsv", "sheet_latin1.csv", "--name", "q"),
     ["sheet_latin1.csv", "UTF-8"]),
    ("validate-missing-csv", "simllm-validate", _with_files(validate.main, "--csv", "missing", "--no-tracking"),
     ["--csv", "missing.json"]),
    ("validate-latin1-csv", "simllm-validate", _with_files(validate.main, "--csv", "latin1.csv", "--no-tracking"),
     ["--csv", "latin1.csv", "UTF-8"]),
    ("validate-bad-regex", "simllm-validate", _with_files(validate.main, "--csv", "good.csv", "--only", "(",
                                                          "--no-tracking"), ["--only", "regular expression"]),
    ("kernels-missing-dir", "simllm-kernels",
     lambda tmp, f: kernels.main([f["missing"], "--out", str(tmp / "k")]), ["kernels_dir", "missing.json"]),
    ("kernels-empty-dir", "simllm-kernels",
     lambda tmp, f: kernels.main([f["empty_dir"], "--out", str(tmp / "k")]), ["kernels_dir", "empty_dir"]),
    ("kernels-loco-no-tables", "simllm-kernels",
     lambda tmp, f: kernels.main(["--loco", "--out", f["empty_dir"], "--loco-out", str(tmp / "k" / "l.json")]),
     ["--out", "empty_dir", "tables.npz"]),
    ("study-unknown", "simllm-study", _with_files(study.main, "check", "nosuch"), ["study = nosuch"]),
    ("replay-not-a-bundle", "simllm-replay", _with_files(bundle.replay_cli, "empty_dir"),
     ["bundle", "empty_dir", "manifest"]),
    ("serve-bad-port", "simllm-serve", _with_files(serve.main, "--port", "70000"), ["--port", "70000"]),
    ("serve-unknown-hardware", "simllm-serve", _with_files(serve.main, "hardware=nochip"),
     ["hardware", "nochip", "h100_sxm"]),
    ("observe-unknown-workload", "simllm-observe",
     lambda tmp, f: observe.main(["http://127.0.0.1:9", "workload=nowl", "-o", str(tmp / "o.json")]),
     ["workload", "nowl"]),
]
STORE_CASES = [
    ("report-unknown-target", "simllm-report",
     lambda uri, tmp: report.main(["nosuchexperiment", "--uri", uri, "--no-log", "-o", str(tmp / "r")]),
     ["nosuchexperiment"]),
    ("bundle-unknown-run", "simllm-bundle",
     lambda uri, tmp: bundle.bundle_cli(["ffff0", "-o", str(tmp / "b"), "--uri", uri]), ["ffff0"]),
]


def _one_line(capsys, tool: str, rc: int, names: list) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith(f"{tool}: error: "), err
    assert len(lines[0]) < 600, lines[0]           # a 128 KiB cell is not echoed back
    for n in names:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_one_line_and_exit_2(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _, tool, call, names = case
    files = _files(tmp_path)
    _one_line(capsys, tool, call(tmp_path, files), names)
    assert not (tmp_path / "conf").exists() and not (tmp_path / "k").exists()   # nothing half-written


@pytest.mark.parametrize("case", STORE_CASES, ids=[c[0] for c in STORE_CASES])
def test_hostile_selection_is_one_line_and_exit_2(case, mlflow_uri, tmp_path, capsys):
    _, tool, call, names = case
    _one_line(capsys, tool, call(mlflow_uri, tmp_path), names)
    assert not (tmp_path / "b").exists()


def test_every_console_script_has_a_case():
    """pyproject's [project.scripts], less ``simllm`` (the Hydra app: tests/runner/test_hostile_overrides.py
    and test_cli.py) and ``simllm-sync`` (runner/tools/sync.py, tested with the tracking code)."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    covered = {c[1] for c in CASES + STORE_CASES}
    assert set(scripts) - covered == {"simllm", "simllm-sync"}


def test_a_long_itl_cell_is_read(tmp_path):
    """An itl_ms cell of 30,000 gaps (~150 KiB, over the csv module's 128 KiB default) is data, not
    an error: the request's median gap is the median of the values written (1.0 and 3.0 ms
    alternating, 15,000 each -> median 2.0 ms)."""
    from engine.calibration.measurements import read_measurement

    gaps = ";".join(["1.000", "3.000"] * 15000)
    assert len(gaps) > 128 * 1024
    p = tmp_path / "long.csv"
    p.write_text("request_id,input_len,output_len,ttft_ms,tpot_ms,itl_ms\n"
                 f"0,100,30001,50,2,{gaps}\n")
    m = read_measurement(p)
    assert len(m) == 1 and m.itl_ms.size == 30000
    assert m.itl_p50_ms[0] == pytest.approx(2.0)
    assert m.quantile("itl_ms", 50) == pytest.approx(2.0)


def test_reader_options_map_to_their_format():
    """--benchmark reads GuideLLM's benchmark and genai-perf's experiment; --input-len only genai-perf."""
    a = calibrate.parser().parse_intermixed_args(["x.json", "--name", "n", "--benchmark", "1"])
    assert calibrate.reader_options(a, "guidellm") == {"benchmark": 1}
    assert calibrate.reader_options(a, "genai_perf") == {"experiment": 1}
    a = calibrate.parser().parse_intermixed_args(["x.csv", "--name", "n", "--concurrency", "4"])
    assert calibrate.reader_options(a, "csv") == {"workload": {"arrival": "closed_loop", "concurrency": 4}}


# ------------------------------------------------------------------------------------ progress
class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_only_on_a_terminal_and_not_quiet(monkeypatch):
    from runner.tools import cli

    monkeypatch.delenv("SIMLLM_QUIET", raising=False)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not cli.show_progress()                   # piped / captured: no bar
    monkeypatch.setattr(sys, "stderr", _Tty())
    assert cli.show_progress()
    assert not cli.show_progress(quiet=True)
    monkeypatch.setenv("SIMLLM_QUIET", "1")
    assert not cli.show_progress()


def test_steps_bar_writes_to_stderr_only(monkeypatch, capsys):
    from runner.tools import cli

    monkeypatch.delenv("SIMLLM_QUIET", raising=False)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    with cli.Steps(["reading", "fitting"], "simllm-x") as s:
        s.step("reading")
        s.step("fitting")
        s.note("fitting: DES run 3")
    assert "simllm-x" in tty.getvalue() and "fitting: DES run 3" in tty.getvalue()
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("n, mode, shown", [(9_999, "auto", False), (10_000, "auto", True),
                                            (100, "on", True), (10**6, "off", False)])
def test_des_bar_from_an_expected_two_seconds(n, mode, shown, monkeypatch):
    """auto: n x 2e-4 CPU-s per request >= 2 s, i.e. from 10,000 requests (was 20,000), on a terminal."""
    import importlib

    from engine.des import DesSpec

    des_run = importlib.import_module("engine.des.run")    # the module, not engine.des.run()

    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    bar = des_run._progress(DesSpec(outputs=dict(progress=mode)), n)
    assert (bar is not None) == shown
    if bar is not None:
        bar.close()
        assert "simllm des" in tty.getvalue()           # drawn on stderr
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert des_run._progress(DesSpec(outputs=dict(progress="auto")), 10**6) is None     # not a terminal


def test_quiet_flags():
    """Every long-running tool takes -q/--quiet."""
    assert calibrate.parser().parse_intermixed_args(["x", "--name", "n", "-q"]).quiet
    assert validate.parser().parse_args(["--quiet"]).quiet
    assert observe.parser().parse_intermixed_args(["http://x", "-o", "o", "-q"]).no_progress
    assert report._args(["t", "--quiet"]).quiet
