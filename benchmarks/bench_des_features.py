"""DES cost of the per-step features: energy accounting (on whenever hardware.tdp is
set), the TDP throttle, speculative decoding and per-token timestamps, each against the plain
simulation of the same stream (poisson_chat, llama_3_1_8b on h100_sxm).

    python benchmarks/bench_des_features.py [--requests 20000] [--reps 3]
"""

from dataclasses import replace

from benchmarks._measure import Bench


def main():
    bench = Bench("bench_des_features", __doc__)
    bench.parser.add_argument("--requests", type=int, default=20000)
    args = bench.parse_args()
    from engine.des import DesSpec, simulate
    from engine.spec.analytical import SpecDecodeSpec
    from tests.conftest import compose_specs

    n = args.requests
    s = compose_specs("workload=poisson_chat", f"workload.num_requests={n}", "workload.rate_rps=20")
    no_tdp = replace(s, hardware=replace(s.hardware, tdp_w=None))
    mtp = replace(s, analytical=replace(s.analytical, spec_decode=SpecDecodeSpec(method="mtp", acceptance=0.7)))
    bench.region("plain (hardware.tdp=null: no energy)", lambda: simulate(no_tdp), n=n, unit="requests")
    bench.region("default (energy accounted)", lambda: simulate(s), n=n, unit="requests")
    bench.region("TDP throttle (peak_power_ratio 1.3)",
                 lambda: simulate(s, DesSpec(power=dict(throttle=True, peak_power_ratio=1.3))), n=n, unit="requests")
    bench.region("speculative decoding (mtp, alpha 0.7)", lambda: simulate(mtp), n=n, unit="requests")
    bench.region("token timestamps", lambda: simulate(s, DesSpec(outputs=dict(token_times=True))), n=n, unit="requests")
    bench.finish()


if __name__ == "__main__":
    main()
