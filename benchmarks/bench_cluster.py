"""Cost of the DES cluster features per simulated request.

    python benchmarks/bench_cluster.py [--requests 20000]

Llama-3.1-8B on H100 SXM replicas (the default config), the Azure 2023 conversation trace tiled
to N requests at 40 req/s. Two runs on the identical stream: features off (4 replicas,
least_outstanding) and all on (multi-turn sessions, diurnal shape, prefix caching with a 64 GB
host tier, weighted router on 1 s old signals, shedding, expiry, autoscaling 2..6 replicas with a
60 s provisioning delay, 10 s time series, decision trace), and all on plus two request classes
with their own lengths, priorities, SLOs and a 60 s end-to-end deadline (aborting running requests)
and the gateway prefix index that hears evictions (prefix_index=events). Prints CPU-seconds of this process,
wall time, peak RSS and CPU-microseconds per simulated request; nothing is asserted.
"""

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.des import DesSpec, simulate  # noqa: E402
from tests.conftest import compose_specs  # noqa: E402


def _measure(specs, des):
    c0, w0 = time.process_time(), time.perf_counter()
    r = simulate(specs, des).result
    return time.process_time() - c0, time.perf_counter() - w0, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20000)
    a = ap.parse_args()
    specs = compose_specs("engine=des", "workload=azure_conv", f"workload.num_requests={a.requests}",
                          "workload.rate_rps=40", "calibration.per_request_overhead=0")
    off = DesSpec(cluster=dict(replicas=4, router="least_outstanding"))
    on = DesSpec(cluster=dict(replicas=4, router="weighted", signal_delay_s=1.0, traffic_shape="diurnal",
                              traffic_peak_ratio=3, traffic_period_s=a.requests / 40.0, shed_outstanding=200,
                              timeout_s=60, autoscale="queue", autoscale_target=16, autoscale_min=2, autoscale_max=6,
                              provision_delay_s=60, price_per_hour=3.0),
                 clients=dict(session_turns=3, session_think_s=10, session_system_tokens=512),
                 kv=dict(prefix_caching=True, kv_host_gb=64), outputs=dict(timeseries_s=10, record_decisions=True))
    more = on.with_(cluster=dict(deadline_s=60.0, prefix_index="events"), clients=dict(classes=(
        {"name": "chat", "share": 0.7, "priority": 0, "slo_ttft_ms": 1000},
        {"name": "long", "share": 0.3, "prompt_len": 4096, "output_len": 512, "priority": 1,
         "prompt_dist": {"kind": "lognormal", "sigma": 0.6}, "slo_ttft_ms": 5000})))
    for name, des in (("features off", off), ("features on", on), ("+ classes etc", more)):
        cpu, wall, r = _measure(specs, des)
        n = r.summary["num_requests"]
        print(f"{name:13s} {n:7d} requests  CPU {cpu:7.2f} s  wall {wall:7.2f} s  "
              f"{cpu / n * 1e6:7.1f} CPU-us/request  peak RSS "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (process so far)")


if __name__ == "__main__":
    main()
