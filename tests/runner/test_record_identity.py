"""The record names what was computed, whatever supplied the model, the hardware or the framework.

Each way in is composed with Hydra's compose API, run through ``runner.job.run_job`` into a temp
job directory and logged to a fresh (copied, already migrated) SQLite MLflow store; the printed
row, config.yaml, the params and tags in the store and the run name are checked against values
read independently: the config.json itself (json module: num_hidden_layers, num_experts), the
override strings of the command line, the option names in conf/.
"""

import json

import pytest
import yaml
from mlflow.tracking import MlflowClient

from runner.job import run_job, run_name
from tests.conftest import require_shared, run_cli


def _job(cfg_of, uri, tmp_path, *overrides):
    """Run one job of ``overrides`` (compose API) logged to ``uri``; (run, config.yaml, stdout
    row) with the run read back from the store."""
    over = list(overrides)
    cfg = cfg_of(*over, f"tracking.uri={uri}", "tracking.experiment=ident")
    job = tmp_path / "job"
    run_job(cfg, job, over)
    c = MlflowClient(tracking_uri=uri)
    exp = c.get_experiment_by_name("ident")
    (run,) = c.search_runs([exp.experiment_id])
    return run, yaml.safe_load((job / "config.yaml").read_text()), job


def _row(out: str) -> dict:
    """The printed row (header and first row of the text table) as {column: value}."""
    head, row = out.strip().splitlines()[:2]
    return dict(zip(head.split(), row.split()))


def test_hf_config_names_the_json_model_everywhere(cfg_of, mlflow_uri, tmp_path, capsys):
    path = require_shared("model_configs", "qwen3-30b-a3b.json")
    hf = json.loads(path.read_text())
    run, conf, job = _job(cfg_of, mlflow_uri, tmp_path, f"model.hf_config={path}")
    row = _row(capsys.readouterr().out)
    assert row["model"] == "qwen3_30b_a3b" and "llama_3_1_8b" not in row.values()
    m = conf["model"]
    assert (m["name"], m["num_layers"], m["num_experts"], m["experts_per_token"]) == \
        ("qwen3_30b_a3b", hf["num_hidden_layers"], hf["num_experts"], hf["num_experts_per_tok"])
    assert m["source"] == str(path) and m["hf_config"] == str(path)
    p, t = run.data.params, run.data.tags
    assert (p["model.name"], p["model.num_layers"], p["model.num_experts"]) == \
        ("qwen3_30b_a3b", str(hf["num_hidden_layers"]), str(hf["num_experts"]))
    assert (t["simllm.model"], t["simllm.model.num_layers"], t["simllm.model.num_experts"]) == \
        ("qwen3_30b_a3b", "48", "128")
    assert run.info.run_name == "analytical:h100_sxm:qwen3_30b_a3b:vllm_v1:tp1:b16"
    # config.yaml re-composes to the same model: the shipped option mapped from the same JSON
    # computes the same numbers
    summary = json.loads((job / "summary.json").read_text())["summary"]
    from runner.convert import specs_from_config
    from engine.analytical import run as analytical

    same = analytical(specs_from_config(cfg_of("model=qwen3_30b_a3b"))).summary
    assert summary["tpot_ms_p50"] == pytest.approx(same["tpot_ms_p50"], rel=1e-12)
    assert summary["weights_gb"] == pytest.approx(same["weights_gb"], rel=1e-12)


def test_conf_model_option(cfg_of, mlflow_uri, tmp_path, capsys):
    from tests.conftest import CONF

    opt = yaml.safe_load((CONF / "model" / "mixtral_8x7b.yaml").read_text())
    run, conf, _ = _job(cfg_of, mlflow_uri, tmp_path, "model=mixtral_8x7b", "partition=tp2")
    assert _row(capsys.readouterr().out)["model"] == "mixtral_8x7b"
    assert conf["model"]["name"] == "mixtral_8x7b" and conf["model"]["num_experts"] == opt["num_experts"] == 8
    t = run.data.tags
    assert (t["simllm.model"], t["simllm.model.num_layers"], t["simllm.model.num_experts"],
            t["simllm.model.experts_per_token"]) == \
        ("mixtral_8x7b", str(opt["num_layers"]), str(opt["num_experts"]), str(opt["experts_per_token"]))
    assert run.info.run_name == "analytical:h100_sxm:mixtral_8x7b:vllm_v1:tp2:b16"


def test_draft_model_by_vendor_name_and_json(cfg_of, mlflow_uri, tmp_path, capsys):
    run, conf, _ = _job(cfg_of, mlflow_uri, tmp_path, "model=llama_3_1_70b", "partition=tp4",
                        "engine.analytical.spec_decode.method=draft",
                        "engine.analytical.spec_decode.draft_model=meta-llama/Llama-3.1-8B")
    assert _row(capsys.readouterr().out)["draft"] == "llama_3_1_8b"
    assert conf["engine"]["analytical"]["spec_decode"]["draft_model"] == "llama_3_1_8b"
    t = run.data.tags
    assert (t["simllm.draft_model"], t["simllm.draft_model.num_layers"],
            t["simllm.draft_model.num_experts"]) == ("llama_3_1_8b", "32", "0")
    assert run.data.params["engine.analytical.spec_decode.draft_model"] == "llama_3_1_8b"
    assert run.info.run_name == "analytical:h100_sxm:llama_3_1_70b:vllm_v1:draft=llama_3_1_8b:tp4:b16"


def test_draft_model_from_a_config_json(cfg_of, mlflow_uri, tmp_path, capsys):
    path = require_shared("model_configs", "llama-3.1-8b.json")
    layers = json.loads(path.read_text())["num_hidden_layers"]
    run, _, _ = _job(cfg_of, mlflow_uri, tmp_path, "model=llama_3_1_70b", "partition=tp4",
                     "engine.analytical.spec_decode.method=draft",
                     f"engine.analytical.spec_decode.draft_model={path}")
    t = run.data.tags
    assert (t["simllm.draft_model"], t["simllm.draft_model.num_layers"]) == ("llama_3_1_8b", str(layers))


def test_spec_sheet_hardware_with_an_override(cfg_of, mlflow_uri, tmp_path, capsys):
    """jalapeno is generated from its spec sheet (conf/hardware/sheets/jalapeno.csv); the
    command line then changes its bandwidth: the row, tags and run name say so."""
    run, conf, _ = _job(cfg_of, mlflow_uri, tmp_path, "hardware=jalapeno", "model=llama_7b_specsheet",
                        "hardware.hbm_bandwidth=8TB/s")
    assert _row(capsys.readouterr().out)["hardware"] == "jalapeno[hbm_bandwidth=8TB/s]"
    assert conf["hardware"]["name"] == "jalapeno" and conf["hardware"]["hbm_bandwidth"] == "8TB/s"
    p, t = run.data.params, run.data.tags
    assert p["hardware.name"] == "jalapeno" and p["hardware.hbm_bandwidth"] == "8TB/s"
    assert t["simllm.hardware"] == "jalapeno[hbm_bandwidth=8TB/s]" and t["simllm.hardware.name"] == "jalapeno"
    assert run.info.run_name == "analytical:jalapeno:llama_7b_specsheet:vllm_v1:tp1:b16 hbm_bandwidth=8TB/s"


def test_framework_profile(cfg_of, mlflow_uri, tmp_path, capsys):
    run, _, _ = _job(cfg_of, mlflow_uri, tmp_path, "framework=vllm_v1")
    assert _row(capsys.readouterr().out)["framework"] == "vllm_v1"
    assert run.data.tags["simllm.framework"] == "vllm_v1" and run.data.params["framework.name"] == "vllm_v1"
    assert run.info.run_name == "analytical:h100_sxm:llama_3_1_8b:vllm_v1:tp1:b16"


def test_des_run_name_names_the_swept_values(cfg_of, mlflow_uri, tmp_path, capsys):
    run, _, _ = _job(cfg_of, mlflow_uri, tmp_path, "engine=des", "workload=poisson_chat",
                     "workload.num_requests=20", "workload.rate_rps=4")
    assert run.info.run_name == "des:h100_sxm:llama_3_1_8b:vllm_v1:tp1:poisson_chat num_requests=20 rate_rps=4"
    # two keys with the same last part keep their full keys; result-neutral keys are left out
    cfg = cfg_of("engine=des")
    assert run_name(cfg, ["hardware.tdp=500", "framework.tdp=1", "tracking.uri=x", "hydra.job.chdir=true"]) \
        == "des:h100_sxm:llama_3_1_8b:vllm_v1:tp1:chat hardware.tdp=500 framework.tdp=1"


def test_vendor_model_names_resolve_to_the_shipped_options():
    from runner.convert import misspelt_option
    from runner.tools.rowgrammar import resolve_model

    for name, opt in (("Meta-Llama-3.1-8B", "llama_3_1_8b"), ("Meta-Llama-3-8B-Instruct", "llama_3_1_8b"),
                      ("meta-llama/Llama-3.1-8B", "llama_3_1_8b"), ("Qwen/Qwen3-32B", "qwen3_32b"),
                      ("Qwen/Qwen3-30B-A3B", "qwen3_30b_a3b"), ("llama_3_1_8b", "llama_3_1_8b"),
                      ("llama_7b_specsheet", "llama_7b_specsheet"), ("gpt_1_8t_moe", "gpt_1_8t_moe"),
                      ("Qwen2.5-72B-Instruct", "qwen2_5_72b"), ("openai/gpt-oss-20b", "gpt_oss_20b")):
        assert resolve_model(name)[0] == opt, name
    msg = misspelt_option(["model=Meta-Llama-3.1-8B", "partition=tp2"])
    assert "model=Meta-Llama-3.1-8B" in msg and "model=llama_3_1_8b" in msg
    assert "model=qwen3_32b" in misspelt_option(["-m", "model=llama_3_1_8b,Qwen/Qwen3-32B"])
    assert "hardware=h100_sxm" in misspelt_option(["hardware=H100-SXM5-80GB"])
    assert "weight_dtype=fp8" in misspelt_option(["model=meta-llama/Meta-Llama-3.1-8B-Instruct-FP8"])
    assert misspelt_option(["model=qwen3_32b", "hardware=h200"]) is None
    assert misspelt_option(["model=nope"]) is None          # no close match: Hydra's own error


@pytest.mark.slow
def test_cli_vendor_model_name_is_one_line_exit_2(tmp_path):
    p = run_cli(["model=Meta-Llama-3.1-8B", "tracking=none", f"hydra.run.dir={tmp_path}/job"], cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [
        "simllm: error: model=Meta-Llama-3.1-8B: no conf/model option 'Meta-Llama-3.1-8B'; the same "
        "model is the option model=llama_3_1_8b"]
