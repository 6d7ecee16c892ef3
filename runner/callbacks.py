"""Hydra callback that groups a multirun in MLflow and reports it at the end; the sweep's own
record (its table, plot, counts and overrides), shared with ``simllm-sync``."""

import json
import os
import sys
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from runner import outputs

#: Files of the sweep's own record, written into the sweep directory and logged to its parent run.
TABLE = "sweep_table.parquet"
TABLE_CSV = "sweep_table.csv"
PLOT = "sweep_latency.png"


def ray_env(config: DictConfig) -> None:
    """The Ray launcher runs the jobs in the Ray cluster's worker processes, which the cluster's
    daemons started: unlike joblib's and submitit's, they do not inherit this process's
    environment. Hand them the sweep's settings (the ``SIMLLM_*`` variables set above: parent run,
    experiment, finished hashes, tracking probe; the user's ``MLFLOW_*`` ones) through the
    launcher's ``ray.init(runtime_env={"env_vars": ...})``; the launcher is instantiated after
    this callback, so it reads them. The launching process's PID is left out (workers of Ray are
    not its children)."""
    from omegaconf import open_dict, read_write

    from runner import app

    launcher = config.hydra.get("launcher")
    if launcher is None or "hydra_ray_launcher" not in str(launcher.get("_target_", "")):
        return
    env = {k: v for k, v in os.environ.items()
           if k.startswith(("SIMLLM_", "MLFLOW_")) and k != app.LAUNCHER_ENV}
    with read_write(config), open_dict(config):
        init = config.hydra.launcher.ray.init
        runtime = dict(init.get("runtime_env") or {})
        runtime["env_vars"] = {**dict(runtime.get("env_vars") or {}), **env}
        init.runtime_env = runtime


class SweepTracking(Callback):
    """Runs in the launching process (whatever the launcher).

    on_multirun_start: probe the tracking store once (``tracking.probe``: seconds, no retries);
    if it answers, create the store and experiment once (parallel first-time creation races in
    MLflow's schema migration), open a parent run, fetch the finished config hashes when
    ``resume=true``, and hand all of it to the jobs through environment variables. If it does
    not, say so once and tell the jobs (environment and ``.tracking_down.json`` in the sweep
    directory): each writes its files and pending_sync.json at once, without trying.
    A sweep that stops before its end (SIGTERM/SIGINT, an error in the sweeper such as a grid
    value that does not convert) ends its parent run at exit (``_abandoned``: KILLED or FAILED);
    one killed outright is ended KILLED by the next ``resume=true`` or ``simllm-sync``
    (``tracking.end_dead_runs``).
    on_multirun_end: print a one-screen summary (done / failed / skipped, with the failing
    overrides), write the sweep's table (and a latency plot when a numeric value was swept) into
    the sweep directory, log them with the counts and the sweep's overrides to the parent run and
    close it (FAILED if any job failed), and exit non-zero if any job failed.
    """

    def __init__(self) -> None:
        self.parent = None
        self.uri = None

    def _abandoned(self) -> None:
        """atexit: the sweep stopped before on_multirun_end (a signal, a bad grid value, an error
        in the sweeper): end its parent run KILLED (stopped by a signal) or FAILED."""
        from runner import app, tracking

        parent, self.parent = self.parent, None
        if parent is None or tracking.down_reason(self.uri):
            return
        try:
            tracking.end_run(self.uri, parent, "KILLED" if app.STOPPED_BY else "FAILED")
        except Exception as e:  # noqa: BLE001 - exiting anyway; resume/simllm-sync end it later
            print(f"simllm: warning: could not end the sweep's MLflow run {parent}: {e}", file=sys.stderr)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        try:
            self._start(config)
        finally:
            ray_env(config)

    def _start(self, config: DictConfig) -> None:
        import atexit

        from runner import app, tracking

        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        os.environ[tracking.SWEEP_ENV] = str(sweep_dir)
        os.environ[app.LAUNCHER_ENV] = str(os.getpid())
        atexit.register(self._abandoned)
        tracking.clear_down(sweep_dir)
        if not config.tracking.enabled:
            return
        uri, exp_name = config.tracking.uri, config.tracking.experiment
        self.uri = uri
        reason = tracking.probe(uri)
        if reason is None:
            os.environ[tracking.PROBED_ENV] = uri
            try:
                exp = tracking.experiment_id(uri, exp_name)
                os.environ[tracking.EXPERIMENT_ENV] = exp
                if config.get("resume"):
                    path = sweep_dir / ".finished_hashes.json"
                    path.write_text(json.dumps(sorted(tracking.finished_hashes(uri, exp_name))))
                    os.environ[tracking.FINISHED_ENV] = str(path.resolve())
                with tracking.uninterrupted():   # the parent is known to _abandoned once created
                    self.parent = tracking.start_parent(
                        uri, exp, f"sweep:{sweep_dir.name}",
                        {"simllm.sweep_id": str(sweep_dir), "simllm.role": "sweep"})
                os.environ[tracking.PARENT_ENV] = self.parent
            except Exception as e:  # noqa: BLE001
                reason = f"{type(e).__name__}: {e}"[:500]
        if reason:
            os.environ.pop(tracking.PROBED_ENV, None)
            os.environ[tracking.DOWN_ENV] = reason
            tracking.mark_down(sweep_dir, uri, reason)
            resume = ""
            if config.get("resume"):   # no finished runs to skip can be known: every job runs
                path = sweep_dir / ".finished_hashes.json"
                path.write_text("[]")
                os.environ[tracking.FINISHED_ENV] = str(path.resolve())
                resume = " (resume=true cannot see its finished runs: every job runs)"
            print(f"simllm: warning: MLflow unavailable at {uri} ({reason}); every job of this "
                  f"sweep writes its results to its job directory only{resume}; upload them later "
                  f"with `simllm-sync {sweep_dir}`", file=sys.stderr)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from engine.result import metric
        from runner import app, tracking
        from runner.job import print_rows

        sweep_dir = Path(config.hydra.sweep.dir)
        rec = sweep_record(sweep_dir)
        done = []
        for j in rec["jobs"]:
            if j["status"] == "done":
                s = j["summary"]
                row = {"job": j["job"], "overrides": " ".join(j["overrides"])}
                for m in map(metric, _MULTIRUN_COLUMNS):
                    row[m.label] = s.get(m.name) if m.text else _f(s.get(m.name), m.digits)
                done.append(row)
        failed = [f"  job {j['job']} FAILED [{' '.join(j['overrides']) or '?'}]: {j['error']}"
                  for j in rec["jobs"] if j["status"] == "failed"]
        c = rec["counts"]
        print(f"\nsimllm multirun: {c['done']} done, {c['failed']} failed, {c['skipped']} skipped "
              f"({sweep_dir})")
        if len(done) <= 40:
            print_rows(done)
        for line in failed:
            print(line)
        files = []
        try:
            files = write_sweep_files(sweep_dir, rec)
        except Exception as e:  # noqa: BLE001 - the jobs' own files are what matters
            print(f"simllm: warning: could not write the sweep's table: {e}", file=sys.stderr)
        down = tracking.down_reason(config.tracking.uri) if config.tracking.enabled else None
        parent, self.parent = self.parent, None
        if parent and not down:
            try:
                finish_sweep_parent(config.tracking.uri, parent, config, rec, files)
            except Exception as e:  # noqa: BLE001
                print(f"simllm: warning: could not close the sweep's MLflow run: {e}", file=sys.stderr)
        pending = sum(1 for d in _job_dirs(sweep_dir) if (d / _pending()).exists())
        if pending:
            print(f"  {pending} job(s) not yet in MLflow: run `simllm-sync {sweep_dir}`")
        tracking.clear_down(sweep_dir)
        for k in (tracking.PARENT_ENV, tracking.EXPERIMENT_ENV, tracking.SWEEP_ENV,
                  tracking.FINISHED_ENV, tracking.DOWN_ENV, tracking.PROBED_ENV, app.LAUNCHER_ENV):
            os.environ.pop(k, None)
        if failed:
            sys.exit(1)


def _pending() -> str:
    from runner.job import PENDING

    return PENDING


def _job_dirs(sweep_dir: Path) -> list[Path]:
    """The job directories of a sweep (its numbered subdirectories), in job order."""
    return sorted((p for p in Path(sweep_dir).iterdir() if p.is_dir() and p.name.isdigit()),
                  key=lambda p: int(p.name))


def _overrides(job_dir: Path) -> list[str]:
    """The job's overrides, from Hydra's record in .hydra/overrides.yaml ([] if absent)."""
    import yaml

    path = job_dir / ".hydra" / "overrides.yaml"
    if not path.exists():
        return []
    return [str(o) for o in (yaml.safe_load(path.read_text()) or [])]


def sweep_record(sweep_dir: Path) -> dict:
    """What a sweep's job directories say: ``jobs`` (job number, status done/failed/skipped/
    missing, overrides, summary, error line, pending) and ``counts`` of each status."""
    from runner.job import PENDING, SKIPPED

    jobs = []
    for d in _job_dirs(sweep_dir):
        j = {"job": int(d.name), "overrides": _overrides(d), "summary": {}, "error": None,
             "config_hash": None, "pending": (d / PENDING).exists()}
        if (d / outputs.ERROR).exists():
            lines = (d / outputs.ERROR).read_text().strip().splitlines()
            j.update(status="failed", error=lines[-1] if lines else "?")
        elif (d / SKIPPED).exists():
            j["status"] = "skipped"
            j["config_hash"] = json.loads((d / SKIPPED).read_text()).get("config_hash")
        elif (d / outputs.SUMMARY).exists():
            j["status"] = "done"
        else:
            j["status"] = "missing"   # killed before it wrote anything
        if j["status"] in ("done", "failed") and (d / outputs.SUMMARY).exists():
            doc = json.loads((d / outputs.SUMMARY).read_text())
            j["config_hash"] = doc.get("config_hash")
            if j["status"] == "done":
                j["summary"] = doc.get("summary", {})
            j["overrides"] = list(doc.get("overrides", j["overrides"]))
        jobs.append(j)
    counts = {k: sum(j["status"] == k for j in jobs) for k in ("done", "failed", "skipped", "missing")}
    counts["total"] = len(jobs)
    counts["pending_sync"] = sum(j["pending"] for j in jobs)
    return {"jobs": jobs, "counts": counts}


def _swept(jobs: list[dict]) -> dict[str, list[str]]:
    """Override key -> its values in job order, for the keys whose value differs across jobs."""
    vals: dict[str, list[str]] = {}
    for j in jobs:
        for o in j["overrides"]:
            k, _, v = o.partition("=")
            vals.setdefault(k, []).append(v)
    return {k: v for k, v in vals.items() if len(set(v)) > 1}


def sweep_table(rec: dict):
    """The sweep's table: one row per job (job, status, overrides, each swept key, config hash,
    error) and every scalar of its summary (metrics in their units, text such as ``bound``)."""
    import polars as pl

    swept = list(_swept(rec["jobs"]))
    rows = []
    for j in rec["jobs"]:
        over = dict(o.partition("=")[::2] for o in j["overrides"])
        row = {"job": j["job"], "status": j["status"], "overrides": " ".join(j["overrides"])}
        row.update({f"sweep.{k}": over.get(k) for k in swept})
        row.update({"config_hash": j["config_hash"], "error": j["error"]})
        for k, v in j["summary"].items():
            if isinstance(v, bool):
                row[k] = v
            elif isinstance(v, (int, float)):
                row[k] = float(v)
            elif isinstance(v, str):
                row[k] = v
        rows.append(row)
    if not rows:
        return pl.DataFrame()
    return pl.from_dicts(rows, infer_schema_length=None, strict=False)


def _number(v: str) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def sweep_plot(rec: dict, path: Path) -> Path | None:
    """TTFT/TPOT vs the swept numeric key with the most values (runner.tools.plots.latency_vs),
    one series per combination of the other swept keys; None when nothing numeric was swept or
    fewer than two jobs have latencies."""
    swept = _swept(rec["jobs"])
    numeric = [k for k, vs in swept.items() if all(_number(v) is not None for v in vs)]
    if not numeric:
        return None
    xkey = max(numeric, key=lambda k: len(set(swept[k])))
    x, series, ttft, tpot = {}, {}, {}, {}
    for j in rec["jobs"]:
        s = j["summary"]
        over = dict(o.partition("=")[::2] for o in j["overrides"])
        if j["status"] != "done" or s.get("ttft_ms_p50") is None or xkey not in over:
            continue
        r = str(j["job"])
        x[r] = _number(over[xkey])
        series[r] = " ".join(f"{k}={over.get(k)}" for k in swept if k != xkey) or "sweep"
        ttft[r] = (s.get("ttft_ms_p50"), s.get("ttft_ms_p99"))
        tpot[r] = (s.get("tpot_ms_p50"), s.get("tpot_ms_p99"))
    if len(x) < 2:
        return None
    from runner.tools import plots

    return plots.latency_vs(x, series, ttft, tpot, xkey, path, f"TTFT and TPOT across the sweep ({len(x)} jobs)")


def write_sweep_files(sweep_dir: Path, rec: dict) -> list[Path]:
    """Write the sweep's table (Parquet and CSV) and plot into ``sweep_dir``; their paths."""
    table = sweep_table(rec)
    if table.is_empty():
        return []
    files = [sweep_dir / TABLE, sweep_dir / TABLE_CSV]
    table.write_parquet(files[0])
    table.write_csv(files[1])
    plot = sweep_plot(rec, sweep_dir / PLOT)
    return files + ([plot] if plot else [])


def sweep_params(multirun_cfg) -> dict:
    """The sweep's overrides as MLflow params, from its multirun config (the launching process's
    config, or the sweep directory's multirun.yaml): ``sweep.partition.tp = 1,2,4`` for each
    command-line override and each ``hydra.sweeper.params`` entry."""
    out = {}
    if multirun_cfg is None:
        return out
    hyd = multirun_cfg.get("hydra") or {}
    for k, v in ((hyd.get("sweeper") or {}).get("params") or {}).items():
        out[f"sweep.{str(k).lstrip('+~')}"] = str(v)
    for o in ((hyd.get("overrides") or {}).get("task") or []):
        k, _, v = str(o).partition("=")
        out[f"sweep.{k.lstrip('+~')}"] = v
    return out


def finish_sweep_parent(uri: str, parent: str, multirun_cfg, rec: dict, files: list[Path]) -> None:
    """Log the sweep's record to its parent run and end it (FAILED if any job failed): metrics
    jobs_total/done/failed/skipped/pending_sync, the sweep's overrides as params, the table and
    plot as artifacts."""
    from runner import tracking

    metrics = {f"jobs_{k}": v for k, v in rec["counts"].items() if k != "missing" or v}
    tracking.finish_parent(uri, parent, metrics, sweep_params(multirun_cfg),
                           {"simllm.role": "sweep"}, files,
                           status="FAILED" if rec["counts"]["failed"] else "FINISHED")


#: The columns of the multirun summary (labels and decimals from engine.result.METRICS).
_MULTIRUN_COLUMNS = ("ttft_ms_p50", "tpot_ms_p50", "throughput_tok_s", "bound")


def _f(v, nd=2):
    return "n/a" if v is None else f"{v:,.{nd}f}"
