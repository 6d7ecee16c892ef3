"""The per-row residuals an error model was fitted on (``intervals.residuals.csv`` beside the
table: id, the regime fields, log_ratio = ln(predicted / measured)), read back for refits and
coverage checks. A file written before the load band (no ``band`` column) still reads: its rows
get ``regimes.complete``'s band (none for static rows, unknown for the others).

    python -m engine.uncertainty.residuals     # the shipped residuals' spread per metric, load, band,
                                               # and the held-out widths with and without the band
"""

import csv
from pathlib import Path

from engine.uncertainty.conformal import SHIPPED
from engine.uncertainty.regimes import FIELDS, complete


def residuals_path(table: Path = SHIPPED) -> Path:
    """intervals.json -> intervals.residuals.csv (same folder)."""
    table = Path(table)
    return table.with_name(table.stem + ".residuals.csv")


def read(path: Path | None = None) -> tuple[list[str], list[dict], list[float]]:
    """(ids, regimes, residuals) of a residuals CSV (default: the shipped one)."""
    p = Path(path) if path else residuals_path()
    ids, regs, res = [], [], []
    with open(p, newline="") as f:
        for row in csv.DictReader(f):
            ids.append(row["id"])
            regs.append(complete({k: row[k] for k in FIELDS if row.get(k) not in (None, "")}))
            res.append(float(row["log_ratio"]))
    return ids, regs, res


def spread_table(path: Path | None = None) -> str:
    """Per (metric, load, band) of a residuals file (default: the shipped one): rows, the median
    residual c and the 80 % / 95 % conformal order statistics of |r - c| (rank ceil((n + 1)
    level), '-' where n is too small), i.e. the half-widths those rows alone would give."""
    import math

    import numpy as np

    from engine.uncertainty.conformal import conformal_rank

    _, regs, res = read(path)
    groups: dict = {}
    for g, r in zip(regs, res):
        if math.isfinite(r):
            groups.setdefault((g["metric"], g["load"], g["band"]), []).append(r)
    order = {b: i for i, b in enumerate(("light", "moderate", "heavy", "none", "unknown"))}
    lines = [f"{'metric':<11}{'load':<9}{'band':<10}{'rows':>5}{'median r':>10}{'q 0.8':>8}{'q 0.95':>8}"]
    for (m, ld, b), xs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], order.get(kv[0][2], 9))):
        a = np.array(xs)
        c = float(np.median(a))
        s = np.sort(np.abs(a - c))
        qs = []
        for level in (0.8, 0.95):
            k = conformal_rank(a.size, level)
            qs.append(f"{s[k - 1]:>8.3f}" if k <= a.size else f"{'-':>8}")
        lines.append(f"{m:<11}{ld:<9}{b:<10}{a.size:>5}{c:>+10.3f}{''.join(qs)}")
    return "\n".join(lines)


def band_gain(path: Path | None = None, splits: int = 10) -> str:
    """What the load band buys on held-out rows: the residuals (default: the shipped ones) split
    in random halves (``conformal.halves``, seeds 0 .. splits - 1, both directions); a model fitted
    on one half with the bands and one with every band replaced by ``complete``'s (none for
    static rows, unknown for the others: no band) give the other half's rows intervals at 80 % and
    95 %. Per group (all rows; closed-loop TTFT and TPOT): held-out rows, the share covered and
    the mean log half-width q, without and with the band."""
    import numpy as np

    from engine.uncertainty.conformal import fit, halves

    _, regs, res = read(path)
    plain = [complete({k: v for k, v in g.items() if k != "band"}) for g in regs]
    groups = {"all rows": lambda g: True,
              "ttft closed": lambda g: g["metric"] == "ttft" and g["load"] == "closed",
              "tpot closed": lambda g: g["metric"] == "tpot" and g["load"] == "closed"}
    tally = {(name, lv, which): [] for name in groups for lv in (0.8, 0.95) for which in ("without", "with")}
    for seed in range(splits):
        a, b = halves(len(res), seed)
        for fit_i, test_i in ((a, b), (b, a)):
            for which, rg in (("without", plain), ("with", regs)):
                m = fit([rg[i] for i in fit_i], [res[i] for i in fit_i])
                for lv in (0.8, 0.95):
                    for i in test_i:
                        iv = m.interval(rg[i], lv)
                        if iv is None:
                            continue
                        hit = float(iv.center - iv.q <= res[i] <= iv.center + iv.q)
                        for name, sel in groups.items():
                            if sel(regs[i]):
                                tally[(name, lv, which)].append((hit, iv.q))
    lines = [f"held-out halves ({splits} seeds x 2 directions): covered share and mean log half-width q, "
             "without -> with the band",
             f"{'rows':<13}{'level':>6}{'n':>7}{'covered':>18}{'mean q':>18}"]
    for name in groups:
        for lv in (0.8, 0.95):
            w0, w1 = (np.array(tally[(name, lv, k)]) for k in ("without", "with"))
            lines.append(f"{name:<13}{lv:>6.0%}{len(w1):>7}{w0[:, 0].mean():>9.1%} -> {w1[:, 0].mean():>5.1%}"
                         f"{w0[:, 1].mean():>10.3f} -> {w1[:, 1].mean():.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(spread_table())
    print()
    print(band_gain())
