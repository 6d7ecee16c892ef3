"""Leave-one-chip-out on the dev set: a measured chip's dev rows predicted as if it had no tables.

    python benchmarks/bench_transfer_dev.py [--chips h100_sxm,h200,b200] [--calibration default]

For each chip (a conf/hardware option whose ``kernel_tables`` names a measured set) the dev rows
run on it (``../shared/data/reference/measured_dev.csv``, through ``simllm-validate``'s row
grammar) are predicted three ways with the same calibration:
    measured   the chip's own kernel tables (calibration.cost.backend=measured)
    transfer   curves fitted on the other chips' tables only, applied to this chip's spec sheet
               (calibration.cost.backend=transfer, calibration.cost.transfer_exclude=[its set])
    anchored   the nearest other measured chip x the transfer ratio (kernels=anchored, same exclusion;
               H100 and H200 are near-twins, so this column is optimistic for a truly new chip)
Rows whose framework names no kernel tables (gpt-fast, priced by the roofline) are left out: the
held-out tables cannot change them. Prints the median |predicted / measured - 1| per metric and
the rows, the CPU-s and wall time of each chip's three predictions, this process's CPU-s and peak
RSS, and writes benchmarks/results/bench_transfer_dev.json (--track: MLflow); nothing is asserted.
"""

import math
import time
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._measure import Bench  # noqa: E402
from runner import schema  # noqa: E402
from runner.paths import shared_data  # noqa: E402
from runner.tools.validate import GROUPS, Runner, read_cases  # noqa: E402


def main():
    bench = Bench("bench_transfer_dev", __doc__, reps=1)
    ap = bench.parser
    ap.add_argument("--chips", default="h100_sxm,h200,b200")
    ap.add_argument("--calibration", default="default")
    ap.add_argument("--des-scale", type=float, default=0.5)
    a = bench.parse_args()
    schema.register()
    cases = [c for c in read_cases(shared_data() / "reference" / "measured_dev.csv") if not c.skip]
    base = Runner(a.calibration, des_scale=a.des_scale)
    print(f"dev set: {len(cases)} predictable rows; calibration {a.calibration}; DES requests x {a.des_scale}")
    for chip in a.chips.split(","):
        mine = [c for c in cases if f"hardware={chip}" in c.overrides]
        tables = None
        rows = []
        for c in mine:
            specs, _ = base.specs(c)
            if specs.framework.kernel_tables == "none":
                continue
            tables = specs.hardware.kernel_tables
            rows.append(c)
        if not rows:
            print(f"\n{chip}: no kernel-priced dev rows")
            continue
        ways = {"measured": ("calibration.cost.backend=measured",),
                "transfer": ("calibration.cost.backend=transfer", f"calibration.cost.transfer_exclude=[{tables}]"),
                "anchored": ("calibration.cost.backend=anchored", f"calibration.cost.transfer_exclude=[{tables}]")}
        errs = {}
        c0, w0 = time.process_time(), time.perf_counter()
        for way, extra in ways.items():
            r = Runner(a.calibration, des_scale=a.des_scale, extra=extra)
            errs[way] = {c.id: r.predict(c) / c.measured - 1.0 for c in rows}
        bench.record(f"{chip}: {len(rows)} rows x 3 ways", [time.process_time() - c0],
                     [time.perf_counter() - w0], n=3 * len(rows), unit="predictions")
        print(f"\n{chip} (tables {tables}), {len(rows)} rows:")
        print(f"  {'metric':<11}" + "".join(f"{w:>12}" for w in ways) + "   median |error|")
        for g in GROUPS:
            ids = [c.id for c in rows if c.metric == g]
            if not ids:
                continue
            med = [np.median([abs(errs[w][i]) for i in ids if math.isfinite(errs[w][i])]) for w in ways]
            print(f"  {g:<11}" + "".join(f"{m:>12.1%}" for m in med) + f"   (n={len(ids)})")
        for c in rows:
            print(f"    {c.id:<9} {c.metric:<10}" + "".join(f"{errs[w][c.id]:>+12.1%}" for w in ways))
        bench.info[chip] = {w: {g: float(np.median([abs(errs[w][c.id]) for c in rows if c.metric == g
                                                    and math.isfinite(errs[w][c.id])]))
                                for g in GROUPS if any(c.metric == g for c in rows)} for w in ways}
    bench.finish()


if __name__ == "__main__":
    main()
