"""Property-based: hostile spec-sheet CSVs and trace files end in a clear error or a valid result.

Clear error = SheetError (names file and line) for sheets, SpecError naming workload.trace.* for
traces. Never an exception from deep inside a parser, a hang, or a half-written output.
"""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.des.trace import load_trace
from engine.errors import SpecError
from engine.ingest.hwcsv import SheetError, read_sheet
from engine.spec.workload import TraceSpec

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

GOOD = ["peak_bf16_tflops,512,TFLOPS,bf16,p24", "hbm_bandwidth,4096,GB/s,,p25",
        "hbm_capacity,192,GB,,p25", "sram_capacity,64,MB,,p26", "tdp,350,W,,p28"]
params = st.sampled_from(["peak_bf16_tflops", "hbm_bandwidth", "hbm_capacity", "tdp", "sram_capacity",
                          "interconnect_bandwidth", "bogus", "", "peak_fp8_tflops"])
vals = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                 st.integers(-10**12, 10**12).map(str), st.sampled_from(["", "-0", "1e400", "abc"]))
units_ = st.sampled_from(["TFLOPS", "TOPS", "GB/s", "TB/s", "Tb/s", "GB", "GiB", "MB", "W", "", "lbs"])
rows = st.tuples(params, vals, units_, st.sampled_from(["", "bf16", "fp8", "xx"]),
                 st.text(max_size=5)).map(lambda t: ",".join(t))


def _check_sheet(path, data: bytes):
    """A sheet either fails with a SheetError naming the file, or parses to figures that are finite
    and non-negative and to a HardwareSpec (or a SpecError naming the hardware field)."""
    path.write_bytes(data)
    try:
        sheet = read_sheet(path, "hostile")
    except SheetError as e:
        assert str(path) in str(e)
        return None
    except UnicodeDecodeError:
        raise AssertionError("non-UTF-8 sheet must give a SheetError naming the file")
    assert sheet.entries, "a sheet that parses has its required figures"
    for fld, entry in sheet.entries.items():
        v = entry.value
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            assert math.isfinite(v) and v >= 0, (fld, v)
    try:
        spec = sheet.hardware_spec()
    except SpecError as e:
        assert str(e).startswith("hardware."), e
        return None
    assert spec.peak_flops_bf16 > 0 and spec.hbm_capacity_bytes > 0 and spec.hbm_bandwidth_bytes_s > 0
    return spec


def test_good_sheet_gives_its_figures(tmp_path):
    """The rows the hostile cases start from, converted by hand: 512 TFLOPS = 512e12 FLOP/s,
    4096 GB/s = 4.096e12 B/s, 192 GB = 192e9 B, 64 MB = 64e6 B, 350 W."""
    spec = _check_sheet(tmp_path / "s.csv", "\n".join(["param,value,unit,precision,source", *GOOD]).encode())
    assert (spec.peak_flops_bf16, spec.hbm_bandwidth_bytes_s, spec.hbm_capacity_bytes, spec.sram_bytes,
            spec.tdp_w) == (512e12, 4.096e12, 192e9, 64e6, 350.0)


@SETTINGS
@given(extra=st.lists(rows, max_size=4), drop=st.integers(0, 4))
def test_sheet_rows(tmp_path, extra, drop):
    lines = ["param,value,unit,precision,source"] + GOOD[drop:] + extra
    _check_sheet(tmp_path / "s.csv", "\n".join(lines).encode())


@SETTINGS
@given(cut=st.integers(0, 200), junk=st.binary(max_size=20))
def test_sheet_truncated_or_binary(tmp_path, cut, junk):
    text = ("param,value,unit,precision,source\n" + "\n".join(GOOD)).encode()
    _check_sheet(tmp_path / "s.csv", text[:cut] + junk)


TRACE = b"arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,20\n0.5,200,30\n1.0,50,10\n"


def _check_trace(path, data: bytes, fmt="auto"):
    path.write_bytes(data)
    try:
        tr = load_trace(TraceSpec(path=str(path), format=fmt))
    except SpecError as e:
        assert str(e).startswith("workload.trace"), e
        return
    assert len(tr) > 0 and (tr.prompt > 0).all() and (tr.output > 0).all()
    if tr.arrival_s is not None:
        assert (tr.arrival_s >= 0).all()


@SETTINGS
@given(cut=st.integers(0, len(TRACE)), junk=st.binary(max_size=16))
def test_trace_truncated_or_binary(tmp_path, cut, junk):
    _check_trace(tmp_path / "t.csv", TRACE[:cut] + junk)


cells = st.one_of(st.integers(-5, 10**6).map(str), st.sampled_from(["", "nan", "x", "1e309", "-0"]))


@SETTINGS
@given(rows_=st.lists(st.tuples(cells, cells, cells), min_size=0, max_size=5))
def test_trace_cells(tmp_path, rows_):
    body = "\n".join(",".join(r) for r in rows_)
    _check_trace(tmp_path / "t.csv", f"arrived_at,num_prefill_tokens,num_decode_tokens\n{body}\n".encode())


@SETTINGS
@given(data=st.binary(max_size=64), fmt=st.sampled_from(["parquet", "json", "jsonl"]))
def test_trace_garbage_other_formats(tmp_path, data, fmt):
    _check_trace(tmp_path / f"t.{fmt}", data, fmt)
