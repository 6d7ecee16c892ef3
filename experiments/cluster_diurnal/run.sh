#!/usr/bin/env bash
# A diurnal day (86,400 s, peak/trough 4, trough at t = 0) of the Azure 2023 conversation trace,
# rate-scaled to 2 req/s on average, as multi-turn sessions (mean 3 turns, 30 s think time), on
# Llama-3.1-70B TP4 H100 SXM replicas with a 256 GB host-DRAM KV tier per replica (PCIe Gen5,
# hardware.host_bandwidth), SLO TTFT 2 s / TPOT 100 ms, price 3 USD per GPU-hour (an assumed
# on-demand price, given on the command line). Two pools: autoscaled (queue target 10
# outstanding per replica, 1..4 replicas, 60 s interval, 180 s provisioning) and fixed at 3
# replicas (sized for the peak); POOLS picks (autoscaled_nostab: no scale-down stabilization).
# Job dirs under $OUT (default outputs/cluster_diurnal).
set -euo pipefail
OUT=${OUT:-outputs/cluster_diurnal}
COMMON=(engine=des framework=generic model=llama_3_1_70b hardware=h100_sxm partition.tp=4 workload=azure_conv
  workload.num_requests=172800 workload.rate_rps=2 tracking.enabled=false
  hardware.price_per_hour=3.0 engine.des.slo_ttft_ms=2000 engine.des.slo_tpot_ms=100
  engine.des.cluster.traffic_shape=diurnal engine.des.cluster.traffic_peak_ratio=4 engine.des.cluster.traffic_period_s=86400
  engine.des.clients.session_turns=3 engine.des.clients.session_think_s=30 engine.des.kv.prefix_caching=true
  engine.des.kv.kv_host_gb=256 engine.des.cluster.router=weighted engine.des.outputs.timeseries_s=10)
POOLS=${POOLS:-autoscaled fixed3}
for pool in $POOLS; do
  case $pool in
    autoscaled) simllm "${COMMON[@]}" engine.des.cluster.replicas=1 engine.des.cluster.autoscale=queue \
        engine.des.cluster.autoscale_target=10 engine.des.cluster.autoscale_min=1 engine.des.cluster.autoscale_max=4 \
        engine.des.cluster.autoscale_interval_s=60 engine.des.cluster.provision_delay_s=180 hydra.run.dir="$OUT/autoscaled" ;;
    autoscaled_nostab) simllm "${COMMON[@]}" engine.des.cluster.replicas=1 engine.des.cluster.autoscale=queue \
        engine.des.cluster.autoscale_target=10 engine.des.cluster.autoscale_min=1 engine.des.cluster.autoscale_max=4 \
        engine.des.cluster.autoscale_interval_s=60 engine.des.cluster.provision_delay_s=180 \
        engine.des.cluster.autoscale_stabilization_s=0 hydra.run.dir="$OUT/autoscaled_nostab" ;;
    fixed*) simllm "${COMMON[@]}" engine.des.cluster.replicas=${pool#fixed} hydra.run.dir="$OUT/$pool" ;;
  esac
done
