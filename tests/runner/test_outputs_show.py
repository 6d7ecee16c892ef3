"""Printed outputs and plots show the answer: the Pareto frontier instead of a row of None, the
disaggregated TTFT/TPOT when disaggregation is on, C* and B* where computed, config names (not
hashes) in the trend legend, labelled y ticks on plan.png.

Expected numbers come from the job's own summary.json / table.parquet (what the engine wrote),
formatted independently here, never from the printing code.
"""

import json

import polars as pl
import pytest

from runner.job import run_job


def _run(cfg_of, tmp_path, capsys, *overrides):
    cfg = cfg_of(*overrides, "tracking=none")
    run_job(cfg, tmp_path / "job", list(overrides))
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "job" / "summary.json").read_text())["summary"]
    return out, summary, pl.read_parquet(tmp_path / "job" / "table.parquet")


def test_pareto_job_prints_its_frontier(cfg_of, tmp_path, capsys):
    out, s, t = _run(cfg_of, tmp_path, capsys, "model=llama_3_1_70b", "engine.analytical.pareto.enabled=true",
                     "engine.analytical.pareto.devices=8", "engine.analytical.pareto.batches=[1,16,256]")
    assert "None" not in out
    lines = out.strip().splitlines()
    # the default frontier: decode throughput per GPU against interactivity
    front = t.filter(pl.col("on_frontier")).sort("decode_throughput_tok_s_per_gpu", descending=True)
    assert lines[0].startswith("Pareto frontier of llama_3_1_70b on h100_sxm (vllm_v1), 8 devices: "
                               f"{front.height} winners of {s['pareto_points']} points (decode tok/s/GPU")
    head = lines[1].split()
    assert head[:3] == ["partition", "batch", "chunk"] and "tok/s/GPU" in lines[1]
    rows = [ln.split() for ln in lines[2:2 + front.height]]
    assert len(rows) == front.height
    # the first winner is the summary's max-throughput point, at its throughput
    assert rows[0][0] == s["max_throughput_partition"] and int(rows[0][1]) == s["max_throughput_batch"]
    assert f"{s['max_throughput_tok_s_per_gpu']:,.0f}" in rows[0]
    assert [r[0] for r in rows] == front["partition"].to_list()


def test_disaggregated_job_prints_the_disaggregated_figures(cfg_of, tmp_path, capsys):
    out, s, _ = _run(cfg_of, tmp_path, capsys, "engine.analytical.disagg.enabled=true",
                     "engine.analytical.disagg.prefill_tp=4")
    head, row = (ln.split() for ln in out.splitlines()[:2])
    # "TTFT ms" / "TPOT ms" / "tok/s/GPU" are two-word labels: compare against the row by value
    assert "serving" in head and "disagg" in row
    assert f"{s['disagg_ttft_ms']:,.2f}" in row and f"{s['disagg_tpot_ms']:,.2f}" in row
    assert f"{s['colocated_ttft_ms']:,.2f}" not in row     # 169 ms co-located vs 122 ms here
    assert f"{s['disagg_throughput_tok_s_per_gpu']:,.0f}" in row
    # tok/s over the prefill + decode devices: 1 decode + 1 x tp4 prefill = 5
    assert s["disagg_devices"] == 5
    assert f"{s['disagg_throughput_tok_s_per_gpu'] * 5:,.0f}" in row
    line = next(ln for ln in out.splitlines() if ln.startswith("disaggregated prefill/decode"))
    assert f"prefill {s['disagg_prefill_ttft_ms']:,.2f} + exposed KV hand-off {s['disagg_exposed_handoff_ms']:,.2f}" in line
    assert f"co-located instead: TTFT {s['colocated_ttft_ms']:,.2f} ms" in line
    assert s["disagg_ttft_ms"] == pytest.approx(s["disagg_prefill_ttft_ms"] + s["disagg_exposed_handoff_ms"])


def test_chunk_star_and_batch_star_are_printed(cfg_of, tmp_path, capsys):
    out, s, _ = _run(cfg_of, tmp_path, capsys, "engine.analytical.chunk_search=true", "model=llama_3_1_70b",
                     "partition=tp4")
    assert (f"C* = {s['chunk_star']:,.0f} tokens (the prefill chunk of least TTFT among "
            f"engine.analytical.chunk_candidates): TTFT {s['ttft_at_chunk_star_ms']:,.2f} ms") in out
    b = s["batch_star"]
    want = "none (the decode step stays memory-bound at any batch)" if b == "inf" else f"{b:,.1f} sequences"
    assert f"B* (decode batch where a step turns compute-bound) = {want}" in out


def test_no_chunk_search_no_c_star_line(cfg_of, tmp_path, capsys):
    out, s, _ = _run(cfg_of, tmp_path, capsys)
    assert "chunk_star" not in s and "C* =" not in out and "B* (" in out


def test_trend_legend_names_configs(tmp_path, mlflow_uri, monkeypatch):
    """Two configs (h100_sxm and h200) over two commits: the legend reads their hardware names."""
    from mlflow.tracking import MlflowClient

    from runner.tools import plots, report

    c = MlflowClient(tracking_uri=mlflow_uri)
    exp = c.create_experiment("trend")
    for hw, h in (("h100_sxm", "aaaa1111bbbb2222"), ("h200", "cccc3333dddd4444")):
        for commit, v in (("c1c1c1c1c1", 10.0), ("c2c2c2c2c2", 11.0)):
            r = c.create_run(exp, tags={"simllm.config_hash": h, "simllm.git_commit": commit})
            c.log_param(r.info.run_id, "hardware.name", hw)
            c.log_param(r.info.run_id, "model.name", "llama_3_1_8b")
            c.log_metric(r.info.run_id, "ttft_ms_p50", v)
            c.set_terminated(r.info.run_id)
    seen = {}

    def keep(fig, path):
        ax = fig.axes[0]
        seen["legend"] = [t.get_text() for t in ax.get_legend().get_texts()]
        seen["labels"] = (ax.get_xlabel(), ax.get_ylabel())
        return orig(fig, path)

    orig = plots._save
    monkeypatch.setattr(plots, "_save", keep)
    assert report.main(["--trend", "ttft_ms_p50", "trend", "--uri", mlflow_uri, "-o", str(tmp_path / "t")]) == 0
    assert sorted(seen["legend"]) == ["hardware=h100_sxm", "hardware=h200"]
    assert seen["labels"] == ("git commit (in order of its first run)", "ttft_ms_p50 (ms)")
    md = (tmp_path / "t" / "trend.md").read_text()
    assert "| hardware=h200 | cccc3333dd | c1c1c1c1c1 |" in md


def _plan_doc(tok_s_per_gpu):
    rows = [{"max_rps": 1.0, "candidate": {"hardware": hw, "layout": f"tp{tp}", "mode": "colocated"},
             "interactivity_tok_s_per_user": u, "tok_s_per_gpu": g}
            for (hw, tp, u), g in zip((("h100_sxm", 1, 40.0), ("h100_sxm", 2, 60.0), ("h200", 1, 55.0),
                                       ("h200", 2, 80.0)), tok_s_per_gpu)]
    return {"rows": rows, "model": "llama_3_1_8b", "workload": "chat",
            "plan": {"slo": {"tpot_ms": 20.0, "ttft_ms": 500.0, "percentile": 99}}}


@pytest.mark.parametrize("tok_s_per_gpu", [(620, 700, 810, 900),      # within one decade (was unlabelled)
                                           (30, 300, 1500, 6000)])   # over two decades (log axis)
def test_plan_plot_has_labelled_y_ticks(tok_s_per_gpu):
    import matplotlib.pyplot as plt

    from runner.tools import plan

    fig = plan.figure(_plan_doc(tok_s_per_gpu))
    ax = fig.axes[0]
    fig.canvas.draw()
    lo, hi = ax.get_ylim()
    shown = [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks()) if lo <= v <= hi and t.get_text()]
    assert len(shown) >= 2, shown
    assert ax.get_ylabel() == "throughput per GPU (output tokens/s)" and "tokens/s per user" in ax.get_xlabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"h100_sxm", "h200", "Pareto frontier"} <= set(legend)
    plt.close(fig)
