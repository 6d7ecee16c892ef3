"""benchmarks/compare_blis.py: it skips with its reason when BLIS cannot be had, and both simulators
are handed the same requests.

The request streams are read back from the written files and compared with the arrays they were
written from (whole microseconds); the go.mod parser against a go.mod typed here.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import compare_blis as cb  # noqa: E402


def _run(*args, env=None):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compare_blis.py"), *args, "--json", ""],
                          capture_output=True, text=True, env=env, timeout=120)


def test_skips_without_a_blis_source(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("BLIS_SRC", "BLIS_BIN")}
    r = _run(env=env)
    assert r.returncode == 0
    assert "compare_blis: skipped: no BLIS source folder (--blis-src DIR or $BLIS_SRC" in r.stdout
    r = _run("--blis-src", str(tmp_path), env=env)
    assert r.returncode == 0
    assert f"skipped: --blis-src {tmp_path} is not a BLIS source folder (no go.mod / defaults.yaml)" in r.stdout
    (tmp_path / "go.mod").write_text("module x\n")
    (tmp_path / "defaults.yaml").write_text("{}\n")
    r = _run("--blis-src", str(tmp_path), "--blis-bin", str(tmp_path / "nope"), env=env)
    assert r.returncode == 0 and "is not an executable file" in r.stdout


def test_go_mod_requirements():
    gomod = ("module github.com/a/b\n\ngo 1.24.0\n\nrequire (\n\tgithub.com/google/uuid v1.6.0\n"
             "\tgopkg.in/yaml.v3 v3.0.1\n)\n\nrequire (\n\tgolang.org/x/sys v0.0.0-20220715151400-c0bba94af5f8 "
             "// indirect\n)\nrequire github.com/spf13/cobra v1.9.1\n")
    assert cb._requirements(gomod) == [("github.com/google/uuid", "v1.6.0"), ("gopkg.in/yaml.v3", "v3.0.1"),
                                       ("golang.org/x/sys", "v0.0.0-20220715151400-c0bba94af5f8"),
                                       ("github.com/spf13/cobra", "v1.9.1")]


def test_both_simulators_get_the_same_requests(tmp_path):
    arrival, prompt, output = cb.poisson(500, 10.0)
    assert arrival[0] == 0 and np.all(np.diff(arrival) >= 0)
    assert prompt.min() >= 2 and output.max() <= 7000 and 400 < prompt.mean() < 620
    tr = cb.write_traces(tmp_path, "p", arrival, prompt, output)
    mine = pl.read_csv(tr["simllm"])
    blis = pl.read_csv(tr["data"], infer_schema_length=0)
    assert blis.columns == cb.TRACE_V2_COLUMNS.split(",")
    us = np.round(arrival * 1e6).astype(np.int64)
    assert blis["arrival_time_us"].cast(pl.Int64).to_list() == us.tolist()
    assert np.array_equal(np.round(mine["arrived_at"].to_numpy() * 1e6).astype(np.int64), us)
    for col_m, col_b, want in (("num_prefill_tokens", "input_tokens", prompt),
                               ("num_decode_tokens", "output_tokens", output)):
        assert mine[col_m].to_list() == want.tolist() == blis[col_b].cast(pl.Int64).to_list()
    assert blis["deadline_us"].cast(pl.Int64).to_list() == [0] * 500        # BLIS: no timeout
    assert "time_unit: microseconds" in tr["header"].read_text()
