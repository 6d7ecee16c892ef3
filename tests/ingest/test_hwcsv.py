"""Spec-sheet CSV import: the seed's example sheet reproduces the hand-written jalapeno config,
conversions are recorded, and each bad row kind is an error naming the line and row."""

import dataclasses

import pytest
from omegaconf import OmegaConf

from engine.analytical import run
from engine.ingest.hwcsv import SheetError, read_sheet
from runner.convert import specs_from_config
from runner.schema import HardwareSchema

# The seed document's example CSV (000_*.txt, section 5.1), verbatim.
SEED_CSV = """param,value,unit,precision,source
peak_bf16_tflops,512,TFLOPS,bf16,hotchips_p24
peak_fp8_tflops,1024,TOPS,fp8,hotchips_p24
hbm_bandwidth,4096,GB/s,,hotchips_p25
hbm_capacity,192,GB,,hotchips_p25
sram_capacity,64,MB,,hotchips_p26
interconnect_bandwidth,900,GB/s,,hotchips_p27
tdp,350,W,,hotchips_p28
"""


def _sheet(text, name="x", **kw):
    return read_sheet("sheet.csv", name, text=text, **kw)


def as_hardware_node(yaml_text):
    """A generated YAML as the hardware node Hydra would compose: HardwareSchema + the file."""
    node = OmegaConf.create(yaml_text)
    node.pop("defaults")
    return OmegaConf.merge(OmegaConf.structured(HardwareSchema), node)


def test_seed_csv_equals_hand_written_jalapeno(cfg_of):
    """Same TTFT/TPOT/memory as conf/hardware/jalapeno.yaml, through the generated YAML and the
    runner's conversion, for the spec-sheet study's model and workload (tp1: links unused)."""
    sheet = _sheet(SEED_CSV, "jalapeno")
    base = ("model=llama_7b_specsheet", "workload=specsheet_512", "calibration=specsheet")
    hand = run(specs_from_config(cfg_of("hardware=jalapeno", *base))).summary
    cfg = cfg_of("hardware=jalapeno", *base)
    cfg.hardware = as_hardware_node(sheet.yaml_text())
    imported = run(specs_from_config(cfg)).summary
    for k in ("ttft_ms_p50", "tpot_ms_p50", "throughput_tok_s", "weights_gb", "kv_capacity_gb",
              "ridge_flop_per_byte", "bound"):
        assert imported[k] == hand[k], k
    # and the engine-only path (HardwareSpec straight from the sheet) gives the same
    specs = specs_from_config(cfg_of("hardware=jalapeno", *base))
    direct = run(dataclasses.replace(specs, hardware=sheet.hardware_spec())).summary
    assert direct["ttft_ms_p50"] == hand["ttft_ms_p50"] and direct["tpot_ms_p50"] == hand["tpot_ms_p50"]


def test_seed_csv_values_and_recorded_conversions():
    s = _sheet(SEED_CSV)
    assert s.si("peak_bf16") == 512e12 and s.si("peak_fp8") == 1024e12
    assert s.si("hbm_bandwidth") == 4.096e12 and s.si("hbm_capacity") == 192e9
    assert s.si("sram") == 64e6 and s.si("scaleup_bandwidth") == 900e9 and s.si("tdp") == 350
    text = "\n".join(s.assumptions)
    assert "TOPS read as TFLOPS" in text
    assert "interconnect_bandwidth: taken as per direction" in text
    y = s.yaml_text()
    assert "hbm_bandwidth: 4.096 TB/s" in y and "# hotchips_p25; sheet: 4096 GB/s" in y


def test_sparse_only_sheet_keeps_flag_and_records_conversion():
    """B200-style sheet (sparse figures only): figures kept, compute_figures_sparse, factor stated;
    the engine's dense bf16 = 4500 x 0.5 = 2250 TFLOPS."""
    s = _sheet("""param,value,unit,precision,source,dense_or_sparse
peak_compute,4500,TFLOPS,bf16,hgx page,sparse (2:4)
hbm_bandwidth,8,TB/s,,hgx page,
hbm_capacity,180,GB,,hgx page,
""")
    assert s.si("compute_figures_sparse") is True
    assert s.hardware_spec().peak_flops("bf16") == pytest.approx(2250e12)
    assert any("compute figures are sparse" in a and "x 0.5" in a for a in s.assumptions)


def test_sparse_only_precision_converted_at_import_with_stated_factor():
    """Dense bf16 given, fp8 only sparse: fp8 dense = 2000 x 0.8 (the factor the sheet states)."""
    s = _sheet("""param,value,unit,precision,source,dense_or_sparse
peak_compute,1000,TFLOPS,bf16,p1,dense
peak_compute,2000,TFLOPS,fp8,p1,sparse
sparse_to_dense_factor,0.8,,,vendor footnote,
hbm_bandwidth,3,TB/s,,p2,
hbm_capacity,96,GB,,p2,
""")
    assert s.si("compute_figures_sparse") is False
    assert s.si("peak_fp8") == pytest.approx(1600e12)
    assert any("peak_fp8: sparse 2000 TFLOPS x 0.8 = dense 1600 TFLOPS" in a for a in s.assumptions)


def test_per_stack_times_count_and_per_system_divided_and_bits():
    """819.2 GB/s per stack x 5 = 4.096 TB/s; 576 TB/s per rack / 72 = 8 TB/s is a duplicate with
    the same value; 3200 Gb/s bidirectional = 400 GB/s / 2 = 200 GB/s per direction; 80 GiB."""
    s = _sheet("""param,value,unit,precision,source,per,count,direction
peak_bf16,100,TFLOPS,,p,,,
hbm_bandwidth,819.2,GB/s,,p,stack,5,
hbm_capacity,80,GiB,,p,,,
scaleup_bandwidth,3200,Gb/s,,p,,,bidirectional
""")
    assert s.si("hbm_bandwidth") == pytest.approx(4.096e12)
    assert s.si("hbm_capacity") == 80 * 2**30
    assert s.si("scaleup_bandwidth") == pytest.approx(200e9)
    text = "\n".join(s.assumptions)
    assert "per stack x 5 stacks" in text and "bidirectional / 2" in text and "80 GiB" in text
    r = _sheet("""param,value,unit,precision,source,per,count
peak_bf16,180,PFLOPS,bf16,rack page,rack,72
hbm_bandwidth,576,TB/s,,rack page,rack,72
hbm_capacity,13.4,TB,,rack page,rack,72
""")
    assert r.si("hbm_bandwidth") == pytest.approx(8e12) and r.si("peak_bf16") == pytest.approx(2.5e15)


def test_per_stack_uses_hbm_stacks_row():
    s = _sheet("""param,value,unit,precision,source,per
peak_bf16,100,TFLOPS,,p,
hbm_stacks,8,count,,p,
hbm_bandwidth,1,TB/s,,p,stack
hbm_capacity,192,GB,,p,
""")
    assert s.si("hbm_bandwidth") == pytest.approx(8e12)


def test_duplicate_with_winner_is_kept_and_noted():
    s = _sheet("""param,value,unit,precision,source,wins,notes
peak_bf16,100,TFLOPS,,p,,
hbm_bandwidth,8,TB/s,,headline,true,UNCERTAIN: some tables list 7.7 TB/s
hbm_bandwidth,7.7,TB/s,,spec table,,
hbm_capacity,180,GB,,p,,
""")
    assert s.si("hbm_bandwidth") == 8e12
    y = s.yaml_text()
    assert "UNCERTAIN" in y and "line 4 (spec table) gives 7.7 TB/s; this row wins" in y
    assert any("UNCERTAIN" in a for a in s.assumptions)


GOOD = "peak_bf16,100,TFLOPS,,p\nhbm_capacity,80,GB,,p\n"
HEAD = "param,value,unit,precision,source\n"


@pytest.mark.parametrize("kind,row,needle", [
    ("unknown param", "hbm_bandwith,3,TB/s,,p", "unknown param 'hbm_bandwith'"),
    ("missing unit", "hbm_bandwidth,3,,,p", "missing unit for hbm_bandwidth"),
    ("unit/param mismatch", "hbm_bandwidth,3,TFLOPS,,p", "unit 'TFLOPS' is the wrong kind for hbm_bandwidth"),
    ("negative value", "hbm_bandwidth,-3,TB/s,,p", "is negative"),
    ("absurd value", "hbm_bandwidth,3000,TB/s,,p", "absurd for one chip"),
])
def test_bad_row_names_line_and_row(kind, row, needle):
    text = HEAD + GOOD + row + "\n"
    with pytest.raises(SheetError) as e:
        _sheet(text)
    msg = str(e.value)
    assert needle in msg, msg
    assert e.value.line == 4 and "sheet.csv:4:" in msg and row in msg


def test_duplicate_with_two_values_is_an_error_naming_both_lines():
    text = HEAD + GOOD + "hbm_bandwidth,8,TB/s,,headline\nhbm_bandwidth,7.7,TB/s,,table\n"
    with pytest.raises(SheetError) as e:
        _sheet(text)
    assert e.value.line == 5 and "line 4" in str(e.value) and "wins=true" in str(e.value)
    # the same figure twice (two sources agreeing) is fine
    ok = _sheet(HEAD + GOOD + "hbm_bandwidth,8,TB/s,,a\nhbm_bandwidth,8000,GB/s,,b\n")
    assert ok.si("hbm_bandwidth") == 8e12


def test_missing_required_field_is_named():
    with pytest.raises(SheetError, match="no hbm_bandwidth"):
        _sheet(HEAD + GOOD)


def test_hwcsv_command_writes_yaml_and_reports_errors(tmp_path, capsys):
    from runner.tools.import_cli import main as import_main

    good = tmp_path / "jal.csv"
    good.write_text(SEED_CSV)
    out = tmp_path / "jal.yaml"
    assert import_main(["hwcsv", str(good), "--name", "jal", "--out", str(out)]) == 0
    assert "peak_bf16: 512 TFLOPS" in out.read_text()
    bad = tmp_path / "bad.csv"
    bad.write_text(SEED_CSV + "hbm_bandwidth,4096,TFLOPS,,hotchips_p25\n")
    assert import_main(["hwcsv", str(bad), "--name", "jal", "--out", str(tmp_path / "b.yaml")]) == 2
    err = capsys.readouterr().err
    assert "bad.csv:9:" in err and "wrong kind" in err


def test_runtime_total_becomes_a_visible_fraction_and_moves_the_kv_room():
    """An ``hbm_visible`` row (the runtime's total) is kept as hbm_visible_fraction = total /
    hbm_capacity: 79.15 GiB = 79.15 x 2^30 = 84,986,665,370 bytes over 80e9 = 1.062333, and the
    spec's visible memory is that total again (the memory rules' input, tests/des/test_kv_rules.py)."""
    base = SEED_CSV.replace("hbm_capacity,192,GB,,hotchips_p25", "hbm_capacity,80,GB,,sheet")
    sheet = _sheet(base + "hbm_visible,79.15,GiB,,nvidia-smi\n")
    assert sheet.si("hbm_visible_fraction") == pytest.approx(79.15 * 2 ** 30 / 80e9, rel=1e-12)
    text = sheet.yaml_text()
    assert "hbm_visible_fraction: 1.062333" in text
    assert "the runtime's total 84.98666537 GB / hbm_capacity 80 GB = 1.062333" in text
    plain = _sheet(base).hardware_spec()
    assert plain.hbm_visible_fraction == 1.0 and plain.visible_bytes == 80e9
    vis = sheet.hardware_spec()
    assert vis.visible_bytes == pytest.approx(79.15 * 2 ** 30, rel=1e-12)
    # a runtime total that is not the same memory (a per-node figure) names the line and the ratio
    with pytest.raises(SheetError, match=r"sheet.csv:9: hbm_visible .* expected 0.5-1.2"):
        _sheet(base + "hbm_visible,640,GiB,,nvidia-smi\n")
