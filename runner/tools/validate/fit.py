"""``--fit`` and ``--half-split``: ONE calibration fitted to all expressible rows at once
(``engine.calibration.solve.least_squares_fit``, the project's one fitter), written as
conf/calibration/NAME.yaml and each fitted profile's step overhead."""

import datetime as _dt
import math
import re
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

from runner.tools.validate.cases import GROUPS, Case
from runner.tools.validate.predict import Runner
from runner.tools.validate.report import summarize


#: Parameters ``--fit`` adjusts (one value each for the whole set), their bounds and the unit the
#: optimiser sees (so that a 1 % finite-difference step means something for each).
FIT_PARAMS = {"compute_efficiency": (0.2, 1.0, "log"), "memory_bandwidth_efficiency": (0.3, 1.0, "log"),
              "comm_efficiency": (0.1, 1.0, "log"), "step_overhead_s": (0.0, 0.01, 1e-3),
              "per_token_overhead_s": (0.0, 2e-4, 1e-5), "per_request_overhead_s": (0.0, 0.05, 1e-3)}
#: A serving framework's host costs beyond the common baseline are the framework's, not the
#: hardware's (scheduler and input preparation per iteration; output processing per sequence that
#: emits a token, and per streaming one; input preparation per prompt token; the API server per request and per prompt
#: token; launching the layers of a pass no CUDA graph holds): ``--fit`` fits
#: the calibration's overheads (the baseline, pinned by the neutral ``generic`` profile's rows too)
#: plus these ``framework.<profile>.<field>`` on top of them per named profile with at least
#: MIN_FRAMEWORK_ROWS fitted rows, on all of that profile's rows at once; other profiles keep their
#: values, ``generic`` stays neutral. (low, high, optimiser unit) per field.
MIN_FRAMEWORK_ROWS = 3
FRAMEWORK_HOST = {"step_overhead_s": (0.0, 0.02, 1e-3), "per_output_token_s": (0.0, 5e-4, 1e-5),
                  "per_streamed_token_s": (0.0, 5e-4, 1e-5),
                  "per_prefill_token_s": (0.0, 5e-5, 1e-6), "per_request_s": (0.0, 0.02, 1e-3),
                  "per_request_token_s": (0.0, 2e-5, 1e-6),
                  "eager_layer_s": (0.0, 1e-3, 1e-5), "host_overlap": (0.0, 1.0, 0.1)}
#: (host_overlap, the part of the host work an overlap scheduler runs beside the GPU, is fitted
#: only for profiles that schedule ahead: a synchronous loop has nothing to overlap)
#: (the API server's time per request is bounded at 20 ms and per prompt token at 20 us: parsing,
#: tokenising up to 8k tokens with a fast tokenizer and handing over take milliseconds; a fit
#: pressing on a bound says the data wants a mechanism these terms do not have, not a slower
#: tokenizer)
#: Rows of a profile needed before its per-token, per-prompt-token and per-request terms are fitted
#: (one number per profile needs a few rows; four need rows at several loads and lengths).
MIN_FRAMEWORK_ROWS_ALL = 20


def fit_space(use: list, only: str = "", ahead=()) -> dict:
    """The parameters ``--fit`` moves for these rows: FIT_PARAMS plus the profile host terms
    (FRAMEWORK_HOST: step overhead per named profile, not generic, with MIN_FRAMEWORK_ROWS rows;
    all of them with MIN_FRAMEWORK_ROWS_ALL, host_overlap only for the profiles in ``ahead``,
    those that schedule ahead); ``only`` (a regular expression) keeps the names it matches, the
    others stay at their composed values."""
    space = dict(FIT_PARAMS)
    rows = Counter(c.framework for c in use)
    for fw, n in sorted(rows.items()):
        if fw and fw != "generic" and n >= MIN_FRAMEWORK_ROWS:
            for k, b in FRAMEWORK_HOST.items():
                if k == "host_overlap" and fw not in ahead:
                    continue
                if k == "step_overhead_s" or n >= MIN_FRAMEWORK_ROWS_ALL:
                    space[f"framework.{fw}.{k}"] = b
    if only:
        space = {k: v for k, v in space.items() if re.search(only, k)}
        if not space:
            from engine.errors import SpecError
            raise SpecError("--fit-params", only, "a regular expression matching at least one of "
                            + ", ".join(sorted(fit_space(use, ahead=ahead))))
    return space


#: Finite-difference steps of ``--fit`` (absolute, in optimiser coordinates: forward differences,
#: engine.calibration.solve.forward_jacobian): 0.01 of a log parameter (1 % of an efficiency) ...
FD_LOG_STEP = 0.01
#: ... and FD_RANGE_STEP of the whole range of a parameter in its own units (0.4 ms of a profile's
#: step overhead, 10 us of its per-token time, 1 us per prompt token, 20 us per eager layer, 0.02
#: of host_overlap). scipy's relative steps (diff_step x |value|) probe a host term at 0 with a
#: step of 0: it never left 0, whatever the data said.
FD_RANGE_STEP = 0.02


def fd_steps(names: list, space: dict) -> np.ndarray:
    """The absolute finite-difference step of each coordinate (FD_LOG_STEP, FD_RANGE_STEP)."""
    return np.array([FD_LOG_STEP if space[k][2] == "log"
                     else FD_RANGE_STEP * (space[k][1] - space[k][0]) / space[k][2] for k in names])


def fit_calibration(runner: Runner, cases: list[Case], start: dict, max_nfev: int = 40, log=print,
                    polish: int = 0, only: str = ""):
    """One calibration for all expressible rows: least_squares (soft-L1, f_scale 0.1) on the log
    of predicted / measured, each metric weighted to the same total; returns (params, scipy
    result, which also carries ``fit``: the ``engine.calibration.solve`` result with each
    coordinate's 95 % range and identifiability). Efficiencies move in log space, the overheads in
    ms (per token: in 10 us). The least squares is the project's one fitter
    (``engine.calibration.solve.least_squares_fit``, the one ``simllm-calibrate`` uses)."""
    from engine.calibration.solve import least_squares_fit

    # MLPerf server rows are a bisection on the rate (a step function of the parameters, and a
    # dozen DES runs each): evaluated and reported, not fitted
    use = [c for c in cases if not c.skip and not c.server]
    first = {}
    for c in use:
        first.setdefault(c.framework, c)
    ahead = {fw for fw, c in first.items() if fw and runner.specs(c)[0].framework.schedule_ahead}
    space = fit_space(use, only, ahead)
    names = list(space)

    def enc(k, v):
        unit = space[k][2]
        return math.log(v) if unit == "log" else v / unit

    def dec(u):
        return {k: float(np.exp(v)) if space[k][2] == "log" else float(v) * space[k][2]
                for k, v in zip(names, u)}

    # each metric (TTFT, TPOT, throughput) weighs the same in total, however many rows it has
    count = {g: sum(1 for c in use if c.metric == g) for g in GROUPS}
    weight = np.array([math.sqrt(len(use) / (len(GROUPS) * count[c.metric])) for c in use])

    def resid(u):
        p = dec(u)
        r = []
        for c in use:
            v = runner.predict(c, p)
            r.append(math.log(v / c.measured) if v > 0 and math.isfinite(v) else 3.0)
        r = np.array(r)
        med = {g: np.median(np.abs([x for x, c in zip(r, use) if c.metric == g])) for g in GROUPS if count[g]}
        log(f"  fit: {', '.join(f'{k}={v:.4g}' for k, v in p.items())}  median |log err| "
            + ", ".join(f"{g} {v:.3f}" for g, v in med.items()))
        return weight * r

    lo = np.array([enc(k, space[k][0]) if space[k][2] != "log" or space[k][0] > 0 else 0.0
                   for k in names])
    hi = np.array([enc(k, space[k][1]) for k in names])
    for k in names:   # a profile's current value (its YAML) starts its own host terms
        if k.startswith("framework.") and k not in start:
            _, fw, field = k.split(".")
            c0 = next(c for c in use if c.framework == fw)
            start[k] = getattr(runner.specs(c0)[0].framework, field) or 0.05 * space[k][1]
    u0 = np.clip(np.array([enc(k, start[k]) for k in names]), lo + 1e-6, hi - 1e-6)
    fit = least_squares_fit(resid, names, lo, hi, u0, loss="soft_l1", f_scale=0.1,
                            abs_step=fd_steps(names, space), max_nfev=max_nfev)
    sol = fit.sol
    sol.fit = fit
    # {name: (value, low, high, pinned)} in the parameters' own units
    sol.ranges = fit.ranges(lambda k, v: float(np.exp(v)) if space[k][2] == "log" else float(v) * space[k][2])
    if polish:
        # the reported figure is the median |error| per metric: polish on the mean of the three
        # medians (piecewise in the parameters, so Nelder-Mead), from the least-squares solution
        from scipy.optimize import minimize

        groups = np.array([c.metric for c in use])

        def medians(u):
            r = np.abs(resid(np.clip(u, lo, hi)) / weight)
            return float(np.mean([np.median(r[groups == g]) for g in GROUPS if count[g]]))

        simplex = np.vstack([sol.x] + [sol.x + np.where(np.arange(len(names)) == i,
                                                        0.1 * np.maximum(np.abs(sol.x), 0.5), 0.0)
                                       for i in range(len(names))])
        nm = minimize(medians, sol.x, method="Nelder-Mead",
                      options={"initial_simplex": simplex, "maxfev": polish, "xatol": 1e-3, "fatol": 1e-4})
        if nm.fun < medians(sol.x):
            sol.x = np.clip(nm.x, lo, hi)
    return dec(sol.x), sol


def fitted_yaml(name: str, params: dict, csv_path: Path, sha: str, summary: dict, cases: list[Case],
                base_cfg) -> str:
    """The fitted calibration as conf/calibration/NAME.yaml (``runner.calibration_yaml``: one
    layout, paths relative to the project); the cost backend as composed (``--set``)."""
    from runner.calibration_yaml import calibration_yaml_text, display

    c = base_cfg.calibration
    cost = c.cost
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    err = "; ".join(f"{g} median {s['median_abs_error']:.1%} / max {s['max_abs_error']:.1%} (n={s['n']})"
                    for g, s in summary.items() if s["n"])
    n = sum(1 for x in cases if not x.skip and not x.server)
    fws = sorted(k.split(".")[1] for k in params if k.startswith("framework."))
    header = [f"Default calibration: ONE set of factors fitted by `simllm-validate --fit {name}` ({date}) to all",
              f"{n} fittable rows of {csv_path.name} at once (never per row or model; host time per iteration",
              f"per framework profile on all of that profile's rows: {', '.join(fws) or 'none'}):",
              "least_squares, soft-L1 on log(predicted / measured). Error it reaches (|predicted / measured - 1|):",
              f"  {err}",
              "Noise stays off: the dev set publishes medians and means, no tails to fit a jump diffusion to."]
    prov = (f"simllm-validate --fit on {display(csv_path)} (sha256 {sha}); {n} rows (TTFT, TPOT,\n"
            "throughput; analytical batch-1/static-batch rows, DES offline and serving rows; MLPerf\n"
            f"server rows evaluated, not fitted); cost.backend={cost.backend}; memory reserve and KV fraction as\n"
            "the seed document (not fitted). Error reached: " + err)
    step = ("fitted: per iteration, every framework (profiles add their own: conf/framework/*.yaml)"
            if fws else "fitted: per iteration (scheduler)")
    fields = [("compute_efficiency", f"{params['compute_efficiency']:.4f}", "fitted (roofline-priced operators)"),
              ("memory_bandwidth_efficiency", f"{params['memory_bandwidth_efficiency']:.4f}", "fitted"),
              ("comm_efficiency", f"{params['comm_efficiency']:.4f}", "fitted"),
              ("memory_reserve", c.memory_reserve, "CUDA context, allocator and framework buffers"),
              ("kv_usable_fraction", c.kv_usable_fraction, ""),
              ("step_overhead", f"{params['step_overhead_s'] * 1e6:.1f} us", step),
              ("per_token_overhead", f"{params['per_token_overhead_s'] * 1e6:.2f} us",
               "fitted: per sequence per step (sampling, detokenise)"),
              ("per_request_overhead", f"{params['per_request_overhead_s'] * 1e6:.1f} us",
               "fitted: once per request (tokenise, admit, respond)"),
              ("launch_overhead", c.get("launch_overhead", "0 us"), "per forward pass; not fitted"),
              ("cost", "", "operator prices (engine.cost.registry; calibration.cost)"),
              ("  backend", cost.backend, "roofline | measured | transfer | anchored | auto"),
              ("  transfer_exclude", list(cost.get("transfer_exclude") or []),
               "kernel table sets the transfer curves are fitted without")]
    return calibration_yaml_text(name, header, prov, fields)


def write_framework_steps(conf_dir: Path, params: dict, csv_label: str, cases: list[Case],
                          ranges: dict | None = None) -> list:
    """Set each fitted profile host term's line (``step_overhead``, ``per_output_token_overhead``,
    ...: the FrameworkSpec field's config key) in conf_dir/framework/NAME.yaml to its fitted value,
    with its 95 % range when known (the rest of the file untouched); returns the paths written."""
    from engine.spec.framework import FrameworkSpec
    from engine.spec.meta import config_fields

    keys = {f.name: (md["key"], md.get("unit")) for f, md in config_fields(FrameworkSpec)}
    out = []
    for k, v in sorted(params.items()):
        if not k.startswith("framework."):
            continue
        _, fw, field = k.split(".")
        key, unit = keys[field]
        path = Path(conf_dir) / "framework" / f"{fw}.yaml"
        n = sum(1 for c in cases if c.framework == fw and not c.skip and not c.server)
        rng = (ranges or {}).get(k)
        x = 1e6 if unit else 1.0          # seconds written in us; fractions as they are
        span = f" (95 % {rng[0] * x:.3g}-{rng[1] * x:.3g})" if rng else ""
        line = (f"{key}: {v * x:.3g}{' us' if unit else ''}   # fitted{span} by simllm-validate --fit on all "
                f"{n} rows of this profile in {csv_label}"
                + ("; on top of the calibration's" if unit else ""))
        text = path.read_text()
        new = re.sub(rf"(?m)^{key}:.*$", line, text, count=1)
        if new == text and not re.search(rf"(?m)^{key}:", text):
            new = text.rstrip("\n") + "\n" + line + "\n"
        path.write_text(new)
        if path not in out:
            out.append(path)
    return out



def halves(cases: list[Case]) -> tuple[list, list]:
    """(every other benchmark point, the others): cases grouped by their setup (the rows of one
    point: its TTFT and its TPOT, read from one simulation), the points sorted by their first row
    id and alternated."""
    from runner.tools.validate.predict import _setup_key

    points: dict = {}
    for c in sorted(cases, key=lambda c: c.id):
        points.setdefault(_setup_key(c), []).append(c)
    groups = sorted(points.values(), key=lambda g: g[0].id)
    return [c for g in groups[0::2] for c in g], [c for g in groups[1::2] for c in g]


def half_split(runner: Runner, cases: list[Case], args) -> dict:
    """Fit one calibration on every other benchmark point (points sorted by their first row id:
    0, 2, 4, ...; the rows of one point - its TTFT and its TPOT, one simulation - stay together)
    with the ``--fit`` machinery, then report median |error| on that half and on the held-out half.
    The fit starts from the composed calibration (``--calibration``, ``--set``): start it away from
    a calibration fitted on all rows, or the held-out half is not held out."""
    use = [c for c in cases if not c.skip and math.isfinite(c.predicted)]
    fit_half, held = halves(use)
    # MLPerf server rows come from a bisection on the rate: a step function of the parameters that
    # finite differences cannot follow; they are evaluated, not fitted
    fit_rows = [c for c in fit_half if not c.server]
    cal = runner.specs(use[0])[0].calibration
    start = {k: getattr(cal, k) for k in FIT_PARAMS}
    fit_runner = Runner(args.calibration, des_scale=args.fit_des_scale * args.des_scale, extra=args.set)
    fit_runner._specs, fit_runner._how = runner._specs, runner._how
    params, _ = fit_calibration(fit_runner, fit_rows, start, max_nfev=args.max_nfev, polish=args.polish,
                                log=lambda *a: print(*a, file=sys.stderr, flush=True),
                                only=getattr(args, "fit_params", ""))

    def errs(rows):
        out = []
        for c in rows:
            v = runner.predict(c, params)
            out.append(replace(c, predicted=v))
        return summarize(out)

    fit_s, held_s = errs(fit_half), errs(held)
    lines = ["", f"half split: fitted on {len(fit_rows)} rows (every other benchmark point by id, MLPerf server rows left out), "
                 f"evaluated on those ({len(fit_half)} with server rows) and on the other {len(held)}:",
             "  fitted " + ", ".join(f"{k}={v:.4g}" for k, v in params.items())]
    for g in GROUPS:
        if fit_s[g]["n"] or held_s[g]["n"]:
            lines.append(f"  {g:<10} fit half median |error| {fit_s[g]['median_abs_error']:.1%} (n={fit_s[g]['n']})"
                         f"   held-out half {held_s[g]['median_abs_error']:.1%} (n={held_s[g]['n']})")
    return {"params": params, "fit": fit_s, "held_out": held_s, "text": "\n".join(lines) + "\n"}
