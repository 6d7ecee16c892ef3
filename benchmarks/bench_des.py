"""Speed of the discrete-event engine: 10,000 and 100,000 requests of a real chat trace.

    python benchmarks/bench_des.py [--trace azure2023_conv.csv] [--rate RPS] [--scheduler vllm]

Llama-3.1-8B on one H100 SXM (the default config), vLLM-style scheduler, the Azure 2023
conversation trace from ../shared/data/traces (19,366 requests; tiled for 100,000, each repeat
after the previous one). Prints CPU-s of the simulate() call alone (the fair figure on a shared,
loaded machine) and wall time, min/median of --reps, simulated requests per CPU-second, the peak
memory a call adds, this process's CPU-s and peak RSS; writes benchmarks/results/bench_des.json
(--track: also to MLflow); nothing is asserted.
Reference: Vidur simulates about 40-60 requests per second on this kind of machine.
"""

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._measure import Bench  # noqa: E402
from engine.des import DesSpec, simulate  # noqa: E402
from engine.spec import WorkloadSpec  # noqa: E402
from runner.compose import compose_specs  # noqa: E402
from runner.convert import _resolve_trace  # noqa: E402

CONF = Path(__file__).resolve().parent.parent / "conf"


def main():
    bench = Bench("bench_des", __doc__, reps=1)
    ap = bench.parser
    ap.add_argument("--trace", default="azure2023_conv.csv")
    ap.add_argument("--rate", type=float, default=0.0, help="rescale arrivals to this mean rate (0: as recorded)")
    ap.add_argument("--scheduler", default="vllm")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. calibration.cost.backend=measured framework=vllm_v1")
    args = bench.parse_args()
    base = compose_specs(args.overrides, config_dir=CONF, experiments=False)
    print(f"model {base.model.name}, hardware {base.hardware.name}, kernels {base.calibration.kernels}"
          f" ({base.framework.kernel_tables}), trace {args.trace}, "
          f"scheduler {args.scheduler}, rate {'as recorded' if not args.rate else args.rate}")
    print(f"{'requests':>9} {'CPU s':>7} {'req/CPU-s':>9} {'wall s':>8} {'sim s':>9} {'iterations':>11} "
          f"{'TTFT p50/p99 ms':>17} {'TPOT p50/p99 ms':>16} {'batch':>6}")
    for n in (int(x) for x in args.sizes.split(",")):
        wl = _resolve_trace({"prompt_len": 1020, "output_len": 129, "arrival": "trace",
                             "rate_rps": args.rate, "num_requests": n, "trace": {"path": args.trace}})
        specs = replace(base, workload=WorkloadSpec(**wl))
        sim = bench.region(f"simulate(), {n:,} requests",
                           lambda: simulate(specs, DesSpec(scheduling=dict(scheduler=args.scheduler),
                                                           outputs=dict(progress="off"))),
                           n=n, unit="requests", warmup=0)
        row = bench.rows[-1]
        cpu, wall = row["cpu_s"]["min"], row["wall_s"]["min"]
        s = sim.result.summary
        print(f"{n:>9,} {cpu:>7.2f} {n / cpu:>9,.0f} {wall:>8.2f} {sim.sim_time_s:>9,.0f} {s['iterations']:>11,} "
              f"{s['ttft_ms_p50']:>8.1f}/{s['ttft_ms_p99']:<8.1f} {s['tpot_ms_p50']:>7.2f}/{s['tpot_ms_p99']:<8.2f}"
              f"{s['batch_size_mean']:>6.1f}", flush=True)
    bench.finish()


if __name__ == "__main__":
    main()
