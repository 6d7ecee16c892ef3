"""``simllm-plan`` with ``plan.requirements``: the smallest spec-sheet figures that serve a target
rate within the SLOs, the frontier of two of them, and the spec elasticities (engine.plan.requirements).

    simllm-plan experiment=requirements_l70b
    simllm-plan plan=requirements engine=des workload=azure_conv model=llama_3_1_8b partition.tp=1 \\
        plan.requirements.rate_rps=5 'plan.requirements.axes={hbm_bandwidth:{lo:1 TB/s,hi:6 TB/s}}'

1. Compose (the plan's overrides); the base chip is the composed ``hardware`` (any conf/hardware
   option plus ``hardware.*`` overrides, or a YAML imported from a spec sheet by simllm-import
   hwcsv); axis ranges and values are unit strings converted by runner.units (pint).
2. Per axis: the least value meeting the SLOs at ``rate_rps`` (others at the base chip's), by
   analytical pruning then DES bisection under the plan's stability rule; with
   ``plan.requirements.space`` the least value at which some deployment of the space does
   (``deployments``: the plan's candidates, one compose per framework profile), the deployment
   binding there named. The frontier of
   ``frontier: [x, y]`` by the staircase walk over ``frontier_points`` x values; of
   ``frontier: [x, z, y]`` the least y at every (x, z) cell of ``frontier_points`` values each.
   With a launcher override on the command line (``hydra/launcher=joblib``, ``...=submitit_slurm``,
   any ``hydra.launcher.*``) every DES verification of the search is a job of that launcher, in
   waves (``WaveExecutor``; the job app is this module's ``--job``), the searches batched.
3. Elasticities d log(metric) / d log(spec) by central differences at +-``elasticity.step``:
   analytical engine metrics and capacity estimate; DES p50/p99 TTFT/TPOT at the target rate
   with the same seeded stream at every point (common random numbers); DES capacity at the SLOs
   by two rate searches per field at +-h (``elasticity.des_capacity``); the ranked "if this
   figure is 10 % optimistic" table.
4. ``requirements.md`` / ``.json`` / ``*.csv`` / ``.png`` in ``--out`` (and ``--study``); an MLflow
   parent run with a child run per DES-verified spec point.

Every spec point, the base chip's included, is priced as a what-if chip by the transfer backend
(hardware.kernel_tables = ""), so differences along an axis are of one cost model; its stated
error (the transfer fits' median |log error|) is in the report.
"""

import json
import math
import os
import resource
import sys
import time
from dataclasses import replace
from pathlib import Path

from omegaconf import OmegaConf

from engine.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
KNOWN_KEYS = ("rate_rps", "axes", "precision", "frontier", "frontier_points", "known_chips", "elasticity",
              "bound_slack", "sheet", "space")
ELASTICITY_KEYS = ("step", "optimistic", "fields", "des", "des_requests", "des_capacity")
#: keys of plan.requirements.space (the deployment space); a list left out = the composed deployment's value
SPACE_KEYS = ("tp", "pp", "ep", "replicas", "max_devices", "frameworks", "des_candidates")


def parse_space(node, g: str = "plan.requirements.space") -> dict | None:
    """The deployment space node -> {tp, pp, ep, replicas: list | None (None = the composed
    deployment's), max_devices: int | None, frameworks: list | None, des_candidates: int}, or
    None when the node is null (the composed deployment alone)."""
    if node is None:
        return None
    if not isinstance(node, dict):
        raise SpecError(g, node, "a mapping of " + ", ".join(SPACE_KEYS) + " (or null: the composed deployment)")
    for k in node:
        if k not in SPACE_KEYS:
            raise SpecError(f"{g}.{k}", node[k], "a known key (" + ", ".join(SPACE_KEYS) + ")")
    out = {}
    for k in ("tp", "pp", "ep", "replicas"):
        v = node.get(k)
        if v is None:
            out[k] = None
            continue
        if not isinstance(v, (list, tuple)) or not v or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v):
            raise SpecError(f"{g}.{k}", v, "a non-empty list of positive integers (or left out: the composed "
                            "deployment's)")
        out[k] = sorted(set(int(x) for x in v))
    md = node.get("max_devices")
    if md is not None and not (isinstance(md, int) and not isinstance(md, bool) and md >= 1):
        raise SpecError(f"{g}.max_devices", md, "a positive integer (devices of one deployment)")
    out["max_devices"] = md
    fw = node.get("frameworks")
    if fw is not None and (not isinstance(fw, (list, tuple)) or not fw or not all(isinstance(x, str) and x for x in fw)):
        raise SpecError(f"{g}.frameworks", fw, "a non-empty list of conf/framework options (or left out: the "
                        "composed framework)")
    out["frameworks"] = list(dict.fromkeys(fw)) if fw is not None else None
    dc = node.get("des_candidates", 2)
    if not (isinstance(dc, int) and not isinstance(dc, bool) and dc >= 0):
        raise SpecError(f"{g}.des_candidates", dc, "an integer >= 0 (DES-verified deployments per spec point; 0 = all)")
    out["des_candidates"] = int(dc)
    return out


# ----------------------------------------------------------------------------- parsing

def parse(node: dict) -> dict:
    """The ``plan.requirements`` node -> a checked dict in SI units (axes as engine Axis)."""
    from engine.plan.requirements import axis_fields, geometric_axis, list_axis
    from runner.units import to_si

    g = "plan.requirements"
    node = dict(node or {})
    for k in node:
        if k not in KNOWN_KEYS:
            raise SpecError(f"{g}.{k}", node[k], "a known key (" + ", ".join(KNOWN_KEYS) + ")")
    rate = node.get("rate_rps")
    if not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0):
        raise SpecError(f"{g}.rate_rps", rate, "a positive request rate in req/s")
    p = node.get("precision", 0.05)
    if not (isinstance(p, (int, float)) and 0.005 <= p <= 0.5):
        raise SpecError(f"{g}.precision", p, "a relative grid step in [0.005, 0.5]")
    fields = axis_fields()
    axes = {}
    for key, a in dict(node.get("axes") or {}).items():
        if key not in fields:
            raise SpecError(f"{g}.axes", key, "a hardware key among " + ", ".join(fields))
        unit = fields[key][1]
        a = dict(a or {})
        if "values" in a:
            vals = [to_si(f"{g}.axes.{key}.values", v, unit) for v in a["values"] or []]
            axes[key] = list_axis(key, vals)
        elif "lo" in a and "hi" in a:
            axes[key] = geometric_axis(key, to_si(f"{g}.axes.{key}.lo", a["lo"], unit),
                                       to_si(f"{g}.axes.{key}.hi", a["hi"], unit), float(p))
        else:
            raise SpecError(f"{g}.axes.{key}", a, "{lo: ..., hi: ...} (a range) or {values: [...]} (a list)")
    if not axes:
        raise SpecError(f"{g}.axes", node.get("axes"), "at least one hardware axis, e.g. {hbm_bandwidth: {lo: 1 TB/s, hi: 8 TB/s}}")
    front = list(node.get("frontier") or [])
    if front and (len(front) not in (2, 3) or any(k not in axes for k in front) or len(set(front)) != len(front)):
        raise SpecError(f"{g}.frontier", front, "two or three different keys of plan.requirements.axes (the last "
                        "one bisected), or []")
    npts = node.get("frontier_points", 6)
    if not (isinstance(npts, int) and not isinstance(npts, bool) and npts >= 2):
        raise SpecError(f"{g}.frontier_points", npts, "an integer >= 2")
    slack = node.get("bound_slack", 1.25)
    if not (isinstance(slack, (int, float)) and slack >= 1.0):
        raise SpecError(f"{g}.bound_slack", slack, "a factor >= 1")
    el = dict(node.get("elasticity") or {})
    for k in el:
        if k not in ELASTICITY_KEYS:
            raise SpecError(f"{g}.elasticity.{k}", el[k], "a known key (" + ", ".join(ELASTICITY_KEYS) + ")")
    step = el.get("step", 0.05)
    if not (isinstance(step, (int, float)) and 0.001 <= step <= 0.3):
        raise SpecError(f"{g}.elasticity.step", step, "a relative step in [0.001, 0.3]")
    opt = el.get("optimistic", 0.10)
    if not (isinstance(opt, (int, float)) and 0.0 < opt < 0.9):
        raise SpecError(f"{g}.elasticity.optimistic", opt, "a fraction in (0, 0.9)")
    for k in el.get("fields") or []:
        if k not in fields:
            raise SpecError(f"{g}.elasticity.fields", k, "a hardware key among " + ", ".join(fields))
    if not isinstance(el.get("des_capacity", True), bool):
        raise SpecError(f"{g}.elasticity.des_capacity", el.get("des_capacity"), "true or false")
    dn = el.get("des_requests", 0)
    if not (isinstance(dn, int) and not isinstance(dn, bool) and (dn == 0 or dn >= 50)):
        raise SpecError(f"{g}.elasticity.des_requests", dn, "0 (the rule's requests) or an integer >= 50")
    sheet = node.get("sheet") or ""
    if sheet and not Path(sheet).is_file():
        raise SpecError(f"{g}.sheet", sheet, "a spec-sheet CSV file (conf/hardware/sheets/*.csv format)")
    return {"sheet": str(sheet), "rate_rps": float(rate), "precision": float(p), "axes": axes, "frontier": front,
            "frontier_points": npts, "known_chips": list(node.get("known_chips") or []),
            "bound_slack": float(slack), "space": parse_space(node.get("space")),
            "elasticity": {"step": float(step), "optimistic": float(opt), "fields": list(el.get("fields") or []),
                           "des": bool(el.get("des", True)), "des_requests": int(dn),
                           "des_capacity": bool(el.get("des_capacity", True))}}


def _fmt(key: str, v) -> str:
    """An SI value in the key's config unit, e.g. 3.35e12 -> '3.35 TB/s'."""
    from engine.plan.requirements import axis_fields
    from runner.units import from_si

    if v is None:
        return "-"
    unit = axis_fields()[key][1]
    return f"{from_si(v, unit):.4g} {unit}"


def _transfer_error(framework_tables: str) -> dict:
    """The transfer fits' median |log error| per op class (engine/cost/data/transfer.json)."""
    from engine.cost.model import shipped_fits

    fits = shipped_fits()["fits"].get(framework_tables, {})
    return {k: v.get("median_abs_log_error") for k, v in fits.items()}


# ----------------------------------------------------------------------------- the deployment space

def deployments(cfg, overrides: list[str], space: dict | None, hardware=None):
    """([engine.plan.requirements.Deployment], dropped [(layout, reason)]) of the requirements
    question: the composed deployment alone (``space`` None), else every deployment of the space
    (engine.plan.requirements.enumerate_deployments: the plan's candidate enumeration with the base
    chip as its hardware) per framework profile (one compose per ``frameworks`` option), each as
    the plan's capacity search builds a candidate's config (runner.tools.plan.compose_candidates:
    the candidate's overrides set on a copy). ``hardware``: a HardwareSpec replacing the composed one
    (the sheet's chip)."""
    import copy

    from engine.des.config import deployment
    from engine.plan import requirements as R
    from engine.plan.spec import SpaceSpec
    from runner.convert import specs_from_config

    def build(c):
        s = specs_from_config(c)
        return deployment(replace(s, hardware=hardware) if hardware is not None else s)[0]

    p = cfg.partition
    if space is None:
        s = build(cfg)
        r = s.des.cluster.replicas or 1
        name = f"TP{s.partition.tp}" + (f"PP{s.partition.pp}" if s.partition.pp > 1 else "") + (
            f"EP{s.partition.ep}" if getattr(s.partition, "ep", 1) > 1 else "") + (f" x{r}" if r > 1 else "")
        return [R.Deployment(name, s, s.partition.devices_per_replica * r)], []
    g = "plan.requirements.space"
    tp, pp = space["tp"] or [int(p.tp)], space["pp"] or [int(p.pp)]
    ep = space["ep"] or [int(p.get("ep", 1) or 1)]
    reps = space["replicas"] or [int(cfg.engine.des.cluster.get("replicas") or 1)]
    md = space["max_devices"] or max(tp) * max(pp) * max(reps)
    sp = SpaceSpec(hardware=(str(cfg.hardware.name),), tp=tuple(tp), pp=tuple(pp), max_devices=md)
    sp.check(g)
    fws = space["frameworks"] or [str(cfg.framework.name)]
    out, dropped = [], []
    for fw in fws:
        if fw == cfg.framework.name:
            cfw = cfg
        else:
            from runner.tools.plan import _compose
            try:
                cfw = _compose(list(overrides) + [f"framework={fw}"])
            except Exception as e:  # noqa: BLE001 - Hydra's "Could not find 'framework/x'"
                if "framework/" not in str(e):
                    raise
                raise SpecError(f"{g}.frameworks", fw, "an option of conf/framework") from None
        cands, drop = R.enumerate_deployments(sp, specs_from_config(cfw), reps, ep)
        dropped += [(f"{a} {fw}" if len(fws) > 1 else a, why) for a, why in drop]
        for c, e in cands:
            cc = copy.deepcopy(cfw)
            for k, v in {**c.overrides(), "partition.ep": e}.items():
                OmegaConf.update(cc, k, v, merge=False)
            cc.partition.name = (c.layout + (f"ep{e}" if e > 1 else "")).lower()
            name = c.layout + (f"EP{e}" if e > 1 else "") + (f" x{c.replicas}" if c.replicas > 1 else "") + (
                f" {fw}" if len(fws) > 1 else "")
            s = build(cc)
            dev = s.partition.devices_per_replica * c.replicas     # ep_layout=extra: EP adds devices
            if dev > md:
                dropped.append((name, f"{dev} devices > max_devices {md}"))
                continue
            out.append(R.Deployment(name, s, dev))
    if not out:
        raise SpecError(g, {k: v for k, v in space.items() if v is not None},
                        "at least one deployment the model takes within max_devices (dropped: "
                        + "; ".join(f"{a}: {why}" for a, why in dropped[:4]) + ")")
    return out, dropped


# ----------------------------------------------------------------------------- launcher waves

JOBS = "jobs.pkl"
RESULT = "result.pkl"


def launcher_mode(launch: list[str]) -> bool:
    """DES verification through Hydra launchers when the command line names a launcher
    (``hydra/launcher=...``) or sets one of its options (``hydra.launcher.*``)."""
    return any(a.lstrip("+~").startswith(("hydra/launcher=", "hydra.launcher.")) for a in launch)


def wave_width(launch: list[str], wave: int) -> int:
    """DES verdicts per wave: ``plan.wave`` when set, else the launcher's ``hydra.launcher.n_jobs``
    on the command line, else one per core (joblib's default here)."""
    if wave:
        return int(wave)
    n = next((a.split("=", 1)[1] for a in launch if a.startswith("hydra.launcher.n_jobs=")), None)
    if n is not None:
        try:
            return max(1, int(n))
        except ValueError:
            raise SpecError("hydra.launcher.n_jobs", n, "a positive integer (jobs per wave)") from None
    return os.cpu_count() or 1


class WaveExecutor:
    """Runs DES verification jobs (engine.plan.requirements.DesJob) as one Hydra multirun per call
    (runner.tools.plan.launch_multirun: this module's job app through the chosen launcher, joblib
    by default; submitit/Ray take the same path): the jobs pickled to ``waveK/jobs.pkl``, job i
    writes ``waveK/i/result.pkl`` (its Trial) or ``error.txt``. A job without a result is returned
    as JobFailed with its error (the search counts the point as failing and the report lists it)."""

    def __init__(self, root: Path, launch: list[str], progress=None):
        self.root, self.launch, self.progress = root, list(launch), progress
        self.waves, self.jobs, self.failed = 0, 0, []

    def __call__(self, jobs: list) -> list:
        import pickle

        from engine.plan.requirements import JobFailed
        from runner.tools.plan import job_error, launch_multirun

        self.waves += 1
        d = self.root / f"wave{self.waves}"
        d.mkdir(parents=True, exist_ok=True)
        with (d / JOBS).open("wb") as f:
            pickle.dump(jobs, f)
        done = [0]

        def poll():
            n = sum((d / str(i) / RESULT).exists() for i in range(len(jobs)))
            if self.progress and n > done[0]:
                self.progress("jobs", n - done[0])
                done[0] = n

        rc = launch_multirun("runner.tools.requirements", d / JOBS, len(jobs), d, self.launch, poll)
        if rc != 0 and not any((d / str(i) / f).exists() for i in range(len(jobs)) for f in (RESULT, "error.txt")):
            log = [ln for ln in ((d / "launcher.log").read_text(errors="replace").strip().splitlines()
                                 if (d / "launcher.log").exists() else []) if ln.strip() and "HYDRA_FULL_ERROR" not in ln]
            raise SpecError("hydra/launcher", " ".join(self.launch), "a launcher that runs the verification jobs (it "
                            f"exited {rc} before any job ran: {_first_error(log)})")
        out = []
        for i, job in enumerate(jobs):
            r = d / str(i) / RESULT
            if r.exists():
                with r.open("rb") as f:
                    t = pickle.load(f)
                if self.progress:
                    self.progress("des", t.runs)
            else:
                t = JobFailed(job_error(d / str(i), rc, d))
                self.failed.append({"wave": self.waves, "job": i, "values": job.values, "error": t.message})
            out.append(t)
        self.jobs += len(jobs)
        return out


def _first_error(log: list[str]) -> str:
    """The line of a launcher's log that says what went wrong: a traceback's last line, else
    (Hydra's own messages: "Could not find ...") the first."""
    if not log:
        return "no output"
    return (log[-1] if any(ln.startswith("Traceback") for ln in log) else log[0]).strip()[:200]


def _job(cfg) -> None:
    """One DES verification of a wave (the Hydra task function): engine.plan.requirements.verify
    on job ``index`` of ``file``; its Trial to result.pkl (and result.json to read), or the error
    to error.txt (one failing job never loses the others)."""
    import pickle
    import traceback

    from hydra.core.hydra_config import HydraConfig

    from engine.plan.requirements import verify

    job_dir = Path(HydraConfig.get().runtime.output_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    try:
        with Path(cfg.file).open("rb") as f:
            job = pickle.load(f)[int(cfg.index)]
        cpu0, t0 = time.process_time(), time.time()
        t = verify(job)
        (job_dir / "result.json").write_text(json.dumps(
            {"values": job.values, "rate_rps": job.rate_rps, "verdict": t.verdict, "failing": t.failing,
             "requests": t.requests, "runs": t.runs, "cpu_s": time.process_time() - cpu0,
             "wall_s": time.time() - t0, "metrics": t.metrics}, indent=1, default=str))
        with (job_dir / RESULT).open("wb") as f:
            pickle.dump(t, f)
    except Exception as e:  # noqa: BLE001 - reported by the driver, never lost
        (job_dir / "error.txt").write_text(traceback.format_exc() + f"{type(e).__name__}: {e}\n")
        print(f"simllm-plan requirements: job {cfg.index} failed: {type(e).__name__}: {e}", file=sys.stderr)


def job_main() -> None:
    import hydra

    from runner.tools.plan import _register_job_config

    _register_job_config()
    hydra.main(version_base="1.3", config_path=None, config_name="simllm_plan_job")(_job)()


# ----------------------------------------------------------------------------- the search

def _cpu() -> float:
    """CPU-seconds of this process and of its finished children (the launcher's jobs)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ru.ru_utime + ru.ru_stime


def search(cfg, req: dict, progress=None, overrides: list[str] | None = None, launch: list[str] | None = None,
           wave_dir: Path | None = None) -> dict:
    """Axis minima, frontier, elasticities for the composed ``cfg`` (a DES config with a plan).
    ``launch``: Hydra launcher overrides; when they name a launcher (``launcher_mode``) the DES
    verifications of the search run as launcher jobs in waves of ``wave_width`` (``WaveExecutor``,
    job directories under ``wave_dir``), the searches batched (engine.plan.requirements.
    monotone_search); else in this process one at a time."""
    from engine.des.workload import build_stream
    from engine.plan import bound
    from engine.plan import requirements as R
    from engine.plan.spec import plan_spec

    plan = plan_spec(OmegaConf.to_container(cfg.plan, resolve=True))
    sheet = base_sheet(req, cfg.hardware.name)
    deps, dropped = deployments(cfg, overrides or [], req["space"],
                                sheet.hardware_spec() if req["sheet"] else None)   # the sheet's chip is the base
    specs = deps[0].specs
    st = build_stream(replace(specs.workload, num_requests=plan.rule.max_requests))
    lengths = bound.Lengths(st.prompt, st.output)
    cpu0, t0 = _cpu(), time.time()
    space = req["space"]
    launch = list(launch or [])
    executor = WaveExecutor(Path(wave_dir or "outputs/plan/waves"), launch, progress) if launcher_mode(launch) else None
    width = wave_width(launch, plan.wave) if executor is not None else 1
    oracle = R.SpaceOracle(deps, plan.slo, plan.rule, req["rate_rps"], lengths, req["bound_slack"],
                           des_candidates=space["des_candidates"] if space else 0,
                           on_run=(lambda r, n, v: progress("des", 1)) if progress else None, executor=executor)
    hw = specs.hardware
    doc = {"rate_rps": req["rate_rps"], "base": hw.name, "axes": [], "frontier": None,
           "deployments": [{"name": d.name, "devices": d.devices, "tp": d.specs.partition.tp,
                            "pp": d.specs.partition.pp, "ep": d.specs.partition.ep,
                            "replicas": d.specs.des.cluster.replicas or 1,
                            "framework": d.specs.framework.name} for d in deps],
           "dropped_deployments": [list(x) for x in dropped],
           "des_candidates": space["des_candidates"] if space else 0, "space": space}
    # base chip itself (what-if pricing)
    base_v = oracle({})
    doc["base_verdict"] = _verdict_doc(base_v)
    for key, ax in req["axes"].items():
        r = R.minimise(oracle, ax) if executor is None else R.minimise_waves(oracle, ax, width)[0]
        if progress:
            progress("axis", key)
        top = oracle({ax.field: ax.values[r.index]}) if r.index is not None else None   # cached
        doc["axes"].append({
            "key": key, "unit": ax.unit, "base": getattr(hw, ax.field), "lo": min(ax.values), "hi": max(ax.values),
            "grid_points": len(ax.values), "least": r.value, "fails_at": r.lower,
            "analytical_least": None if r.analytical_index is None else ax.values[r.analytical_index],
            "binding": (r.below.reason if r.below is not None else
                        ("even the best value fails" if r.index is None else "axis minimum")),
            "deployment": top.deployment if top is not None else "",
            "bound": top.bound if top is not None else "",
            "des_verdicts": len(r.verdicts)})
    if len(req["frontier"]) == 3:
        doc["frontier3"] = _frontier3(oracle, req, width, len(deps))
        if progress:
            progress("axis", "frontier")
    elif req["frontier"]:
        kx, ky = req["frontier"]
        xa, ya = req["axes"][kx], req["axes"][ky]
        xs = _coarse(xa, req["frontier_points"])
        if executor is None:
            pts, least = R.frontier(oracle, xa, ya, xs)
        else:
            pts, least, _ = R.frontier_waves(oracle, xa, ya, xs, width)
        doc["frontier"] = {"x": kx, "y": ky, "x_unit": xa.unit, "y_unit": ya.unit,
                           "x_values": [xa.values[i] for i in sorted(xs)],
                           "y_least": [None if j is None else ya.values[j] for j in least],
                           "y_lo": min(ya.values), "y_hi": max(ya.values),
                           "points": [p.__dict__ for p in pts],
                           "brute_force_des_points": len(xs) * len(ya.values) * len(deps)}
        if progress:
            progress("axis", "frontier")
    doc["des_runs_search"] = oracle.des_runs
    doc["des_points_search"] = oracle.des_points
    doc["verification"] = ({"mode": "launcher", "launch": launch, "width": width, "waves": executor.waves,
                            "jobs": executor.jobs, "failed": executor.failed}
                           if executor is not None else {"mode": "in-process", "width": 1})
    doc["verified"] = [_verdict_doc(v) for v in oracle.verified()]
    doc["search_cpu_s"], doc["search_wall_s"] = _cpu() - cpu0, time.time() - t0
    # elasticities: of one deployment - the one named at the base chip, else (the base misses the
    # SLOs with all of them) the one with the highest analytical capacity estimate at the base chip
    names = [d.name for d in deps]
    if base_v.passed:
        el_dep = deps[names.index(base_v.deployment)]
    else:
        an = oracle._analytical_all({})
        el_dep = max(zip(deps, an), key=lambda t: R.deployment_rate(t[0].specs, t[1].estimate)
                     if t[1] is not None and t[1].estimate is not None else 0.0)[0]
    specs = el_dep.specs
    doc["elasticity_deployment"] = el_dep.name
    e = req["elasticity"]
    keys = e["fields"] or [k for k in ("peak_bf16", "peak_fp8", "hbm_bandwidth", "hbm_capacity", "scaleup_bandwidth",
                                       "scaleup_latency", "host_bandwidth")
                           if getattr(hw, R.axis_fields()[k][0]) not in (None, 0)]
    t1 = time.process_time()
    doc["elasticity_analytical"] = R.elasticities(
        lambda s: R.analytical_metrics(s, lengths, plan.slo), specs, keys, e["step"], e["optimistic"],
        grid_fn=lambda s, k, v: R.analytical_metrics_grid(s, lengths, plan.slo, k, v))
    doc["elasticity_analytical_cpu_s"] = time.process_time() - t1
    des_rate = req["rate_rps"]
    on_run = (lambda r, n, v: progress("des", 1)) if progress else None
    sp = plan.search
    e_base = oracle.oracles[names.index(el_dep.name)].analytical({}).estimate
    est = R.deployment_rate(specs, e_base) if e_base is not None and e_base.rate_rps else 1.0
    found = None
    el_v = oracle.oracles[names.index(el_dep.name)]({}) if e["des"] else None
    if e["des"] and not el_v.passed:
        # at a rate the base cannot serve the queue grows without bound and the DES latencies
        # measure the run's length, not the chip: the DES elasticities are taken at the base's own
        # capacity instead (the plan's rate search on the base chip, engine.plan.search)
        found = R.des_capacity(R.at(specs, {}), plan.slo, plan.rule, sp, est * sp.initial_ratio, on_run)
        doc["base_capacity"] = {"max_rps": found.rate, "fail_rps": found.hi if math.isfinite(found.hi) else None,
                                "status": found.status, "des_runs": found.runs, "estimate_rps": est}
        if found.rate > 0:
            des_rate = found.rate
        else:
            e = {**e, "des": False}
    if e["des"]:
        n = e["des_requests"] or plan.rule.requests
        t1 = time.process_time()

        def des_fn(s):
            if progress:
                progress("des", 1)
            return R.des_metrics(s, des_rate, n, plan.rule.warmup_fraction)

        doc["elasticity_des"] = R.elasticities(des_fn, specs, keys, e["step"], e["optimistic"])
        doc["elasticity_des_requests"] = n
        doc["elasticity_des_rate_rps"] = des_rate
        doc["elasticity_des_cpu_s"] = time.process_time() - t1
    if e["des"] and e["des_capacity"]:
        # d ln(capacity at the SLOs) / d ln(spec) by the DES: two rate searches per field at
        # spec x (1 +- h), h from the analytical capacity elasticity and the search's precision
        t1 = time.process_time()
        prior = {r["key"]: r["e_capacity_rps"] for r in doc["elasticity_analytical"]}
        if found is None:
            found = R.des_capacity(R.at(specs, {}), plan.slo, plan.rule, sp, est * sp.initial_ratio, on_run)
        doc["elasticity_des_capacity"] = R.des_capacity_elasticities(
            specs, plan.slo, plan.rule, sp, keys, e["step"], e["optimistic"], prior, base=found, on_run=on_run)
        doc["elasticity_des_capacity_base"] = {"max_rps": found.rate, "status": found.status, "des_runs": found.runs,
                                               "fail_rps": found.hi if math.isfinite(found.hi) else None}
        doc["elasticity_des_capacity_cpu_s"] = time.process_time() - t1
    doc["elasticity_step"], doc["optimistic"] = e["step"], e["optimistic"]
    from engine.analytical.kernels import backend
    from engine.cost import resolve

    doc["cost_backend"] = resolve(backend(specs), specs.framework.kernel_tables, R.at(specs, {}).hardware)
    doc["transfer_error"] = _transfer_error(specs.framework.kernel_tables) if doc["cost_backend"] == "transfer" else {}
    doc["sheet_rows"] = sheet_rows(sheet, specs.hardware, list(req["axes"]) + keys)
    doc["plan"] = OmegaConf.to_container(cfg.plan, resolve=True)
    doc["model"], doc["workload"] = cfg.model.name, cfg.workload.name
    d0 = deps[0].specs
    doc["partition"] = {"tp": d0.partition.tp, "pp": d0.partition.pp, "replicas": d0.des.cluster.replicas or 1}
    doc["devices"] = deps[0].devices if len(deps) == 1 else f"{min(d.devices for d in deps)}-{max(d.devices for d in deps)}"
    return doc


def _coarse(axis, points: int) -> list:
    """``points`` indices spread evenly over an axis's grid (its ends included)."""
    n = len(axis.values)
    return sorted({round(i * (n - 1) / (points - 1)) for i in range(points)})


def _frontier3(oracle, req: dict, width: int, n_deps: int) -> dict:
    """The 3-axis frontier [x, z, y]: x and z on ``frontier_points`` coarse values each, y (the
    last key) bisected per (x, z) by engine.plan.requirements.frontier3; its DES cost counted
    apart, with the brute-force grid's size (every (x, z, y) point, every deployment)."""
    from engine.plan import requirements as R

    kx, kz, ky = req["frontier"]
    xa, za, ya = req["axes"][kx], req["axes"][kz], req["axes"][ky]
    xs, zs = _coarse(xa, req["frontier_points"]), _coarse(za, req["frontier_points"])
    p0, r0 = oracle.des_points, oracle.des_runs
    t0, c0 = time.time(), _cpu()
    f = R.frontier3(oracle, xa, za, ya, xs, zs, width)
    pts = []
    for (i, k), c in sorted(f["cells"].items()):
        pts.append({"x": xa.values[i], "z": za.values[k], "y": None if c.least is None else ya.values[c.least],
                    "y_lower": ya.values[c.least - 1] if c.least else None,
                    "binding": (c.below.reason if c.below is not None else
                                ("even the best value fails" if c.least is None else "axis minimum")),
                    "bound": c.top.bound if c.top is not None else "",
                    "deployment": c.top.deployment if c.top is not None else "",
                    "dominated": c.dominated or c.least is None, "des_verdicts": len(c.verdicts)})
    return {"x": kx, "z": kz, "y": ky, "x_unit": xa.unit, "z_unit": za.unit, "y_unit": ya.unit,
            "x_values": [xa.values[i] for i in xs], "z_values": [za.values[k] for k in zs],
            "y_lo": min(ya.values), "y_hi": max(ya.values), "y_grid": len(ya.values), "points": pts,
            "des_points": oracle.des_points - p0, "des_runs": oracle.des_runs - r0, "waves": f["waves"],
            "violations": f["violations"], "wall_s": time.time() - t0, "cpu_s": _cpu() - c0,
            "brute_force_des_points": len(xs) * len(zs) * len(ya.values) * n_deps}


def _verdict_doc(v) -> dict:
    m = v.trial.metrics if v.trial is not None else {}
    return {"values": v.values, "passed": v.passed, "by": v.by, "reason": v.reason, "bound": v.bound,
            "deployment": v.deployment, "requests": v.trial.requests if v.trial is not None else 0,
            "runs": v.trial.runs if v.trial is not None else 0,
            "estimate_rps": v.estimate.rate_rps if v.estimate is not None else None,
            **{k: m.get(k) for k in ("ttft_ms_q", "tpot_ms_q", "ttft_ms_p50", "tpot_ms_p50", "throughput_tok_s")}}


def base_sheet(req: dict, option: str):
    """The spec sheet the base chip rests on: ``plan.requirements.sheet``, else the conf/hardware
    option's own sheet (conf/hardware/sheets/OPTION.csv) where there is one; None otherwise."""
    from engine.ingest.hwcsv import read_sheet

    path = req["sheet"] or ROOT / "conf" / "hardware" / "sheets" / f"{option}.csv"
    if not Path(path).is_file():
        return None
    return read_sheet(path, Path(path).stem if req["sheet"] else option)


def sheet_rows(sheet, hw, keys) -> list[dict]:
    """Per hardware key the answer uses: the value used, the sheet's figure and its provenance
    (source and line, the comment simllm-import writes), or 'not on the sheet'."""
    from engine.plan.requirements import axis_fields

    out = []
    for k in dict.fromkeys(keys):
        used = getattr(hw, axis_fields()[k][0])
        e = sheet.entries.get(k) if sheet is not None else None
        out.append({"key": k, "used": _fmt(k, used) if used is not None else "-",
                    "sheet": e.display if e is not None else "-",
                    "source": (e.comment if e is not None else
                               ("not on the sheet" if sheet is not None else "no sheet"))})
    return out


def known_chips(overrides: list[str], names: list[str]) -> dict:
    """Hardware option name -> {axis key: SI value} of each known chip (one compose each)."""
    from engine.plan.requirements import axis_fields
    from runner.compose import compose
    from runner.convert import specs_from_config

    out = {}
    for n in names:
        try:
            cfg = compose(overrides + [f"hardware={n}"], ROOT / "conf")
        except Exception as e:  # noqa: BLE001 - Hydra's "Could not find 'hardware/x'"
            if "hardware/" not in str(e):
                raise
            raise SpecError("plan.requirements.known_chips", n, "an option of conf/hardware") from None
        hw = specs_from_config(cfg).hardware
        out[n] = {k: getattr(hw, f) for k, (f, _) in axis_fields().items()}
    return out


# ----------------------------------------------------------------------------- report

def _staircase(ax, f: dict, chips: dict, base_option: str, xs: list, ys: list, points: list, z=None) -> None:
    """One frontier panel: x and y axes of ``f``, the feasible region (at or above the staircase
    of the least y per x, ``ys``) shaded, the non-dominated DES-verified points, the base chip and
    the known chips marked (``z``: (key, value) - a chip is filled where its z figure is at least
    the panel's, i.e. where it meets the panel's z, hollow where it does not)."""
    from engine.plan.requirements import better
    from runner.units import from_si

    ux, uy = f["x_unit"], f["y_unit"]
    cx = lambda v: from_si(v, ux)   # noqa: E731
    cy = lambda v: from_si(v, uy)   # noqa: E731
    pairs = sorted((x, y) for x, y in zip(xs, ys) if y is not None)
    xr = max([cx(max(xs))] + [cx(v[f["x"]]) for v in chips.values() if v.get(f["x"])]) * 1.05
    yr = max([cy(f["y_hi"])] + [cy(v[f["y"]]) for v in chips.values() if v.get(f["y"])]) * 1.05
    if pairs:
        # staircase: at x in [x_i, x_(i+1)) the least feasible y is y*(x_i); beyond the searched
        # box the region continues (monotone: more of either never fails)
        sx, sy = [], []
        for i, (x, y) in enumerate(pairs):
            x_next = cx(pairs[i + 1][0]) if i + 1 < len(pairs) else xr
            sx += [cx(x), x_next]
            sy += [cy(y), cy(y)]
        ax.fill_between(sx, sy, [yr] * len(sy), color="tab:green", alpha=0.18,
                        label="meets the SLOs (verified staircase)")
        ax.plot(sx, sy, "-", color="tab:green", lw=1.5)
        nd = [p for p in points if not p["dominated"] and p["y"] is not None]
        ax.scatter([cx(p["x"]) for p in nd], [cy(p["y"]) for p in nd], color="tab:green", s=36, zorder=4,
                   label="frontier points (DES-verified)")
        for p in nd:
            ax.annotate(p["binding"].split(" (")[0][:18], (cx(p["x"]), cy(p["y"])), textcoords="offset points",
                        xytext=(4, -10), fontsize=6, color="0.3")
    for name, v in chips.items():
        x, y = v.get(f["x"]), v.get(f["y"])
        if x is None or y is None:
            continue
        base = name == base_option
        meets = z is None or (v.get(z[0]) is not None and
                              (v[z[0]] >= z[1] * (1 - 1e-9) if better(z[0]) > 0 else v[z[0]] <= z[1] * (1 + 1e-9)))
        color = "tab:red" if base else "tab:blue"
        ax.scatter([cx(x)], [cy(y)], marker="*" if base else "o", s=140 if base else 40,
                   color=color if meets else "none", zorder=5, edgecolor=color if not meets else "k", lw=0.8)
        ax.annotate(name + (" (base)" if base else ""), (cx(x), cy(y)), textcoords="offset points",
                    xytext=(5, 4), fontsize=7)
    ax.set_xlim(cx(min(xs)) * 0.95, xr)
    ax.set_ylim(cy(f["y_lo"]) * 0.95, yr)
    ax.set_xlabel(f"{f['x']} [{ux}]")
    ax.set_ylabel(f"{f['y']} [{uy}]")
    ax.grid(True, alpha=0.3)


def _title(doc: dict, what: str) -> str:
    s = doc["plan"]["slo"]
    return (f"{doc['model']}, {doc['devices']} devices, {doc['workload']} at {doc['rate_rps']:g} req/s: "
            f"p{s['percentile']:g} TTFT <= {s['ttft_ms']:g} ms, TPOT <= {s['tpot_ms']:g} ms\n{what}")


def figure(doc: dict, chips: dict):
    """The frontier plot: x and y axes of the frontier, the feasible region (at or above the
    staircase, others at the base chip) shaded, the DES-verified frontier points, the base chip and
    the known chips marked. None without a frontier."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f = doc.get("frontier")
    if not f:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    _staircase(ax, f, chips, doc.get("base_option"), f["x_values"], f["y_least"], f["points"])
    ax.set_title(_title(doc, f"other fields at {doc['base']}; known chips placed by these two fields only"), fontsize=8)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    return fig


def figure3(doc: dict, chips: dict):
    """The 3-axis frontier as 2-D slices: one panel per value of the middle axis (z), each the
    (x, y) staircase at that z with its feasible region shaded; known chips placed by x and y,
    filled in the panels whose z they meet. None without a 3-axis frontier."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from runner.units import from_si

    f = doc.get("frontier3")
    if not f:
        return None
    zs = f["z_values"]
    cols = min(3, len(zs))
    rows = math.ceil(len(zs) / cols)
    fig, axs = plt.subplots(rows, cols, figsize=(5.0 * cols, 3.9 * rows + 0.6), squeeze=False)
    for k, z in enumerate(zs):
        ax = axs[k // cols][k % cols]
        pts = [p for p in f["points"] if p["z"] == z]
        pts.sort(key=lambda p: p["x"])
        _staircase(ax, f, chips, doc.get("base_option"), [p["x"] for p in pts], [p["y"] for p in pts], pts,
                   z=(f["z"], z))
        ax.set_title(f"{f['z']} = {from_si(z, f['z_unit']):.4g} {f['z_unit']}", fontsize=9)
        if k == 0 and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, loc="lower right")
    for k in range(len(zs), rows * cols):
        axs[k // cols][k % cols].axis("off")
    fig.suptitle(_title(doc, f"other fields at {doc['base']}; chips filled where they meet the panel's {f['z']}"),
                 fontsize=8)
    return fig


def _table(rows: list[dict]) -> str:
    from runner.tools.plan import markdown_table

    return markdown_table(rows) if rows else "(none)"


def _el_rows(rows: list[dict], metrics: list[str], rank_by: str, opt: float) -> list[dict]:
    out = []
    for r in sorted(rows, key=lambda r: (r.get(f"opt_{rank_by}_pct") if math.isfinite(r.get(f"opt_{rank_by}_pct", math.nan))
                                         else 0.0) * (1 if rank_by == "capacity_rps" else -1)):
        row = {"field": r["key"], "base": _fmt(r["key"], r["base_value"])}
        for m in metrics:
            row[f"d ln {m} / d ln spec"] = f"{r[f'e_{m}']:+.3f}"
        for m in metrics:
            row[f"{m} if {opt * 100:g} % optimistic"] = f"{r[f'opt_{m}_pct']:+.1f} %"
        out.append(row)
    return out


def _des_el_rows(doc: dict, opt: float) -> list[dict]:
    """The DES elasticity table: p99/p50 TTFT/TPOT at the rate, with the DES capacity columns
    (elasticity, its bounds and h, the change if the figure is ``opt`` optimistic) where they were
    measured, ranked by the capacity's change (the largest loss first), else by p99 TTFT's."""
    cap = {r["key"]: r for r in doc.get("elasticity_des_capacity") or []}
    rows = doc["elasticity_des"]
    if cap:
        rows = sorted(rows, key=lambda r: _finite(cap.get(r["key"], {}).get("opt_capacity_rps_pct")))
        out = []
        for r in rows:
            row = _el_rows([r], ["ttft_ms_p99", "tpot_ms_p99", "ttft_ms_p50", "tpot_ms_p50"], "ttft_ms_p99", opt)[0]
            c = cap.get(r["key"])
            if c is not None:
                e, lo, hi = c["e_capacity_rps"], c.get("e_capacity_rps_lo"), c.get("e_capacity_rps_hi")
                row = {"field": row.pop("field"), "base": row.pop("base"),
                       "d ln capacity / d ln spec (DES)": (f"{e:+.3f}" if math.isfinite(e) else "-"),
                       "[lo, hi]": (f"[{lo:+.2f}, {hi:+.2f}]" if lo is not None and math.isfinite(lo) else "-")
                       + ("" if c["resolved"] else " within precision"),
                       "h": f"{c['h']:.3g}",
                       f"capacity if {opt * 100:g} % optimistic": (f"{c['opt_capacity_rps_pct']:+.1f} %"
                                                                   if math.isfinite(c["opt_capacity_rps_pct"]) else "-"),
                       **row}
            out.append(row)
        return out
    return _el_rows(rows, ["ttft_ms_p99", "tpot_ms_p99", "ttft_ms_p50", "tpot_ms_p50"], "ttft_ms_p99", opt)


def _finite(x) -> float:
    return x if isinstance(x, (int, float)) and math.isfinite(x) else 0.0


def _verification_lines(doc: dict) -> list[str]:
    """The report's line on how the DES verifications ran (none for the in-process default)."""
    v = doc.get("verification") or {}
    if v.get("mode") != "launcher":
        return []
    out = [f"- DES verification through the Hydra launcher (`{' '.join(v['launch'])}`): {v['jobs']} jobs in "
           f"{v['waves']} waves of up to {v['width']} (each search cut {v['width'] + 1} ways per wave: galloping "
           f"{v['width']} points at a time until a pass, then a {v['width'] + 1}-ary split of the bracket; several "
           "cells of a frontier share a wave)"]
    for f in v.get("failed") or []:
        out.append(f"- failed job (wave {f['wave']}, job {f['job']}, counted as failing): "
                   + ", ".join(f"{k}={x:.4g}" for k, x in f["values"].items()) + f": {f['error']}")
    return out


def _save(fig, paths: dict, key: str, path: Path) -> bool:
    """Write ``fig`` (None: nothing) to ``path`` as ``paths[key]``; True when written."""
    import matplotlib.pyplot as plt

    if fig is None:
        return False
    paths[key] = path
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _frontier3_section(doc: dict, chips: dict, out_dir: Path, name: str, paths: dict) -> list[str]:
    """The 3-axis frontier's table (every (x, z) cell: the least y), its CSV and its plot (one
    panel per z value)."""
    import polars as pl

    f = doc["frontier3"]
    rows = [{f["x"]: _fmt(f["x"], p["x"]), f["z"]: _fmt(f["z"], p["z"]), f"least {f['y']}": _fmt(f["y"], p["y"]),
             "fails at": _fmt(f["y"], p["y_lower"]), "binding (just below)": p["binding"],
             "deployment": p["deployment"], "DES bound": p["bound"],
             "non-dominated": "" if p["dominated"] else "yes"} for p in f["points"]]
    paths["frontier3_csv"] = out_dir / f"{name}_frontier3.csv"
    pl.DataFrame(f["points"], infer_schema_length=None).write_csv(paths["frontier3_csv"])
    cells = len(f["x_values"]) * len(f["z_values"])
    out = [f"## Frontier {f['x']} x {f['z']} x {f['y']}", "",
           f"For each of the {cells} ({f['x']}, {f['z']}) cells the least {f['y']} on its grid of "
           f"{f['y_grid']} values (a staircase over the cells, bisecting {f['y']}; each verdict also decides the "
           f"cells it dominates or is dominated by): {f['des_points']} DES points ({f['des_runs']} runs, "
           f"{f['waves']} waves, {f['cpu_s']:.1f} CPU-s) against {f['brute_force_des_points']} for the brute-force "
           f"grid; non-monotone verdicts met: {f['violations']}.", "", _table(rows), ""]
    if _save(figure3(doc, chips), paths, "frontier3_png", out_dir / f"{name}_frontier3.png"):
        out += [f"![3-axis frontier]({paths['frontier3_png'].name})", ""]
    return out


def report(doc: dict, chips: dict, out_dir: Path, command: str, name: str = "requirements") -> dict:
    """NAME.md, NAME.json, NAME.png and the CSVs (axes, frontier, elasticities) in ``out_dir``."""
    import polars as pl

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / f"{name}.json"}
    paths["json"].write_text(json.dumps({**doc, "known_chips": chips}, indent=1, default=str))
    axes_rows = [{"axis": a["key"], "base": _fmt(a["key"], a["base"]),
                  "range": f"{_fmt(a['key'], a['lo'])} .. {_fmt(a['key'], a['hi'])}",
                  "least passing": _fmt(a["key"], a["least"]), "fails at": _fmt(a["key"], a["fails_at"]),
                  "analytical bound": _fmt(a["key"], a["analytical_least"]),
                  "binding (just below)": a["binding"], "deployment at least": a.get("deployment", ""),
                  "DES bound at least": a["bound"], "DES verdicts": a["des_verdicts"]} for a in doc["axes"]]
    paths["axes_csv"] = out_dir / f"{name}_axes.csv"
    pl.DataFrame([{k: v for k, v in a.items()} for a in doc["axes"]], infer_schema_length=None).write_csv(paths["axes_csv"])
    s = doc["plan"]["slo"]
    deps = doc.get("deployments") or []
    who = (f"TP{doc['partition']['tp']} PP{doc['partition']['pp']} x {doc['partition']['replicas']} replica(s) serve"
           if len(deps) <= 1 else
           f"some deployment of the space ({len(deps)}: " + ", ".join(f"{d['name']} ({d['devices']} dev.)" for d in deps)
           + ") serves")
    lines = [f"# Spec requirements: {doc['model']} on {doc['devices']} x what-if {doc['base']}", "",
             f"Generated by `{command}` (simllm-plan with plan.requirements; do not edit by hand).", "",
             f"Question: the least value of each spec-sheet field (the others at `{doc['base']}`'s) with which "
             f"{who} "
             f"`{doc['workload']}` at {doc['rate_rps']:g} req/s with p{s['percentile']:g} TTFT <= {s['ttft_ms']:g} ms "
             f"and p{s['percentile']:g} TPOT <= {s['tpot_ms']:g} ms (stability rule of the plan: "
             f"{doc['plan']['rule']['requests']}..{doc['plan']['rule']['max_requests']} requests, first "
             f"{doc['plan']['rule']['warmup_fraction']:g} of the span not measured).", "",
             f"- base chip as a what-if chip: "
             f"{'meets' if doc['base_verdict']['passed'] else 'misses'} the SLOs"
             + (f" with {doc['base_verdict']['deployment']}" if doc['base_verdict'].get('deployment') and len(deps) > 1 else "")
             + (f" ({doc['base_verdict']['reason']})" if doc['base_verdict']['reason'] else ""),
             *([f"- deployment space: at each spec point every deployment's analytical checks first, then the "
                f"survivors DES-verified best first (fewest devices, then highest capacity estimate), stopping at "
                f"the first pass (the deployment named), verifying "
                + (f"at most {doc['des_candidates']} per point" if doc['des_candidates'] else "all of them if need be")
                + (" (des_candidates 0: the exact OR over deployments)" if not doc['des_candidates'] else
                   " (a truncated OR: set plan.requirements.space.des_candidates=0 for the exact one)")
                + (f"; left out: " + "; ".join(f"{a} ({w})" for a, w in doc['dropped_deployments'])
                   if doc.get('dropped_deployments') else "")] if len(deps) > 1 else []),
             f"- precision: each axis on a geometric grid of ratio {1 + doc['plan']['requirements'].get('precision', 0.05):g}; "
             "'least passing' passed and 'fails at' (the grid point below) failed",
             f"- DES: {doc['des_runs_search']} runs at {doc['des_points_search']} spec points for the search"
             + (f" (a brute-force grid of the frontier alone: {doc['frontier']['brute_force_des_points']} points)"
                if doc.get("frontier") else ""),
             *_verification_lines(doc),
             f"- time: search {doc['search_wall_s']:.1f} s wall / {doc['search_cpu_s']:.1f} CPU-s; total "
             f"{doc['figures']['wall_s']:.1f} s wall / {doc['figures']['cpu_s']:.1f} CPU-s; load average "
             f"{doc['figures']['load']}",
             (f"- cost model: every point, the base included, priced by the transfer backend (curves fitted on the "
              "measured chips applied to the point's spec figures); median |log error| of its fits: "
              + ", ".join(f"{k} {v:.2f}" for k, v in doc["transfer_error"].items() if v is not None)
              if doc["cost_backend"] == "transfer" else
              f"- cost model: the {doc['cost_backend']} backend at every point (the framework profile names no "
              "kernel tables)"), "",
             "## Least value per axis", "", _table(axes_rows), ""]
    f = doc.get("frontier")
    if f:
        fr = [{f["x"]: _fmt(f["x"], p["x"]), f"least {f['y']}": _fmt(f["y"], p["y"]),
               f"fails at": _fmt(f["y"], p["y_lower"]), "binding (just below)": p["binding"],
               "deployment": p.get("deployment", ""), "DES bound": p["bound"], "non-dominated": "" if p["dominated"] else "yes"} for p in f["points"]]
        paths["frontier_csv"] = out_dir / f"{name}_frontier.csv"
        pl.DataFrame(f["points"] or [{"x": None}], infer_schema_length=None).write_csv(paths["frontier_csv"])
        lines += [f"## Frontier {f['x']} x {f['y']}", "", _table(fr), ""]
        if _save(figure(doc, chips), paths, "png", out_dir / f"{name}.png"):
            lines += [f"![frontier]({paths['png'].name})", ""]
            placed = []
            for c, v in chips.items():
                x, y = v.get(f["x"]), v.get(f["y"])
                if x is None or y is None:
                    continue
                ok = [yy for xx, yy in zip(f["x_values"], f["y_least"]) if yy is not None and xx <= x]
                inside = bool(ok) and y >= min(ok)
                placed.append({"chip": c, f["x"]: _fmt(f["x"], x), f["y"]: _fmt(f["y"], y),
                               "in the feasible region": "yes" if inside else "no"})
            lines += ["Known chips placed by these two fields (their other fields at the base chip's):", "",
                      _table(placed), ""]
    f3 = doc.get("frontier3")
    if f3:
        lines += _frontier3_section(doc, chips, out_dir, name, paths)
    opt = doc["optimistic"]
    lines += ["## Elasticities", "",
              f"d ln(metric) / d ln(spec) by central differences at +-{doc['elasticity_step'] * 100:g} %, and the "
              f"change if the sheet's figure is {opt * 100:g} % optimistic (the real chip has {1 - opt:g} x a peak "
              f"or bandwidth, {1 + opt:g} x a latency), ranked"
              + (f"; of deployment {doc['elasticity_deployment']} (the one named at the base chip, else the one with "
                 "the highest analytical capacity estimate there)" if len(deps) > 1 else "") + ".", "",
              f"Analytical engine (capacity = fluid-model capacity at the SLOs, engine/plan/bound.py; "
              f"{doc['elasticity_analytical_cpu_s']:.1f} CPU-s):", "",
              _table(_el_rows(doc["elasticity_analytical"], ["capacity_rps", "ttft_ms_p50", "tpot_ms_p50"],
                              "capacity_rps", opt)), ""]
    bc = doc.get("base_capacity")
    if bc:
        lines += [f"The base chip misses the SLOs at {doc['rate_rps']:g} req/s; its own capacity (the plan's rate "
                  f"search, DES): {bc['max_rps']:.3g} req/s passes, {bc['fail_rps'] or float('inf'):.3g} req/s fails "
                  f"({bc['des_runs']} DES runs; analytical estimate {bc['estimate_rps']:.3g} req/s). The DES "
                  "elasticities below are taken there.", ""]
    if doc.get("elasticity_des") is not None:
        cap = doc.get("elasticity_des_capacity")
        lines += [f"DES at {doc['elasticity_des_rate_rps']:.3g} req/s, {doc['elasticity_des_requests']} requests, the same seeded "
                  f"stream at every point (common random numbers; {doc['elasticity_des_cpu_s']:.1f} CPU-s)"
                  + (", ranked by the DES capacity's change" if cap else "") + ":", "",
                  _table(_des_el_rows(doc, opt)), ""]
        if cap:
            cb = doc["elasticity_des_capacity_base"]
            p = cap[0]["precision"] if cap else 0.0
            ach = max((r.get("achieved_precision", 0.0) for r in cap), default=0.0)
            lines += [f"DES capacity at the SLOs (`capacity` columns): the plan's rate search (bisection on log(rate) "
                      f"to a precision of {p * 100:g} %: each capacity C passed and C x {1 + p:g} or less failed; "
                      f"widest bracket reached {ach * 100:.1f} %) at "
                      f"spec x (1 +- h), the same seeded stream at every rate and spec point; base "
                      f"{cb['max_rps']:.4g} req/s ({cb['des_runs']} DES runs); "
                      f"{sum(r.get('des_runs', 0) for r in cap)} DES runs for the elasticities, "
                      f"{doc['elasticity_des_capacity_cpu_s']:.1f} CPU-s. h is the least of the step "
                      f"({doc['elasticity_step']:g}) and above at which the analytical elasticity predicts a log "
                      "difference of 4 x ln(1 + precision) (capped at 0.3); [lo, hi] bounds the elasticity from the two "
                      "brackets ((ln C+ - ln hi-) / D .. (ln hi+ - ln C-) / D, D = ln((1 + h) / (1 - h))); "
                      "'within precision' where that interval holds 0: the difference did not exceed the searches' "
                      "precision.", ""]
    rows = []
    for kind in ("analytical", "des", "des_capacity"):
        for r in doc.get(f"elasticity_{kind}") or []:
            rows.append({"engine": kind, **r})
    if rows:
        paths["elasticity_csv"] = out_dir / f"{name}_elasticity.csv"
        pl.DataFrame(rows, infer_schema_length=None).write_csv(paths["elasticity_csv"])
    if doc.get("sheet_rows"):
        lines += ["## Sheet rows the answer rests on", "",
                  _table([{"field": r["key"], "value used": r["used"], "sheet": r["sheet"],
                           "source": r["source"][:160]} for r in doc["sheet_rows"]]), ""]
    lines += ["Where monotonicity may not hold: HBM capacity acts in whole KV blocks (steps); verdicts decided "
              "by a percentile's point estimate near the SLO; discrete scheduler changes. The search assumes it "
              "(engine/plan/requirements.py).", ""]
    paths["md"] = out_dir / f"{name}.md"
    paths["md"].write_text("\n".join(lines))
    return paths


# ----------------------------------------------------------------------------- MLflow

def _track(cfg, doc: dict, paths: dict, out: Path) -> None:
    """Parent run (figures, report files) and one child per DES-verified spec point; a failure
    ends the parent FAILED, never RUNNING."""
    from runner import tracking

    uri, exp = cfg.tracking.uri, cfg.tracking.experiment
    exp_id = tracking.experiment_id(uri, exp)
    parent = tracking.start_parent(uri, exp_id, f"requirements:{doc['model']}:{out.name}",
                                   {"simllm.role": "requirements", "simllm.sweep_id": str(out)})
    try:
        for i, v in enumerate(doc["verified"]):
            d = out / "points" / str(i)
            d.mkdir(parents=True, exist_ok=True)
            (d / "point.json").write_text(json.dumps(v, indent=1, default=str))
            params = {f"hardware.{k}": x for k, x in v["values"].items()}
            summary = {"passed": float(v["passed"]), "requests": v["requests"], "des_runs": v["runs"],
                       **{k: x for k, x in v.items() if k.endswith(("_q", "_p50", "throughput_tok_s"))
                          and isinstance(x, (int, float))}}
            tags = {"mlflow.parentRunId": parent, "simllm.role": "requirements_point",
                    "simllm.verdict_reason": v["reason"], "engine": "des",
                    "simllm.deployment": v.get("deployment", "")}
            name = ("point:" + ",".join(f"{k}={x:.4g}" for k, x in v["values"].items()) if v["values"] else "point:base") + (
                f":{v['deployment']}" if v.get("deployment") else "")
            tracking.log_run(uri, exp_id, name, params, summary, tags, d,
                             status="FAILED" if v["by"] == "error" else "FINISHED")
        metrics = {"des_runs": doc["des_runs_search"], "des_points": doc["des_points_search"],
                   "wall_s": doc["figures"]["wall_s"], "cpu_s": doc["figures"]["cpu_s"]}
        tags = {"simllm.base": doc["base"], "simllm.verification": doc.get("verification", {}).get("mode", "")}
        v = doc.get("verification") or {}
        if v.get("mode") == "launcher":
            metrics.update(launcher_waves=v["waves"], launcher_jobs=v["jobs"], launcher_failed=len(v["failed"]))
        f3 = doc.get("frontier3")
        if f3:
            metrics.update(frontier3_des_points=f3["des_points"], frontier3_des_runs=f3["des_runs"],
                           frontier3_brute_force_des_points=f3["brute_force_des_points"])
        for a in doc["axes"]:
            if a["least"] is not None:
                metrics[f"least_{a['key']}"] = a["least"]
                tags[f"simllm.least_{a['key']}.deployment"] = a.get("deployment", "")
        for kind in ("analytical", "des", "des_capacity"):
            for r in doc.get(f"elasticity_{kind}") or []:
                for k, x in r.items():
                    if k.startswith(("e_", "opt_")) and isinstance(x, float) and math.isfinite(x):
                        metrics[f"{kind}.{k}.{r['key']}"] = x
                if kind == "des_capacity":
                    metrics[f"des_capacity.h.{r['key']}"] = r["h"]
                    metrics[f"des_capacity.resolved.{r['key']}"] = float(r["resolved"])
        params = {"requirements.rate_rps": doc["rate_rps"], "requirements.base": doc["base"],
                  "requirements.axes": ",".join(a["key"] for a in doc["axes"])}
        params["requirements.deployments"] = ",".join(d["name"] for d in doc.get("deployments") or [])[:500]
        tracking.finish_parent(uri, parent, metrics, params, tags,
                               [p for p in paths.values() if p is not None])
    except BaseException:
        try:
            tracking.end_run(uri, parent, "FAILED")
        except Exception:  # noqa: BLE001
            pass
        raise


def run(cfg, overrides: list[str], out: Path, command: str, quiet: bool = False, study: str | None = None,
        launch: list[str] | None = None) -> int:
    """The whole requirements question for the composed ``cfg`` (called by simllm-plan)."""
    from tqdm import tqdm

    t0, cpu0 = time.time(), time.process_time()
    if cfg.engine.name != "des":
        raise SpecError("engine", cfg.engine.name, "des (plan.requirements verifies every point with the DES)")
    req = parse(OmegaConf.to_container(cfg.plan.requirements, resolve=True))
    chips = known_chips(overrides, req["known_chips"])        # bad names stop before any run
    bar = tqdm(unit="DES run", desc="simllm-plan requirements", disable=quiet, mininterval=1.0, file=sys.stderr)

    def progress(kind, v):
        if kind == "des":
            bar.update(v)
        elif kind == "jobs":
            bar.set_postfix_str(f"{v} launcher job(s) done")
        else:
            bar.set_postfix_str(f"{v} done")

    try:
        doc = search(cfg, req, progress, overrides, launch, out / "waves")
    finally:
        bar.close()
    doc["base_option"] = cfg.hardware.name
    if doc["base_option"] not in chips:
        from runner.convert import specs_from_config
        from engine.plan.requirements import axis_fields
        hw = specs_from_config(cfg).hardware
        chips = {doc["base_option"]: {k: getattr(hw, f) for k, (f, _) in axis_fields().items()}, **chips}
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    doc["figures"] = {"wall_s": time.time() - t0, "cpu_s": time.process_time() - cpu0 + ru.ru_utime + ru.ru_stime,
                      "cores": os.cpu_count(), "load": " ".join(Path("/proc/loadavg").read_text().split()[:3])
                      if Path("/proc/loadavg").exists() else "n/a"}
    doc["command"] = command
    paths = report(doc, chips, out, command)
    if study:
        st = Path(study)
        report(doc, chips, st.parent, command, name=st.name)
    print(paths["md"].read_text())
    if cfg.tracking.enabled:
        try:
            _track(cfg, doc, paths, out)
        except Exception as e:  # noqa: BLE001 - the files are written; say so
            print(f"simllm-plan: warning: MLflow logging failed ({type(e).__name__}: {e}); results stay in {out}",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        del sys.argv[1]
        job_main()
