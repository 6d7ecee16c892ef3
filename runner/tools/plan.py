"""``simllm-plan``: the cheapest deployment that meets latency SLOs, searched across hardware,
partitions, replicas and serving modes (the search itself is ``engine.plan``).

    simllm-plan experiment=capacity                                   # the 8B study
    simllm-plan experiment=capacity plan.space.hardware=[h200] plan.target_rps=50
    simllm-plan experiment=capacity hydra/launcher=submitit_slurm hydra.launcher.partition=gpu

1. Compose ``conf/config.yaml`` with the overrides (``+plan=default`` when no experiment brought a
   ``plan`` node); ``hydra.*`` / ``hydra/...`` overrides go to the launched multiruns.
2. Candidates (engine.plan.space) -> per candidate the composed config (one compose per hardware
   option, partition and DES replicas set on a copy) -> specs -> analytical checks
   (engine.plan.bound): memory fit and zero-load SLOs prune, the capacity estimate orders.
3. Waves of candidates, best estimate first, each one Hydra multirun of this module's job app
   (``python -m runner.tools.plan --job -m index=0,1,...``) through the launcher chosen on the
   command line (default joblib with one job per core; submitit_local / submitit_slurm / ray run
   the same jobs elsewhere). A job searches one candidate (engine.plan.search over
   engine.plan.probe DES runs), verifies the replicas needed for ``plan.target_rps``, writes its
   job directory (summary.json, table.parquet of every DES run, assumptions.md, config.yaml) and
   logs a child MLflow run under the plan's parent run (runner.job.track_job_dir). After a wave,
   candidates whose estimate x bound_slack cannot beat the best found are pruned, and the next
   wave's first probes use the median found/estimate ratio so far.
4. The ranked table (Markdown + CSV), the Pareto plot with the SLO line, and ``plan.md`` go to
   ``--out`` (default outputs/plan/DATE/TIME); ``--study experiments/NAME`` writes them there too;
   the parent MLflow run gets the table, plot and figures.
"""

import argparse
import copy
import json
import math
import os
import resource
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from omegaconf import OmegaConf

from engine.errors import SpecError
from runner.tools.cli import guard

ROOT = Path(__file__).resolve().parents[2]
RESULT = "plan_result.json"
TRIALS = "trials.jsonl"


# ----------------------------------------------------------------------------- composing

def _compose(overrides: list[str]):
    """The composed config, moved keys at their new place (runner.convert.renamed), so that the
    candidates' settings below are not overridden by an old key afterwards."""
    from runner.compose import compose
    from runner.convert import renamed

    cfg = compose(overrides, ROOT / "conf")
    if cfg.get("plan") is None:
        cfg = compose(overrides + ["+plan=default"], ROOT / "conf")
    return renamed(cfg)


def compose_candidates(overrides: list[str]):
    """(base cfg, PlanSpec, [(Candidate, cfg)], dropped): one compose per hardware option."""
    from engine.plan.space import enumerate_candidates
    from engine.plan.spec import plan_spec
    from runner.convert import specs_from_config

    base = _compose(overrides)
    plan = plan_spec(OmegaConf.to_container(base.plan, resolve=True))
    if base.engine.name != "des":
        raise SpecError("engine", base.engine.name, "des (simllm-plan measures every candidate with the DES; "
                        "use experiment=capacity or engine=des)")
    per_hw = {}
    for hw in plan.space.hardware:
        try:
            per_hw[hw] = _compose(overrides + [f"hardware={hw}"])
        except Exception as e:  # noqa: BLE001 - Hydra's "Could not find 'hardware/x'"
            if "hardware/" not in str(e):
                raise
            raise SpecError("plan.space.hardware", hw, "an option of conf/hardware") from None
    cands, dropped = enumerate_candidates(plan.space, specs_from_config(base), plan.device_budget)
    out = []
    for c in cands:
        cfg = copy.deepcopy(per_hw[c.hardware])
        for k, v in c.overrides().items():
            OmegaConf.update(cfg, k, v, merge=False)
        cfg.partition.name = c.layout.lower()
        cfg.engine.des.slo_ttft_ms = float(plan.slo.ttft_ms or cfg.engine.des.slo_ttft_ms)
        cfg.engine.des.slo_tpot_ms = float(plan.slo.tpot_ms or cfg.engine.des.slo_tpot_ms)
        cfg.engine.des.outputs.progress = "off"
        cfg.print_table = False
        cfg.tracking.run_name = f"plan:{c.key}"
        out.append((c, cfg))
    return base, plan, out, dropped


# ----------------------------------------------------------------------------- the job

@dataclass
class PlanJob:
    """The job app's own config: which candidate of which wave file."""
    file: str = ""
    index: int = 0


def _register_job_config() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="simllm_plan_job", node=PlanJob)


def search_candidate(cfg_dict: dict, guess: float, job_dir: Path) -> dict:
    """Search one candidate (its resolved config), verify the target, return the result doc."""
    from engine.des.config import deployment
    from engine.plan.probe import Probe
    from engine.plan.search import find_max_rate
    from engine.plan.spec import plan_spec
    from runner.convert import specs_from_config

    cpu0, t0 = time.process_time(), time.time()
    cfg = OmegaConf.create(cfg_dict)
    plan = plan_spec(cfg_dict["plan"])
    specs, _ = deployment(specs_from_config(cfg))
    log = (job_dir / TRIALS).open("a")

    def on_run(rate, n, verdict):
        log.write(json.dumps({"rate": rate, "requests": n, "verdict": verdict}) + "\n")
        log.flush()

    probe = Probe(specs, plan.slo, plan.rule, on_run=on_run)
    s = plan.search
    res = find_max_rate(probe, guess, s.precision, s.step, s.min_rate, s.max_rate)
    doc = {"max_rps": res.rate, "fail_rps": res.hi if math.isfinite(res.hi) else None,
           "status": res.status, "des_runs": res.runs, "probes": len(res.trials),
           "trials": [_trial_doc(t) for t in res.trials]}
    best = res.best
    doc["metrics"] = best.metrics if best is not None else {}
    above = [t for t in res.trials if t.verdict == "fail" and t.rate == res.hi]
    doc["limit"] = above[0].failing if above else ""
    if plan.target_rps > 0 and res.rate > 0:
        doc["target"] = verify_target(specs, on_run, plan, res.rate, n_floor=probe.n_floor)
        doc["des_runs"] += sum(t["runs"] for t in doc["target"]["tried"])
    if plan.confidence and res.rate > 0:
        doc["confident"] = confident_search(specs, plan, res.rate, cfg_dict, on_run)
        doc["des_runs"] += doc["confident"]["des_runs"]
    doc["cpu_s"] = time.process_time() - cpu0
    doc["wall_s"] = time.time() - t0
    log.close()
    return doc


def confident_search(specs, plan, point_rps: float, cfg_dict: dict, on_run) -> dict:
    """plan.confidence = p: the rate met with probability >= p - the same search with every step
    time x the upper factor of the TPOT interval at level p of the candidate's regime
    (engine.plan.confidence, runner.intervals) - and the target's units at that rate."""
    from engine.plan.confidence import slowed
    from engine.plan.probe import Probe
    from engine.plan.search import find_max_rate
    from engine.uncertainty import regime_of
    from runner.intervals import base_regime, model_for, transfer_widening

    p = plan.confidence
    base = base_regime(specs, "des")
    unc = cfg_dict.get("uncertainty") or {}
    iv = model_for(unc.get("table")).interval(regime_of("tpot_ms_p50", **base), p)
    lq = transfer_widening(specs, base, p, unc.get("loco_table")) if iv is not None else None
    if lq is not None:   # a chip priced by the transfer backend: the LOCO error on top
        from engine.uncertainty.loco import widen
        iv = widen(iv, lq.q)
    if iv is None:
        return {"rps": None, "factor": None, "regime": f"no regime of {base} has rows enough for {p:g}",
                "des_runs": 0}
    f = max(1.0, iv.hi_factor)
    slow = slowed(specs, f)
    probe = Probe(slow, plan.slo, plan.rule, on_run=on_run)
    s = plan.search
    res = find_max_rate(probe, point_rps / f, s.precision, s.step, s.min_rate, s.max_rate)
    out = {"rps": res.rate, "factor": f, "regime": iv.regime, "rows": iv.n, "status": res.status,
           "des_runs": res.runs}
    if plan.target_rps > 0 and res.rate > 0:
        out["target"] = verify_target(slow, on_run, plan, res.rate, n_floor=probe.n_floor)
        out["des_runs"] += sum(t["runs"] for t in out["target"]["tried"])
    return out


def _trial_doc(t) -> dict:
    m = t.metrics
    return {"rate": t.rate, "verdict": t.verdict, "decided_by": t.decided_by, "requests": t.requests,
            "runs": t.runs, "failing": t.failing,
            **{k: m.get(k) for k in ("ttft_ms_q", "ttft_ms_q_lo", "ttft_ms_q_hi", "tpot_ms_q",
                                     "tpot_ms_q_lo", "tpot_ms_q_hi", "e2e_ms_q", "goodput_fraction",
                                     "throughput_tok_s", "utilisation")}}


def verify_target(specs, on_run, plan, unit_rps: float, max_extra: int = 3, n_floor: int = 0) -> dict:
    """Units for ``plan.target_rps``: ceil(target / unit rate), checked by a DES of that many
    units behind the router at the target rate with the same stability rule, at least as many
    requests as the search's decisive runs (``n_floor``); one more unit per failure (at most
    ``max_extra`` more)."""
    from engine.plan.probe import Probe

    d = specs.des
    per_unit = d.cluster.replicas or 1
    units = math.ceil(plan.target_rps / unit_rps - 1e-9)
    tried = []
    for _ in range(max_extra + 1):
        des = d.with_(cluster=dict(replicas=units * per_unit, prefill_replicas=units * d.cluster.prefill_replicas))
        pr = Probe(replace(specs, des=des), plan.slo, plan.rule, on_run=on_run)
        pr.n_floor = n_floor
        t = pr(plan.target_rps)
        tried.append({"units": units, **_trial_doc(t)})
        if t.verdict == "pass":
            return {"units": units, "verified": True, "tried": tried}
        units += 1
    return {"units": units - 1, "verified": False, "tried": tried}


def _job(cfg) -> None:
    """One candidate of a wave (the Hydra task function)."""
    from hydra.core.hydra_config import HydraConfig

    from runner import outputs, tracking
    from runner.job import config_hash, git_commit, record_failure, to_yaml, track_job_dir

    import runner

    job_dir = Path(HydraConfig.get().runtime.output_dir)
    entry = json.loads(Path(cfg.file).read_text())["candidates"][int(cfg.index)]
    resolved = entry["config"]
    ocfg = OmegaConf.create(resolved)
    try:
        job_dir.mkdir(parents=True, exist_ok=True)
        doc = search_candidate(resolved, entry["guess"], job_dir)
        doc.update(candidate=entry["candidate"], estimate=entry["estimate"], guess=entry["guess"])
        outputs.write_json(job_dir / RESULT, doc)
        import polars as pl

        from engine.result import Assumption, RunResult

        table = pl.DataFrame(doc["trials"]) if doc["trials"] else pl.DataFrame()
        summary = {"max_rps": doc["max_rps"], "des_runs": doc["des_runs"], "status": doc["status"],
                   "estimate_rps": entry["estimate"]["rate_rps"], "limit": doc["limit"],
                   **{k: v for k, v in doc["metrics"].items() if isinstance(v, (int, float, str))}}
        if "target" in doc:
            summary.update(units_for_target=doc["target"]["units"],
                           target_verified=doc["target"]["verified"])
        p = resolved["plan"]
        notes = [Assumption("stability rule", f"{p['rule']['requests']}..{p['rule']['max_requests']} requests, "
                            f"first {p['rule']['warmup_fraction']:g} of the span dropped",
                            f"binomial {p['rule']['confidence']:g} interval of each p{p['slo']['percentile']:g}; "
                            "doubled while unsure, then the point estimate"),
                 Assumption("search", f"bisection on log(rate) to {p['search']['precision']:g}",
                            "reported rate = highest rate measured to pass")]
        meta = {"config_hash": config_hash(resolved), "engine": "plan", "simllm_version": runner.__version__,
                "git_commit": git_commit(), "overrides": [f"candidate={entry['candidate']['key']}"],
                "job_uid": uuid.uuid4().hex}
        if os.environ.get(tracking.PARENT_ENV):
            meta["parent_run_id"] = os.environ[tracking.PARENT_ENV]
        outputs.write_result(job_dir, RunResult(summary=summary, table=table, assumptions=notes),
                             to_yaml(resolved), meta)
        if resolved["tracking"]["enabled"]:
            track_job_dir(ocfg.tracking, job_dir, cfg=resolved, fresh=True, quiet=False)
    except Exception as e:  # noqa: BLE001 - one failing candidate never loses the others
        record_failure(ocfg, job_dir, e, [f"candidate={entry['candidate']['key']}"])
        print(f"simllm-plan: candidate {entry['candidate']['key']} failed: {type(e).__name__}: {e}",
              file=sys.stderr)


def job_main() -> None:
    import hydra

    _register_job_config()
    hydra.main(version_base="1.3", config_path=None, config_name="simllm_plan_job")(_job)()


# ----------------------------------------------------------------------------- the driver

def _hydra_args(args: list[str]) -> tuple[list[str], list[str]]:
    """(config overrides, launcher overrides: hydra.* and hydra/...)."""
    conf, launch = [], []
    for a in args:
        (launch if a.lstrip("+~").startswith(("hydra.", "hydra/")) else conf).append(a)
    return conf, launch


def launch_multirun(module: str, file: Path, n: int, wave_dir: Path, launch: list[str], poll=None) -> int:
    """One Hydra multirun of ``module``'s job app (``python -m MODULE --job -m file=FILE
    index=0,...,n-1``), job ``i`` in ``wave_dir/i``, through the launcher chosen by the ``launch``
    overrides (default joblib with one job per core, at most ``n``); ``poll()`` every 0.5 s while it
    runs. The launched multirun is stopped if this one is interrupted. Returns its exit code."""
    if not any(a.lstrip("+").startswith("hydra/launcher=") for a in launch):
        launch = ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={min(n, os.cpu_count() or 1)}"] + launch
    cmd = [sys.executable, "-m", module, "--job", "-m", f"file={file}",
           "index=" + ",".join(str(i) for i in range(n)), f"hydra.sweep.dir={wave_dir}",
           "hydra.sweep.subdir=${hydra.job.num}", "hydra.job.chdir=false"] + launch
    logf = (wave_dir / "launcher.log").open("w")
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, cwd=os.getcwd())
    try:
        while proc.poll() is None:
            time.sleep(0.5)
            if poll is not None:
                poll()
    finally:
        if proc.poll() is None:       # interrupted: stop the launched multirun too
            proc.terminate()
            proc.wait(timeout=30)
        logf.close()
    return proc.returncode


def job_error(job_dir: Path, rc: int, wave_dir: Path) -> str:
    """Why a launched job left no result: the last line of its error.txt, else the launcher's exit."""
    f = job_dir / "error.txt"
    return f.read_text().strip().splitlines()[-1] if f.exists() else \
        f"no result (launcher exit {rc}; see {wave_dir / 'launcher.log'})"


def run_wave(wave: list[dict], wave_dir: Path, launch: list[str], progress=None) -> list[dict]:
    """Launch one multirun over ``wave`` (candidate docs); returns their result docs (None for
    a failed job, with its error)."""
    wave_dir.mkdir(parents=True, exist_ok=True)
    file = wave_dir / "candidates.json"
    file.write_text(json.dumps({"candidates": wave}, default=str))
    seen_runs = [0]

    def poll():
        if progress is not None:
            n = sum(sum(1 for _ in open(p)) for p in wave_dir.glob(f"*/{TRIALS}"))
            progress(n - seen_runs[0], sum((wave_dir / str(i) / RESULT).exists() for i in range(len(wave))))
            seen_runs[0] = n

    rc = launch_multirun("runner.tools.plan", file, len(wave), wave_dir, launch, poll)
    if progress is not None:
        n = sum(sum(1 for _ in open(p)) for p in wave_dir.glob(f"*/{TRIALS}"))
        progress(n - seen_runs[0], len(wave))
    out = []
    for i, c in enumerate(wave):
        d = wave_dir / str(i)
        if (d / RESULT).exists():
            out.append(json.loads((d / RESULT).read_text()))
        else:
            out.append({"candidate": c["candidate"], "estimate": c["estimate"], "error": job_error(d, rc, wave_dir)})
    return out


def _median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def plan_search(overrides: list[str], launch: list[str], out_dir: Path, quiet: bool = False) -> dict:
    """The whole search (module docstring, steps 2-3); returns the plan document."""
    from engine.des.config import deployment
    from engine.des.run import handoff_function
    from engine.des.workload import build_stream
    from engine.plan import bound, rank
    from engine.plan.search import grid_size
    from runner.convert import specs_from_config

    base, plan, cands, dropped = compose_candidates(overrides)
    q = plan.slo.percentile / 100.0
    lengths = None
    rows, todo = [], []
    for c, cfg in cands:
        specs, _ = deployment(specs_from_config(cfg))
        if lengths is None:
            st = build_stream(replace(specs.workload, num_requests=plan.rule.max_requests))
            lengths = bound.Lengths(st.prompt, st.output)
        ho = handoff_function(specs, specs.des) if specs.des.cluster.prefill_replicas else None
        e = bound.estimate(specs, lengths, q, plan.slo.ttft_ms, plan.slo.tpot_ms, ho)
        hw = specs.hardware
        price = plan.prices.get(c.hardware, hw.price_per_hour) if plan.prices else hw.price_per_hour
        info = {"candidate": {**asdict(c), "key": c.key, "mode": c.mode, "layout": c.layout,
                              "devices": c.devices},
                "estimate": asdict(e), "price_per_hour": price, "tdp_w": hw.tdp_w,
                "idle_fraction": specs.analytical.idle_power_fraction}
        if e.reason:
            rows.append({**info, "pruned": e.reason})
        else:
            todo.append((info, cfg, rank.objective_value(plan.objective, e.rate_rps, c.devices, price)))
    todo.sort(key=lambda t: -t[2])
    n_jobs = next((int(a.split("=", 1)[1]) for a in launch if a.startswith("hydra.launcher.n_jobs=")),
                  os.cpu_count() or 1)
    wave_size = plan.wave or max(4 * n_jobs, 4)
    ratios, best, k = [], 0.0, 0
    from tqdm import tqdm

    bar = tqdm(total=len(todo), unit="cand", desc="simllm-plan", disable=quiet, mininterval=1.0,
               file=sys.stderr)
    runs_total = [0]

    last = [None]
    start = [0]

    def progress(new_runs, done):
        runs_total[0] += new_runs
        text = f"{runs_total[0]} DES runs, wave {k}"
        if bar.n < start[0] + done:
            bar.update(start[0] + done - bar.n)
        if text != last[0]:
            last[0] = text
            bar.set_postfix_str(text)

    while todo:
        k += 1
        if plan.prune and best > 0:
            keep = []
            for info, cfg, val in todo:
                if val * plan.bound_slack < best:
                    unit = "req/s per USD-hour" if plan.objective == "cost" else "req/s per GPU"
                    rows.append({**info, "pruned": f"estimate x {plan.bound_slack:g} = "
                                 f"{val * plan.bound_slack:.4g} < best found {best:.4g} {unit}"})
                    bar.update(1)
                else:
                    keep.append((info, cfg, val))
            todo = keep
            if not todo:
                break
        wave, todo = todo[:wave_size], todo[wave_size:]
        ratio = _median(ratios) if ratios else plan.search.initial_ratio
        docs = []
        for info, cfg, _ in wave:
            resolved = OmegaConf.to_container(cfg, resolve=True)
            docs.append({**info, "config": resolved, "guess": info["estimate"]["rate_rps"] * ratio})
        start[0] = bar.n
        results = run_wave(docs, out_dir / f"wave{k}", launch, progress)
        bar.update(max(0, start[0] + len(wave) - bar.n))
        for info, r in zip(docs, results):
            row = {kk: info[kk] for kk in ("candidate", "estimate", "price_per_hour", "tdp_w", "idle_fraction")}
            row.update({kk: v for kk, v in r.items() if kk not in row})
            rows.append(row)
            if r.get("max_rps"):
                ratios.append(r["max_rps"] / info["estimate"]["rate_rps"])
                best = max(best, rank.objective_value(plan.objective, r["max_rps"],
                                                      info["candidate"]["devices"], info["price_per_hour"]))
    bar.close()
    for r in rows:
        if r.get("max_rps"):
            r.update(rank.figures(r["max_rps"], r["candidate"]["devices"], r.get("metrics", {}),
                                  r["price_per_hour"], r["tdp_w"], r["idle_fraction"], plan.target_rps))
            if r.get("target"):
                u = r["target"]["units"]
                r.update(units_for_target=u, gpus_for_target=u * r["candidate"]["devices"],
                         target_verified=r["target"]["verified"],
                         usd_per_hour_for_target=(u * r["candidate"]["devices"] * r["price_per_hour"]
                                                  if r["price_per_hour"] is not None else float("nan")))
    rows.sort(key=rank.sort_key(plan.objective, plan.target_rps))
    p = plan.search.precision
    # brute force at the same resolution: every candidate that fits in memory, a geometric grid of
    # ratio 1 + p over [estimate / 4, estimate] (one run where the estimate is 0: SLO-infeasible)
    brute = sum(grid_size(r["estimate"]["rate_rps"] / 4, r["estimate"]["rate_rps"], p)
                if r["estimate"]["rate_rps"] > 0 else 1 for r in rows if r["estimate"]["fits"])
    return {"plan": asdict(plan), "rows": rows, "dropped": [list(d) for d in dropped],
            "des_runs": sum(r.get("des_runs", 0) for r in rows),
            "brute_force_runs": brute, "candidates": len(cands), "searched": sum("max_rps" in r for r in rows),
            "model": base.model.name, "workload": base.workload.name, "framework": base.framework.name,
            "job_cpu_s": sum(r.get("cpu_s", 0.0) for r in rows)}


# ----------------------------------------------------------------------------- outputs

def _f(v, fmt):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return format(v, fmt)


def table_rows(doc: dict) -> list[dict]:
    """The ranked table as rows of display strings (searched candidates first, then pruned)."""
    plan = doc["plan"]
    q = plan["slo"]["percentile"]
    tgt = plan["target_rps"]
    out = []
    rank_no = 0
    for r in doc["rows"]:
        c, e = r["candidate"], r["estimate"]
        m = r.get("metrics", {})
        row = {"hardware": c["hardware"], "layout": c["layout"], "mode": c["mode"], "GPUs": c["devices"]}
        if r.get("max_rps"):
            rank_no += 1
            row = {"#": str(rank_no), **row}
            row.update({
                "max req/s": f"{r['max_rps']:.3g} (+{_prec(r)})",
                "req/s/GPU": _f(r["rps_per_gpu"], ".3g"), "tok/s/GPU": _f(r["tok_s_per_gpu"], ",.0f"),
                f"p{q:g} TTFT ms": _f(m.get("ttft_ms_q"), ".0f"), f"p{q:g} TPOT ms": _f(m.get("tpot_ms_q"), ".1f"),
                "limit": r.get("limit") or "-", "bound": str(m.get("bound") or "-"),
                "estimate req/s": _f(e["rate_rps"], ".3g"),
                "$/M tok": _f(r.get("usd_per_mtok"), ".3f"), "J/tok": _f(r.get("j_per_tok"), ".2f"),
                "DES runs": str(r.get("des_runs", "-"))})
            if tgt:
                row[f"GPUs for {tgt:g} req/s"] = (f"{r['gpus_for_target']}" +
                                                  ("" if r.get("target_verified", True) else " (unverified)"))
            conf = r.get("confident")
            if plan.get("confidence") and conf:   # plan.confidence: the rate met with probability >= p
                pc = f"{plan['confidence']:.0%}"
                row[f"req/s at {pc}"] = _f(conf.get("rps"), ".3g") + (f" (step x{conf['factor']:.2f})"
                                                                     if conf.get("factor") else "")
                if tgt:
                    t = conf.get("target")
                    row[f"GPUs for {tgt:g} req/s at {pc}"] = (
                        "-" if not t else f"{t['units'] * c['devices']}" + ("" if t["verified"] else " (unverified)"))
        else:
            row = {"#": "-", **row}
            why = r.get("pruned") or ("error: " + r["error"] if r.get("error") else r.get("status", "infeasible"))
            if r.get("status") == "infeasible":
                why = f"infeasible: fails at {plan['search']['min_rate']:g} req/s"
            row.update({"max req/s": "-", "estimate req/s": _f(e["rate_rps"], ".3g") if e["rate_rps"] else "-",
                        "limit": why, "DES runs": str(r.get("des_runs", 0))})
        out.append(row)
    return out


def _prec(r: dict) -> str:
    """The found rate's precision: the next failing rate above it, in % (``*``: the bracket was
    left at the statistical resolution, its ends decided by point estimates)."""
    if not r.get("fail_rps"):
        return "?"
    return f"{(r['fail_rps'] / r['max_rps'] - 1) * 100:.1f}%" + ("*" if r.get("status") == "resolution" else "")


def target_line(doc: dict) -> str:
    """'R req/s: N x hardware layout = G GPUs, checked by a DES ...' for the best row, or ''."""
    tgt = doc["plan"]["target_rps"]
    best = next((r for r in doc["rows"] if r.get("max_rps") and r.get("target")), None)
    if not tgt or best is None:
        return ""
    c, t = best["candidate"], best["target"]
    last = t["tried"][-1]
    q = doc["plan"]["slo"]["percentile"]
    cost = (f", USD {best['usd_per_hour_for_target']:.2f} per hour"
            if best.get("usd_per_hour_for_target") == best.get("usd_per_hour_for_target")
            and best.get("usd_per_hour_for_target") is not None else "")
    ct = (best.get("confident") or {}).get("target")
    at_p = (f" At {doc['plan']['confidence']:.0%} confidence (step times x {best['confident']['factor']:.2f}): "
            f"{ct['units']} units = {ct['units'] * c['devices']} GPUs" + ("" if ct["verified"] else " (NOT verified)")
            + "." if ct else "")
    return (f"{tgt:g} req/s: {t['units']} x {c['hardware']} {c['layout']} ({c['mode']}) = "
            f"{t['units'] * c['devices']} GPUs{cost}; " +
            (f"checked by a DES of {t['units'] * c['replicas']} replicas behind the router at {tgt:g} req/s: "
             f"p{q:g} TTFT {last['ttft_ms_q']:.0f} ms, p{q:g} TPOT {last['tpot_ms_q']:.1f} ms "
             f"({last['requests']} requests)" if t["verified"] else
             f"NOT verified: the DES at {tgt:g} req/s still failed with {t['units']} units")) + at_p


def markdown_table(rows: list[dict]) -> str:
    """The rows as a Markdown table, one column per key in first-seen order (runner.tools.cli)."""
    from runner.tools.cli import text_table

    cols = list(dict.fromkeys(k for r in rows for k in r))
    return text_table({c: [r.get(c, "") for r in rows] for c in cols})


def plot(doc: dict, path: Path) -> Path | None:
    """Throughput per GPU vs interactivity of every searched candidate at its max SLO rate
    (``figure``) as ``path`` (PNG); None when no candidate meets the SLOs."""
    import matplotlib.pyplot as plt

    fig = figure(doc)
    if fig is None:
        return None
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def figure(doc: dict):
    """The plan's figure (matplotlib Figure, or None without a candidate at an SLO rate):
    throughput per GPU vs interactivity of every searched candidate at its max SLO rate,
    coloured by hardware, the Pareto frontier joined, the TPOT SLO as interactivity 1000 / TPOT."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from engine.plan.rank import pareto

    rows = [r for r in doc["rows"] if r.get("max_rps")]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 5))
    hws = list(dict.fromkeys(r["candidate"]["hardware"] for r in rows))
    cmap = plt.get_cmap("tab10")
    for i, hw in enumerate(hws):
        rr = [r for r in rows if r["candidate"]["hardware"] == hw]
        ax.scatter([r["interactivity_tok_s_per_user"] for r in rr], [r["tok_s_per_gpu"] for r in rr],
                   color=cmap(i), label=hw, s=30, zorder=3)
    on = pareto(rows)
    front = sorted([r for r, o in zip(rows, on) if o], key=lambda r: r["interactivity_tok_s_per_user"])
    ax.plot([r["interactivity_tok_s_per_user"] for r in front], [r["tok_s_per_gpu"] for r in front],
            "-", color="0.3", lw=1.2, zorder=2, label="Pareto frontier")
    for r, o in zip(rows, on):
        ax.annotate(f"{r['candidate']['hardware']} {r['candidate']['layout']}"
                    + ("" if r["candidate"]["mode"] == "colocated" else f" {r['candidate']['mode']}"),
                    (r["interactivity_tok_s_per_user"], r["tok_s_per_gpu"]), textcoords="offset points",
                    xytext=(5, 4), fontsize=7 if o else 6, color="0.1" if o else "0.45")
    tpot = doc["plan"]["slo"]["tpot_ms"]
    if tpot:
        ax.axvline(1000.0 / tpot, color="tab:red", ls="--", lw=1.2,
                   label=f"TPOT SLO {tpot:g} ms = {1000 / tpot:g} tok/s/user")
    from runner.tools.plots import _log_if_wide

    # a log axis only over a wide range (x20+), with labelled 1-2-5 major ticks; a short range
    # (a log axis inside one decade has no major tick, so no label) stays linear
    _log_if_wide(ax, "x", [r["interactivity_tok_s_per_user"] for r in rows])
    _log_if_wide(ax, "y", [r["tok_s_per_gpu"] for r in rows])
    ax.margins(x=0.12, y=0.08)
    ax.set_xlabel("interactivity at the max SLO rate (tokens/s per user = 1000 / p50 TPOT)")
    ax.set_ylabel("throughput per GPU (output tokens/s)")
    s = doc["plan"]["slo"]
    ax.set_title(f"{doc['model']}, {doc['workload']}: p{s['percentile']:g} TTFT <= {s['ttft_ms']:g} ms, "
                 f"TPOT <= {s['tpot_ms']:g} ms", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="hardware", fontsize=7, loc="best")
    return fig


def report(doc: dict, out_dir: Path, command: str, name: str = "plan") -> dict:
    """Write NAME.md, NAME.csv, NAME.png into ``out_dir``; returns their paths."""
    import polars as pl

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = table_rows(doc)
    csv = out_dir / f"{name}.csv"
    flat = []
    for r in doc["rows"]:
        c, e, m = r["candidate"], r["estimate"], r.get("metrics", {})
        flat.append({"hardware": c["hardware"], "tp": c["tp"], "pp": c["pp"], "mode": c["mode"],
                     "devices": c["devices"], "max_rps": r.get("max_rps"), "fail_rps": r.get("fail_rps"),
                     "rps_per_gpu": r.get("rps_per_gpu"), "tok_s_per_gpu": r.get("tok_s_per_gpu"),
                     "ttft_ms_q": m.get("ttft_ms_q"), "tpot_ms_q": m.get("tpot_ms_q"),
                     "interactivity_tok_s_per_user": r.get("interactivity_tok_s_per_user"),
                     "usd_per_mtok": r.get("usd_per_mtok"), "j_per_tok": r.get("j_per_tok"),
                     "gpus_for_target": r.get("gpus_for_target"), "limit": r.get("limit"),
                     "bound": m.get("bound"), "estimate_rps": e["rate_rps"], "estimate_limit": e["limit"],
                     "zero_load_ttft_ms": e["ttft0_ms"], "zero_load_tpot_ms": e["tpot0_ms"],
                     "des_runs": r.get("des_runs", 0),
                     "pruned": r.get("pruned") or r.get("error") or ""})
    pl.DataFrame(flat, infer_schema_length=None).write_csv(csv)
    png = plot(doc, out_dir / f"{name}.png")
    p = doc["plan"]
    s = p["slo"]
    f = doc["figures"]
    found = [r for r in doc["rows"] if r.get("max_rps")]
    ratios = [r["max_rps"] / r["estimate"]["rate_rps"] for r in found]
    lines = [
        f"# Capacity plan: {doc['model']} on {', '.join(p['space']['hardware'])}",
        "",
        f"Generated by `{command}` (simllm-plan; do not edit by hand).",
        "",
        f"Question: the highest request rate of `{doc['workload']}` (rate-scaled trace) each deployment "
        f"serves with p{s['percentile']:g} TTFT <= {s['ttft_ms']:g} ms and p{s['percentile']:g} TPOT <= "
        f"{s['tpot_ms']:g} ms" + (f" and p{s['percentile']:g} E2E <= {s['e2e_ms']:g} ms" if s['e2e_ms'] else "")
        + f", framework profile `{doc['framework']}`; partitions TP x PP <= {p['space']['max_devices']} GPUs"
        + (f"; GPUs needed for {p['target_rps']:g} req/s" if p["target_rps"] else "") + ".",
        "",
        f"- candidates: {doc['candidates']} ({doc['searched']} searched with the DES, "
        f"{doc['candidates'] - doc['searched']} pruned or failed; partitions the model cannot take: "
        f"{len(doc['dropped'])})",
        f"- DES runs: {doc['des_runs']} (brute force over the same candidates at the same resolution: at "
        f"least {doc['brute_force_runs']}, one run per point of a geometric grid of ratio "
        f"{1 + p['search']['precision']:g} over [estimate / 4, estimate] for every candidate that fits in "
        "memory, before any doubling of the request count)",
        f"- time: {f['wall_s']:.1f} s wall, {f['cpu_s']:.1f} CPU-s (this process and its launched jobs) on "
        f"{f['cores']} cores",
        f"- precision: each max rate r passed and the rate in brackets above it failed (asked: "
        f"{p['search']['precision'] * 100:g} %; `*`: stopped wider, at the statistical resolution, where both "
        "bracket ends were decided by point estimates at the largest run)",
        f"- stability rule: {p['rule']['requests']} requests per run (doubled up to {p['rule']['max_requests']} "
        f"while the {p['rule']['confidence']:g} binomial interval of a p{s['percentile']:g} straddles its "
        f"threshold, then the point estimate), the first {p['rule']['warmup_fraction']:g} of the stream's span "
        "not measured",
    ]
    if ratios:
        lines.append(f"- found / analytical estimate: median {_median(ratios):.2f}, range "
                     f"{min(ratios):.2f}-{max(ratios):.2f} (estimate pruning used x{p['bound_slack']:g} slack)")
    lines += ["", markdown_table(rows), ""]
    if target_line(doc):
        lines += [target_line(doc), ""]
    if png is not None:
        lines += [f"![Pareto: throughput per GPU vs interactivity]({png.name})", ""]
    lines += ["Columns: max req/s of one unit (the true maximum lies below the next failing rate, within "
              "the stated precision); limit = the SLO that failed just above it; bound = the DES's binding "
              "bound at the max rate; estimate = the analytical fluid-model capacity "
              "(engine/plan/bound.py); $/M tok = USD per million output tokens at the max rate "
              "(plan.prices or hardware.price_per_hour); J/tok = energy per output token (TDP x busy "
              "share, an upper estimate).", ""]
    md = out_dir / f"{name}.md"
    md.write_text("\n".join(lines))
    return {"md": md, "csv": csv, "png": png}


def _log_parent(uri: str, exp_id: str, parent: str, doc: dict, paths: dict, status: str) -> None:
    from runner import tracking
    from runner.job import flatten

    f = doc.get("figures", {})
    metrics = {"des_runs": doc.get("des_runs", 0), "brute_force_runs": doc.get("brute_force_runs", 0),
               "candidates": doc.get("candidates", 0), "searched": doc.get("searched", 0),
               "wall_s": f.get("wall_s", 0.0), "cpu_s": f.get("cpu_s", 0.0)}
    tags = {}
    top = next((r for r in doc.get("rows", []) if r.get("max_rps")), None)
    if top:
        metrics.update(best_max_rps=top["max_rps"], best_rps_per_gpu=top["rps_per_gpu"])
        tags["plan.best"] = top["candidate"]["key"]
    params = {f"plan.{k}": v for k, v in flatten(doc.get("plan", {})).items()}
    tracking.finish_parent(uri, parent, metrics, params, tags,
                           [p for p in paths.values() if p is not None], status=status)


def _plan_json(path: str) -> dict:
    """A finished search's plan.json (--from-json), or a SpecError naming the file."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise SpecError("--from-json", path, f"a plan.json written by simllm-plan (not JSON: {str(e)[:80]})") from None
    if not isinstance(doc, dict) or "rows" not in doc:
        raise SpecError("--from-json", path, "a plan.json written by simllm-plan (an object with 'rows')")
    return doc


@guard("simllm-plan")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="simllm-plan", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides (config and hydra/launcher ones)")
    ap.add_argument("--out", help="output folder (default outputs/plan/DATE/TIME)")
    ap.add_argument("--study", help="also write the report as this path stem (e.g. experiments/capacity_l8b)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--from-json", help="write the report (--out / --study) of a finished search's plan.json "
                    "instead of searching (the overrides then only name the command it was run with, "
                    "where plan.json does not record it)")
    a = ap.parse_args(argv)
    if a.from_json:
        doc = _plan_json(a.from_json)
        cmd = doc.get("command") or "simllm-plan " + " ".join(a.overrides)   # plan.json before 'command'
        paths = report(doc, Path(a.out) if a.out else Path(a.from_json).parent, cmd)
        if a.study:
            report(doc, Path(a.study).parent, cmd, name=Path(a.study).name)
        print(f"report: {paths['md']}")
        return 0
    t0, cpu0 = time.time(), time.process_time()
    conf, launch = _hydra_args(a.overrides)
    out = Path(a.out) if a.out else Path("outputs/plan") / time.strftime("%Y-%m-%d/%H-%M-%S")
    # the command as shipped reports show it: no tracking store path of this machine
    command = "simllm-plan " + " ".join(o for o in a.overrides if not o.startswith("tracking.uri="))
    from runner import tracking

    parent, uri, exp_id = None, None, None
    try:
        base = _compose(conf)
        if base.plan.get("requirements"):       # the spec-sheet question (runner/tools/requirements.py)
            from runner.tools.requirements import run as requirements

            return requirements(base, conf, out, command, quiet=a.quiet, study=a.study, launch=launch)
        from engine.plan.spec import plan_spec

        plan_spec(OmegaConf.to_container(base.plan, resolve=True))   # bad input: stop before any run
        if base.engine.name != "des":
            raise SpecError("engine", base.engine.name, "des (simllm-plan measures every candidate with "
                            "the DES; use experiment=capacity or engine=des)")
        if base.tracking.enabled:
            uri, exp_name = base.tracking.uri, base.tracking.experiment
            try:
                exp_id = tracking.experiment_id(uri, exp_name)
                parent = tracking.start_parent(uri, exp_id, f"plan:{base.model.name}:{out.name}",
                                               {"simllm.role": "plan", "simllm.sweep_id": str(out)})
                os.environ[tracking.EXPERIMENT_ENV] = exp_id
                os.environ[tracking.PARENT_ENV] = parent
            except Exception as e:  # noqa: BLE001
                os.environ[tracking.DOWN_ENV] = f"{type(e).__name__}: {e}"[:500]
                print(f"simllm-plan: warning: MLflow unavailable at {uri} ({e}); results stay in {out}",
                      file=sys.stderr)
        doc = plan_search(conf, launch, out, quiet=a.quiet)
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        doc["figures"] = {"wall_s": time.time() - t0,
                          "cpu_s": time.process_time() - cpu0 + ru.ru_utime + ru.ru_stime,
                          "cores": os.cpu_count()}
        doc["command"] = command
        (out / "plan.json").write_text(json.dumps(doc, indent=1, default=str))
        paths = report(doc, out, command)
        if a.study:
            st = Path(a.study)
            report(doc, st.parent, command, name=st.name)
        print(markdown_table(table_rows(doc)))
        if target_line(doc):
            print("\n" + target_line(doc))
        f = doc["figures"]
        print(f"\n{doc['searched']} of {doc['candidates']} candidates searched, {doc['des_runs']} DES runs "
              f"(brute force at the same resolution: {doc['brute_force_runs']}); {f['wall_s']:.1f} s wall, "
              f"{f['cpu_s']:.1f} CPU-s; report: {paths['md']}")
        if parent:
            _log_parent(uri, exp_id, parent, doc, paths, "FINISHED")
            parent = None
        return 0
    finally:      # user errors (SpecError, Hydra's composition errors): one line, exit 2 (guard)
        if parent:
            try:
                tracking.end_run(uri, parent, "FAILED")
            except Exception:  # noqa: BLE001
                pass
        for k in (tracking.PARENT_ENV, tracking.EXPERIMENT_ENV, tracking.DOWN_ENV):
            os.environ.pop(k, None)


def cli() -> None:
    sys.exit(main())


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        del sys.argv[1]
        job_main()
    else:
        cli()
