"""simllm-report draws each run's prediction intervals on the CDF and Pareto plots: bars whose
ends are the runs' ``*_lo`` / ``*_hi`` (read back from the matplotlib artists), and plots as
before where runs have none (uncertainty.enabled=false).

Jobs: the DES engine on a Poisson chat stream (compose API, run_job, a temp SQLite store) with
a test error model: residuals 0.05, 0.06 ... 0.14 in every regime of these jobs (DES Poisson ->
load open; vllm_v1; bf16 -> 16-bit; h100_sxm has vLLM tables -> backend measured). By hand:
c = median = 0.095, scores |r - c| = 0.005, 0.005, 0.015, 0.015, ..., 0.045, 0.045; 80 %:
k = ceil(11 x 0.8) = 9 -> q = 0.045, so lo = p exp(-0.14), hi = p exp(-0.05): an interval below
its point (the model's bias), which the bars must still draw from lo to hi."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from engine.uncertainty import fit
from runner.job import run_job
from runner.tools import plots, report

METRICS = ("ttft", "tpot", "e2e", "throughput")
RATES = (2.0, 8.0, 32.0)


@pytest.fixture
def saved(monkeypatch):
    """PNG file name -> the matplotlib Figure saved under it (artists stay readable after close)."""
    from matplotlib.figure import Figure

    figs, real = {}, Figure.savefig

    def save(self, fname, *a, **k):
        figs[Path(fname).name] = self
        return real(self, fname, *a, **k)

    monkeypatch.setattr(Figure, "savefig", save)
    return figs


def _error_model(path):
    regs = [{"metric": m, "stat": s, "load": "open", "framework": "vllm_v1", "precision": "16-bit",
             "backend": "measured"} for m in METRICS for s in ("center", "tail") for _ in range(10)]
    return str(fit(regs, np.tile(0.05 + np.arange(10) / 100, len(METRICS) * 2)).save(path))


def _jobs(cfg_of, uri, tmp_path, experiment, *extra):
    """One DES job per rate into ``experiment``; their summaries (summary.json), in rate order."""
    out = []
    for rate in RATES:
        cfg = cfg_of("engine=des", "workload=poisson_chat", "workload.num_requests=60",
                     f"workload.rate_rps={rate}", f"tracking.uri={uri}",
                     f"tracking.experiment={experiment}", "print_table=false", *extra)
        job = tmp_path / experiment / str(rate)
        run_job(cfg, job, [])
        out.append(json.loads((job / "summary.json").read_text())["summary"])
    return out


def _bars(ax, gid):
    """Each bar of the interval collections ``gid`` on ``ax`` as (x0, y0, x1, y1), sorted."""
    return sorted(tuple(np.ravel(seg)) for c in ax.collections if c.get_gid() == gid
                  for seg in c.get_segments())


def _approx(rows):
    return [pytest.approx(r, rel=1e-9) for r in sorted(rows)]


def test_cdf_and_pareto_bars_are_the_runs_intervals(cfg_of, mlflow_uri, tmp_path, saved):
    table = _error_model(tmp_path / "t.json")
    summ = _jobs(cfg_of, mlflow_uri, tmp_path, "bands", f"uncertainty.table={table}")
    s = summ[0]
    assert s["ttft_ms_p50_lo"] == pytest.approx(s["ttft_ms_p50"] * math.exp(-0.14), rel=1e-6)
    assert s["ttft_ms_p50_hi"] == pytest.approx(s["ttft_ms_p50"] * math.exp(-0.05), rel=1e-6)
    out = tmp_path / "rep"
    assert report.main(["bands", "--uri", mlflow_uri, "-o", str(out), "--no-log"]) == 0

    cdf = saved["cdf.png"]   # bars at 0.5 (p50) and 0.99 (p99), the i-th run's (rate order)
    for ax, w in zip(cdf.axes, ("ttft", "tpot")):   # 0.02 i lower (3 runs: min(0.02, 0.12 / 3))
        want = [(x[f"{w}_ms_{st}_lo"], q - 0.02 * i, x[f"{w}_ms_{st}_hi"], q - 0.02 * i)
                for i, x in enumerate(summ) for q, st in ((0.5, "p50"), (0.99, "p99"))]
        assert _bars(ax, "interval-x") == _approx(want)
    assert "80% prediction interval of p50 and p99 (bars at 0.5 and 0.99, one row per run)" in [
        t.get_text() for t in cdf.legends[0].get_texts()]

    (ax,) = saved["pareto.png"].axes           # throughput per GPU: vertical bars at each run's
    assert _bars(ax, "interval-y") == _approx([  # interactivity; interactivity = 1000 / TPOT p50:
        (x["interactivity_tok_s_per_user"], x["throughput_tok_s_per_gpu_lo"],  # horizontal bars
         x["interactivity_tok_s_per_user"], x["throughput_tok_s_per_gpu_hi"]) for x in summ])
    assert _bars(ax, "interval-x") == _approx([
        (1e3 / x["tpot_ms_p50_hi"], x["throughput_tok_s_per_gpu"],
         1e3 / x["tpot_ms_p50_lo"], x["throughput_tok_s_per_gpu"]) for x in summ])
    md = (out / "report.md").read_text()
    assert "bars at 0.5 and 0.99" in md and "Bars: each run's prediction intervals" in md


def test_runs_without_intervals_plot_as_before(cfg_of, mlflow_uri, tmp_path, saved):
    _jobs(cfg_of, mlflow_uri, tmp_path, "plain", "uncertainty.enabled=false")
    out = tmp_path / "rep"
    assert report.main(["plain", "--uri", mlflow_uri, "-o", str(out), "--no-log"]) == 0
    for name in ("cdf.png", "pareto.png"):
        fig = saved[name]
        assert not [c for ax in fig.axes for c in ax.collections
                    if c.get_gid() in ("interval-x", "interval-y", "reaches-front")], name
        assert not [t for lg in fig.legends for t in lg.get_texts() if "interval" in t.get_text()]
    md = (out / "report.md").read_text()
    assert "bars at 0.5" not in md and "Bars:" not in md


def test_no_interval_arguments_draw_the_same_png(tmp_path):
    """Empty or absent intervals give the very PNG the plots drew before intervals existed."""
    rng = np.random.default_rng(0)
    samples = {r: {"ttft": rng.lognormal(3, 0.5, 200), "tpot": rng.lognormal(2, 0.3, 200)} for r in "ab"}
    labels = {"a": "rate=1", "b": "rate=4"}
    plain = plots.cdfs(samples, labels, tmp_path / "c0.png").read_bytes()
    empty = {r: {"ttft": [], "tpot": []} for r in samples}
    assert plots.cdfs(samples, labels, tmp_path / "c1.png", empty, 0.8).read_bytes() == plain
    pts = [(1.0, 10.0, "tp1", "c"), (2.0, 8.0, "tp2", "c"), (1.5, 5.0, "tp4", "c")]
    plain = plots.pareto(pts, tmp_path / "p0.png").read_bytes()
    none = [p + (None, None) for p in pts]
    assert plots.pareto(none, tmp_path / "p1.png", level=0.8).read_bytes() == plain


def test_dominated_point_whose_interval_reaches_the_front_is_ringed(tmp_path, saved):
    # front (1, 10) (2, 8) (3, 3). (1.5, 5): optimistic corner (1.6, 9.5), which neither (1, 10)
    # (x 1 < 1.6) nor (2, 8) (y 8 < 9.5) nor (3, 3) dominates: ringed. (2, 2): corner (2, 2.5),
    # dominated by (2, 8): not ringed.
    pts = [(1.0, 10.0, "a", "c", None, (9.0, 11.0)), (2.0, 8.0, "b", "c", None, None),
           (3.0, 3.0, "d", "c", None, None), (1.5, 5.0, "e", "c", (1.4, 1.6), (4.0, 9.5)),
           (2.0, 2.0, "f", "c", None, (1.5, 2.5))]
    plots.pareto(pts, tmp_path / "p.png", level=0.8)
    (ax,) = saved["p.png"].axes
    (ring,) = [c for c in ax.collections if c.get_gid() == "reaches-front"]
    assert ring.get_offsets().tolist() == [[1.5, 5.0]]
    assert _bars(ax, "interval-y") == _approx([(1.0, 9.0, 1.0, 11.0), (1.5, 4.0, 1.5, 9.5),
                                              (2.0, 1.5, 2.0, 2.5)])
    assert _bars(ax, "interval-x") == _approx([(1.4, 5.0, 1.6, 5.0)])
    texts = [t.get_text() for t in saved["p.png"].legends[0].get_texts()]
    assert "80% prediction interval of each run (bars)" in texts
    assert "dominated, but its interval reaches the frontier" in texts
