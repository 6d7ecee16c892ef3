"""PlanSpec errors name the key; the candidate space by count."""

import pytest

from engine.errors import SpecError
from engine.plan.space import enumerate_candidates
from engine.plan.spec import PlanSpec, SpaceSpec, plan_spec
from runner.convert import specs_from_config


@pytest.mark.parametrize("d,key", [
    ({"slo": {"percentile": 100}}, "plan.slo.percentile"),
    ({"slo": {"ttft_ms": 0, "tpot_ms": 0}}, "plan.slo.ttft_ms"),
    ({"rule": {"requests": 10}}, "plan.rule.requests"),
    ({"rule": {"requests": 2000, "max_requests": 1000}}, "plan.rule.max_requests"),
    ({"search": {"precision": 0}}, "plan.search.precision"),
    ({"space": {"modes": ["both"]}}, "plan.space.modes"),
    ({"objective": "speed"}, "plan.objective"),
    ({"typo": 1}, "plan.typo"),
    ({"space": {"tpp": [1]}}, "plan.space.tpp"),
])
def test_bad_plan_values_name_the_key(d, key):
    with pytest.raises(SpecError) as e:
        plan_spec(d)
    assert e.value.field == key


def test_composed_default_is_valid(cfg_of):
    from omegaconf import OmegaConf
    p = plan_spec(OmegaConf.to_container(cfg_of("experiment=capacity").plan, resolve=True))
    assert p.slo.ttft_ms == 500 and p.slo.tpot_ms == 50 and len(p.space.hardware) == 5


def test_space_counts(cfg_of):
    """TP in {1,2,4,8} x PP in {1,2,4,8} with TP x PP <= 8: 4 + 3 + 2 + 1 = 10 partitions per chip
    (Llama-3.1-8B: 32 heads, 8 KV heads: every TP <= 8 divides both); x 2 modes with one
    disaggregated pool; a device budget of 4 drops the units above 4 devices."""
    specs = specs_from_config(cfg_of("experiment=capacity"))
    sp = SpaceSpec(hardware=("h100_sxm", "h200"), tp=(1, 2, 4, 8), pp=(1, 2, 4, 8), max_devices=8)
    c, dropped = enumerate_candidates(sp, specs)
    assert len(c) == 20 and not dropped
    sp2 = SpaceSpec(hardware=("h100_sxm",), tp=(1, 2, 4, 8), pp=(1,), modes=("colocated", "disagg"),
                    disagg_pools=((1, 2),))
    c2, d2 = enumerate_candidates(sp2, specs, device_budget=4)
    # colocated 1,2,4,8 GPUs -> 8 dropped; disagg 1P+2D = 3, 6, 12, 24 GPUs -> 3 kept
    assert sorted(x.devices for x in c2) == [1, 2, 3, 4]
    assert len(d2) == 4
    sp3 = SpaceSpec(hardware=("h100_sxm",), tp=(3,), pp=(1,))
    c3, d3 = enumerate_candidates(sp3, specs)
    assert not c3 and d3[0][3] == "heads not divisible by tp"


def test_cli_bad_input_one_line_no_run(mlflow_uri, tmp_path, capsys):
    """Bad plan values and unknown hardware stop simllm-plan with exit 2 and one line naming the
    key, before any MLflow run or job exists."""
    from runner import tracking
    from runner.tools.plan import main

    out = tmp_path / "p"
    assert main(["experiment=capacity", "plan.objective=speed", f"tracking.uri={mlflow_uri}",
                 "--out", str(out), "--quiet"]) == 2
    assert "plan.objective = 'speed': expected one of gpus, cost, energy" in capsys.readouterr().err
    assert main(["experiment=capacity", "plan.space.hardware=[h100_sxm,nochip]", f"tracking.uri={mlflow_uri}",
                 "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "plan.space.hardware = 'nochip'" in err
    assert main(["experiment=capacity", "plan.typo=1", "tracking=none", "--out", str(out)]) == 2
    assert "plan.typo" in capsys.readouterr().err
    runs = tracking.search_runs(mlflow_uri)
    assert all(r["status"] != "RUNNING" for r in runs)
    assert not (out / "wave1").exists()
