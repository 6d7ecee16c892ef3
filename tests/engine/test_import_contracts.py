"""The import arrow of DESIGN.md, as import-linter contracts (``[tool.importlinter]`` in
pyproject.toml; ``lint-imports`` from the project root runs the same check):

- ``engine-pure``: no engine module imports ``runner``, hydra, omegaconf or mlflow;
- ``engine-layers``: engine.calibration | engine.plan over engine.des | engine.ingest over
  engine.analytical over engine.cost over engine.result over engine.spec over engine.errors (a
  layer imports only the ones below it; nothing in the engine imports engine.calibration back);
- ``engine-acyclic``: no package cycle among the engine's sub-packages, nor inside any of them
  (engine.des's schedulers/, kv/, features/, workload/ ... included).

import-linter (grimp) reads every ``import`` statement, lazy ones inside functions included, so a
lazy import cannot hide a cycle; ``test_a_breach_fails`` shows each contract failing on one.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"


def _lint(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``lint-imports`` on the packages under ``cwd`` (first on the path), its pyproject.toml."""
    env = dict(os.environ, PYTHONPATH=str(cwd))
    return subprocess.run([str(LINT), "--no-cache", "--no-logo", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_are_kept():
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


#: (contract id, files written into a copy of the tree, a line the report must contain)
BREACHES = {
    "lazy calibration import in des": (
        "engine-layers",
        {"engine/des/_probe.py": "def f():\n    from engine.calibration.fit import fit\n"},
        "engine.des._probe -> engine.calibration.fit"),
    "hydra in the engine": (
        "engine-pure",
        {"engine/cost/_probe.py": "def f():\n    import hydra\n"},
        "engine.cost._probe -> hydra"),
    "cycle between two des sub-packages": (
        "engine-acyclic",
        {"engine/des/kv/_probe.py": "from engine.des.schedulers import base\n",
         "engine/des/schedulers/_probe.py": "def f():\n    from engine.des.kv import _probe\n"},
        "engine.des"),
}


@pytest.mark.parametrize("case", list(BREACHES))
def test_a_breach_fails(case, tmp_path):
    """One import added to a copy of the engine breaks the contract that forbids it."""
    contract, files, line = BREACHES[case]
    skip = shutil.ignore_patterns("__pycache__", "data", "*.pyc")
    for pkg in ("engine", "runner"):
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert _lint(tmp_path, "--contract", contract).returncode == 0   # the copy alone is clean
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    r = _lint(tmp_path, "--contract", contract)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "BROKEN" in r.stdout and line in r.stdout, r.stdout
