"""HBM bandwidth from interface physics, checked against the published bandwidth of real parts.

Each part: stacks and bus width from the vendor (../shared/data/hardware/hardware_specs.csv
notes), the per-pin data rate from the source named in the row; the published total from the
vendor datasheet. The tool must land within 3 %.
"""

import csv
import io

import pytest

from engine.ingest import dram
from engine.ingest.hwcsv import read_sheet
from runner.tools.import_cli import main as import_main

# part, stacks, bits per stack, Gb/s per pin, per-pin rate source, published TB/s (vendor)
PARTS = [
    ("A100 SXM4 80GB (HBM2e)", 5, 1024, 3.2,
     "AnandTech, 'NVIDIA Announces A100 80GB' (2020-11): memory clock 3.2 Gbps HBM2e, 5120-bit", 2.039),
    ("H100 SXM5 (HBM3)", 5, 1024, 5.2,
     "NVIDIA H100 final spec table as reported by prohardver.hu: effective memory clock 5.2 GHz, 5120-bit", 3.35),
    ("H200 SXM (HBM3e)", 6, 1024, 6.2,
     "geektopia.es H200 announcement (2023-11-13): six 1024-bit controllers, HBM3e at 6.2 Gb/s", 4.8),
]


@pytest.mark.parametrize("part,stacks,bits,rate,source,published", PARTS, ids=[p[0] for p in PARTS])
def test_real_parts_within_3_percent(part, stacks, bits, rate, source, published):
    d = dram.interface_bandwidth(stacks, bits, rate)
    assert d.tb_s == pytest.approx(published, rel=0.03), (part, d.tb_s)


def test_measured_errors():
    """The errors themselves (hand: 5*1024*3.2/8 = 2048 GB/s; 5*1024*5.2/8 = 3328; 6*1024*6.2/8 = 4761.6)."""
    got = [dram.interface_bandwidth(s, b, r).bytes_s for _, s, b, r, _, _ in PARTS]
    assert got == [2048e9, 3328e9, pytest.approx(4761.6e9)]
    errs = [g / (p * 1e12) - 1 for g, (*_, p) in zip(got, PARTS)]
    assert errs == [pytest.approx(0.00441, abs=1e-4), pytest.approx(-0.00657, abs=1e-4),
                    pytest.approx(-0.008, abs=1e-4)]


def test_mi300x_from_per_stack_figure():
    """MI300X: 8 HBM3 stacks at 662.4 GB/s each (emergentmind MI300X review; AMD: 5.3 TB/s)
    -> implied 5.175 Gb/s per pin over 1024 bits, and 8 stacks at that rate give 5.299 TB/s."""
    rate = 662.4e9 * 8 / (1 * 1024) / 1e9   # Gb/s per pin: bytes/s x 8 / (stacks x width)
    assert rate == pytest.approx(5.175)
    assert dram.interface_bandwidth(8, 1024, rate).tb_s == pytest.approx(5.3, rel=0.03)


def test_generation_presets():
    """Nominal: HBM3 8 stacks = 8 x 819.2 GB/s = 6.5536 TB/s; HBM4 2048-bit x 8 Gb/s = 2.048 TB/s/stack."""
    assert dram.generation_bandwidth("hbm3", 8).bytes_s == pytest.approx(6.5536e12)
    assert dram.generation_bandwidth("HBM4", 1).bytes_s == pytest.approx(2.048e12)
    assert dram.generation_bandwidth("hbm3e", 6, 6.2).bytes_s == pytest.approx(4.7616e12)
    with pytest.raises(ValueError, match="generation"):
        dram.generation_bandwidth("gddr7", 1)


def test_area_form_hand_computed():
    """10 mm^2 at 40 um square pitch = 1e7 um^2 / 1600 um^2 = 6250 bumps; half carry data =
    3125 pins x 4 Gb/s / 8 = 1562.5 GB/s. Hex grid packs 2/sqrt(3) = 1.1547x more bumps."""
    sq = dram.area_bandwidth(10, 40, 0.5, 4.0)
    assert sq.bytes_s == pytest.approx(1562.5e9)
    hexa = dram.area_bandwidth(10, 40, 0.5, 4.0, grid="hex")
    assert hexa.bytes_s / sq.bytes_s == pytest.approx(2 / 3 ** 0.5)
    # an HBM3-like stack: 1024 data pins of ~2048 bumps at 55 um pitch need 2048 x 55^2 um^2 = 6.2 mm^2
    hbm3_like = dram.area_bandwidth(2048 * 55 ** 2 / 1e6, 55, 0.5, 6.4)
    assert hbm3_like.bytes_s == pytest.approx(819.2e9)
    with pytest.raises(ValueError, match="fraction"):
        dram.area_bandwidth(10, 40, 1.5, 4.0)


def test_sheet_row_imports():
    """The derived bandwidth goes into a spec sheet as a row that carries its derivation."""
    row = dram.interface_bandwidth(5, 1024, 5.2).sheet_row("prohardver.hu, 5.2 GHz effective")
    cells = next(csv.reader(io.StringIO(row)))
    assert cells[:3] == ["hbm_bandwidth", "3.328", "TB/s"] and "5 stacks x 1024 bit" in cells[4]
    sheet = read_sheet("x.csv", "x", text="param,value,unit,precision,source\n"
                       "peak_bf16,989.4,TFLOPS,bf16,datasheet\nhbm_capacity,80,GB,,datasheet\n" + row + "\n")
    assert sheet.si("hbm_bandwidth") == pytest.approx(3.328e12)


def test_hbm_command(capsys):
    assert import_main(["hbm", "--stacks", "5", "--bus-width", "1024", "--gbps-per-pin", "5.2"]) == 0
    assert "hbm_bandwidth = 3.328 TB/s" in capsys.readouterr().out
    assert import_main(["hbm", "--stacks", "5"]) == 2
    assert "--bus-width" in capsys.readouterr().err
