"""Jobs priced by the transfer backend get intervals widened by the transfer curves' leave-one-chip-out
(LOCO) error; jobs on measured chips are unchanged (compose API, run_job, no tracking).

gh200 names no kernel tables (conf/hardware/gh200.yaml ``kernel_tables: ""``), so the default
calibration's ``auto`` backend resolves to transfer; h100_sxm has vLLM tables -> measured.

Test tables, by hand:

* error model: ten residuals 0.00 .. 0.09 in every regime of the default job's metrics, backend
  measured and transfer (as in test_intervals.py): c = median = 0.045, 80 %: k = ceil(11 x 0.8) = 9
  -> q_regime = 0.045; unwidened factors exp(-0.09) and exp(0) = 1.
* LOCO table: one held-out chip, vLLM bf16 residuals +-0.01, +-0.02 ... +-0.10 (signs alternating),
  scores |r| = 0.01 .. 0.10; 80 %: k = 9 -> q_loco = 0.09.
* widened: q_total = sqrt(0.045^2 + 0.09^2) = sqrt(0.010125) = 0.10062306; factors
  exp(-(0.045 + 0.10062306)) = exp(-0.14562306) = 0.8644835 and exp(-(0.045 - 0.10062306)) =
  exp(0.05562306) = 1.0571991, where unwidened they are exp(-0.09) = 0.9139312 and 1.
"""

import json
import math

import numpy as np
import pytest

from engine.errors import SpecError
from engine.uncertainty import ErrorModel, fit, regime_of
from engine.uncertainty.loco import GROUP, SHIPPED, build, save
from runner.job import run_job

METRICS = ("ttft", "tpot", "e2e", "throughput")
KEYS = ("ttft_ms_p50", "tpot_ms_p50", "e2e_ms_p50", "throughput_tok_s")


@pytest.fixture
def table(tmp_path):
    regs = [{"metric": m, "stat": s, "load": "static", "framework": "vllm_v1", "precision": "16-bit",
             "backend": b} for b in ("measured", "transfer") for m in METRICS for s in ("center", "tail")
            for _ in range(10)]
    res = np.tile(np.arange(10) / 100, len(METRICS) * 2 * 2)
    return str(fit(regs, res).save(tmp_path / "t.json"))


@pytest.fixture
def loco(tmp_path):
    r = np.arange(1, 11) / 100 * np.array([1, -1] * 5)
    return str(save(build({"vllm": {"x": {"bf16": r}}}, {"command": "test"}), tmp_path / "loco.json"))


def _job(cfg_of, tmp_path, *over):
    cfg = cfg_of(*over, "tracking.enabled=false", "print_table=false")
    d = tmp_path / "job"
    run_job(cfg, d, [])
    return json.loads((d / "summary.json").read_text())["summary"], (d / "assumptions.md").read_text()


def test_spec_only_chip_is_widened_by_hand(cfg_of, tmp_path, table, loco):
    """gh200 (transfer): every interval is exp(-(c + q_total)) .. exp(-(c - q_total)) with q_total =
    sqrt(0.045^2 + 0.09^2) (module docstring), strictly wider than the unwidened exp(-0.09) .. 1."""
    s, notes = _job(cfg_of, tmp_path, "hardware=gh200", f"uncertainty.table={table}", f"uncertainty.loco_table={loco}")
    for k in KEYS:
        assert s[f"{k}_lo"] == pytest.approx(s[k] * 0.8644835, rel=1e-7)
        assert s[f"{k}_hi"] == pytest.approx(s[k] * 1.0571991, rel=1e-7)
        assert s[f"{k}_lo"] < s[k] * 0.9139312 and s[f"{k}_hi"] > s[k]
    line = next(x for x in notes.splitlines() if "interval ttft_ms_p50" in x)
    assert "widened by the transfer backend's leave-one-chip-out (LOCO) error from x0.914 to x1.000" in line
    assert "sqrt(0.045^2 + 0.090^2) = 0.101" in line and "over 10 vllm gemm+attention kernel points of 1 held-out" in line
    assert "x0.864 to x1.057" in line


def test_measured_chip_is_unchanged_and_reads_no_loco(cfg_of, tmp_path, table):
    """h100_sxm (measured): lo = p exp(-0.09), hi = p as without the feature; the LOCO table is not
    read at all (a missing file is no error), and no line says widened."""
    s, notes = _job(cfg_of, tmp_path, f"uncertainty.table={table}", "uncertainty.loco_table=/nonexistent/loco.json")
    for k in KEYS:
        assert s[f"{k}_lo"] == pytest.approx(s[k] * math.exp(-0.09), rel=1e-6)
        assert s[f"{k}_hi"] == pytest.approx(s[k], rel=1e-6)
    assert "widened" not in notes and "LOCO" not in notes


def test_spec_only_chip_with_the_shipped_tables(cfg_of, tmp_path):
    """gh200 with the shipped error model and LOCO table: the interval equals the regime's own
    (ErrorModel.interval of its regime) widened by exactly sqrt(q_regime^2 + q_loco^2), q_loco read
    straight from transfer_loco.json (vllm pool at level 0.8). A key whose regimes are all too thin
    for 80 % has no interval, widened or not."""
    s, notes = _job(cfg_of, tmp_path, "hardware=gh200")
    d = json.loads(SHIPPED.read_text())
    q_loco = d["frameworks"]["vllm"][GROUP]["q"][d["levels"].index(0.8)]
    em = ErrorModel.load()
    widened = 0
    for k in KEYS:
        iv = em.interval(regime_of(k, "static", "vllm_v1", "16-bit", "transfer"), 0.8)
        if iv is None:
            assert f"{k}_lo" not in s
            continue
        widened += 1
        qt = math.sqrt(iv.q ** 2 + q_loco ** 2)
        assert s[f"{k}_lo"] == pytest.approx(s[k] * math.exp(-(iv.center + qt)), rel=1e-9)
        assert s[f"{k}_hi"] == pytest.approx(s[k] * math.exp(-(iv.center - qt)), rel=1e-9)
        assert s[f"{k}_hi"] - s[f"{k}_lo"] > s[k] * (iv.hi_factor - iv.lo_factor)
    assert widened >= 2
    assert f"{d['frameworks']['vllm'][GROUP]['n']:,} vllm gemm+attention kernel points of 6 held-out chips" in notes


@pytest.mark.parametrize("over, match", [
    ("uncertainty.loco_table=/nonexistent/loco.json", "does not exist"),
    ("uncertainty.level=0.9995", "no quantile|a quantile at level 0.9995"),
])
def test_bad_loco_table_names_the_key(cfg_of, tmp_path, table, over, match):
    """A transfer job with a missing LOCO table, or at a level above the stored 0.999, fails naming
    uncertainty.loco_table (the regime table must allow the level: the error model's own check
    comes first only where it has an interval)."""
    with pytest.raises(SpecError, match="uncertainty.loco_table") as e:
        _job(cfg_of, tmp_path, "hardware=gh200", f"uncertainty.table={table}", over)
    assert e.value.field == "uncertainty.loco_table"


def test_off_reads_nothing(cfg_of, tmp_path):
    """uncertainty.enabled=false on a transfer chip: no interval, no LOCO read (missing file ok)."""
    s, _ = _job(cfg_of, tmp_path, "hardware=gh200", "uncertainty.enabled=false",
                "uncertainty.loco_table=/nonexistent/loco.json")
    assert not any(k.endswith(("_lo", "_hi")) for k in s)


def test_regenerated_table_matches_the_shipped_one(tmp_path):
    """simllm-kernels --loco's function, vLLM only (about 3-5 CPU-s of refits): the pooled quantiles
    equal the shipped table's (the transfer fits converge to ~2e-6 in log), its provenance is
    relative to the repository."""
    from runner.tools.kernels import OUT, loco as write_loco

    path, t = write_loco(OUT / "tables.npz", tmp_path / "l.json", frameworks=("vllm",))
    shipped = json.loads(SHIPPED.read_text())["frameworks"]["vllm"][GROUP]
    g = json.loads(path.read_text())["frameworks"]["vllm"][GROUP]
    assert g["n"] == shipped["n"] and g["chips"] == shipped["chips"]
    assert np.allclose([x for x in g["q"] if x is not None], [x for x in shipped["q"] if x is not None], atol=1e-4)
    prov = t["provenance"]
    assert prov["tables"]["path"] == "engine/cost/data/tables.npz" and prov["chips_held_out"]["vllm"]
    assert prov["command"] == "simllm-kernels --loco" and not str(path).startswith(str(OUT))


def test_plan_confidence_uses_the_widened_factor(monkeypatch, table, loco):
    """simllm-plan's confidence search slows every step by the TPOT interval's upper factor: on
    gh200 (transfer) that is the widened exp(-(0.045 - 0.10062306)) = 1.0571991 (module docstring),
    where the unwidened factor would be 1 (clipped to >= 1). The probe and search are stubbed: only the
    factor handed to engine.plan.confidence.slowed is checked."""
    from types import SimpleNamespace

    import engine.plan.confidence as conf
    import engine.plan.probe as probe
    import engine.plan.search as search
    from runner.tools.plan import confident_search
    from tests.conftest import compose_specs

    seen = {}
    monkeypatch.setattr(conf, "slowed", lambda specs, f: seen.setdefault("f", f) and specs)
    monkeypatch.setattr(probe, "Probe", lambda *a, **k: None)
    monkeypatch.setattr(search, "find_max_rate",
                        lambda *a, **k: SimpleNamespace(rate=0.0, status="stub", runs=0))
    plan = SimpleNamespace(confidence=0.8, slo=None, rule=None, target_rps=0,
                           search=SimpleNamespace(precision=0.1, step=2.0, min_rate=0.1, max_rate=10.0))
    out = confident_search(compose_specs("hardware=gh200"), plan, 1.0,
                           {"uncertainty": {"table": table, "loco_table": loco}}, None)
    assert seen["f"] == pytest.approx(1.0571991, rel=1e-7) and out["factor"] == seen["f"]
