"""plan.requirements in waves: the batched monotone search (any width) against the brute-force
answer, the DES verifications through the Hydra joblib launcher against the in-process search,
a failed launcher job reported, and the 3-axis frontier against the brute-force grid.

Small space (as tests/plan/test_requirements.py): Llama-3.1-8B on one what-if H100 (the neutral
``generic`` profile: roofline prices), the Azure conversation trace at 4 req/s, 200..400
requests per DES verdict.
"""

import itertools
import json
import random

import pytest

from engine.plan import requirements as R
from tests.conftest import require_shared
from tests.plan.test_requirements import BASE, RATE, _setup


class _Staircase:
    """A monotone verdict known in closed form: (cell, j) passes iff j >= need(cell), need
    non-increasing in every outer index (None: never); the analytical check passes from
    need - slack (an optimistic bound, as bound.estimate is). Counts the verdicts asked for."""

    des_only = False

    def __init__(self, outer, yaxis, need, slack):
        self.outer, self.yaxis, self.need, self.slack = outer, yaxis, need, slack
        self.asked, self.waves = [], 0

    def _cell(self, values):
        return tuple(a.values.index(values[a.field]) for a in self.outer), self.yaxis.values.index(values[self.yaxis.field])

    def analytical(self, values):
        c, j = self._cell(values)
        n = self.need[c]
        return R.Verdict(values, n is not None and j >= n - self.slack, "analytical", "")

    def many(self, points):
        self.waves += 1
        out = []
        for v in points:
            c, j = self._cell(v)
            self.asked.append((c, j))
            ok = self.need[c] is not None and j >= self.need[c]
            out.append(R.Verdict(v, ok, "des", "" if ok else "tpot"))
        return out


@pytest.mark.parametrize("dims", [0, 1, 2])
def test_monotone_search_any_width_equals_brute_force(dims):
    """Random monotone staircases over 0, 1 and 2 outer axes: the least passing index found with
    1, 2, 3 and 5 verdicts per wave equals the one read off the closed form at every cell, never
    more verdicts than the grid, and wider waves need no more waves than width 1."""
    rng = random.Random(7 + dims)
    outer = [R.list_axis(k, [1e9 * (i + 1) for i in range(4)]) for k in ("hbm_capacity", "sram")[:dims]]
    y = R.list_axis("hbm_bandwidth", [1e12 * (1 + i) for i in range(13)])
    for _ in range(6):
        cells = list(itertools.product(*[range(4)] * dims))
        need = {}
        for c in sorted(cells, key=lambda c: tuple(-i for i in c)):       # best first: need non-increasing
            floor = max([need[b] if need[b] is not None else 99 for b in need if all(p >= q for p, q in zip(b, c))]
                        + [rng.randrange(0, 6)])
            j = floor + rng.randrange(0, 4)
            need[c] = None if j >= len(y.values) else j
        waves, slack = {}, rng.randrange(0, 3)
        for width in (1, 2, 3, 5):
            o = _Staircase(outer, y, need, slack)
            r = R.monotone_search(o, outer, y, cells, width)
            assert {c: cell.least for c, cell in r["cells"].items()} == need, (width, need)
            assert r["violations"] == 0
            assert len(set(o.asked)) <= len(cells) * len(y.values)
            waves[width] = r["waves"]
            for c, cell in r["cells"].items():         # the evidence just below the answer failed
                if cell.least:
                    assert cell.below is not None and not cell.below.passed
        assert waves[5] <= waves[1] and waves[3] <= waves[1]


def test_frontier3_matches_brute_force_grid(cfg_of):
    """The 3-axis frontier HBM capacity x BF16 peak x HBM bandwidth (4 x 4 cells, bandwidth on a
    13-point grid of ratio 1.1): the least bandwidth per (capacity, peak) cell found by the
    staircase equals the DES at every one of the 208 grid points (same deterministic verdicts, so
    with monotone verdicts the same grid index: precision one grid step, 10 %), with 1 and with 3
    verdicts per wave; the grid's monotonicity along all three axes is checked first (the
    premise), and the search needs fewer DES points than the grid."""
    require_shared("traces", "azure2023_conv.csv")
    specs, plan, L = _setup(cfg_of)
    # sheet capacities at which the runtime sees 28, 32, 40 and 80 GB (hbm_visible_fraction)
    vis = specs.hardware.hbm_visible_fraction
    x = R.list_axis("hbm_capacity", [v / vis for v in (28e9, 32e9, 40e9, 80e9)])
    z = R.list_axis("peak_bf16", [300e12, 400e12, 600e12, 989e12])
    y = R.geometric_axis("hbm_bandwidth", 0.9e12, 2.6e12, 0.1)
    grid = R.Oracle(specs, plan.slo, plan.rule, RATE, L, des_only=True)
    g_least, matrix = R.grid_frontier3(grid, x, z, y)
    for (i, k), row in matrix.items():
        assert row == sorted(row), (i, k, row)                      # monotone in bandwidth
        for b in ((i + 1, k), (i, k + 1)):                          # and in capacity and peak
            if b in matrix:
                assert all(q or not p for p, q in zip(row, matrix[b])), (i, k, b)
    assert len(set(g_least.values())) >= 4                          # the third axis matters here
    assert g_least[(0, 0)] is None and g_least[(3, 3)] is not None
    for width in (1, 3):
        o = R.Oracle(specs, plan.slo, plan.rule, RATE, L)
        f = R.frontier3(o, x, z, y, width=width)
        assert f["least"] == g_least, (width, f["least"], g_least)
        assert o.des_points < grid.des_points / 2, (o.des_points, grid.des_points)
        for (i, k), cell in f["cells"].items():
            # non-dominated: no worse neighbour cell reaches the same least bandwidth
            worse = [g_least.get((i - 1, k)), g_least.get((i, k - 1))]
            assert cell.dominated == (cell.least is None or cell.least in worse)


LAUNCH_AXES = ["plan.requirements.rate_rps=4", "plan.requirements.precision=0.1",
               "plan.requirements.axes.hbm_bandwidth={lo:0.9 TB/s,hi:1.6 TB/s}",
               "+plan.requirements.axes.hbm_capacity={values:[22 GB,28 GB,40 GB,80 GB]}",
               "~plan.requirements.axes.peak_bf16", "plan.requirements.frontier=[hbm_capacity,hbm_bandwidth]",
               "plan.requirements.frontier_points=4", "plan.requirements.known_chips=[h200]",
               "plan.requirements.elasticity.fields=[hbm_bandwidth]", "plan.requirements.elasticity.des=false"]


@pytest.mark.slow
def test_launcher_equals_in_process_and_mlflow(mlflow_uri, tmp_path):
    """simllm-plan requirements with ``hydra/launcher=joblib hydra.launcher.n_jobs=4``: every DES
    verification a launcher job (waves of 4), the same per-axis minima and the same frontier as
    the in-process search (the same deterministic verdict per point; the batched search reads
    them in another order); one FINISHED parent run, a FINISHED child per verified point, none
    RUNNING, and the job directories on disk."""
    require_shared("traces", "azure2023_conv.csv")
    from runner import tracking
    from runner.tools.plan import main

    docs = {}
    for name, extra in (("inproc", ["tracking.enabled=false"]),
                        ("joblib", [f"tracking.uri={mlflow_uri}", "tracking.experiment=req_waves",
                                    "hydra/launcher=joblib", "hydra.launcher.n_jobs=4"])):
        out = tmp_path / name
        assert main(BASE + LAUNCH_AXES + extra + ["--out", str(out), "--quiet"]) == 0
        docs[name] = json.loads((out / "requirements.json").read_text())
    a, b = docs["inproc"], docs["joblib"]
    assert [x["least"] for x in a["axes"]] == [x["least"] for x in b["axes"]]
    assert a["frontier"]["y_least"] == b["frontier"]["y_least"]
    assert any(v is not None for v in a["frontier"]["y_least"])
    v = b["verification"]
    assert a["verification"]["mode"] == "in-process" and v["mode"] == "launcher" and v["width"] == 4
    assert v["failed"] == [] and v["jobs"] == b["des_points_search"] and v["waves"] < v["jobs"]
    assert len(list((tmp_path / "joblib" / "waves").glob("wave*/*/result.pkl"))) == v["jobs"]
    assert "DES verification through the Hydra launcher" in (tmp_path / "joblib" / "requirements.md").read_text()
    runs = tracking.search_runs(mlflow_uri)
    assert not [r for r in runs if r["status"] == "RUNNING"]
    parents = [r for r in runs if r.get("tags.simllm.role") == "requirements"]
    assert len(parents) == 1 and parents[0]["status"] == "FINISHED"
    assert parents[0]["metrics.launcher_waves"] == v["waves"]
    kids = [r for r in runs if r.get("tags.mlflow.parentRunId") == parents[0]["run_id"]]
    assert len(kids) == len(b["verified"]) == v["jobs"]
    assert all(k["status"] == "FINISHED" for k in kids)


def test_failed_launcher_job_reported(cfg_of, tmp_path):
    """A verification job that raises in the launched process (a spec point naming no
    HardwareSpec field: dataclasses.replace raises TypeError there) comes back as JobFailed with
    its error, listed by the executor, and the point's verdict fails with ``by`` = "error" and
    the error as its reason; the other job of the wave still returns its DES verdict."""
    require_shared("traces", "azure2023_conv.csv")
    from runner.tools.requirements import WaveExecutor, _verification_lines

    specs, plan, L = _setup(cfg_of)
    ex = WaveExecutor(tmp_path / "waves", ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"])
    o = R.Oracle(specs, plan.slo, plan.rule, RATE, L, des_only=True, executor=ex)
    good, bad = {"hbm_bandwidth_bytes_s": 3.35e12}, {"no_such_field": 1.0}
    vg, vb = o.many([good, bad])
    assert vg.by == "des" and vg.trial is not None and vg.passed
    assert vb.by == "error" and not vb.passed and "job failed" in vb.reason and "no_such_field" in vb.reason
    assert ex.waves == 1 and len(ex.failed) == 1 and ex.failed[0]["values"] == bad
    assert (tmp_path / "waves" / "wave1" / "1" / "error.txt").exists()
    assert vb in o.verified()                  # a child run each (FAILED), not lost
    lines = _verification_lines({"verification": {"mode": "launcher", "launch": ex.launch, "width": 2, "waves": 1,
                                                  "jobs": 2, "failed": ex.failed}})
    assert any("failed job" in s and "no_such_field" in s for s in lines)


def test_cli_frontier3_report_and_mlflow(mlflow_uri, tmp_path):
    """A 3-axis frontier from the command line (in process): its section, CSV and plot in the
    report, its DES cost against the grid's in the parent run, a FINISHED child per verified
    point."""
    require_shared("traces", "azure2023_conv.csv")
    from runner import tracking
    from runner.tools.plan import main

    out = tmp_path / "f3"
    rc = main(BASE + ["plan.requirements.rate_rps=4", "plan.requirements.precision=0.2",
                      "plan.requirements.axes.hbm_bandwidth={lo:0.9 TB/s,hi:2.6 TB/s}",
                      "plan.requirements.axes.peak_bf16={lo:300 TFLOPS,hi:989 TFLOPS}",
                      "+plan.requirements.axes.hbm_capacity={values:[32 GB,80 GB]}",
                      "plan.requirements.frontier=[hbm_capacity,peak_bf16,hbm_bandwidth]",
                      "plan.requirements.frontier_points=2", "plan.requirements.known_chips=[h200]",
                      "plan.requirements.elasticity.fields=[hbm_bandwidth]", "plan.requirements.elasticity.des=false",
                      f"tracking.uri={mlflow_uri}", "tracking.experiment=req_f3", "--out", str(out), "--quiet"])
    assert rc == 0
    doc = json.loads((out / "requirements.json").read_text())
    f = doc["frontier3"]
    assert len(f["points"]) == 4 and f["brute_force_des_points"] == 4 * f["y_grid"]
    assert f["des_points"] < f["brute_force_des_points"]
    md = (out / "requirements.md").read_text()
    assert "## Frontier hbm_capacity x peak_bf16 x hbm_bandwidth" in md
    assert (out / "requirements_frontier3.png").exists() and (out / "requirements_frontier3.csv").exists()
    runs = tracking.search_runs(mlflow_uri)
    parent = next(r for r in runs if r.get("tags.simllm.role") == "requirements")
    assert parent["status"] == "FINISHED"
    assert parent["metrics.frontier3_brute_force_des_points"] == f["brute_force_des_points"]
    kids = [r for r in runs if r.get("tags.mlflow.parentRunId") == parent["run_id"]]
    assert len(kids) == len(doc["verified"]) and all(k["status"] == "FINISHED" for k in kids)


def test_frontier_of_four_axes_names_the_field():
    from engine.errors import SpecError
    from runner.tools.requirements import parse

    node = {"rate_rps": 1, "axes": {k: {"values": ["1 TB/s"]} for k in ("hbm_bandwidth", "host_bandwidth")},
            "frontier": ["hbm_bandwidth", "host_bandwidth", "hbm_bandwidth"]}
    with pytest.raises(SpecError) as e:
        parse(node)
    assert e.value.field == "plan.requirements.frontier"


def test_cli_launcher_that_runs_nothing_exits_2(tmp_path, capsys):
    """A launcher that starts no job (no such launcher option): one line naming hydra/launcher and
    the launcher's own error, exit 2, no report written - not a search that reads every point as
    failing."""
    require_shared("traces", "azure2023_conv.csv")
    from runner.tools.plan import main

    out = tmp_path / "x"
    rc = main(BASE + LAUNCH_AXES + ["tracking.enabled=false", "hydra/launcher=no_such_launcher", "--out", str(out),
                                    "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "hydra/launcher" in err and "no_such_launcher" in err
    assert not (out / "requirements.json").exists()
