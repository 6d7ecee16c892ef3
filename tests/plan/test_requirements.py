"""plan.requirements: the staircase search against a brute-force grid, an elasticity against two
independent runs at +-5 %, bad input, and the CLI with a real (temporary) MLflow store.

Small space: Llama-3.1-8B on one H100 (the neutral ``generic`` profile: roofline prices, no
tables), the Azure conversation trace at 4 req/s, 200..400 requests per DES verdict.
"""

import math
from dataclasses import replace

import pytest
from omegaconf import OmegaConf

from engine.des.config import deployment
from engine.des.workload import build_stream
from engine.errors import SpecError
from engine.plan import bound
from engine.plan import requirements as R
from engine.plan.spec import plan_spec
from runner.convert import specs_from_config
from tests.conftest import require_shared


@pytest.fixture(autouse=True)
def _azure_trace():
    """Every test here composes workload=azure_conv, whose trace is external data: skip, naming the
    file, in a clone without ../shared."""
    require_shared("traces", "azure2023_conv.csv")


BASE = ["+plan=requirements", "engine=des", "workload=azure_conv", "model=llama_3_1_8b", "framework=generic",
        "partition.tp=1", "hardware=h100_sxm", "plan.rule.requests=200", "plan.rule.max_requests=400"]
RATE = 4.0


def _setup(cfg_of):
    cfg = cfg_of(*BASE)
    plan = plan_spec(OmegaConf.to_container(cfg.plan, resolve=True))
    specs = deployment(specs_from_config(cfg))[0]
    st = build_stream(replace(specs.workload, num_requests=plan.rule.max_requests))
    return specs, plan, bound.Lengths(st.prompt, st.output)


def test_frontier_matches_brute_force_grid(cfg_of):
    """The staircase walk (analytical pruning + DES gallop/bisection) and the DES at every grid
    point give the same least bandwidth per capacity: both read the same deterministic verdicts
    on the same grid (ratio 1.1), so with monotone verdicts the answers are the same grid index
    (precision: one grid step, 10 %). The grid's own monotonicity is checked first (the premise)."""
    specs, plan, L = _setup(cfg_of)
    x = R.list_axis("hbm_capacity", [22e9, 28e9, 40e9, 80e9])
    y = R.geometric_axis("hbm_bandwidth", 0.9e12, 1.6e12, 0.1)
    search = R.Oracle(specs, plan.slo, plan.rule, RATE, L)
    pts, least = R.frontier(search, x, y)
    grid = R.Oracle(specs, plan.slo, plan.rule, RATE, L, des_only=True)
    g_least, matrix = R.grid_frontier(grid, x, y)
    for row in matrix:                           # monotone in y: once passing, always passing
        assert row == sorted(row), matrix
    for lo, hi in zip(matrix, matrix[1:]):       # monotone in x: more capacity never fails a pass
        assert all(b or not a for a, b in zip(lo, hi)), matrix
    assert least == g_least, (least, g_least)
    assert any(v is not None for v in least) and least[0] is None      # 22 GB: no bandwidth serves it
    assert search.des_points < grid.des_points, (search.des_points, grid.des_points)
    # every reported frontier point passed at y and failed (or is the axis minimum) at the step below
    for p in pts:
        j = y.values.index(p.y)
        assert matrix[x.values.index(p.x)][j]
        assert j == 0 or not matrix[x.values.index(p.x)][j - 1]


def test_axis_minimum_matches_brute_force(cfg_of):
    """Least HBM bandwidth at the base capacity: the search's index equals the lowest passing
    point of the DES on every grid point."""
    specs, plan, L = _setup(cfg_of)
    y = R.geometric_axis("hbm_bandwidth", 0.8e12, 2.0e12, 0.1)
    r = R.minimise(R.Oracle(specs, plan.slo, plan.rule, RATE, L), y)
    g = R.Oracle(specs, plan.slo, plan.rule, RATE, L, des_only=True)
    row = [g({y.field: v}).passed for v in y.values]
    assert row == sorted(row)
    assert r.index == row.index(True)
    assert r.analytical_index <= r.index        # the estimate is optimistic: a lower bound
    assert len(r.verdicts) < len(y.values)


def test_elasticity_two_independent_runs(cfg_of):
    """d ln TPOT / d ln HBM bandwidth (analytical engine) from ``elasticities`` equals the one
    computed here from two runs built independently (HardwareSpec replaced at 0.95 and 1.05 x the
    sheet's 3.35 TB/s): ln(t(1.05) / t(0.95)) / ln(1.05 / 0.95). Physics bound: decode is
    memory-bound on one H100 for an 8B model, TPOT = overhead + bytes / bandwidth, so the
    elasticity is minus the memory share of TPOT: in [-1, 0)."""
    from engine.analytical.run import run

    specs, plan, L = _setup(cfg_of)
    rows = R.elasticities(lambda s: R.analytical_metrics(s, L, plan.slo), specs, ["hbm_bandwidth"], h=0.05)
    e = rows[0]["e_tpot_ms_p50"]
    hw = replace(specs.hardware, kernel_tables="")
    t = {f: run(replace(specs, hardware=replace(hw, hbm_bandwidth_bytes_s=3.35e12 * f))).summary["tpot_ms_p50"]
         for f in (0.95, 1.05)}
    direct = math.log(t[1.05] / t[0.95]) / math.log(1.05 / 0.95)
    assert e == pytest.approx(direct, rel=1e-9)
    assert -1.0 <= e < 0.0
    # the same check through the DES (common random numbers: one seeded stream at both points)
    d = R.elasticities(lambda s: R.des_metrics(s, RATE, 200, 0.1), specs, ["hbm_bandwidth"], h=0.05)[0]
    m = {f: R.des_metrics(replace(specs, hardware=replace(hw, hbm_bandwidth_bytes_s=3.35e12 * f)), RATE, 200, 0.1)
         for f in (0.95, 1.05)}
    assert d["e_tpot_ms_p50"] == pytest.approx(
        math.log(m[1.05]["tpot_ms_p50"] / m[0.95]["tpot_ms_p50"]) / math.log(1.05 / 0.95), rel=1e-9)
    assert d["e_tpot_ms_p50"] < 0.0


def test_optimistic_factor_and_formula():
    """f = x^e exactly: the central difference returns e; a 10 % optimistic latency is 1.1 x."""
    h, e = 0.05, -0.7
    assert R.elasticity((1 - h) ** e, (1 + h) ** e, h) == pytest.approx(e, rel=1e-12)
    assert R.optimistic_factor("hbm_bandwidth", 0.1) == pytest.approx(0.9)
    assert R.optimistic_factor("scaleup_latency", 0.1) == pytest.approx(1.1)
    a = R.geometric_axis("scaleup_latency", 1e-6, 4e-6, 0.5)
    assert a.values[0] == 4e-6 and a.values[-1] == 1e-6     # worst (longest) first


@pytest.mark.parametrize("node, field", [
    ({"rate_rps": 0, "axes": {"hbm_bandwidth": {"lo": "1 TB/s", "hi": "2 TB/s"}}}, "plan.requirements.rate_rps"),
    ({"rate_rps": 1, "axes": {"hbm_bandwith": {"lo": "1 TB/s", "hi": "2 TB/s"}}}, "plan.requirements.axes"),
    ({"rate_rps": 1, "axes": {"hbm_bandwidth": {"lo": "1 TFLOPS", "hi": "2 TB/s"}}}, "plan.requirements.axes.hbm_bandwidth.lo"),
    ({"rate_rps": 1, "axes": {"hbm_bandwidth": {"lo": "3 TB/s", "hi": "2 TB/s"}}}, "plan.requirements.axes.hbm_bandwidth"),
    ({"rate_rps": 1, "axes": {"hbm_bandwidth": {"lo": "1 TB/s"}}}, "plan.requirements.axes.hbm_bandwidth"),
    ({"rate_rps": 1, "axes": {"hbm_bandwidth": {"values": ["1 TB/s"]}}, "frontier": ["hbm_bandwidth", "x"]},
     "plan.requirements.frontier"),
    ({"rate_rps": 1, "axes": {"hbm_bandwidth": {"values": ["1 TB/s"]}}, "elasticity": {"step": 2}},
     "plan.requirements.elasticity.step"),
])
def test_bad_input_names_the_field(node, field):
    from runner.tools.requirements import parse

    with pytest.raises(SpecError) as e:
        parse(node)
    assert e.value.field == field


def test_cli_mlflow_parent_and_children(mlflow_uri, tmp_path):
    """simllm-plan with plan.requirements end to end: report files, one FINISHED parent run, one
    FINISHED child per DES-verified spec point (as many as the report's verified list)."""
    import json

    from runner import tracking
    from runner.tools.plan import main

    out = tmp_path / "req"
    rc = main(BASE + ["plan.requirements.rate_rps=4", "plan.requirements.precision=0.1",
                      "plan.requirements.axes.hbm_bandwidth={lo:0.9 TB/s,hi:1.6 TB/s}", "~plan.requirements.axes.peak_bf16",
                      "plan.requirements.known_chips=[h200]", "plan.requirements.elasticity.fields=[hbm_bandwidth]",
                      "plan.requirements.elasticity.des=false",
                      f"tracking.uri={mlflow_uri}", "tracking.experiment=req_test", "--out", str(out), "--quiet"])
    assert rc == 0
    doc = json.loads((out / "requirements.json").read_text())
    assert (out / "requirements.md").exists() and (out / "requirements_axes.csv").exists()
    runs = tracking.search_runs(mlflow_uri)
    parents = [r for r in runs if r.get("tags.simllm.role") == "requirements"]
    assert len(parents) == 1 and parents[0]["status"] == "FINISHED"
    kids = [r for r in runs if r.get("tags.mlflow.parentRunId") == parents[0]["run_id"]]
    assert len(kids) == len(doc["verified"]) > 0
    assert all(k["status"] == "FINISHED" for k in kids)
    assert parents[0]["metrics.least_hbm_bandwidth"] == doc["axes"][0]["least"]


def test_cli_bad_axis_exits_2(tmp_path, capsys):
    from runner.tools.plan import main

    rc = main(BASE + ["+plan.requirements.axes.hbm_capacity={lo:80 GB,hi:20 GB}", "tracking.enabled=false",
                      "--out", str(tmp_path / "x"), "--quiet"])
    assert rc == 2
    assert "plan.requirements.axes.hbm_capacity" in capsys.readouterr().err
    assert not (tmp_path / "x" / "requirements.json").exists()


def test_vectorised_analytical_equals_point_by_point(cfg_of):
    """Roofline pricing (framework=generic): the elasticities of HBM bandwidth and BF16 peak from
    one vectorised pipeline pass equal those from separate runs per what-if chip (the same
    formulas, evaluated on arrays vs scalars)."""
    specs, plan, L = _setup(cfg_of)
    keys = ["hbm_bandwidth", "peak_bf16"]
    vec = R.elasticities(lambda s: R.analytical_metrics(s, L, plan.slo), specs, keys,
                         grid_fn=lambda s, k, v: R.analytical_metrics_grid(s, L, plan.slo, k, v))
    loop = R.elasticities(lambda s: R.analytical_metrics(s, L, plan.slo), specs, keys)
    assert all(r["vectorised"] for r in vec) and not any(r["vectorised"] for r in loop)
    for a, b in zip(vec, loop):
        for k in ("e_ttft_ms_p50", "e_tpot_ms_p50", "e_capacity_rps", "opt_capacity_rps_pct"):
            assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), (a["key"], k)
