"""simllm-report --trend METRIC and short run-id prefixes, on a real temporary MLflow store.

Runs are logged by hand (MlflowClient) with the tags a job sets (simllm.config_hash,
simllm.git_commit): two configs, three commits, a re-run at one commit, so the expected trend
table is written down from what was logged."""

import time

import polars as pl
import pytest
from mlflow.tracking import MlflowClient

from runner.tools import bundle, compare, report, runs

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _log(c, exp, chash, commit, ttft, t0):
    r = c.create_run(exp, start_time=t0, tags={"simllm.config_hash": chash, "simllm.git_commit": commit,
                                               "simllm.engine": "analytical"})
    c.log_metric(r.info.run_id, "ttft_ms_p50", ttft)
    c.log_param(r.info.run_id, "hardware.name", "h100_sxm")
    c.set_terminated(r.info.run_id, "FINISHED", end_time=t0 + 1000)
    return r.info.run_id


@pytest.fixture
def store(mlflow_uri):
    c = MlflowClient(tracking_uri=mlflow_uri)
    exp = c.create_experiment("trend_exp")
    t0 = int(time.time() * 1000) - 100_000
    ids = {}
    # config A over commits c1, c2 (run twice: the later one counts), c3; config B at c1 and c3
    for i, (h, commit, v) in enumerate([("aaaa1111", "c1c1c1c1", 10.0), ("aaaa1111", "c2c2c2c2", 12.0),
                                        ("aaaa1111", "c2c2c2c2", 11.0), ("bbbb2222", "c1c1c1c1", 20.0),
                                        ("aaaa1111", "c3c3c3c3", 11.0), ("bbbb2222", "c3c3c3c3", 25.0)]):
        ids[i] = _log(c, exp, h, commit, v, t0 + 1000 * i)
    return mlflow_uri, ids


def test_trend_table_latest_run_per_commit(store):
    uri, _ = store
    df = runs.select(uri, experiment="trend_exp", dedupe=False)
    t = report.trend_table(df, "ttft_ms_p50", "commit")
    a = t.filter(pl.col("config_hash") == "aaaa1111")
    assert a["commit"].to_list() == ["c1c1c1c1", "c2c2c2c2", "c3c3c3c3"]
    assert a["value"].to_list() == [10.0, 11.0, 11.0]          # c2: the re-run (11) replaces 12
    assert a["change_pct"].to_list()[1:] == pytest.approx([10.0, 0.0])
    b = report.trend_table(df, "ttft_ms_p50", "date", config_hash="bbbb")
    assert b["value"].to_list() == [20.0, 25.0] and b["change_pct"][1] == pytest.approx(25.0)
    with pytest.raises(runs.SelectionError, match="no run of the selection has metric 'ttft_ms_p99'"):
        report.trend_table(df, "ttft_ms_p99")


def test_trend_cli_writes_table_and_plot(store, tmp_path, capsys):
    uri, _ = store
    out = tmp_path / "trend"
    assert report.main(["--trend", "ttft_ms_p50", "trend_exp", "--uri", uri, "-o", str(out)]) == 0
    assert (out / "trend.png").read_bytes()[:8] == PNG_MAGIC
    assert pl.read_csv(out / "trend.csv").height == 5
    md = (out / "trend.md").read_text()
    assert "| aaaa1111 | c2c2c2c2 |" in md and "+10.00" in md and "![trend](trend.png)" in md
    assert "Trend of ttft_ms_p50" in capsys.readouterr().out
    assert report.main(["--trend", "no_such_metric", "trend_exp", "--uri", uri, "-o", str(out)]) == 2
    assert "no_such_metric" in capsys.readouterr().err


def test_short_run_ids_everywhere(store, tmp_path, capsys):
    uri, ids = store
    full = ids[0]
    assert runs.full_run_id(uri, full[:6]) == full
    assert runs.runs_by_id(uri, [full[:8], ids[1][:8]])["run_id"].to_list() == [full, ids[1]]
    kind, df = runs.resolve(uri, full[:8])
    assert kind == "run" and df["run_id"].to_list() == [full]
    text, raw = compare.compare(uri, full[:8], ids[1][:8])
    assert "A = run" in text and ("ttft_ms_p50", 10.0, 12.0) in [tuple(m) for m in raw["metrics"]]
    # unknown prefix: a clear error, no guess
    unknown = next(p for p in ("ffff0", "0000f", "abcd9") if not any(i.startswith(p) for i in ids.values()))
    with pytest.raises(runs.SelectionError, match=f"no run id starts with '{unknown}'"):
        runs.full_run_id(uri, unknown)
    with pytest.raises(runs.SelectionError, match="matches no run id, git commit or experiment"):
        runs.resolve(uri, unknown)
    with pytest.raises(runs.SelectionError, match="not a run id"):
        runs.full_run_id(uri, "xyz")
    assert bundle.bundle_cli([unknown, "-o", str(tmp_path / "b"), "--uri", uri]) == 2
    assert "no run id starts with" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()          # nothing half-written


def test_ambiguous_prefix_lists_the_candidates(monkeypatch):
    rows = [{"run_id": "abcd" + "0" * 28}, {"run_id": "abcd" + "1" * 28}, {"run_id": "ffff" + "2" * 28}]
    monkeypatch.setattr(runs.tracking, "search_runs", lambda uri, flt="", exps=None: rows)
    with pytest.raises(runs.SelectionError, match="ambiguous.*2 runs start with it.*abcd0000"):
        runs.full_run_id("sqlite:///x.db", "abcd")
    assert runs.full_run_id("sqlite:///x.db", "ffff") == "ffff" + "2" * 28
    with pytest.raises(runs.SelectionError, match="ambiguous"):
        runs.resolve("sqlite:///x.db", "abcd")
