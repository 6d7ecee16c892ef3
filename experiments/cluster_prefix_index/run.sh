#!/usr/bin/env bash
# The weighted router's gateway prefix index (engine.des.cluster.prefix_index): routed (never forgets),
# events (forgets a block when the replica evicts it: KV events), lru (capped at each replica's
# cache size). Setup of experiments/cluster_routing (Azure 2023 conversation lengths as sessions,
# 12,000 requests at RATE (24) req/s, mean 4 turns, 10 s think time, a 1,024-token system prompt;
# 4 x Llama-3.1-8B on H100 SXM, prefix caching, load signals 1 s old), with the KV pool at the
# memory model's size and cut to BLOCKS (4000) blocks per replica so that blocks get evicted.
# Job dirs under $OUT (default outputs/cluster_prefix_index); summarize.py prints the table.
set -euo pipefail
OUT=${OUT:-outputs/cluster_prefix_index}
for blocks in 0 ${BLOCKS:-4000}; do
  for idx in routed events lru; do
    simllm engine=des framework=generic model=llama_3_1_8b hardware=h100_sxm workload=azure_conv \
      workload.num_requests=12000 workload.rate_rps=${RATE:-24} tracking.enabled=false \
      engine.des.cluster.replicas=4 engine.des.cluster.router=weighted engine.des.cluster.signal_delay_s=1 \
      engine.des.clients.session_turns=4 engine.des.clients.session_think_s=10 engine.des.clients.session_system_tokens=1024 \
      engine.des.kv.prefix_caching=true engine.des.kv.num_kv_blocks=$blocks engine.des.cluster.prefix_index=$idx \
      hydra.run.dir="$OUT/b${blocks}_$idx"
  done
done
