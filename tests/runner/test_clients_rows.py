"""Benchmark clients on the runner side: workload.client composes, benchmark rows name their
client, closed-loop rows run the client's profile; simllm-import inference-perf's current field
names, prompt pool and model names."""

import numpy as np
import pytest

from engine.des.workload.importers import inference_perf_requests
from runner.tools import rowgrammar as rg
from runner.tools.import_cli import inference_perf_model
from runner.tools.validate import cases
from runner.tools.validate.cases import build_case
from tests.conftest import compose_specs


def test_workload_client_composes_and_sets_the_des_fields():
    from engine.des.config import deployment

    specs = compose_specs("engine=des", "workload=closed_loop", "workload.client=aiperf",
                          "engine.des.clients.ramp_up_s=2")
    assert specs.workload.client == "aiperf"
    _, des = deployment(specs)
    assert des.clients.ramp_up_s == 0.0                          # the profile's burst start wins
    assert compose_specs("workload=closed_loop").workload.client == "none"


@pytest.mark.parametrize("cell,notes,want", [
    ("aiperf", "", "aiperf"), ("", "closed loop; client=vllm_bench", "vllm_bench"),
    ("genai-perf 0.0.15", "", "aiperf"), ("benchmark_serving.py", "", "vllm_bench"),
    ("GuideLLM", "", "guidellm"), ("inference-perf", "", "inference_perf"),
    ("none", "", "none"), ("", "fixed ISL/OSL", ""),
])
def test_row_names_its_client(cell, notes, want):
    assert rg.parse_client(cell, notes) == want


_ROW = {"model": "Qwen3-32B", "hardware": "H100-SXM5-80GB", "num_gpus": "1", "precision": "BF16",
        "framework": "vLLM", "framework_version": "0.10", "tp": "1", "pp": "1",
        "batch_or_concurrency": "concurrency=16", "input_len": "1024", "output_len": "128",
        "metric": "ttft_ms", "unit": "ms (mean)", "value": "100", "id": "X-1"}


def test_closed_loop_row_runs_its_client_profile():
    c = build_case({**_ROW, "client": "aiperf"})
    # AIPerf as aiconfigurator's sweep runs it: 20 x 16 requests, burst start, exact lengths
    assert c.workload["client"] == "aiperf" and c.workload["num_requests"] == 320
    assert c.des["ramp_up_s"] == 0.0 and c.des["length_jitter"] == 0.0 and not c.des["exclude_drain"]
    v = build_case({**_ROW, "notes": "client=vllm_bench"})
    assert v.workload["num_requests"] == 1000            # vLLM bench --num-prompts default
    n = build_case({**_ROW, "client": "none"})
    assert "client" not in n.workload and n.des["ramp_up_s"] == cases.CLOSED_RAMP_S
    d = build_case(_ROW)
    assert d.workload["client"] == cases.DEFAULT_CLIENT


def test_inference_perf_current_and_former_field_names_give_one_stream():
    sp = {"system_prompt_len": 1024, "question_len": 100, "output_len": 50}
    load = {"type": "constant", "stages": [{"rate": 10, "duration": 4}]}
    new = inference_perf_requests({"load": load, "data": {"type": "shared_prefix", "shared_prefix": {
        **sp, "num_unique_system_prompts": 2, "num_users_per_system_prompt": 3}}}, block_tokens=256)
    old = inference_perf_requests({"load": load, "data": {"type": "shared_prefix", "shared_prefix": {
        **sp, "num_groups": 2, "num_prompts_per_group": 3}}}, block_tokens=256)
    assert new.equals(old)


def test_inference_perf_cycles_its_prompt_pool():
    # 2 system prompts x 3 questions = a pool of 6 prompts; request i sends prompt i mod 6, so
    # request i + 6 is the same token sequence (all its blocks a prefix hit). 1024 + 300 tokens at
    # 256 per block: 5 full blocks, the first 4 the group's system prompt
    cfg = {"load": {"type": "constant", "stages": [{"rate": 10, "duration": 2}]},
           "data": {"type": "shared_prefix", "shared_prefix": {
               "num_unique_system_prompts": 2, "num_users_per_system_prompt": 3,
               "system_prompt_len": 1024, "question_len": 300, "output_len": 50}}}
    t = inference_perf_requests(cfg, block_tokens=256)
    h = [tuple(x) for x in t["hash_ids"].to_list()]
    assert t.height == 20 and all(len(x) == 5 for x in h)
    assert h[:6] == h[6:12] == h[12:18]
    assert len(set(h[:6])) == 6                          # six distinct prompts in the pool
    assert {x[:4] for x in h} == {(0, 1, 2, 3), (4, 5, 6, 7)}   # two system prompts


def test_inference_perf_multi_turn_sessions_grow_by_their_history():
    # one group of 2 users; round r input = s + (r + 1)(s + q) + r o with s = 512, q = 100,
    # o = 50 (the context starts as the system prompt; each round appends prompt and response)
    cfg = {"load": {"type": "constant", "stages": [{"rate": 6, "duration": 1}]},
           "data": {"type": "shared_prefix", "shared_prefix": {
               "num_unique_system_prompts": 1, "num_users_per_system_prompt": 2,
               "system_prompt_len": 512, "question_len": 100, "output_len": 50,
               "enable_multi_turn_chat": True}}}
    t = inference_perf_requests(cfg, block_tokens=128)
    inp = t["input_length"].to_numpy()
    r = np.arange(6) // 2
    assert np.array_equal(inp, 512 + (r + 1) * 612 + r * 50)
    h = t["hash_ids"].to_list()
    for k in range(4):                                   # the same user's next round extends it
        assert h[k + 2][:len(h[k])] == h[k]
    assert h[0][:4] == h[1][:4] and h[0][4] != h[1][4]   # system prompt shared, the rest not


@pytest.mark.parametrize("name,want", [
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama_3_1_8b"), ("Meta-Llama-3.1-8B", "llama_3_1_8b"),
    ("meta-llama/Meta-Llama-3.1-70B-Instruct", "llama_3_1_70b"),
])
def test_inference_perf_model_names_resolve(name, want):
    assert inference_perf_model({"server": {"model_name": name}}) == (want, "")
    assert inference_perf_model({"tokenizer": {"pretrained_model_name_or_path": name}})[0] == want
    assert rg.resolve_model(name)[0] == want
    opt, note = inference_perf_model({"server": {"model_name": "HuggingFaceTB/SmolLM2-135M"}})
    assert opt == "" and "hfconfig" in note


def test_guidellm_rows_compare_its_own_tpot_and_itl():
    # GuideLLM's TPOT includes the first token (tpot_ms under its definition); its mean ITL is the
    # decode TPOT (itl_ms_mean)
    t = build_case({**_ROW, "client": "guidellm", "metric": "tpot_ms"})
    assert t.key == "tpot_ms_mean" and t.des["tpot_definition"] == "per_output_token"
    i = build_case({**_ROW, "client": "guidellm", "metric": "itl_ms"})
    assert i.key == "itl_ms_mean"
    assert build_case({**_ROW, "client": "aiperf", "metric": "itl_ms"}).key == "tpot_ms_mean"
