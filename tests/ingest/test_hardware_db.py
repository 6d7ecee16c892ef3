"""The hardware database: conf/hardware/*.yaml are generated from conf/hardware/sheets/*.csv.

Regenerating every sheet must give the committed YAML byte for byte (edit the sheet, then run
``simllm-import sheets``), and the kept options carry the numbers the other tests rely on.
"""

import pytest

from runner.convert import specs_from_config
from runner.tools.import_cli import SHEETS, hwcsv_text
from tests.conftest import CONF

SHEET_NAMES = sorted(p.stem for p in SHEETS.glob("*.csv"))


def test_database_has_the_issue_devices():
    assert set(SHEET_NAMES) >= {"a100_sxm_80gb", "h100_sxm", "h200", "b200", "gb200_nvl72", "mi300x",
                                "mi325x", "gaudi3", "tpu_v5e", "tpu_v5p", "tpu_v6e", "jalapeno"}


@pytest.mark.parametrize("name", SHEET_NAMES)
def test_committed_yaml_equals_regenerated(name):
    committed = (CONF / "hardware" / f"{name}.yaml").read_text()
    assert hwcsv_text(SHEETS / f"{name}.csv", name) == committed, \
        f"conf/hardware/{name}.yaml is stale: run `simllm-import sheets`"


# Figures straight from ../shared/data/hardware/hardware_specs.csv (dense bf16 TFLOPS, HBM GB,
# HBM TB/s, scale-up GB/s per direction = bidirectional / 2), checked after the runner's conversion.
EXPECTED = {
    "a100_sxm_80gb": (312, 80, 2.039, 300),
    "h100_sxm": (989.4, 80, 3.35, 450),
    "h200": (989.4, 141, 4.8, 450),
    "b200": (2250, 180, 8.0, 900),          # sparse 4500 x 0.5
    "gb200_nvl72": (2500, 13400 / 72, 8.0, 900),   # rack 360 PF sparse / 72 x 0.5; 13.4 TB / 72
    "mi300x": (1307.4, 192, 5.3, 448),
    "mi325x": (1307.4, 256, 6.0, 448),
    "gaudi3": (1835, 128, 3.67, 525),
    "tpu_v5e": (197, 16, 0.819, 200),
    "tpu_v5p": (459, 95, 2.765, 600),
    "tpu_v6e": (918, 32, 1.638, 400),
    "jalapeno": (512, 192, 4.096, 900),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_generated_numbers(cfg_of, name):
    tflops, gb, tbs, link = EXPECTED[name]
    hw = specs_from_config(cfg_of(f"hardware={name}")).hardware
    assert hw.peak_flops("bf16") == pytest.approx(tflops * 1e12)
    assert hw.hbm_capacity_bytes == pytest.approx(gb * 1e9)
    assert hw.hbm_bandwidth_bytes_s == pytest.approx(tbs * 1e12)
    assert hw.scaleup_bandwidth_bytes_s == pytest.approx(link * 1e9)


def test_uncertain_rows_say_so():
    """Rows marked UNCERTAIN / moderate confidence in the reference CSV keep the word in the
    comment and in the assumptions list."""
    for name, field in (("b200", "hbm_bandwidth"), ("gb200_nvl72", "tdp"), ("mi300x", "scaleup_bandwidth"),
                        ("tpu_v6e", "scaleup_bandwidth"), ("tpu_v5p", "peak_fp8")):
        text = (CONF / "hardware" / f"{name}.yaml").read_text()
        line = next(x for x in text.splitlines() if x.startswith(f"{field}:"))
        assert "UNCERTAIN" in line or "moderate confidence" in line, (name, line)
        assert any(field in a and ("UNCERTAIN" in a) for a in text.split("assumptions:")[1].splitlines())


# device in ../shared/data/hardware/hardware_specs.csv -> the option built from it
RAW_DEVICES = {
    "NVIDIA A100 SXM4 80GB": "a100_sxm_80gb", "NVIDIA H100 SXM5 80GB": "h100_sxm",
    "NVIDIA H200 SXM 141GB": "h200", "NVIDIA B200 (HGX B200, 1000 W)": "b200",
    "NVIDIA GB200 NVL72 (per B200 GPU, 1200 W)": "gb200_nvl72", "AMD Instinct MI300X": "mi300x",
    "AMD Instinct MI325X": "mi325x", "Google TPU v5e": "tpu_v5e", "Google TPU v5p": "tpu_v5p",
    "Google TPU v6e (Trillium)": "tpu_v6e", "Intel Gaudi 3 (HL-325L OAM)": "gaudi3",
}


@pytest.mark.parametrize("device", sorted(RAW_DEVICES))
def test_shared_table_imports_directly_and_agrees_with_the_sheet(cfg_of, device):
    """Importing the collected table itself (--device) gives the same engine figures as the
    project's curated sheet: dense peaks per precision, HBM, SRAM, scale-up link, TDP. (GB200's
    capacity differs by rounding: the table's 186 GB vs the rack's 13.4 TB / 72 = 186.1 GB.)"""
    from engine.ingest.hwcsv import read_sheet
    from tests.conftest import require_shared

    raw = read_sheet(require_shared("hardware", "hardware_specs.csv"), "raw", device=device).hardware_spec()
    ours = specs_from_config(cfg_of(f"hardware={RAW_DEVICES[device]}")).hardware
    for p in ("bf16", "fp8", "int8", "fp4"):
        if getattr(ours, f"peak_flops_{p}") is not None:
            assert raw.peak_flops(p) == pytest.approx(ours.peak_flops(p)), p
    assert raw.hbm_capacity_bytes == pytest.approx(ours.hbm_capacity_bytes, rel=1e-3)
    assert raw.hbm_bandwidth_bytes_s == ours.hbm_bandwidth_bytes_s
    assert raw.sram_bytes == ours.sram_bytes and raw.tdp_w == ours.tdp_w
    assert raw.scaleup_bandwidth_bytes_s == ours.scaleup_bandwidth_bytes_s


def test_table_of_several_devices_needs_one_named():
    from engine.ingest.hwcsv import SheetError, read_sheet
    from tests.conftest import require_shared

    table = require_shared("hardware", "hardware_specs.csv")
    with pytest.raises(SheetError, match="holds 11 devices"):
        read_sheet(table, "x")
    with pytest.raises(SheetError, match="no rows for device 'H100'"):
        read_sheet(table, "x", device="H100")
