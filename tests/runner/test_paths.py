"""The shared data root (paths group, runner.paths) and the paths written into shipped files."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from runner import paths
from runner.calibration_yaml import calibration_yaml_text, write_calibration_yaml
from tests.conftest import ROOT


def test_default_root_is_the_folder_beside_the_checkout(cfg_of, monkeypatch):
    monkeypatch.delenv(paths.ENV, raising=False)
    cfg = cfg_of()
    assert cfg.paths.shared_data == "../shared/data"             # conf/paths/default.yaml, unresolved
    assert paths.shared_data(cfg.paths.shared_data) == (ROOT.parent / "shared" / "data").resolve()
    assert paths.shared_data() == (ROOT.parent / "shared" / "data").resolve()


def test_environment_and_override_move_the_root(cfg_of, monkeypatch, tmp_path):
    monkeypatch.setenv(paths.ENV, str(tmp_path))
    assert cfg_of().paths.shared_data == str(tmp_path)
    assert paths.shared_data() == tmp_path
    assert paths.shared_file("traces", "x.csv") == tmp_path / "traces" / "x.csv"
    assert cfg_of("paths.shared_data=/data/ref").paths.shared_data == "/data/ref"


def test_the_root_is_not_part_of_the_config_hash(cfg_of, monkeypatch):
    from runner.job import config_hash

    monkeypatch.delenv(paths.ENV, raising=False)
    assert config_hash(cfg_of()) == config_hash(cfg_of("paths.shared_data=/elsewhere"))


def test_trace_lookup_uses_the_configured_root(tmp_path):
    from runner.convert import _resolve_trace

    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "mine.csv").write_text("input,output\n1,1\n")
    wl = _resolve_trace({"trace": {"path": "mine.csv"}}, str(tmp_path))
    assert wl["trace"]["path"] == str(tmp_path / "traces" / "mine.csv")


def test_display_is_relative(monkeypatch, tmp_path):
    monkeypatch.delenv(paths.ENV, raising=False)
    # beside the checkout: ../shared/data/... (what conf/calibration/default.yaml names)
    assert paths.display(ROOT.parent / "shared" / "data" / "reference" / "measured_dev.csv") == \
        "../shared/data/reference/measured_dev.csv"
    assert paths.display((ROOT.parent / "shared" / "data").resolve() / "reference" / "m.csv") == \
        "../shared/data/reference/m.csv"                         # a linked root, given resolved
    assert paths.display(ROOT / "conf" / "calibration" / "x.yaml") == "conf/calibration/x.yaml"
    monkeypatch.setenv(paths.ENV, str(tmp_path))
    assert paths.display(tmp_path / "reference" / "m.csv") == "$SIMLLM_SHARED_DATA/reference/m.csv"


def test_calibration_writer_layout_and_overwrite(tmp_path):
    text = calibration_yaml_text("t", ["fitted to x", ""], "line one\nline two",
                                 [("compute_efficiency", "0.5000", "fitted"), ("kv_usable_fraction", 0.9, "")])
    assert text == ("# fitted to x\n#\ndefaults:\n  - calibration_schema\n"
                    "  - noise: none   # step-time jitter/jumps for engine=des (conf/calibration/noise/)\n"
                    "  - _self_\nname: t\nprovenance: >-\n  line one\n  line two\n"
                    "compute_efficiency: 0.5000   # fitted\nkv_usable_fraction: 0.9\n")
    path = tmp_path / "calibration" / "t.yaml"
    write_calibration_yaml(path, text, log=None)
    write_calibration_yaml(path, text, log=None)                 # same text: fine
    with pytest.raises(FileExistsError, match="--force"):
        write_calibration_yaml(path, text + "x: 1\n", log=None)
    write_calibration_yaml(path, "other\n", force=True, log=None)
    assert path.read_text() == "other\n"


#: An absolute path of some machine: /work/..., /home/..., /tmp/..., /Users/..., C:\...
_MACHINE_PATH = re.compile(r"(?<![\w.$/~-])(/(?:work|home|tmp|Users|root|mnt|scratch)/[\w.-]+|[A-Z]:\\\\)")


def test_no_shipped_file_carries_a_machine_path():
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "conf", "experiments", "README.md",
                            "pyproject.toml", "engine", "runner"],
                           capture_output=True, text=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout: no list of shipped files")
    hits = []
    for f in files:
        p = ROOT / f
        if p.suffix in (".yaml", ".md", ".py", ".toml", ".csv", ".jsonl") and p.is_file():
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
                if _MACHINE_PATH.search(line):
                    hits.append(f"{f}:{n}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)
