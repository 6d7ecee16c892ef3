"""Plain engine specs for the engine tests, and hand formulas the tests check the engine against.

The specs are frozen dataclasses written out here with the values of the conf/ options they are
named after (fields at their dataclass default are left out); tests/runner/
test_fixtures_match_conf.py checks that each equals what Hydra composes from conf/, so they cannot
drift, and tests/engine and tests/cost need neither Hydra nor the runner. Times and bandwidths are
SI floats as the runner's pint conversion gives them (5 us -> 4.9999999999999996e-06 s).
"""

from dataclasses import replace

from engine.spec import (AnalyticalSpec, CalibrationSpec, DesSpec, DisaggSpec, FrameworkSpec,
                         HardwareSpec, ModelSpec, PartitionSpec, Specs, WorkloadSpec)
from engine.spec.calibration import CostSpec
from engine.spec.workload import LengthDist

#: conf/hardware/NAME.yaml
HARDWARE = {
    'h100_sxm': HardwareSpec(name='h100_sxm', peak_flops_bf16=989400000000000.0, hbm_capacity_bytes=80000000000.0, hbm_visible_fraction=1.062333, hbm_bandwidth_bytes_s=3350000000000.0, peak_flops_fp8=1978900000000000.0, peak_flops_int8=1978900000000000.0, sram_bytes=50000000.0, scaleup_bandwidth_bytes_s=450000000000.0, scaleup_latency_s=2e-06, scaleout_bandwidth_bytes_s=50000000000.0, scaleout_latency_s=4.9999999999999996e-06, devices_per_node=8, tdp_w=700.0, host_bandwidth_bytes_s=64000000000.0, kernel_tables='h100_sxm'),
    'h200': HardwareSpec(name='h200', peak_flops_bf16=989400000000000.0, hbm_capacity_bytes=141000000000.0, hbm_visible_fraction=1.064604, hbm_bandwidth_bytes_s=4800000000000.0, peak_flops_fp8=1978900000000000.0, peak_flops_int8=1978900000000000.0, sram_bytes=50000000.0, scaleup_bandwidth_bytes_s=450000000000.0, scaleup_latency_s=2e-06, scaleout_bandwidth_bytes_s=50000000000.0, scaleout_latency_s=4.9999999999999996e-06, devices_per_node=8, tdp_w=700.0, host_bandwidth_bytes_s=64000000000.0, kernel_tables='h200_sxm'),
    'jalapeno': HardwareSpec(name='jalapeno', peak_flops_bf16=512000000000000.0, hbm_capacity_bytes=192000000000.0, hbm_bandwidth_bytes_s=4096000000000.0, peak_flops_fp8=1024000000000000.0, sram_bytes=64000000.0, scaleup_bandwidth_bytes_s=900000000000.0, scaleup_latency_s=2e-06, scaleout_bandwidth_bytes_s=50000000000.0, scaleout_latency_s=4.9999999999999996e-06, devices_per_node=8, tdp_w=350.0),
    'gb200_nvl72_llmperf': HardwareSpec(name='gb200_nvl72_llmperf', peak_flops_bf16=2500000000000000.0, hbm_capacity_bytes=192000000000.0, hbm_bandwidth_bytes_s=8000000000000.0, peak_flops_fp8=5000000000000000.0, peak_flops_int8=5000000000000000.0, peak_flops_fp4=9000000000000000.0, scaleup_bandwidth_bytes_s=900000000000.0, scaleup_latency_s=5e-07, scaleout_bandwidth_bytes_s=50000000000.0, scaleout_latency_s=4.9999999999999996e-06, devices_per_node=72, tdp_w=1200.0, kernel_tables='gb200'),
}

#: conf/model/NAME.yaml
MODEL = {
    'llama_3_1_8b': ModelSpec(name='llama_3_1_8b', num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8, head_dim=128, ffn_size=14336, vocab_size=128256, context_length=131072),
    'llama_3_1_70b': ModelSpec(name='llama_3_1_70b', num_layers=80, hidden_size=8192, num_heads=64, num_kv_heads=8, head_dim=128, ffn_size=28672, vocab_size=128256, context_length=131072),
    'llama_3_1_405b': ModelSpec(name='llama_3_1_405b', num_layers=126, hidden_size=16384, num_heads=128, num_kv_heads=8, head_dim=128, ffn_size=53248, vocab_size=128256, context_length=131072),
    'llama_2_7b': ModelSpec(name='llama_2_7b', num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=32, head_dim=128, ffn_size=11008, vocab_size=32000, context_length=4096, attention='mha'),
    'mixtral_8x7b': ModelSpec(name='mixtral_8x7b', num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8, head_dim=128, ffn_size=14336, vocab_size=32000, context_length=32768, num_experts=8, experts_per_token=2, expert_ffn_size=14336),
    'deepseek_v3': ModelSpec(name='deepseek_v3', num_layers=61, hidden_size=7168, num_heads=128, num_kv_heads=128, head_dim=192, ffn_size=18432, vocab_size=129280, context_length=163840, attention='mla', num_experts=256, experts_per_token=8, expert_ffn_size=2048, num_shared_experts=1, first_dense_layers=3, q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, weight_dtype='fp8', activation_dtype='fp8', weight_group_size=16384, weight_scale_dtype='fp32'),
    'gpt_oss_120b': ModelSpec(name='gpt_oss_120b', num_layers=36, hidden_size=2880, num_heads=64, num_kv_heads=8, head_dim=64, ffn_size=2880, vocab_size=201088, context_length=131072, num_experts=128, experts_per_token=4, expert_ffn_size=2880, sliding_window=128, sliding_window_layers=18, weight_dtype='fp4', weight_group_size=32, weight_scale_dtype='fp8'),
    'llama_7b_specsheet': ModelSpec(name='llama_7b_specsheet', num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=32, head_dim=128, ffn_size=11008, vocab_size=32000, attention='mha', num_params=7200000000.0),
    'gpt_1_8t_moe': ModelSpec(name='gpt_1_8t_moe', num_layers=120, hidden_size=20480, num_heads=128, num_kv_heads=16, head_dim=160, ffn_size=14336, vocab_size=128256, num_experts=16, experts_per_token=2, expert_ffn_size=14336, weight_dtype='fp4', kv_dtype='fp4', activation_dtype='fp4'),
}

#: conf/partition/NAME.yaml
PARTITION = {
    'tp1': PartitionSpec(),
    'tp2': PartitionSpec(tp=2),
    'tp4': PartitionSpec(tp=4),
    'tp8': PartitionSpec(tp=8),
}

#: conf/workload/NAME.yaml
WORKLOAD = {
    'chat': WorkloadSpec(prompt_len=512, output_len=128, batch_size=16, name='chat'),
    'specsheet_512': WorkloadSpec(prompt_len=512, output_len=128, name='specsheet_512'),
    'poisson_chat': WorkloadSpec(prompt_len=512, output_len=128, batch_size=16, name='poisson_chat', num_requests=1000, arrival='poisson', rate_rps=10.0, prompt_dist=LengthDist(kind='lognormal', low=8, high=8192, sigma=0.8), output_dist=LengthDist(kind='lognormal', low=2, high=2048, sigma=0.6)),
}

#: conf/calibration/NAME.yaml
CALIBRATION = {
    'default': CalibrationSpec(compute_efficiency=0.7115, memory_bandwidth_efficiency=0.5593, comm_efficiency=0.4274, memory_reserve_bytes=2000000000.0, kv_usable_fraction=0.9, step_overhead_s=0.0002229, per_token_overhead_s=1.4e-07, per_request_overhead_s=0.0051389999999999995, name='default', cost=CostSpec(backend='auto', transfer_exclude=())),
    'ideal': CalibrationSpec(compute_efficiency=1.0, memory_bandwidth_efficiency=1.0, comm_efficiency=1.0, memory_reserve_bytes=0.0, kv_usable_fraction=1.0, name='ideal'),
    'specsheet': CalibrationSpec(compute_efficiency=0.88, memory_bandwidth_efficiency=1.0, comm_efficiency=1.0, memory_reserve_bytes=0.0, kv_usable_fraction=0.9, name='specsheet'),
}

#: conf/framework/NAME.yaml
FRAMEWORK = {
    'vllm_v1': FrameworkSpec(name='vllm_v1', versions='>=0.8.0', scheduler='sarathi', max_num_seqs=1024, kv_rule='total_fraction', step_overhead_s=0.00225, per_output_token_s=5.12e-05, per_prefill_token_s=7.53e-09 * 1e-6, per_request_s=1.97e4 * 1e-6, per_request_token_s=0.307 * 1e-6, eager_layer_s=3.8e-09, chunked_prefill=True, chunk_size=0, cuda_graph_sizes=(1, 2, 4) + tuple(range(8, 513, 8)), cuda_graph_padding=True, watermark=0.0, allreduce='one_shot', kernel_tables='vllm', sources=('github:vllm-project/vllm vllm/engine/arg_utils.py (_set_default_args_v1 / get_batch_defaults: max_num_batched_tokens, max_num_seqs by usage context, GPU memory >= 70 GiB and not A100)', 'github:vllm-project/vllm vllm/v1/core/sched/scheduler.py (running requests first, then waiting, within token_budget)', 'github:vllm-project/vllm vllm/config.py (CompilationConfig cudagraph_capture_sizes [1, 2, 4] + range(8, 513, 8); CacheConfig block_size 16, gpu_memory_utilization 0.9)', 'github:vllm-project/vllm vllm/distributed/device_communicators/custom_all_reduce.py')),
    'generic': FrameworkSpec(),
}

#: conf/engine/analytical.yaml
ANALYTICAL = AnalyticalSpec(disagg=DisaggSpec(enabled=False, prefill_tp=0, prefill_pp=0, prefill_sp=0, prefill_replicas=1, link_bandwidth_bytes_s=50000000000.0, link_latency_s=4.9999999999999996e-06, per_wr_s=1e-06, relayout_factor=0.1, overlap=0.0))
#: conf/engine/des.yaml
DES = DesSpec()


#: The defaults list of conf/config.yaml.
DEFAULTS = dict(hardware="h100_sxm", model="llama_3_1_8b", partition="tp1", workload="chat",
                calibration="default", framework="vllm_v1")


def specs(**options) -> Specs:
    """The Specs that ``simllm group=option ...`` runs (conf/config.yaml's defaults for the groups
    not named), e.g. ``specs(model="llama_3_1_70b", partition="tp8")``."""
    unknown = set(options) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"not a config group: {sorted(unknown)}")
    o = {**DEFAULTS, **options}
    return Specs(hardware=HARDWARE[o["hardware"]], model=MODEL[o["model"]],
                 partition=PARTITION[o["partition"]], workload=WORKLOAD[o["workload"]],
                 calibration=CALIBRATION[o["calibration"]], analytical=ANALYTICAL,
                 framework=FRAMEWORK[o["framework"]], des=DES)


#: A framework profile's fitted host terms switched off (``with_fields(s, framework=NO_HOST)``): for
#: tests that derive pass times by hand from the operators and the calibration's overheads alone.
NO_HOST = dict(step_overhead_s=0.0, per_output_token_s=0.0, per_streamed_token_s=0.0, per_prefill_token_s=0.0,
               per_request_s=0.0, per_request_token_s=0.0, eager_layer_s=0.0)
#: ... the same as command-line overrides, for tests that compose (or run a CLI)
NO_HOST_OVERRIDES = ("framework.step_overhead=0us", "framework.per_output_token_overhead=0us",
                     "framework.per_streamed_token_overhead=0us",
                     "framework.per_prefill_token_overhead=0us", "framework.per_request_overhead=0us",
                     "framework.per_request_token_overhead=0us", "framework.eager_layer_overhead=0us")


def with_fields(s: Specs, **groups) -> Specs:
    """``s`` with some fields of its groups replaced: ``with_fields(s, workload=dict(batch_size=1))``
    (what ``workload.batch_size=1`` on the command line gives, in SI units)."""
    return replace(s, **{g: replace(getattr(s, g), **f) for g, f in groups.items()})


def prefill_chunk_aggregates(chunk_len, cached_len):
    """(attn_pairs, kv_read) of a prefill chunk of ``chunk_len`` tokens after ``cached_len``
    cached ones: pairs = s*k + s(s+1)/2, read = k."""
    return chunk_len * cached_len + chunk_len * (chunk_len + 1) / 2.0, cached_len
