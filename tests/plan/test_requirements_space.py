"""plan.requirements with a deployment space (the OR over deployments) and the DES capacity-at-SLO
elasticity: each checked against the same quantity computed here separately, plus bad input.

Small space: Llama-3.1-8B (the ``generic`` profile: roofline prices, no tables) on what-if H100s
at TP1 and TP2, the Azure conversation trace at 4 req/s, 200..400 requests per DES verdict.
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
from engine.plan.probe import Probe
from engine.plan.search import find_max_rate
from engine.plan.spec import plan_spec
from runner.convert import specs_from_config
from tests.conftest import require_shared


@pytest.fixture(autouse=True)
def _azure_trace():
    """Every test here composes workload=azure_conv, whose trace is external data: skip, naming the
    file, in a clone without ../shared."""
    require_shared("traces", "azure2023_conv.csv")


COMMON = ["+plan=requirements", "engine=des", "workload=azure_conv", "model=llama_3_1_8b", "framework=generic",
          "hardware=h100_sxm", "plan.rule.requests=200", "plan.rule.max_requests=400"]
RATE = 4.0


def _specs(cfg_of, tp):
    cfg = cfg_of(*COMMON, f"partition.tp={tp}")
    plan = plan_spec(OmegaConf.to_container(cfg.plan, resolve=True))
    specs = deployment(specs_from_config(cfg))[0]
    st = build_stream(replace(specs.workload, num_requests=plan.rule.max_requests))
    return cfg, specs, plan, bound.Lengths(st.prompt, st.output)


@pytest.mark.parametrize("key, lo, hi", [("hbm_bandwidth", 0.2e12, 1.6e12), ("peak_bf16", 20e12, 1000e12)])
def test_or_minimum_is_least_per_deployment_minimum(cfg_of, key, lo, hi):
    """The least passing value over the space {TP1, TP2} equals the least of the two per-deployment
    minima, each searched here separately with its own single-deployment Oracle on specs composed
    separately (partition.tp=1, partition.tp=2) - the OR's deployments come from the runner's
    space enumeration instead. Derivation: every deployment's verdict is monotone in the spec,
    so "some deployment passes" first holds at the least of the indices where each first passes;
    with des_candidates=0 the OR is exact. The deployment named at the minimum is the one whose
    own minimum it is (TP1 on a tie: fewer devices first). Checked against the DES verdict at
    every grid point of each deployment too (monotone rows; the OR row's first pass)."""
    from runner.tools.requirements import deployments, parse_space

    cfg1, s1, plan, L = _specs(cfg_of, 1)
    _, s2, _, _ = _specs(cfg_of, 2)
    ax = R.geometric_axis(key, lo, hi, 0.1)
    per = {name: R.minimise(R.Oracle(s, plan.slo, plan.rule, RATE, L), ax).index for name, s in (("TP1", s1), ("TP2", s2))}
    deps, dropped = deployments(cfg1, COMMON + ["partition.tp=1"], parse_space({"tp": [1, 2], "des_candidates": 0}))
    assert [d.name for d in deps] == ["TP1", "TP2"] and [d.devices for d in deps] == [1, 2] and not dropped
    space = R.SpaceOracle(deps, plan.slo, plan.rule, RATE, L)
    r = R.minimise(space, ax)
    known = [i for i in per.values() if i is not None]
    assert known, per
    assert r.index == min(known), (r.index, per)
    named = space({ax.field: ax.values[r.index]}).deployment
    assert named == ("TP1" if per["TP1"] == r.index else "TP2"), (named, per)
    # the brute-force reference: the DES at every grid point of each deployment (no pruning)
    rows = {}
    for name, s in (("TP1", s1), ("TP2", s2)):
        g = R.Oracle(s, plan.slo, plan.rule, RATE, L, des_only=True)
        rows[name] = [g({ax.field: v}).passed for v in ax.values]
        assert rows[name] == sorted(rows[name]), (name, rows[name])
    either = [a or b for a, b in zip(rows["TP1"], rows["TP2"])]
    assert r.index == either.index(True)


def test_des_capacity_elasticity_two_independent_searches(cfg_of):
    """d ln(DES capacity) / d ln(HBM bandwidth) from ``des_capacity_elasticities`` equals the one
    computed here from two capacity searches run separately (find_max_rate over a Probe of a
    what-if H100 with hbm_bandwidth = 3.35 TB/s x (1 -+ h), to the plan's 2 % precision, no
    resolution stop, each from the base capacity found by a third search from 8 req/s):
    e = ln(C+ / C-) / ln((1 + h) / (1 - h)). h by hand: prior elasticity 0.6, precision 0.02,
    margin 4: tanh(4 ln 1.02 / (2 x 0.6)) = tanh(0.06601) = 0.06591 > step 0.05. The bounds:
    the true capacities lie in [C, hi) of each search, so e lies in [(ln C+ - ln hi-) / D,
    (ln hi+ - ln C-) / D]. Physics: decode on one H100 is memory-bound, so capacity rises with
    bandwidth, sub-linearly at most up to the bisection's precision: e in (0, 1.3]."""
    _, s1, plan, L = _specs(cfg_of, 1)
    sp = plan.search
    assert sp.precision == pytest.approx(0.02)
    h = math.tanh(4 * math.log(1.02) / (2 * 0.6))
    assert h == pytest.approx(0.06591, abs=1e-4)
    rows = R.des_capacity_elasticities(s1, plan.slo, plan.rule, sp, ["hbm_bandwidth"], step=0.05, optimistic=0.1,
                                       prior={"hbm_bandwidth": 0.6}, base_guess=8.0)
    row = rows[0]
    assert row["h"] == pytest.approx(h, rel=1e-12)

    hw = replace(s1.hardware, kernel_tables="")

    def cap(f, guess):
        pr = Probe(replace(s1, hardware=replace(hw, hbm_bandwidth_bytes_s=3.35e12 * f)), plan.slo, plan.rule)
        return find_max_rate(pr, guess, sp.precision, sp.step, sp.min_rate, sp.max_rate, stop_at_resolution=False)

    base = cap(1.0, 8.0)
    lo, hi = cap(1 - h, base.rate), cap(1 + h, base.rate)
    d = math.log((1 + h) / (1 - h))
    e = math.log(hi.rate / lo.rate) / d
    assert row["capacity_rps"] == base.rate
    assert row["capacity_rps_minus"] == lo.rate and row["capacity_rps_plus"] == hi.rate
    assert row["e_capacity_rps"] == pytest.approx(e, rel=1e-9)
    assert row["e_capacity_rps_lo"] == pytest.approx((math.log(hi.rate) - math.log(lo.hi)) / d, rel=1e-9)
    assert row["e_capacity_rps_hi"] == pytest.approx((math.log(hi.hi) - math.log(lo.rate)) / d, rel=1e-9)
    assert row["e_capacity_rps_lo"] <= e <= row["e_capacity_rps_hi"]
    assert lo.hi / lo.rate <= 1.02 + 1e-12 and hi.hi / hi.rate <= 1.02 + 1e-12    # the stated precision
    assert row["resolved"] and 0.0 < e <= 1.3
    assert row["opt_capacity_rps_pct"] == pytest.approx((cap(0.9, base.rate).rate / base.rate - 1) * 100, rel=1e-9)


def test_capacity_step():
    """h = tanh(margin ln(1 + p) / (2 |prior|)) within [step, h_max]; h_max without a prior."""
    assert R.capacity_step(float("nan"), 0.02, 0.05) == 0.3
    assert R.capacity_step(0.0, 0.02, 0.05) == 0.3
    assert R.capacity_step(5.0, 0.02, 0.05) == 0.05                     # tanh(0.0079) < step
    assert R.capacity_step(-0.2, 0.02, 0.05) == pytest.approx(math.tanh(4 * math.log(1.02) / 0.4))
    assert R.capacity_step(0.01, 0.02, 0.05) == 0.3                     # capped


@pytest.mark.parametrize("space, field", [
    ({"tp": []}, "plan.requirements.space.tp"),
    ({"tp": [1, 0]}, "plan.requirements.space.tp"),
    ({"replicas": []}, "plan.requirements.space.replicas"),
    ({"frameworks": []}, "plan.requirements.space.frameworks"),
    ({"tensor": [1]}, "plan.requirements.space.tensor"),
    ({"des_candidates": -1}, "plan.requirements.space.des_candidates"),
    ({"max_devices": 0}, "plan.requirements.space.max_devices"),
    ([1, 2], "plan.requirements.space"),
])
def test_bad_space_names_the_field(space, field):
    from runner.tools.requirements import parse

    with pytest.raises(SpecError) as e:
        parse({"rate_rps": 1, "axes": {"hbm_bandwidth": {"values": ["1 TB/s"]}}, "space": space})
    assert e.value.field == field


def test_empty_enumerated_space_and_unknown_framework(cfg_of):
    """A space whose every deployment is left out (TP3: 32 heads not divisible; TP2 > max_devices 1)
    and an unknown framework option are errors naming the field; so is an empty SpaceOracle."""
    from runner.tools.requirements import deployments, parse_space

    cfg, s1, plan, L = _specs(cfg_of, 1)
    ov = COMMON + ["partition.tp=1"]
    with pytest.raises(SpecError) as e:
        deployments(cfg, ov, parse_space({"tp": [2, 3], "max_devices": 1}))
    assert e.value.field == "plan.requirements.space"
    assert "heads not divisible" in str(e.value) and "max_devices" in str(e.value)
    with pytest.raises(SpecError) as e:
        deployments(cfg, ov, parse_space({"frameworks": ["no_such_framework"]}))
    assert e.value.field == "plan.requirements.space.frameworks"
    with pytest.raises(SpecError) as e:
        R.SpaceOracle([], plan.slo, plan.rule, RATE, L)
    assert e.value.field == "plan.requirements.space"
    with pytest.raises(SpecError) as e:
        from runner.tools.requirements import parse
        parse({"rate_rps": 1, "axes": {"hbm_bandwidth": {"values": ["1 TB/s"]}}, "elasticity": {"des_capacity": "yes"}})
    assert e.value.field == "plan.requirements.elasticity.des_capacity"


def test_cli_bad_space_exits_2(tmp_path, capsys):
    from runner.tools.plan import main

    rc = main(COMMON + ["partition.tp=1", "plan.requirements.space={tp:[]}", "tracking.enabled=false",
                        "--out", str(tmp_path / "x"), "--quiet"])
    assert rc == 2
    assert "plan.requirements.space.tp" in capsys.readouterr().err


def test_cli_space_and_des_capacity_mlflow(mlflow_uri, tmp_path):
    """End to end: the deployment named at each minimum (report and parent tag), the DES capacity
    column in the DES elasticity table, its elasticity logged on the parent run as the others are,
    one child per DES verdict of any deployment (tagged with it)."""
    import json

    from runner import tracking
    from runner.tools.plan import main

    out = tmp_path / "req"
    rc = main(COMMON + ["partition.tp=1", "plan.requirements.rate_rps=4", "plan.requirements.precision=0.1",
                        "plan.requirements.axes.hbm_bandwidth={lo:0.2 TB/s,hi:1.6 TB/s}",
                        "~plan.requirements.axes.peak_bf16", "plan.requirements.space={tp:[1,2],des_candidates:0}",
                        "plan.requirements.known_chips=[]", "plan.requirements.elasticity.fields=[hbm_bandwidth]",
                        "plan.requirements.elasticity.des_requests=200",
                        f"tracking.uri={mlflow_uri}", "tracking.experiment=req_space", "--out", str(out), "--quiet"])
    assert rc == 0
    doc = json.loads((out / "requirements.json").read_text())
    a = doc["axes"][0]
    assert a["deployment"] in ("TP1", "TP2") and a["least"] is not None
    md = (out / "requirements.md").read_text()
    assert "deployment at least" in md and "d ln capacity / d ln spec (DES)" in md
    cap = doc["elasticity_des_capacity"][0]
    runs = tracking.search_runs(mlflow_uri)
    parent = next(r for r in runs if r.get("tags.simllm.role") == "requirements")
    assert parent["metrics.des_capacity.e_capacity_rps.hbm_bandwidth"] == pytest.approx(cap["e_capacity_rps"])
    assert parent["tags.simllm.least_hbm_bandwidth.deployment"] == a["deployment"]
    kids = [r for r in runs if r.get("tags.mlflow.parentRunId") == parent["run_id"]]
    assert len(kids) == len(doc["verified"]) > 0
    assert {k["tags.simllm.deployment"] for k in kids} <= {"TP1", "TP2"}


def _or_against_separate(cfg_of, base: list, space: dict, separate: dict, key: str, lo: float, hi: float):
    """The OR search over the runner's deployments of ``space`` (composed from ``base``) against
    each deployment searched on its own, composed separately from ``base`` + its overrides
    (``separate``: deployment name -> overrides), and against the DES at every grid point of
    every deployment (the brute-force OR). Returns (OR least index, per-deployment least index,
    the deployment named at the OR minimum)."""
    from runner.tools.requirements import deployments, parse_space

    cfg = cfg_of(*base)
    plan = plan_spec(OmegaConf.to_container(cfg.plan, resolve=True))
    ax = R.geometric_axis(key, lo, hi, 0.1)
    per, rows, L = {}, {}, None
    for name, extra in separate.items():
        s = deployment(specs_from_config(cfg_of(*base, *extra)))[0]
        if L is None:
            st = build_stream(replace(s.workload, num_requests=plan.rule.max_requests))
            L = bound.Lengths(st.prompt, st.output)
        per[name] = R.minimise(R.Oracle(s, plan.slo, plan.rule, RATE, L), ax).index
        g = R.Oracle(s, plan.slo, plan.rule, RATE, L, des_only=True)
        rows[name] = [g({ax.field: v}).passed for v in ax.values]
        assert rows[name] == sorted(rows[name]), (name, rows[name])       # monotone: the premise
    deps, dropped = deployments(cfg, list(base), parse_space(space))
    assert sorted(d.name for d in deps) == sorted(separate) and not dropped, ([d.name for d in deps], dropped)
    oracle = R.SpaceOracle(deps, plan.slo, plan.rule, RATE, L)
    r = R.minimise(oracle, ax)
    either = [any(col) for col in zip(*rows.values())]
    assert r.index == either.index(True)                                 # the brute-force OR
    return r.index, per, oracle({ax.field: ax.values[r.index]}).deployment


def test_or_minimum_over_expert_parallel_degrees(cfg_of):
    """An EP space (Qwen3-30B-A3B, 128 experts, TP2 with EP 1 or 2 inside it: ep_layout shared,
    2 devices each): the least NVLink bandwidth at which some EP degree
    serves 4 req/s equals the smaller of the two minima searched separately on specs composed with
    partition.ep=1 and partition.ep=2 (each EP degree is monotone in the spec, so the OR first
    passes at the least of the per-degree first passes), and the degree named there is the one
    whose own minimum it is; it equals the brute-force OR of the DES at every grid point. The two
    degrees differ here (expert all-to-all vs all-reduce traffic), so the check is not a tie."""
    base = COMMON[:3] + ["model=qwen3_30b_a3b"] + COMMON[4:] + ["partition.tp=2"]
    least, per, named = _or_against_separate(
        cfg_of, base, {"tp": [2], "ep": [1, 2], "des_candidates": 0},
        {"TP2": ["partition.ep=1"], "TP2EP2": ["partition.ep=2"]}, "scaleup_bandwidth", 10e9, 100e9)
    assert per["TP2"] != per["TP2EP2"], per
    assert least == min(i for i in per.values() if i is not None), (least, per)
    assert per[named] == least, (named, per)


@pytest.mark.parametrize("key, lo, hi", [("hbm_bandwidth", 0.2e12, 3.35e12), ("peak_bf16", 20e12, 1000e12)])
def test_or_minimum_over_frameworks(cfg_of, key, lo, hi):
    """A multi-framework space (Llama-3.1-8B TP1 under the generic and the vLLM V1 profiles, each
    its own compose): the OR minimum equals the smaller of the per-framework minima searched
    separately (framework=generic, framework=vllm_v1 composed on their own), the framework named
    there is the one whose own minimum it is, and both equal the brute-force OR. The profiles
    schedule differently, so the two minima differ (and on these two axes the winner differs)."""
    base = COMMON[:4] + ["framework=generic"] + COMMON[5:] + ["partition.tp=1"]
    least, per, named = _or_against_separate(
        cfg_of, base, {"frameworks": ["generic", "vllm_v1"], "des_candidates": 0},
        {"TP1 generic": [], "TP1 vllm_v1": ["framework=vllm_v1"]}, key, lo, hi)
    assert per["TP1 generic"] != per["TP1 vllm_v1"], per
    assert least == min(i for i in per.values() if i is not None), (least, per)
    assert per[named] == least, (named, per)
