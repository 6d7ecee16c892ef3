"""The search against brute force on a small space: same answer within the stated precision.

The search reports r with r measured to pass and the next probed rate above (at most r (1 + p))
measured to fail; the brute force evaluates every rate of a geometric grid of ratio 1 + p and
reports its highest passing point g (the next grid point failing). With a verdict monotone in
the rate, both bracket the same true maximum, so r <= g (1 + p) and g <= r (1 + p). The DES is
deterministic (noise off, fixed seeds), so the same rate gets the same verdict in both.
"""

import math
from dataclasses import replace

import pytest
from omegaconf import OmegaConf

from engine.des.config import deployment
from engine.des.workload import build_stream
from engine.plan import bound
from engine.plan.probe import Probe
from engine.plan.search import brute_force, find_max_rate, geometric_grid
from engine.plan.spec import plan_spec
from runner.convert import specs_from_config

#: (the neutral profile: the comparison is about the search, and its rule's run lengths were sized
#: on these roofline prices; SMALL[:1] + SMALL[4:] are the settings of one candidate)
SMALL = ["experiment=capacity", "plan.space.hardware=[h100_sxm]", "plan.space.tp=[1,2]",
         "plan.space.pp=[1]", "framework=generic", "plan.rule.requests=200", "plan.rule.max_requests=800",
         "plan.search.precision=0.1", "plan.search.step=1.3"]


def _brute(specs, plan, est):
    grid = geometric_grid(est / 3, est * 1.3, plan.search.precision)
    b = brute_force(Probe(specs, plan.slo, plan.rule), grid)
    verdicts = [t.verdict for t in b.trials]
    first_fail = verdicts.index("fail") if "fail" in verdicts else len(verdicts)
    return b, verdicts, first_fail


def _agree(r, g, p):
    return r <= g * (1 + p) + 1e-9 and g <= r * (1 + p) + 1e-9


def test_search_matches_brute_force_in_process(cfg_of):
    """One candidate (H100 TP1), compose API, probes in this process."""
    cfg = cfg_of(*SMALL[:1], "hardware=h100_sxm", *SMALL[4:])
    plan = plan_spec(OmegaConf.to_container(cfg.plan, resolve=True))
    specs = deployment(specs_from_config(cfg))[0]
    st = build_stream(replace(specs.workload, num_requests=plan.rule.max_requests))
    est = bound.estimate(specs, bound.Lengths(st.prompt, st.output), 0.99, 500, 50).rate_rps
    s = find_max_rate(Probe(specs, plan.slo, plan.rule), est * 0.8, plan.search.precision, plan.search.step)
    b, verdicts, first_fail = _brute(specs, plan, est)
    assert s.status == b.status == "ok"
    assert all(v == "fail" for v in verdicts[first_fail:]), verdicts   # monotone on this grid
    assert _agree(s.rate, b.rate, plan.search.precision), (s.rate, b.rate)
    assert s.runs < sum(t.runs for t in b.trials)


@pytest.mark.slow
def test_simllm_plan_matches_brute_force(mlflow_uri, tmp_path):
    """The whole tool (waves through the joblib launcher, MLflow parent + children in a temp
    SQLite store) on H100 TP1 and TP2; each child's max_rps read back from MLflow and compared
    with a brute force over the same candidate composed here."""
    from runner import tracking
    from runner.tools.plan import compose_candidates, main

    out = tmp_path / "plan"
    rc = main(SMALL + [f"tracking.uri={mlflow_uri}", "tracking.experiment=plan_test", "--out", str(out),
                       "--quiet"])
    assert rc == 0
    runs = tracking.search_runs(mlflow_uri)
    parents = [r for r in runs if r.get("tags.simllm.role") == "plan"]
    assert len(parents) == 1 and parents[0]["status"] == "FINISHED"
    children = {r["tags.mlflow.runName"]: r for r in runs
                if r.get("tags.mlflow.parentRunId") == parents[0]["run_id"]}
    assert set(children) == {"plan:h100_sxm:TP1:co", "plan:h100_sxm:TP2:co"}
    assert all(c["status"] == "FINISHED" for c in children.values())
    base, plan, cands, _ = compose_candidates(SMALL)
    for c, cfg in cands:
        specs = deployment(specs_from_config(cfg))[0]
        child = children[f"plan:{c.key}"]
        found = child["metrics.max_rps"]
        est = child["metrics.estimate_rps"]
        b, verdicts, first_fail = _brute(specs, plan, est)
        assert all(v == "fail" for v in verdicts[first_fail:]), (c.key, verdicts)
        assert _agree(found, b.rate, plan.search.precision), (c.key, found, b.rate)
        assert child["metrics.des_runs"] < sum(t.runs for t in b.trials)
    assert (out / "plan.md").exists() and (out / "plan.png").exists()
    assert parents[0]["metrics.searched"] == 2 and parents[0]["metrics.des_runs"] > 0
