"""Measurement readers: each sample file under tests/calibration/data is written in the client's
own format (field names from vLLM's benchmark_serving.py, Perf Analyzer's profile export as
genai-perf reads it, GuideLLM's report models); expected values are hand-computed from the numbers
in the file. A malformed file names the file, the record and the field."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from engine.calibration.measurements import (MeasurementError, detect_format, read_measurement,
                                             request_stream)

DATA = Path(__file__).parent / "data"


def test_vllm_save_result():
    m = read_measurement(DATA / "vllm_serving.json")
    assert m.format == "vllm" and len(m) == 3              # the errored request (index 2) dropped
    t = m.table
    assert t["request_id"].to_list() == [0, 1, 3]
    assert t["input_len"].to_list() == [512, 256, 1024]
    assert t["ttft_ms"].to_list() == pytest.approx([30.0, 20.0, 50.0])
    # TPOT = sum(itls) / (output - 1): (10+12+11)/3, 9/1, (10+14)/2 ms
    assert t["tpot_ms"].to_list() == pytest.approx([11.0, 9.0, 12.0])
    assert t["e2e_ms"].to_list() == pytest.approx([63.0, 29.0, 74.0])
    assert sorted(m.itl_ms) == pytest.approx([9, 10, 10, 11, 12, 14])
    assert m.workload == {"num_requests": 3, "arrival": "poisson", "rate_rps": 2.0, "arrival_cv": 1.0}
    assert len(m.sha256) == 64


def test_genai_perf_profile_export():
    m = read_measurement(DATA / "genai_perf_profile_export.json")
    assert m.format == "genai_perf" and len(m) == 2
    t = m.table
    assert t["ttft_ms"].to_list() == pytest.approx([40.0, 20.0])           # (1.040 - 1.000) s ...
    assert t["tpot_ms"].to_list() == pytest.approx([11.0, 9.0])            # (1.062 - 1.040)/2 s; 9 ms
    assert t["output_len"].to_list() == [3, 2]                             # responses streamed
    assert t["input_len"].to_list() == [10, 5]                             # 40 and 20 chars / 4
    assert t["arrival_s"].to_list() == pytest.approx([0.0, 0.005])
    assert m.workload["arrival"] == "closed_loop" and m.workload["concurrency"] == 2
    m2 = read_measurement(DATA / "genai_perf_profile_export.json", input_len=512)
    assert m2.table["input_len"].to_list() == [512, 512]


def test_guidellm_report_both_layouts():
    m = read_measurement(DATA / "guidellm_benchmarks.json")
    assert m.format == "guidellm" and len(m) == 2                       # successful only
    t = m.table   # epoch seconds (1.7e9) carry ~2e-7 s of float resolution: abs 1e-3 ms
    assert t["ttft_ms"].to_list() == pytest.approx([25.0, 35.0], abs=1e-3)
    assert t["tpot_ms"].to_list() == pytest.approx([15.0, 12.0], abs=1e-3)   # 60 ms / 4, 12 ms / 1
    assert m.workload == {"num_requests": 2, "arrival": "closed_loop", "concurrency": 4}
    m = read_measurement(DATA / "guidellm_benchmarks.json", benchmark=1)  # v0.4 'info.timings'
    assert m.table["ttft_ms"].to_list() == pytest.approx([30.0, 40.0])
    assert m.table["tpot_ms"].to_list() == pytest.approx([20.0, 20.0])
    assert m.table["arrival_s"].to_list() == pytest.approx([0.0, 0.2])
    assert m.workload["arrival"] == "trace" and m.workload["rate_rps"] == 5.0


def test_plain_csv():
    m = read_measurement(DATA / "measured.csv")
    assert m.format == "csv" and len(m) == 3
    t = m.table
    assert t["arrival_s"].to_list() == pytest.approx([0.0, 0.5, 1.25])   # relative to the first
    assert math.isnan(t["tpot_ms"][2])                                   # one output token
    assert m.workload["arrival"] == "trace"
    assert m.quantile("itl_ms", 50) == pytest.approx(10.5)               # median of 9,10,11,12
    s, order = request_stream(m)
    assert list(order) == [0, 1, 2]
    assert list(s.prompt) == [512, 256, 1024] and list(s.arrival_s) == pytest.approx([0, 0.5, 1.25])


def test_detect_format():
    assert [detect_format(DATA / f) for f in ("vllm_serving.json", "genai_perf_profile_export.json",
                                               "guidellm_benchmarks.json", "measured.csv")] == \
        ["vllm", "genai_perf", "guidellm", "csv"]


def _broken(tmp_path, name, edit):
    doc = json.loads((DATA / name).read_text())
    edit(doc)
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("name,edit,record,field", [
    ("vllm_serving.json", lambda d: d["ttfts"].__setitem__(1, "fast"), 1, "ttfts"),
    ("vllm_serving.json", lambda d: d["itls"].__setitem__(3, [0.01, -0.5]), 3, "itls"),
    ("vllm_serving.json", lambda d: d.pop("input_lens"), None, "input_lens"),
    ("vllm_serving.json", lambda d: d["output_lens"].pop(), None, "output_lens"),
    ("genai_perf_profile_export.json",
     lambda d: d["experiments"][0]["requests"][1].__setitem__("response_timestamps", []), 1,
     "response_timestamps"),
    ("genai_perf_profile_export.json",
     lambda d: d["experiments"][0]["requests"][0].pop("timestamp"), 0, "timestamp"),
    ("guidellm_benchmarks.json",
     lambda d: d["benchmarks"][0]["requests"]["successful"][1].__setitem__("output_tokens", 2.5), 1,
     "output_tokens"),
    ("guidellm_benchmarks.json",
     lambda d: d["benchmarks"][0]["requests"]["successful"][0].pop("prompt_tokens"), 0, "prompt_tokens"),
])
def test_malformed_json_names_file_record_field(tmp_path, name, edit, record, field):
    p = _broken(tmp_path, name, edit)
    with pytest.raises(MeasurementError) as e:
        read_measurement(p)
    msg = str(e.value)
    assert str(p) in msg and f"field '{field}'" in msg
    if record is not None:
        assert f"record {record}:" in msg


def test_malformed_csv_and_json(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text((DATA / "measured.csv").read_text().replace("20.0,9.0", "twenty,9.0"))
    with pytest.raises(MeasurementError, match=r"bad\.csv: record 3 \(line\): field 'ttft_ms'"):
        read_measurement(p)
    q = tmp_path / "cut.json"
    q.write_text((DATA / "vllm_serving.json").read_text()[:100])
    with pytest.raises(MeasurementError, match=r"cut\.json: field '\(file\)'"):
        read_measurement(q, fmt="vllm")
    r = tmp_path / "nocol.csv"
    r.write_text("request_id,input_len,output_len,ttft_ms\n0,1,2,3\n")
    with pytest.raises(MeasurementError, match="field 'tpot_ms'"):
        read_measurement(r)
