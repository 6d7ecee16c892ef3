"""Prediction intervals: coverage on held-out halves, interval widths per regime, and the cost
of a default job with intervals on vs off.

    python benchmarks/bench_intervals.py [--seeds 5] [--reps 3]

Coverage: the shipped residuals (engine/uncertainty/data/intervals.residuals.csv) split in
halves (numpy default_rng(seed) for each seed; both directions); a model fitted on one half,
the share of the other half inside its interval at 80 % and 95 %, per metric and load kind
(band "all") and per metric, load kind and load band, with row counts (summed over seeds and
directions), and the mean held-out log half-width q at 80 % per metric, load kind and band. Widths: the shipped model's median relative
half-width (hi - lo) / 2 at 80 % over its rows, per regime the rows land in. Cost: CPU-s of
``runner.job.run_job`` for the default config, uncertainty.enabled true vs false, tracking off
(min of --reps). Nothing is asserted; figures are printed.
"""

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.uncertainty import ErrorModel, covered, fit, halves  # noqa: E402
from engine.uncertainty.residuals import read  # noqa: E402


def coverage_table(seeds: int) -> list[tuple]:
    ids, regs, res = read()
    tally = defaultdict(lambda: {0.8: [0, 0], 0.95: [0, 0], "q": []})
    for seed in range(seeds):
        a, b = halves(len(ids), seed)
        for fit_i, test_i in ((a, b), (b, a)):
            m = fit([regs[i] for i in fit_i], [res[i] for i in fit_i])
            for level in (0.8, 0.95):
                hit = covered(m, [regs[i] for i in test_i], [res[i] for i in test_i], level)
                for i, h in zip(test_i, hit):
                    if np.isfinite(h):
                        g = regs[i]
                        for key in ((g["metric"], g["load"], "all"), (g["metric"], g["load"], g["band"]),
                                    ("all", "all", "all")):
                            tally[key][level][0] += int(h)
                            tally[key][level][1] += 1
                            if level == 0.8:
                                tally[key]["q"].append(m.interval(g, 0.8).q)
    order = {b: i for i, b in enumerate(("all", "light", "moderate", "heavy", "none", "unknown"))}
    return sorted(tally.items(), key=lambda kv: (kv[0][0], kv[0][1], order.get(kv[0][2], 9)))


def widths() -> list[tuple]:
    em = ErrorModel.load()
    _, regs, _ = read()
    per = defaultdict(list)
    for g in regs:
        iv = em.interval(g, 0.8)
        if iv is not None:
            per[iv.regime].append(iv.half_width)
    return sorted((k, len(v), float(np.median(v))) for k, v in per.items())


def job_cpu(enabled: bool, reps: int) -> float:
    from runner.compose import compose
    from runner.job import run_job

    cfg = compose(["tracking.enabled=false", "print_table=false", f"uncertainty.enabled={str(enabled).lower()}"])
    best = float("inf")
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as d:
            t = time.process_time()
            run_job(cfg, Path(d), [])
            best = min(best, time.process_time() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    print(f"coverage on held-out halves ({a.seeds} seeds x 2 directions; rows summed)")
    print(f"{'metric':<11}{'load':<9}{'band':<10}{'80% covered':>14}{'n':>6}{'95% covered':>14}{'n':>6}"
          f"{'mean q 80%':>12}")
    for (m, ld, b), v in coverage_table(a.seeds):
        cells = "".join((f"{c[0] / c[1]:>14.1%}" if c[1] else f"{'-':>14}") + f"{c[1]:>6}" for c in (v[0.8], v[0.95]))
        print(f"{m:<11}{ld:<9}{b:<10}{cells}{np.mean(v['q']):>12.3f}")
    print("\nmedian relative half-width (hi - lo) / 2 at 80 % (shipped model) over the rows, per regime "
          "the rows' intervals rest on")
    for k, n, w in widths():
        print(f"  {w:7.1%}  rows {n:>4}  {k}")
    job_cpu(True, 1)   # warm: imports, first compose
    on, off = job_cpu(True, a.reps), job_cpu(False, a.reps)
    print(f"\ndefault job CPU-s (min of {a.reps}): intervals on {on:.3f}, off {off:.3f}")


if __name__ == "__main__":
    main()
