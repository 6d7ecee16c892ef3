"""simllm-report and --compare against real (temporary) MLflow SQLite stores.

One real 6-job sweep (the jalapeno sensitivity preset, through the console script) is shared by
the module; DES-like runs with per-request tables are logged by hand (synthetic parquet).
"""

import shutil

import numpy as np
import polars as pl
import pytest
from mlflow.tracking import MlflowClient

from runner.tools import compare, plots, report, runs
from tests.conftest import run_cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _is_png(path, min_bytes=10_000):
    data = path.read_bytes()
    return data[:8] == PNG_MAGIC and len(data) >= min_bytes


@pytest.fixture(scope="module")
def sweep(_migrated_store, tmp_path_factory):
    """(uri, parent run id) of a real `simllm -m experiment=jalapeno_sensitivity` (6 jobs)."""
    tmp = tmp_path_factory.mktemp("sweep")
    db = tmp / "mlflow.db"
    shutil.copy(_migrated_store, db)
    uri = f"sqlite:///{db}"
    p = run_cli(["-m", "experiment=jalapeno_sensitivity", f"tracking.uri={uri}", "print_table=false",
                 f"hydra.sweep.dir={tmp}/multirun"], cwd=tmp)
    assert p.returncode == 0, p.stderr
    c = MlflowClient(tracking_uri=uri)
    exp = c.get_experiment_by_name("jalapeno_sensitivity")
    (parent,) = [r for r in c.search_runs([exp.experiment_id])
                 if r.data.tags.get("simllm.role") == "sweep"]
    return uri, parent.info.run_id


@pytest.mark.slow  # the module's real 6-job sweep (console script)
def test_report_of_a_sweep_matches_the_runs(sweep, tmp_path, capsys):
    uri, parent = sweep
    out = tmp_path / "rep"
    assert report.main([parent, "--uri", uri, "-o", str(out), "--html"]) == 0
    table = pl.read_csv(out / "sensitivity.csv")
    assert table.height == 6 and table.columns[:2] == ["peak_bf16", "hbm_bandwidth"]
    assert sorted(zip(table["peak_bf16"], table["hbm_bandwidth"])) == sorted(
        (c, b) for c in ("512TFLOPS", "800TFLOPS") for b in ("2TB/s", "4TB/s", "8TB/s"))
    assert "TTFT p99 ms" not in table.columns  # analytical: p99 = p50, no p99 column
    client = MlflowClient(tracking_uri=uri)
    for row in table.iter_rows(named=True):
        r = client.get_run(row["run_id"]).data
        assert r.tags["mlflow.parentRunId"] == parent
        assert row["TTFT ms"] == r.metrics["ttft_ms_p50"]
        assert row["TPOT ms"] == r.metrics["tpot_ms_p50"]
        assert row["tok/s"] == r.metrics["throughput_tok_s"]
        assert row["tok/s/GPU"] == r.metrics["throughput_tok_s_per_gpu"]
        assert row["bound"] == r.tags["summary.bound"]
    # compute moves TTFT, bandwidth moves TPOT (rows sorted by the swept values)
    assert table["TTFT ms"][0] > table["TTFT ms"][3] and table["TPOT ms"][0] > table["TPOT ms"][2]
    md = (out / "report.md").read_text()
    assert md.count("| 512TFLOPS |") == 3 and md.count("| 800TFLOPS |") == 3
    for png in ("roofline.png", "sensitivity.png", "pareto.png", "op_shares.png"):
        assert _is_png(out / png), png
        assert f"]({png})" in md
    assert not (out / "cdf.png").exists() and "No per-request tables" in md
    assert md_html_ok(out)
    (rep,) = [r for r in client.search_runs([client.get_run(parent).info.experiment_id])
              if r.data.tags.get("simllm.role") == "report"]
    assert {a.path for a in client.list_artifacts(rep.info.run_id)} >= {
        "report.md", "roofline.png", "sensitivity.csv"}
    assert "logged as MLflow run" in capsys.readouterr().out


def md_html_ok(out):
    page = (out / "report.html").read_text()
    return page.count("data:image/png;base64,") == 4 and "<table>" in page and "src=\"roofline" not in page


@pytest.mark.slow  # the module's real 6-job sweep (console script)
def test_report_by_experiment_ignores_parents_and_reports(sweep, tmp_path):
    uri, _ = sweep
    out = tmp_path / "rep"
    assert report.main(["--experiment", "jalapeno_sensitivity", "--uri", uri, "-o", str(out),
                        "--no-log"]) == 0
    assert pl.read_csv(out / "sensitivity.csv").height == 6


def test_unknown_experiment_is_a_clean_error(mlflow_uri, tmp_path, capsys):
    uri = mlflow_uri
    assert report.main(["--experiment", "nope", "--uri", uri, "-o", str(tmp_path / "r")]) == 2
    assert "nope" in capsys.readouterr().err


@pytest.mark.slow  # the module's real 6-job sweep (console script)
def test_compare_two_runs_differing_in_one_param(sweep):
    uri, parent = sweep
    df = runs.sweep_runs(uri, parent)
    rows = {(r["params.hardware.peak_bf16"], r["params.hardware.hbm_bandwidth"]): r["run_id"]
            for r in df.iter_rows(named=True)}
    a, b = rows[("512TFLOPS", "4TB/s")], rows[("800TFLOPS", "4TB/s")]
    md, raw = compare.compare(uri, a, b)
    assert raw["params"] == [("hardware.peak_bf16", "512TFLOPS", "800TFLOPS")]
    changed = {k for k, _, _ in raw["metrics"]}
    assert {"ttft_ms_p50", "ttft_ms_p99", "e2e_ms_p50", "throughput_tok_s", "ridge_flop_per_byte"} <= changed
    assert "tpot_ms_p50" not in changed and "weights_gb" not in changed  # memory-bound decode
    ma, mb = (MlflowClient(tracking_uri=uri).get_run(r).data.metrics for r in (a, b))
    for k, x, y in raw["metrics"]:
        assert (x, y) == (ma.get(k), mb.get(k))
    assert "1 param(s) changed" in md and "| hardware.peak_bf16 | 512TFLOPS | 800TFLOPS |" in md


@pytest.mark.slow  # the module's real 6-job sweep (console script)
def test_compare_sweep_with_its_own_runs_matches_every_config(sweep):
    uri, parent = sweep
    ids = runs.sweep_runs(uri, parent)["run_id"].to_list()
    md, raw = compare.compare(uri, parent, "jalapeno_sensitivity")
    assert len(raw["pairs"]) == 6 and not raw["only_a"] and not raw["only_b"]
    assert {p["a"] for p in raw["pairs"]} == set(ids)
    assert all(not p["params"] and not p["metrics"] for p in raw["pairs"])
    assert "Every matched config has the same params and metrics" in md


def _log_des_like(uri, tmp_path, rate, scale):
    """A run shaped like a DES job: per-request table (seconds), p99 != p50, arrival rate param."""
    rng = np.random.default_rng(int(rate))
    ttft = rng.lognormal(np.log(0.05 * scale), 0.5, 400)
    tpot = rng.lognormal(np.log(0.01 * scale), 0.3, 400)
    job = tmp_path / f"job{rate}"
    job.mkdir()
    pl.DataFrame({"request_id": np.arange(400), "ttft": ttft, "tpot": tpot}).write_parquet(job / "table.parquet")
    c = MlflowClient(tracking_uri=uri)
    exp = c.get_experiment_by_name("des") or c.get_experiment(c.create_experiment("des"))
    run = c.create_run(exp.experiment_id, tags={"simllm.engine": "des", "summary.bound": "queueing",
                                                "simllm.config_hash": f"h{rate}"})
    rid = run.info.run_id
    for k, v in {"workload.rate_rps": str(rate), "hardware.name": "h100_sxm",
                 "partition.tp": "1", "engine.name": "des"}.items():
        c.log_param(rid, k, v)
    for k, v in {"ttft_ms_p50": np.median(ttft) * 1e3, "ttft_ms_p99": np.quantile(ttft, 0.99) * 1e3,
                 "tpot_ms_p50": np.median(tpot) * 1e3, "tpot_ms_p99": np.quantile(tpot, 0.99) * 1e3,
                 "throughput_tok_s": 100.0 * rate, "throughput_tok_s_per_gpu": 100.0 * rate,
                 "interactivity_tok_s_per_user": 1e3 / (np.mean(tpot) * 1e3)}.items():
        c.log_metric(rid, k, float(v))
    c.log_artifact(rid, str(job / "table.parquet"))
    c.set_terminated(rid)
    return rid


def test_cdfs_and_load_plot_from_per_request_tables(mlflow_uri, tmp_path):
    ids = [_log_des_like(mlflow_uri, tmp_path, rate, s) for rate, s in ((1, 1.0), (4, 1.5), (16, 3.0))]
    out = tmp_path / "rep"
    assert report.main(["des", "--uri", mlflow_uri, "-o", str(out), "--no-log"]) == 0
    t = pl.read_csv(out / "sensitivity.csv")
    assert t["rate_rps"].to_list() == [1, 4, 16] and t["run_id"].to_list() == ids
    c = MlflowClient(tracking_uri=mlflow_uri)
    for row in t.iter_rows(named=True):
        m = c.get_run(row["run_id"]).data.metrics
        assert (row["TTFT p99 ms"], row["TPOT p99 ms"]) == (m["ttft_ms_p99"], m["tpot_ms_p99"])
    assert set(t["bound"]) == {"queueing"}
    md = (out / "report.md").read_text()
    for png in ("cdf.png", "load.png", "pareto.png"):
        assert _is_png(out / png), png
    assert "](roofline.png)" not in md and "phase breakdown" in md  # no analytical table: no roofline


def test_per_request_units():
    s = report.per_request(pl.DataFrame({"ttft_ms": [10.0, 20.0], "tpot_s": [0.005, 0.006]}))
    assert s["ttft"].tolist() == [10.0, 20.0] and s["tpot"].tolist() == [5.0, 6.0]
    assert report.per_request(pl.DataFrame({"x": [1]})) is None


def test_pareto_front():
    # (tok/s/user, tok/s/gpu): (1,10) (2,8) (3,3) dominate (1.5,5) and (2,2)
    x = [1.0, 2.0, 3.0, 1.5, 2.0]
    y = [10.0, 8.0, 3.0, 5.0, 2.0]
    assert plots.pareto_front(x, y) == [0, 1, 2]


def test_swept_params_shows_option_name_not_its_fields():
    df = pl.DataFrame({"params.hardware.name": ["h100", "h200", "h100", "h200"],
                       "params.hardware.hbm_capacity": ["80 GB", "141 GB", "80 GB", "141 GB"],
                       "params.hardware.description": ["a", "b", "a", "b"],
                       "params.partition.tp": ["1", "1", "2", "2"],
                       "params.model.name": ["m"] * 4})
    assert report.swept_params(df) == ["hardware.name", "partition.tp"]


def test_compare_matches_configs_across_commits_by_overrides():
    """Another commit changed the config hash (new schema field) and the command added a
    result-neutral override: runs still pair up by their result-relevant overrides."""
    def rows(commit, extra, hashes):
        return pl.DataFrame([{"run_id": f"{commit}{i}" + "0" * 30, "tags.simllm.git_commit": commit,
                              "tags.simllm.config_hash": h,
                              "tags.simllm.overrides": f"hardware.hbm_bandwidth={bw} experiment=x{extra}",
                              "params.hardware.hbm_bandwidth": bw}
                             for i, (bw, h) in enumerate(zip(("2TB/s", "4TB/s"), hashes))])
    a = rows("aa", "", ("h1", "h2"))
    b = rows("bb", " print_table=False", ("h3", "h4"))[::-1]
    pairs, only_a, only_b = compare._match(a, b)
    assert [(x["params.hardware.hbm_bandwidth"], y["params.hardware.hbm_bandwidth"]) for x, y in pairs] \
        == [("2TB/s", "2TB/s"), ("4TB/s", "4TB/s")] and not only_a and not only_b
    assert compare._kind(1.0, 1.0 + 1e-15) == "rounding" and compare._kind(1.0, 1.001) == "changed"
    assert compare.metric_changes({"x": float("inf")}, {"x": 1.7976931348623157e308}) == []


def test_pareto_points_from_a_grid_table_and_png(tmp_path):
    """A run whose table is the analytical Pareto sweep contributes one point per grid row."""
    grid = pl.DataFrame({"partition": ["PP1-TP4-EP1-SP1", "PP2-TP4-EP1-SP1", "PP1-TP8-EP1-SP1"],
                         "batch_size": [64.0, 8.0, 1.0], "interactivity_tok_s_per_user": [40.0, 30.0, 90.0],
                         "throughput_tok_s_per_gpu": [800.0, 100.0, 12.0]})
    rows = {"r1": {"metrics.interactivity_tok_s_per_user": 1.0, "metrics.throughput_tok_s_per_gpu": 2.0},
            "r2": {"metrics.interactivity_tok_s_per_user": 50.0, "metrics.throughput_tok_s_per_gpu": 300.0,
                   "params.partition.tp": "2", "params.partition.pp": "1"}}
    pts, kind = report._pareto_points(rows, {"r1": grid}, {"r1": "grid", "r2": "single"})
    assert kind == ""  # e2e throughput (no run asked for the decode frontier)
    assert [p[2] for p in pts] == ["TP4 b64", "PP2 TP4 b8", "TP8 b1", "tp2"]
    assert plots.pareto_front([p[0] for p in pts], [p[1] for p in pts]) == [0, 3, 2]
    assert _is_png(plots.pareto(pts, tmp_path / "p.png"))
