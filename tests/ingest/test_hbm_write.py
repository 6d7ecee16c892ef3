"""simllm-import hbm --write-sheet: the derived bandwidth replaces the sheet's hbm_bandwidth row and
the hardware YAML is regenerated from the sheet ."""

from pathlib import Path

import pytest
import yaml

from runner.tools.import_cli import ROOT, hwcsv_text
from runner.tools.import_cli import main as import_main

SHEET = ROOT / "conf" / "hardware" / "sheets" / "jalapeno.csv"


def test_write_sheet_replaces_row_and_regenerates_yaml(tmp_path):
    sheet = tmp_path / "chip.csv"
    sheet.write_text(SHEET.read_text())
    out = tmp_path / "chip.yaml"
    assert import_main(["hbm", "--generation", "hbm3e", "--stacks", "8", "--write-sheet", str(sheet),
                        "--name", "chip", "--out", str(out)]) == 0
    old, new = SHEET.read_text().splitlines(), sheet.read_text().splitlines()
    # every other row is byte for byte the same; exactly one hbm_bandwidth row, the derived one
    assert [l for l in old if not l.startswith("hbm_bandwidth,")] == \
           [l for l in new if not l.startswith("hbm_bandwidth,")]
    rows = [l for l in new if l.startswith("hbm_bandwidth,")]
    assert len(rows) == 1 and rows[0].startswith("hbm_bandwidth,9.8304,TB/s,,")
    # the YAML is what `simllm-import hwcsv` makes of the new sheet, and carries the derived
    # figure: hand: 8 stacks x 1024 bit x 9.6 Gb/s / 8 = 9.8304e12 B/s
    assert out.read_text() == hwcsv_text(sheet, "chip")
    doc = yaml.safe_load(out.read_text())
    assert doc["hbm_bandwidth"] == "9.8304 TB/s"
    assert "derived: HBM3E" in out.read_text()


def test_write_sheet_by_name_and_errors(tmp_path, capsys):
    assert import_main(["hbm", "--generation", "hbm3", "--stacks", "4", "--write-sheet", "no_such_chip"]) == 2
    assert "no spec sheet at conf/hardware/sheets/no_such_chip.csv" in capsys.readouterr().err
    # a sheet the engine rejects (no bf16 peak) is left as it was and no YAML is written
    bad = tmp_path / "bad.csv"
    bad.write_text("param,value,unit,precision,source\nhbm_capacity,80,GB,,x\n")
    before = bad.read_text()
    assert import_main(["hbm", "--generation", "hbm3", "--stacks", "4", "--write-sheet", str(bad),
                        "--out", str(tmp_path / "bad.yaml")]) == 2
    assert bad.read_text() == before and not (tmp_path / "bad.yaml").exists()
