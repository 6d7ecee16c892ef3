"""Simple spec-sheet configs (num_params, compute_tflops_bf16, memory_bandwidth_gbps ...) run,
with the missing architecture terms stated. The seed document's Jalapeno config (sec. 3.2) must
give the same TTFT/TPOT as the hand-written jalapeno + llama_7b_specsheet options (tp1)."""

import pytest
from omegaconf import OmegaConf

from engine.analytical import run
from engine.ingest.simple import SimpleConfigError, import_simple, nearest_reference
from runner.convert import specs_from_config
from runner.tools.import_cli import main as import_main
from runner.tools.import_cli import reference_models

REFS = reference_models()
from runner.schema import HardwareSchema, ModelSchema

SEED = {
    "model": {"name": "llama-7b", "num_params": 7.2e9, "dtype_bits": 16},
    "hardware": {"compute_tflops_bf16": 512, "memory_bandwidth_gbps": 4096, "memory_capacity_gb": 192,
                 "sram_capacity_mb": 64, "interconnect_bandwidth_gbps": 900},
    "scheduler": {"max_batch_size": 128, "preemption": True, "kv_cache_capacity_gb": 160},
    "workload": {"trace": "./traces/arxiv_sample.json", "max_concurrent_requests": 256,
                 "input_len_p50": 512, "output_len_p50": 128},
}


def _node(schema, text):
    node = OmegaConf.create(text)
    node.pop("defaults")
    return OmegaConf.merge(OmegaConf.structured(schema), node)


def test_seed_simple_config_matches_hand_written_options(cfg_of):
    imp = import_simple(SEED, "jalapeno_simple", references=REFS)
    base = ("workload=specsheet_512", "calibration=specsheet")
    hand = run(specs_from_config(cfg_of("hardware=jalapeno", "model=llama_7b_specsheet", *base))).summary
    cfg = cfg_of(*base)
    cfg.hardware = _node(HardwareSchema, imp.hardware.yaml_text())
    cfg.model = _node(ModelSchema, imp.model_yaml())
    got = run(specs_from_config(cfg)).summary
    for k in ("ttft_ms_p50", "tpot_ms_p50", "weights_gb", "kv_cache_gb", "bound"):
        assert got[k] == hand[k], k
    # hand check (seed sec. 4.2): weights 7.2e9 x 2 B = 14.4 GB streamed per token at 4.096 TB/s
    assert got["weights_gb"] == pytest.approx(14.4)
    assert got["tpot_ms_p50"] >= 14.4e9 / 4.096e12 * 1e3
    assert imp.overrides == ["workload.prompt_len=512", "workload.output_len=128"]


def test_missing_terms_are_stated():
    imp = import_simple(SEED, "x", references=REFS)
    text = "\n".join(imp.assumptions + imp.hardware.assumptions)
    assert "architecture of llama_2_7b" in text                       # 6.74 B is nearest to 7.2 B
    assert "read as GB/s" in text
    # (192 - 14.4) x 0.9 = 159.84 GB vs the sheet's 160 GB
    assert "159.8 GB agrees" in text
    assert "scheduler.preemption" in text and "not used" in text


def test_nearest_reference_by_log_distance():
    # totals of the conf/model options (SOURCES.md): 6.74, 13.0, 8.03, 70.55, 405.85 B
    assert nearest_reference(7.2e9, REFS) == "llama_2_7b"      # ln(7.2/6.74)=0.066 < ln(8.03/7.2)=0.109
    assert nearest_reference(9e9, REFS) == "llama_3_1_8b"
    assert nearest_reference(60e9, REFS) == "llama_3_1_70b"
    assert nearest_reference(12e9, REFS) == "llama_2_13b"      # ln(13.0/12)=0.08 < ln(12/8.03)=0.40


@pytest.mark.parametrize("cfg,needle", [
    ({**SEED, "hardware": {**SEED["hardware"], "memory_bandwith_gbps": 1}}, "hardware.memory_bandwith_gbps: unknown"),
    ({"model": {"num_params": 7e9, "dtype_bits": 16}, "hardware": {"compute_tflops_bf16": 512,
                                                                   "memory_capacity_gb": 192}},
     "hardware.memory_bandwidth_gbps: missing"),
    ({**SEED, "model": {"num_params": "many", "dtype_bits": 16}}, "model.num_params = 'many'"),
])
def test_errors_name_the_key(cfg, needle):
    with pytest.raises(SimpleConfigError, match=needle.replace("(", r"\(")):
        import_simple(cfg, "x", references=REFS)


def test_simple_command_writes_both_configs(tmp_path, capsys):
    src = tmp_path / "study.yaml"
    src.write_text(OmegaConf.to_yaml(OmegaConf.create(SEED)))
    assert import_main(["simple", str(src), "--name", "jal_simple", "--conf-dir", str(tmp_path / "conf")]) == 0
    assert (tmp_path / "conf" / "hardware" / "jal_simple.yaml").exists()
    assert (tmp_path / "conf" / "model" / "jal_simple.yaml").exists()
    out = capsys.readouterr().out
    assert "simllm hardware=jal_simple model=jal_simple workload.prompt_len=512 workload.output_len=128" in out


def test_seed_yaml_imported_whole_for_the_des(cfg_of, tmp_path, capsys):
    """The scheduler and workload sections become a DES config: max_batch_size -> max_num_seqs,
    preemption true -> recompute, kv_cache_capacity_gb 160 -> 160e9 / (KV per token x 16) blocks
    with Llama-2-7B's KV (32 layers x 32 KV heads x 128 x 2 (K, V) x 2 B = 524,288 B/token):
    19073 blocks; 256 concurrent users -> a closed loop; the missing trace is stated."""
    from runner.schema import WorkloadSchema
    from engine.des import simulate

    imp = import_simple(SEED, "jal_seed", references=REFS)
    assert imp.des_overrides == ["engine.des.scheduling.max_num_seqs=128", "engine.des.scheduling.preemption=recompute",
                                 "engine.des.kv.block_size=16", "engine.des.kv.num_kv_blocks=19073"]
    w = imp.workload_fields
    assert (w["arrival"], w["concurrency"], w["prompt_len"], w["output_len"]) == ("closed_loop", 256, 512, 128)
    assert any("arxiv_sample.json" in a and "not found" in a for a in imp.assumptions)
    cmd = imp.des_command("jal_seed", "jal_seed")
    assert cmd.startswith("simllm engine=des hardware=jal_seed model=jal_seed workload=jal_seed ")
    # the imported config runs in the DES with the sheet's KV blocks and batch limit
    cfg = cfg_of("engine=des", *imp.des_overrides)
    cfg.hardware = _node(HardwareSchema, imp.hardware.yaml_text())
    cfg.model = _node(ModelSchema, imp.model_yaml())
    cfg.workload = _node(WorkloadSchema, imp.workload_yaml())
    cfg.workload.num_requests = 300
    specs = specs_from_config(cfg)
    r = simulate(specs).result.summary
    assert r["kv_blocks"] == 19073 and r["num_completed"] == 300
    assert r["batch_size_mean"] <= 128
    # the CLI writes the workload option and prints the DES command
    for d in ("hardware", "model", "workload"):
        (tmp_path / d).mkdir()
    src = tmp_path / "seed.yaml"
    import yaml
    src.write_text(yaml.safe_dump(SEED))
    import_main(["simple", str(src), "--name", "jal_seed", "--conf-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "run (DES): simllm engine=des hardware=jal_seed model=jal_seed workload=jal_seed" in out
    assert (tmp_path / "workload" / "jal_seed.yaml").is_file()


def test_seed_yaml_bad_preemption_names_the_key():
    bad = {**SEED, "scheduler": {**SEED["scheduler"], "preemption": "sometimes"}}
    with pytest.raises(SimpleConfigError, match="scheduler.preemption"):
        import_simple(bad, "x", references=REFS)
