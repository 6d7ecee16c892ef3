#!/usr/bin/env bash
# Multi-turn sessions (Azure 2023 conversation lengths, 12,000 requests at RATE (24) req/s, mean 4 turns,
# 10 s think time, a 1,024-token system prompt shared by all sessions) on 4 Llama-3.1-8B H100 SXM
# replicas with prefix caching: prefix affinity (router=weighted, w_prefix=1, w_queue=1) vs
# least-loaded (router=least_outstanding), each with the load signals 0 / 1 / 5 s old.
# Job dirs under $OUT (default outputs/cluster_routing); summarize.py prints the table.
set -euo pipefail
OUT=${OUT:-outputs/cluster_routing}
for router in weighted least_outstanding; do
  for d in 0 1 5; do
    simllm engine=des framework=generic model=llama_3_1_8b hardware=h100_sxm workload=azure_conv \
      workload.num_requests=12000 workload.rate_rps=${RATE:-24} tracking.enabled=false \
      engine.des.cluster.replicas=4 engine.des.cluster.router=$router engine.des.cluster.signal_delay_s=$d \
      engine.des.clients.session_turns=4 engine.des.clients.session_think_s=10 engine.des.clients.session_system_tokens=1024 \
      engine.des.kv.prefix_caching=true engine.des.outputs.timeseries_s=10 hydra.run.dir="$OUT/${router}_d$d"
  done
done
