"""The ``simllm-calibrate`` console script: fit a calibration to one measured benchmark run.

    simllm-calibrate results/vllm-4qps.json --name h100_vllm hardware=h100_sxm model=llama_3_1_8b
    simllm-calibrate profile_export.json --name trt --input-len 512 engine.des.scheduling.scheduler=orca
    simllm-calibrate measured.csv --name mine --rate 4 hardware=h200

The measurement (vLLM --save-result JSON, genai-perf profile_export.json, GuideLLM report or a plain
CSV; see engine.calibration.measurements) is re-simulated with the DES on the deployment the
Hydra overrides describe; engine.calibration.fit does the two-stage fit. Output:
conf/calibration/NAME.yaml (efficiencies, overhead, provenance with the data's path and sha256,
the before/after error table and the diagnosis table as comments) and
conf/calibration/noise/NAME.yaml (the fitted jump diffusion), a report directory
outputs/calibrations/NAME-TIME/ (report.md, fit.json, both YAMLs) and an MLflow run holding all of
it. Errors print one line and exit 2.
"""

import argparse
import datetime as _dt
import json
import math
import sys
from pathlib import Path

from engine.errors import SpecError
from runner.calibration_yaml import calibration_yaml_text, display, write_calibration_yaml
from runner.tools.cli import (add_quiet, add_tracking, count_type as _count, guard, log_run,
                              positive_type as _positive, text_table as _table)

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


def compose(overrides: list[str], config_dir: Path = CONF):
    """The composed config for ``overrides`` (engine=des unless given)."""
    from runner.compose import compose as compose_config

    if not any(o.startswith("engine=") for o in overrides):
        overrides = ["engine=des", *overrides]
    return compose_config(overrides, config_dir)


def _pct(v) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:+.1%}"


def _key(k) -> str:
    m, q = k
    return f"{m[:-3]}_p{q:g}".replace(".", "_")


def error_table(fit, measured: dict) -> list[dict]:
    """Rows: metric, measured value, signed error before (start) and after the fit."""
    rows = []
    for k in sorted(fit.errors_after, key=lambda t: (t[0], t[1])):
        rows.append({"metric": f"{k[0]} p{k[1]:g}", "measured": measured.get(k),
                     "before": fit.errors_before.get(k), "after": fit.errors_after.get(k)})
    return rows


def _fmt_value(name: str, v: float) -> str:
    if name in ("step_overhead_s", "per_request_overhead_s"):
        return f"{v * 1e6:.1f} us"
    if name == "jump_mean_s":
        return f"{v * 1e3:.3f} ms"
    return f"{v:.4g}"


def _fmt_range(name: str, fit) -> str:
    r = fit.ranges.get(name)
    return f"{_fmt_value(name, r[1])} .. {_fmt_value(name, r[2])}" if r else "-"


def _pinned(name: str, fit) -> str:
    r = fit.ranges.get(name)
    return "-" if not r else ("yes" if r[3] else "**not pinned**")


def markdown(name: str, m, fit, measured: dict, deployment: str) -> str:
    errs = error_table(fit, measured)
    out = [f"# Calibration {name}", "",
           f"Data: `{display(m.path)}` ({m.format}, {len(m)} requests, sha256 `{m.sha256}`)", "",
           f"Deployment: {deployment}", "",
           f"Fit: two stages x {sum(1 for h in fit.history if isinstance(h['round'], int)) // 2} rounds"
           f"{', valley check' if any(h['round'] == 'valley check' for h in fit.history) else ''}, "
           f"{fit.simulations} DES simulations", "",
           "## Fitted parameters", "",
           "95 % range: from the Jacobian of the last stage that fitted the parameter "
           "(covariance s^2 (J^T J)^-1, engine/calibration/solve.py); *not pinned*: the data cannot "
           "determine it (range too wide or a flat direction), so its value is the start's or arbitrary.", "",
           _table({"parameter": list(fit.params), "start": [_fmt_value(k, fit.start[k]) for k in fit.params],
                   "fitted": [_fmt_value(k, v) for k, v in fit.params.items()],
                   "95 % range": [_fmt_range(k, fit) for k in fit.params],
                   "pinned by the data": [_pinned(k, fit) for k in fit.params]})]
    loose = [k for k, r in fit.ranges.items() if not r[3]]
    if loose:
        out += ["", f"The data cannot pin: {', '.join(loose)} (see the range column)."]
    out += ["", "## Error against the measurement (simulated / measured - 1)", "",
            _table({"metric": [r["metric"] for r in errs], "measured ms": [f"{r['measured']:.3f}" for r in errs],
                    "before": [_pct(r["before"]) for r in errs], "after": [_pct(r["after"]) for r in errs]})]
    diag = fit.diagnosis
    out += ["", "## Diagnosis (from the fit: each parameter alone back at its start)", "",
            _table({"parameter": [d["parameter"] for d in diag], "symptom it explains": [d["symptom"] for d in diag],
                    "start -> fitted": ["" if not math.isfinite(d["start"]) else
                                        f"{_fmt_value(d['parameter'], d['start'])} -> "
                                        f"{_fmt_value(d['parameter'], d['fitted'])}" for d in diag],
                    "error with it at start -> fitted": [d["explains"] for d in diag]})]
    if m.notes:
        out += ["", "Notes on the data: " + "; ".join(m.notes)]
    return "\n".join(out) + "\n"


def calibration_yaml(name: str, cfg, m, fit, measured: dict, deployment: str, commit: str) -> tuple[str, str]:
    """(conf/calibration/NAME.yaml text, conf/calibration/noise/NAME.yaml text)."""
    c = cfg.calibration
    p = fit.params
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = display(m.path)  # relative to the project root: no machine's absolute path
    lines = [f"Fitted by simllm-calibrate on {date} (commit {commit}) to {where}",
             f"({m.format}, {len(m)} requests) re-simulated with engine=des on {deployment}.",
             "Error of the simulation against the measurement (simulated / measured - 1):",
             "  metric            measured ms    before     after"]
    for r in error_table(fit, measured):
        lines.append(f"  {r['metric']:<16} {r['measured']:>12.3f} {_pct(r['before']):>9} {_pct(r['after']):>9}")
    lines.append("Diagnosis (each parameter alone back at its start value):")
    for d in fit.diagnosis:
        lines.append(f"  {d['parameter']}: {d['symptom']}; {d['explains']}")
    cal = calibration_yaml_text(
        name, lines, noise=name,
        noise_comment=f"fitted jump diffusion: conf/calibration/noise/{name}.yaml",
        provenance=(f"simllm-calibrate two-stage fit to {where} (sha256 {m.sha256}, {len(m)} "
                    f"requests, {m.format}); {deployment}; started from calibration '{c.name}'"),
        fields=[("compute_efficiency", f"{p['compute_efficiency']:.4f}", "fitted (stage 1)"),
                ("memory_bandwidth_efficiency", f"{p['memory_bandwidth_efficiency']:.4f}", "fitted (stage 1)"),
                ("comm_efficiency", c.comm_efficiency, f"from '{c.name}' (not fitted)"),
                ("memory_reserve", c.memory_reserve, f"from '{c.name}'"),
                ("kv_usable_fraction", c.kv_usable_fraction, f"from '{c.name}'"),
                ("step_overhead", f"{p['step_overhead_s'] * 1e6:.1f} us", "fitted (stage 1)"),
                ("per_token_overhead", c.per_token_overhead, f"from '{c.name}'"),
                ("per_request_overhead", f"{p['per_request_overhead_s'] * 1e6:.1f} us", "fitted (stage 1)")
                if "per_request_overhead_s" in p else
                ("per_request_overhead", c.per_request_overhead, f"from '{c.name}'"),
                ("launch_overhead", c.get("launch_overhead", "0 us"), f"from '{c.name}'")])
    noise = [f"# Jump diffusion fitted by simllm-calibrate (stage 2) to {where} (sha256 {m.sha256[:16]}...).",
             f"jitter_sigma: {p['jitter_sigma']:.4f}",
             f"jump_rate: {p['jump_rate_per_s']:.4f}        # per second of busy time",
             f"jump_dist: {c.noise.jump_dist}",
             f"jump_size: {p['jump_mean_s'] * 1e3:.4f} ms",
             f"jump_sigma: {c.noise.jump_sigma}",
             f"throttle_after: {c.noise.throttle_after}",
             f"throttle_factor: {c.noise.throttle_factor}"]
    return cal, "\n".join(noise) + "\n"


#: Reader options per command-line option: format -> the reader's keyword (engine.calibration.measurements).
OPTIONS = {"--input-len": {"genai_perf": "input_len"},
           "--benchmark": {"guidellm": "benchmark", "genai_perf": "experiment"},
           "--rate": {"csv": "workload"}, "--concurrency": {"csv": "workload"}}
#: Why an option does not apply to a format (the file already says it).
_HAS = {"--input-len": "prompt token counts", "--benchmark": "a single run",
        "--rate": "its traffic (rate or concurrency)", "--concurrency": "its traffic (rate or concurrency)"}


def reader_options(args, fmt: str) -> dict:
    """The reader's keyword arguments of the command-line options given, or a SpecError naming an
    option that does not apply to ``fmt`` data."""
    given = {"--input-len": args.input_len or None, "--benchmark": args.benchmark,
             "--rate": args.rate or None, "--concurrency": args.concurrency or None}
    if given["--rate"] and given["--concurrency"]:
        raise SpecError("--concurrency", args.concurrency, "either --rate or --concurrency, not both")
    kw = {}
    for opt, v in given.items():
        if v is None:
            continue
        if fmt not in OPTIONS[opt]:
            takes = " or ".join(f.replace("_", "-") for f in OPTIONS[opt])
            raise SpecError(opt, v, f"only with {takes} data ({fmt.replace('_', '-')} data records "
                            f"{_HAS[opt]} itself; leave {opt} out)")
        if opt == "--rate":
            v = {"arrival": "poisson", "rate_rps": v}
        elif opt == "--concurrency":
            v = {"arrival": "closed_loop", "concurrency": v}
        kw[OPTIONS[opt][fmt]] = v
    return kw


def run(args) -> dict:
    """Fit, write the YAMLs, the report directory and (optionally) the MLflow run."""
    from runner.tools.cli import Steps

    names = ["reading the measurement", "composing the deployment", "fitting", "writing the report"]
    with Steps(names + ([] if args.no_tracking else ["logging to MLflow"]), "simllm-calibrate",
               args.quiet) as steps:
        return _run(args, steps)


def _run(args, steps) -> dict:
    from engine.calibration.fit import TARGETS, calibrate
    from engine.calibration.measurements import detect_format, read_measurement
    from runner.convert import des_spec, specs_from_config
    from runner.job import git_commit

    steps.step("reading the measurement")
    fmt = detect_format(args.measurement) if args.format == "auto" else args.format
    m = read_measurement(args.measurement, fmt, **reader_options(args, fmt))
    steps.step("composing the deployment")
    cfg = compose(args.overrides)
    specs = specs_from_config(cfg)
    des = des_spec(cfg)
    if steps.shown and des.outputs.progress == "auto":
        from dataclasses import replace

        des = des.with_(outputs=dict(progress="off"))     # one bar: the fit's, not one per simulation
    steps.step("fitting")
    fit = calibrate(specs, des, m, rounds=args.rounds, max_nfev=args.max_nfev,
                    request_overhead={"auto": "auto", "yes": True, "no": False}[args.fit_request_overhead],
                    on_simulation=lambda n: steps.note(f"fitting: DES run {n}"))
    steps.step("writing the report")
    measured = {k: m.quantile(*k) for k in TARGETS}
    p = cfg.partition
    d = des.resolve(specs.framework)      # null engine.des settings: the framework profile's
    deployment = (f"{cfg.hardware.name} / {cfg.model.name} / tp{p.tp} pp{p.pp} / {specs.framework.name}: "
                  f"{d.scheduling.scheduler} scheduler, max_num_seqs {d.scheduling.max_num_seqs}")
    commit = git_commit()
    cal_text, noise_text = calibration_yaml(args.name, cfg, m, fit, measured, deployment, commit)
    conf_dir = Path(args.conf_dir)
    write_calibration_yaml(conf_dir / "calibration" / f"{args.name}.yaml", cal_text, args.force)
    write_calibration_yaml(conf_dir / "calibration" / "noise" / f"{args.name}.yaml", noise_text, args.force)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.output_dir) / f"{args.name}-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    report = markdown(args.name, m, fit, measured, deployment)
    (out / "report.md").write_text(report)
    (out / f"{args.name}.yaml").write_text(cal_text)
    (out / f"noise_{args.name}.yaml").write_text(noise_text)
    doc = {"name": args.name, "data": {"path": display(m.path), "sha256": m.sha256, "format": m.format,
                                       "requests": len(m), "workload": m.workload, "notes": m.notes},
           "deployment": deployment, "params": fit.params, "start": fit.start,
           "ranges_95": {k: {"low": r[1], "high": r[2], "identifiable": r[3]} for k, r in fit.ranges.items()},
           "errors_before": {_key(k): v for k, v in fit.errors_before.items()},
           "errors_after": {_key(k): v for k, v in fit.errors_after.items()},
           "measured_ms": {_key(k): v for k, v in measured.items()},
           "diagnosis": fit.diagnosis, "history": [{k: (str(v) if isinstance(v, dict) else v)
                                                     for k, v in h.items()} for h in fit.history],
           "simulations": fit.simulations, "git_commit": commit}
    (out / "fit.json").write_text(json.dumps(doc, indent=2, default=float))
    print(report)
    if not args.no_tracking:
        steps.step("logging to MLflow")
        summary = {f"err_before_{_key(k)}": v for k, v in fit.errors_before.items()}
        summary.update({f"err_after_{_key(k)}": v for k, v in fit.errors_after.items()})
        params = {**{k: v for k, v in fit.params.items()}, "data_path": m.path, "data_sha256": m.sha256,
                  "data_format": m.format, "deployment": deployment, "name": args.name}
        log_run("simllm-calibrate", args, f"calibrate:{args.name}", params, summary,
                {"simllm.kind": "calibration", "simllm.git_commit": commit}, out)
    return {"fit": fit, "report_dir": out, "measurement": m}


def parser() -> argparse.ArgumentParser:
    from engine.calibration.readers import FORMATS

    ap = argparse.ArgumentParser(prog="simllm-calibrate", description=__doc__.split("\n\n")[0])
    ap.add_argument("measurement", help="vLLM --save-result JSON, genai-perf profile_export.json, "
                                        "GuideLLM report JSON or CSV")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of the deployment (hardware=..., model=...)")
    ap.add_argument("--name", required=True, help="writes conf/calibration/NAME.yaml")
    ap.add_argument("--format", default="auto", choices=["auto", *FORMATS],
                    help="a registered reader (engine/calibration/readers/); auto: from the file's content")
    ap.add_argument("--input-len", type=_count(1), default=0, help="genai-perf: prompt tokens per request")
    ap.add_argument("--benchmark", type=_count(0), default=None,
                    help="GuideLLM: which benchmark of the report (genai-perf: which experiment)")
    ap.add_argument("--rate", type=_positive, default=0.0, help="CSV without arrivals: Poisson rate [req/s]")
    ap.add_argument("--concurrency", type=_count(1), default=0, help="CSV without arrivals: closed-loop users")
    ap.add_argument("--rounds", type=_count(1), default=2, help="stage 1 + stage 2 alternations")
    ap.add_argument("--max-nfev", type=_count(1), default=60, help="simulations per stage at most")
    ap.add_argument("--fit-request-overhead", choices=["auto", "yes", "no"], default="auto",
                    help="also fit calibration.per_request_overhead (a constant per request on TTFT: "
                         "client, HTTP, tokenisation); auto: when the data has each request's ITLs")
    ap.add_argument("--conf-dir", default=str(CONF))
    ap.add_argument("--output-dir", default=str(ROOT / "outputs" / "calibrations"))
    ap.add_argument("--force", action="store_true", help="overwrite existing YAMLs")
    add_tracking(ap, "calibration")
    add_quiet(ap)
    return ap


@guard("simllm-calibrate")
def main(argv=None) -> int:
    args = parser().parse_intermixed_args(argv)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
