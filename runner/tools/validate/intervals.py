"""The error model of ``engine.uncertainty`` fitted on simllm-validate's rows:

    simllm-validate --csv A.csv --csv B.csv --fit-intervals           # predict, then fit
    simllm-validate --csv A.csv --csv B.csv --intervals-from OUT_A --intervals-from OUT_B
                                                                      # fit from earlier runs' table.csv

Each predicted row gives one residual ln(predicted / measured) under its regime: the report's
metric group, centre or tail from the compared summary key, the load kind of its workload
(analytical batch -> static; DES offline / Poisson / closed loop / MLPerf server), the load band
of its predicted run (``engine.uncertainty.regimes.load_band``: the queue share of its predicted
summary, as a job computes its own), its framework profile and precision class, and the kernel
backend its composed specs resolve to. The table is written with its provenance (CSV names and
digests, calibration, commit, date).

The band is set on each predicted case (``Case.band``, ``set_bands``) from the summary the
prediction came from, and written to table.csv's ``band`` column; --intervals-from DIR reads it
back (a table.csv from before the band: unknown for DES rows, none for static ones)."""

import csv
import datetime as _dt
import hashlib
import math
from pathlib import Path

from engine.errors import SpecError
from engine.uncertainty import fit
from engine.uncertainty.conformal import SHIPPED
from engine.uncertainty.residuals import residuals_path
from engine.uncertainty.regimes import BANDS, load_band, metric_of
from runner.intervals import load_kind

#: Rows a regime needs before it stands on its own (else the next coarser regime is used): at
#: 8 rows the 80 % rank ceil(9 x 0.8) = 8 is the largest score; a 95 % interval needs 19 rows.
MIN_ROWS = 8


def case_load(case) -> str:
    """The load kind of a validation row (runner.intervals.load_kind)."""
    return load_kind(case.engine, case.workload.get("arrival", ""), bool(case.server))


def case_band(case, runner, params: dict | None = None) -> str:
    """The load band of a predicted row from the summary its prediction came from
    (``runner.summary(case, params)``: the run already made, read from the runner's cache)."""
    load = case_load(case)
    return load_band(load, None if load == "static" else runner.summary(case, params))


def set_bands(cases, runner, params: dict | None = None) -> None:
    """``Case.band`` of every predicted row (finite positive prediction)."""
    for c in cases:
        if not c.skip and math.isfinite(c.predicted) and c.predicted > 0:
            c.band = case_band(c, runner, params)


def case_regime(case, runner) -> dict:
    """The regime of a predicted validation row (engine.uncertainty.regimes); its band is
    ``case.band`` where set (``set_bands``, or a table.csv read back), else from its summary."""
    from engine.analytical.kernels import backend
    from engine.cost import resolve

    specs = runner.specs(case)[0]
    be = backend(specs)
    if be == "auto":
        be = resolve("auto", specs.framework.kernel_tables, specs.hardware)
    return {"metric": case.metric, "stat": metric_of(case.key)[1], "load": case_load(case),
            "band": case.band or case_band(case, runner),
            "framework": case.framework, "precision": case.precision, "backend": be}


def residual_rows(cases, runner) -> tuple[list[dict], list[float], list[str]]:
    """(regimes, residuals, ids) of the rows with a finite positive prediction."""
    regs, res, ids = [], [], []
    for c in cases:
        if c.skip or not (math.isfinite(c.predicted) and c.predicted > 0 and c.measured > 0):
            continue
        regs.append(case_regime(c, runner))
        res.append(math.log(c.predicted / c.measured))
        ids.append(c.id)
    return regs, res, ids


def predictions_from(dirs: list[str], bands: dict | None = None) -> dict:
    """{row id: predicted} read from simllm-validate output folders' table.csv; ``bands``, when
    given, gets {row id: load band} from its ``band`` column (absent in a table.csv written
    before the band: no entry)."""
    out = {}
    for d in dirs:
        p = Path(d) / "table.csv"
        if not p.is_file():
            raise SpecError("--intervals-from", d, "a simllm-validate output folder with a table.csv")
        with open(p, newline="") as f:
            for row in csv.DictReader(f):
                if row.get("skipped"):
                    continue
                try:
                    out[row["id"]] = float(row["predicted"])
                except (KeyError, ValueError):
                    raise SpecError("--intervals-from", str(p), "table.csv with id and predicted columns") from None
                band = row.get("band") or ""
                if band and band not in BANDS:
                    raise SpecError("--intervals-from", f"{p}: band '{band}'", f"one of {', '.join(BANDS)}")
                if bands is not None and band:
                    bands[row["id"]] = band
    return out


def provenance(paths: list[Path], calibration: str, source: str, n: int) -> dict:
    from runner.job import git_commit

    return {"csvs": [{"name": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in paths],
            "calibration": calibration, "git_commit": git_commit(), "rows": n, "predictions": source,
            "fitted": _dt.date.today().isoformat()}


def fit_and_write(cases, runner, paths: list[Path], calibration: str, source: str, out: str | None,
                  min_rows: int = MIN_ROWS) -> Path:
    """Fit the error model on ``cases`` (predicted) and write it to ``out`` (default: the shipped file)."""
    regs, res, ids = residual_rows(cases, runner)
    if not res:
        raise SpecError("--fit-intervals", "0 rows", "at least one predicted row")
    em = fit(regs, res, min_rows=min_rows, provenance=provenance(paths, calibration, source, len(res)))
    path = Path(out) if out else SHIPPED
    write_residuals(residuals_path(path), ids, regs, res)
    return em.save(path)


def write_residuals(path: Path, ids, regs, res) -> Path:
    """One row per residual: id, the regime fields, ln(predicted / measured) - the rows the table
    was fitted on (the coverage test splits them)."""
    from engine.uncertainty.regimes import FIELDS

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", *FIELDS, "log_ratio"])
        for i, g, r in zip(ids, regs, res):
            w.writerow([i, *(g[k] for k in FIELDS), f"{r:.6f}"])
    return path


def fit_residual_files(files: list[str], paths: list[Path], calibration: str, out: str | None,
                       min_rows: int = MIN_ROWS) -> Path:
    """Refit from residual CSVs (``engine.uncertainty.residuals``) written by earlier
    --fit-intervals runs, e.g. one per reference CSV; ``paths``: the reference CSVs, for the
    provenance. Ids must be unique across the files."""
    from engine.uncertainty import residuals

    ids, regs, res = [], [], []
    for f in files:
        if not Path(f).is_file():
            raise SpecError("--intervals-from", f, "an existing .residuals.csv file")
        i, g, r = residuals.read(Path(f))
        ids += i
        regs += g
        res += r
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise SpecError("--intervals-from", dup[0], "row ids unique across the residual files")
    src = "simllm-validate --fit-intervals residuals " + ", ".join(Path(f).name for f in files)
    em = fit(regs, res, min_rows=min_rows, provenance=provenance(paths, calibration, src, len(res)))
    path = Path(out) if out else SHIPPED
    write_residuals(residuals_path(path), ids, regs, res)
    return em.save(path)
