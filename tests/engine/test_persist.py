"""engine.persist: the cross-process JSON cache (unit conversions, attention-line fits) returns
exactly what the computation returned, and never stands in for a failure."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.persist import JsonCache

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMLLM_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SIMLLM_PERSIST", raising=False)
    return tmp_path


def test_round_trip_is_exact(cache_dir, tmp_path):
    src = tmp_path / "defs.py"
    src.write_text("x = 1\n")
    # floats that a decimal rendering with fewer digits would change: repr round-trips exactly
    vals = [0.1 + 0.2, 1 / 3, 2.0 ** -1074, 1e308 * 1.7, float("inf")]
    c = JsonCache("t", packages=("numpy",), sources=(src,))
    for i, v in enumerate(vals):
        c.put(str(i), v)
    c.save()
    d = JsonCache("t", packages=("numpy",), sources=(src,))
    assert [d.get(str(i)) for i in range(len(vals))] == vals
    assert d.get("missing") is None


def test_a_changed_source_starts_a_new_file(cache_dir, tmp_path):
    src = tmp_path / "defs.py"
    src.write_text("x = 1\n")
    c = JsonCache("t", sources=(src,))
    c.put("k", 1.5)
    c.save()
    src.write_text("x = 2\n")
    assert JsonCache("t", sources=(src,)).get("k") is None
    assert len(list(cache_dir.glob("t-*.json"))) == 1      # the new stamp writes nothing until put


def test_off_reads_and_writes_nothing(cache_dir, monkeypatch):
    monkeypatch.setenv("SIMLLM_PERSIST", "0")
    c = JsonCache("t")
    c.put("k", 1.0)
    c.save()
    assert c.get("k") is None and not list(cache_dir.iterdir())


def test_unreadable_file_costs_only_the_computation(cache_dir):
    c = JsonCache("t")
    c.put("k", 2.0)
    c.save()
    path = next(cache_dir.glob("t-*.json"))
    path.write_text("{not json")
    assert JsonCache("t").get("k") is None


def test_merge_keeps_entries_of_other_processes(cache_dir):
    a, b = JsonCache("t"), JsonCache("t")
    a._load(), b._load()
    a.put("a", 1.0)
    b.put("b", 2.0)
    a.save()
    b.save()
    path = next(cache_dir.glob("t-*.json"))
    assert json.loads(path.read_text()) == {"a": 1.0, "b": 2.0}


_UNITS_CHILD = """
import json, sys
import runner.units as u
vals = [u.to_si("hardware.hbm_bandwidth", "3.35 TB/s", "TB/s"),
        u.to_si("calibration.step_overhead", "222.9 us", "us"),
        u.to_si("hardware.hbm_capacity", 141, "GB"), u.from_si(2.229e-4, "us")]
print(json.dumps({"vals": vals, "pint": "pint" in sys.modules}))
"""


def _child(env_dir: Path) -> dict:
    import os

    env = dict(os.environ, SIMLLM_CACHE_DIR=str(env_dir), PYTHONPATH=str(ROOT))
    env.pop("SIMLLM_PERSIST", None)
    out = subprocess.run([sys.executable, "-c", _UNITS_CHILD], env=env, capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_units_from_the_cache_equal_pint_and_skip_it(tmp_path):
    first, second = _child(tmp_path), _child(tmp_path)
    assert first["pint"] and not second["pint"]           # the second process never imports pint
    assert first["vals"] == second["vals"]
    # pint's own answers, computed here (the values the cache must reproduce bit for bit)
    import pint  # noqa: F401

    from engine.ingest.units import registry
    q = registry().Quantity
    assert second["vals"][:3] == [float(q("3.35 TB/s").to("byte / second").magnitude),
                                  float(q("222.9 us").to("second").magnitude),
                                  float(q(141.0, "GB").to("byte").magnitude)]


def test_a_bad_unit_is_never_cached(cache_dir):
    import runner.units as u
    from engine.errors import SpecError

    for _ in range(2):      # the second time too: pint's error, not a stored value
        with pytest.raises(SpecError, match="hardware.hbm_bandwidth"):
            u.to_si("hardware.hbm_bandwidth", "3.35 TFLOPS", "TB/s")


def test_attention_fit_from_the_cache_is_the_fit(cache_dir, monkeypatch):
    from engine.analytical import kernels

    monkeypatch.setattr(kernels, "_FITS", JsonCache("attention-fits-test"))
    rng = np.random.default_rng(3)
    b = rng.uniform(1, 16, 40)
    s = rng.uniform(16, 4096, 40)
    t = 1e-5 + 2e-9 * b * s + 3e-13 * b * s * s        # exact non-negative line: NNLS recovers it
    cols = [np.ones_like(b), b * s, b * s * s]
    coef1, err1 = kernels._fit_lines(cols, t)
    assert np.allclose(coef1, [1e-5, 2e-9, 3e-13], rtol=1e-6)
    import scipy.optimize

    def boom(*a, **k):
        raise AssertionError("a cached fit must not call nnls")

    monkeypatch.setattr(scipy.optimize, "nnls", boom)
    coef2, err2 = kernels._fit_lines(cols, t)
    assert coef2.tolist() == coef1.tolist() and err2 == err1
