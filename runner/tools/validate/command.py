"""The ``simllm-validate`` command: arguments, the steps (read, fit, predict, half split,
report, MLflow) and the output folder (table.csv, report.md, summary.json)."""

import argparse
import datetime as _dt
import hashlib
import math
import re
import sys
from pathlib import Path

from runner.compose import CONF, ROOT
from runner.tools.cli import add_quiet, add_tracking, count_type, guard, log_run, positive_type
from runner.tools.validate.fit import FIT_PARAMS, fit_calibration, fitted_yaml, half_split, write_framework_steps
from runner.tools.validate.predict import Runner
from runner.tools.validate.report import coverage, summarize, table_text, write_files
from runner.tools.validate.rows import DEFAULT_CSV, _model_config, read_cases

#: The --help line (the package docstring's first).
DESCRIPTION = "The ``simllm-validate`` console script: predicted vs published measurements, row by row."


def run(args) -> dict:
    from runner.tools.cli import Steps

    if args.intervals_from:
        return _intervals_only(args)
    names = ["reading the rows", *(["fitting"] if args.fit else []), "predicting",
             *(["half split"] if args.half_split else []), "writing the report",
             *([] if args.no_tracking else ["logging to MLflow"])]
    with Steps(names, "simllm-validate", getattr(args, "quiet", False)) as steps:
        return _run(args, steps)


def _run(args, steps) -> dict:
    from tqdm import tqdm

    from engine.errors import SpecError

    steps.step("reading the rows")
    paths = [Path(p) for p in (args.csv or [DEFAULT_CSV])]
    for p in paths:
        if not p.is_file():
            raise SpecError("--csv", str(p), "an existing CSV of measured points")
    # one file: its own name and digest; several (fitted together): the names joined, the digest of
    # the digests in order
    csv_path = paths[0] if len(paths) == 1 else Path(" + ".join(p.name for p in paths))
    shas = [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]
    sha = shas[0] if len(shas) == 1 else hashlib.sha256("".join(shas).encode()).hexdigest()
    configs = dict(_model_config(x) for x in args.model_config)
    cases = [c for p in paths for c in read_cases(p, configs)]
    if args.only:
        try:
            cases = [c for c in cases if re.match(args.only, c.id)]
        except re.error as e:
            raise SpecError("--only", args.only, f"a regular expression ({e})") from None
    runner = Runner(args.calibration, des_scale=args.des_scale, extra=args.set)
    params = None
    evals = [0]

    def fit_log(line: str) -> None:      # the fit's lines stay on stdout, around the bar
        evals[0] += 1
        steps.note(f"fitting: evaluation {evals[0]}")
        tqdm.write(line, file=sys.stdout)

    if args.fit:
        steps.step("fitting")
        first = next(c for c in cases if not c.skip)
        cal = runner.specs(first)[0].calibration
        start = {k: getattr(cal, k) for k in FIT_PARAMS}
        fit_runner = Runner(args.calibration, des_scale=args.fit_des_scale * args.des_scale, extra=args.set)
        fit_runner._specs, fit_runner._how = runner._specs, runner._how
        params, sol = fit_calibration(fit_runner, cases, start, max_nfev=args.max_nfev, polish=args.polish,
                                      log=fit_log, only=args.fit_params)
    steps.step("predicting")
    for i, c in enumerate(cases):
        steps.note(f"predicting: row {i + 1} of {len(cases)} ({c.id})")
        if not c.skip:
            c.predicted = runner.predict(c, params)
            if not math.isfinite(c.predicted):
                c.how += " [no prediction: does not fit in memory at this calibration; not in the summary]"
    from runner.tools.validate.intervals import set_bands

    set_bands(cases, runner, params)   # the load band of each predicted run, for table.csv and the intervals
    summary = summarize(cases)
    text = table_text(cases, summary)
    if args.fit_intervals:
        from runner.tools.validate.intervals import fit_and_write

        print(f"wrote {fit_and_write(cases, runner, paths, args.calibration, f'simllm-validate des_scale={args.des_scale:g}', args.intervals_out)} (intervals)")
    if args.ttft_parts:
        from runner.tools.validate.report import ttft_parts_text

        text += ttft_parts_text(cases, runner, params)
    if args.half_split:
        steps.step("half split")
    split = half_split(runner, cases, args) if args.half_split else None
    if split:
        text += split["text"]
    steps.step("writing the report")
    print(text)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.output_dir) / stamp
    out.mkdir(parents=True, exist_ok=True)
    write_files(out, csv_path, sha, args.calibration, params, text, summary, cases, split)
    if args.fit and not any(k in FIT_PARAMS for k in params):
        # only profile host terms moved (--fit-params): the calibration stays as composed
        print(f"calibration '{args.calibration}' not rewritten: --fit-params moved none of its factors")
    elif args.fit:
        from runner.tools.calibrate import compose

        path = Path(args.conf_dir) / "calibration" / f"{args.fit}.yaml"
        text_y = fitted_yaml(args.fit, params, csv_path, sha, summary, cases,
                             compose([f"calibration={args.calibration}", *args.set]))
        if path.exists() and not args.force and path.read_text() != text_y:
            raise FileExistsError(f"{path} exists and differs; pass --force to overwrite")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text_y)
        (out / f"{args.fit}.yaml").write_text(text_y)
        print(f"wrote {path}")
    if args.fit:
        rng = {k: (lo, hi) for k, (_, lo, hi, _) in getattr(sol, "ranges", {}).items()}
        for p in write_framework_steps(Path(args.conf_dir), params, csv_path.name, cases, rng):
            print(f"wrote {p} (host terms)")
    if not args.no_tracking:
        steps.step("logging to MLflow")
        metrics = {f"{g}_{k}": v for g, s in summary.items() for k, v in s.items()}
        metrics["rows_predicted"] = coverage(cases)["predicted"]
        if split:
            metrics.update({f"half_split_{g}_median_abs_error": s["median_abs_error"]
                            for g, s in split["held_out"].items() if s["n"]})
        p = {"csv": str(csv_path), "sha256": sha, "calibration": args.calibration,
             "rows": len(cases), "skipped": sum(1 for c in cases if c.skip)}
        if params:
            p.update({f"fitted.{k}": v for k, v in params.items()})
        log_run("simllm-validate", args, f"validate:{csv_path.stem}", p, metrics,
                {"simllm.kind": "validation"}, out)
    return {"cases": cases, "summary": summary, "params": params, "out": out}


def _intervals_only(args) -> dict:
    """--intervals-from: the error model fitted from earlier runs' predictions, nothing predicted."""
    from engine.errors import SpecError
    from runner.tools.validate.intervals import fit_and_write, predictions_from

    paths = [Path(p) for p in (args.csv or [DEFAULT_CSV])]
    for p in paths:
        if not p.is_file():
            raise SpecError("--csv", str(p), "an existing CSV of measured points")
    files = [d for d in args.intervals_from if d.endswith(".residuals.csv")]
    if files:   # residuals written by an earlier --fit-intervals: refit from them, nothing composed
        from runner.tools.validate.intervals import fit_residual_files

        if len(files) != len(args.intervals_from):
            raise SpecError("--intervals-from", args.intervals_from, "either folders or .residuals.csv files, not both")
        out = fit_residual_files(files, paths, args.calibration, args.intervals_out)
        print(f"wrote {out} (intervals from {', '.join(Path(f).name for f in files)})")
        return {"out": out}
    configs = dict(_model_config(x) for x in args.model_config)
    cases = [c for p in paths for c in read_cases(p, configs)]
    bands: dict = {}
    pred = predictions_from(args.intervals_from, bands)
    ids = {c.id for c in cases}
    unknown = sorted(set(pred) - ids)
    if unknown:
        raise SpecError("--intervals-from", unknown[0], "a row id of the --csv files")
    from runner.tools.validate.intervals import case_load

    for c in cases:
        c.predicted = pred.get(c.id, float("nan"))
        # the load band the earlier run wrote; a table.csv from before the band: unknown (DES
        # rows: their summaries are not re-run), none for static rows
        c.band = bands.get(c.id) or ("none" if case_load(c) == "static" else "unknown")
    if pred and not bands:
        print("note: the table.csv files have no band column (written before the load band): the DES rows' "
              "load band is unknown, their intervals pool over the bands")
    runner = Runner(args.calibration, des_scale=args.des_scale, extra=args.set)
    src = "simllm-validate table.csv of " + ", ".join(Path(d).name for d in args.intervals_from)
    out = fit_and_write(cases, runner, paths, args.calibration, src, args.intervals_out)
    print(f"wrote {out} (intervals from {sum(1 for c in cases if c.id in pred)} predicted rows)")
    return {"cases": cases, "out": out}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="simllm-validate", description=DESCRIPTION)
    ap.add_argument("--csv", action="append", default=[],
                    help="measured points (measured_dev.csv columns); repeat to predict and fit "
                    "several files together (default: the dev set)")
    ap.add_argument("--calibration", default="default", help="conf/calibration option to predict with")
    ap.add_argument("--only", default="", help="regex on row ids (e.g. 'GF|TPM')")
    ap.add_argument("--set", nargs="*", default=[], help="overrides for every row, e.g. "
                    "calibration.compute_efficiency=0.7 (with --fit: the start)")
    ap.add_argument("--fit", default="", help="fit one calibration on all rows, write conf/calibration/NAME.yaml")
    ap.add_argument("--fit-params", default="",
                    help="--fit: regex on the parameter names to move (e.g. 'framework\\.'), the "
                    "others stay as composed")
    ap.add_argument("--max-nfev", type=count_type(1), default=30, help="--fit: least_squares evaluations")
    ap.add_argument("--polish", type=int, default=0,
                    help="--fit: then Nelder-Mead on the mean per-metric median |error| (this many evaluations)")
    ap.add_argument("--model-config", action="append", default=[], metavar="NAME=PATH",
                    help="a config.json for a model the project has no conf/model for (repeatable)")
    ap.add_argument("--des-scale", type=positive_type, default=1.0,
                    help="DES request counts x this (smaller: faster, noisier); rows run by a "
                         "benchmark client keep the client's run length")
    ap.add_argument("--half-split", action="store_true",
                    help="also fit on every other row (by id) and report the error on the rows not fitted")
    ap.add_argument("--ttft-parts", action="store_true",
                    help="also take each DES TTFT row's predicted mean apart along the request's path "
                         "(API server and client trip, queue, prefill iterations, first token back)")
    ap.add_argument("--fit-des-scale", type=positive_type, default=0.3,
                    help="--fit: DES request counts x this while fitting (the final table uses all; "
                         "client rows keep their run length)")
    ap.add_argument("--fit-intervals", action="store_true",
                    help="also fit the prediction-interval error model on the predicted rows "
                         "(engine.uncertainty; written to --intervals-out)")
    ap.add_argument("--intervals-from", action="append", default=[], metavar="DIR",
                    help="fit the error model from earlier runs' DIR/table.csv (repeatable; rows from "
                         "--csv), or from NAME.residuals.csv files an earlier --fit-intervals wrote; "
                         "predicting nothing")
    ap.add_argument("--intervals-out", default="",
                    help="where the error model goes (default: the shipped engine/uncertainty/data/intervals.json)")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--conf-dir", default=str(CONF))
    ap.add_argument("--output-dir", default=str(ROOT / "outputs" / "validation"))
    add_tracking(ap, "validation")
    add_quiet(ap)
    return ap


@guard("simllm-validate")
def main(argv=None) -> int:
    args = parser().parse_args(argv)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
