"""``simllm engine=des workload=<trace>`` end to end, with a temporary MLflow store."""

import json

import polars as pl
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli

pytestmark = pytest.mark.slow


def test_cli_des_on_shipped_trace_logs_table_and_percentiles(tmp_path, mlflow_uri):
    p = run_cli(["engine=des", "workload=azure_conv_2k", "workload.num_requests=300",
                 "engine.des.outputs.record_iterations=true",
                 f"tracking.uri={mlflow_uri}", f"hydra.run.dir={tmp_path}/job"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    job = tmp_path / "job"
    summary = json.loads((job / "summary.json").read_text())["summary"]
    table = pl.read_parquet(job / "table.parquet")
    assert table.height == 300 and {"ttft_ms", "tpot_ms", "e2e_ms", "queueing_ms", "preemptions",
                                    "replica", "first_token_s", "completion_s"} <= set(table.columns)
    assert summary["num_completed"] == 300
    assert summary["ttft_ms_p99"] >= summary["ttft_ms_p50"] > 0
    c = MlflowClient(tracking_uri=mlflow_uri)
    runs = c.search_runs([c.get_experiment_by_name("simllm").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    m = runs[0].data.metrics
    for k in ("ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "ttft_ms_p99_9", "tpot_ms_p50",
              "tpot_ms_p99", "itl_ms_p99", "e2e_ms_p50", "queueing_ms_p99", "throughput_tok_s",
              "throughput_tok_s_per_gpu", "goodput_rps", "kv_utilisation_mean"):
        assert m[k] == pytest.approx(summary[k]), k
    assert runs[0].data.tags["simllm.engine"] == "des"
    # engine.des.scheduling.scheduler is null in conf/engine/des.yaml: the default profile (conf/framework/
    # vllm_v1.yaml: decode-first chunked prefill) supplies it
    assert runs[0].data.params["framework.scheduler"] == "sarathi"
    assert runs[0].data.params["framework.name"] == "vllm_v1"
    arts = {a.path for a in c.list_artifacts(runs[0].info.run_id)}
    assert {"table.parquet", "timeline.parquet"} <= arts
    tl = pl.read_parquet(job / "timeline.parquet")
    # the per-iteration timeline (one row per iteration or multi-step decode run) covers every
    # iteration the summary counts
    assert tl.height > 0 and int(tl["iterations"].sum()) == summary["iterations"]
