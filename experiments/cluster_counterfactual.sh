#!/usr/bin/env bash
# Counterfactual FCFS -> priority: Azure 2023 conversation lengths, 3,000 requests at RATE (24) req/s on
# one Llama-3.1-8B H100 SXM replica, 30 % of requests in class 0 (TTFT SLO 500 ms), the rest
# class 1 (TTFT SLO 5 s). The baseline is FCFS; the counterfactual re-runs the same arrivals
# with queue_policy=priority. regret.parquet names every request; report_counterfactual.py prints them.
set -euo pipefail
OUT=${OUT:-outputs/cluster_cf}
simllm engine=des framework=generic model=llama_3_1_8b hardware=h100_sxm workload=azure_conv workload.num_requests=3000 \
  workload.rate_rps=${RATE:-24} workload.priority_fraction=0.3 tracking.enabled=false \
  'engine.des.class_slo_ttft_ms=[500,5000]' 'engine.des.counterfactual="scheduling.queue_policy=priority"' \
  engine.des.outputs.timeseries_s=10 hydra.run.dir="$OUT"
