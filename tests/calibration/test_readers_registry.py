"""Measurement readers are registered by name (engine/calibration/readers/): the registry lists
the four formats in detection order, detects each from its content as before, and a reader added
with ``@register`` is found by name and by content."""

import json

import pytest

from engine.calibration import measurements
from engine.calibration.readers import FORMATS, READERS, detect_format, register
from engine.calibration.readers.base import Measurement, MeasurementError, _table


def test_formats_in_registration_order():
    assert FORMATS == ("vllm", "genai_perf", "guidellm", "csv") == measurements.FORMATS
    assert READERS["vllm"].read is measurements.read_vllm


@pytest.mark.parametrize("doc, fmt", [({"ttfts": []}, "vllm"), ({"input_lens": []}, "vllm"),
                                      ({"experiments": []}, "genai_perf"), ({"benchmarks": []}, "guidellm")])
def test_detect_from_content(tmp_path, doc, fmt):
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    assert detect_format(p) == fmt


def test_csv_by_suffix_and_unknown_json_names_every_format(tmp_path):
    assert detect_format(tmp_path / "m.CSV") == "csv"
    p = tmp_path / "x.json"
    p.write_text("{}")
    with pytest.raises(MeasurementError, match="a vLLM --save-result JSON \\(ttfts\\), a genai-perf "
                       "profile_export.json \\(experiments\\), a GuideLLM report \\(benchmarks\\) or a CSV"):
        detect_format(p)


def test_a_registered_reader_is_picked_by_name_and_content(tmp_path, monkeypatch):
    monkeypatch.setattr("engine.calibration.readers.base.READERS", dict(READERS))
    from engine.calibration.readers import base

    @register("toy", detect=lambda doc: "toy" in doc, describe="a toy file")
    def read_toy(path, scale: float = 1.0):
        return Measurement(_table([(0, 10, 5, 0.0, 50.0 * scale, 5.0, 70.0)]), {"arrival": "batch"}, None,
                           str(path), "toy", "")

    assert "toy" in base.READERS and "toy" not in READERS
    p = tmp_path / "t.json"
    p.write_text('{"toy": 1}')
    monkeypatch.setattr(measurements, "READERS", base.READERS)
    assert base.detect_format(p) == "toy"
    m = measurements.read_measurement(p, "toy", scale=2.0)
    assert m.table["ttft_ms"].to_list() == [100.0]
    with pytest.raises(MeasurementError, match="no input_len for toy data"):
        measurements.read_measurement(p, "toy", input_len=3)
