"""Reading simllm runs back from MLflow (for reports, comparisons and bundles).

A *selection* is the job runs of an experiment, of one sweep (its parent run id or its sweep id),
of one git commit, or a list of run ids; sweep parents and report runs are left out, and only
FINISHED runs count. The runs come from runner.tracking (the one MLflow module, MlflowClient
only) as flat rows and become one polars DataFrame here.
"""

import os
import re
from pathlib import Path

import polars as pl

from runner import tracking

ROLE_TAG = "simllm.role"
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
#: a short run id: the first 4 to 31 hex digits of one (``git``-style prefixes)
_PREFIX = re.compile(r"^[0-9a-f]{4,31}$")


class SelectionError(ValueError):
    """The experiment, sweep, commit or run asked for matches nothing."""


def _search(uri: str, filter_string: str = "", experiment_ids=None) -> pl.DataFrame:
    rows = tracking.search_runs(uri, filter_string, experiment_ids)
    if not rows:
        return pl.DataFrame()
    keys = list(dict.fromkeys(k for r in rows for k in r))
    schema = {k: (pl.Float64 if k.startswith("metrics.") else
                  pl.Int64 if k in ("start_time", "end_time") else pl.String) for k in keys}
    df = pl.from_dicts(rows, schema=schema)
    # naive UTC datetimes, as the run listing shows them
    return df.with_columns(pl.from_epoch(c, time_unit="ms") for c in ("start_time", "end_time"))


def _jobs_only(df: pl.DataFrame, dedupe: bool) -> pl.DataFrame:
    """Keep FINISHED job runs (no sweep parents, no reports); one per config hash (latest)."""
    if df.is_empty():
        return df
    if f"tags.{ROLE_TAG}" in df.columns:
        df = df.filter(pl.col(f"tags.{ROLE_TAG}").is_null())
    df = df.filter(pl.col("status") == "FINISHED").sort("start_time", descending=True)
    if dedupe and "tags.simllm.config_hash" in df.columns:
        df = df.unique(subset=["tags.simllm.config_hash"], keep="first", maintain_order=True)
    return df.sort("start_time")


def experiment_ids(uri: str, name_or_id: str) -> list[str]:
    c = tracking.client(uri)
    exp = c.get_experiment_by_name(name_or_id)
    if exp is None and name_or_id.isdigit():
        try:
            exp = c.get_experiment(name_or_id)
        except Exception:  # noqa: BLE001
            exp = None
    if exp is None:
        raise SelectionError(f"no MLflow experiment {name_or_id!r} at {uri}")
    return [exp.experiment_id]


def _run_or_none(uri: str, run_id: str):
    """The MLflow run ``run_id``, or None where the store has no such run."""
    try:
        return tracking.client(uri).get_run(run_id)
    except Exception:  # noqa: BLE001 - MLflow raises its own RESOURCE_DOES_NOT_EXIST
        return None


def sweep_runs(uri: str, sweep: str, dedupe: bool = True) -> pl.DataFrame:
    """Job runs of a sweep given by its parent run id or (the end of) its sweep id/dir."""
    if _HEX32.match(sweep):
        parent = _run_or_none(uri, sweep)
        if parent is not None:
            df = _search(uri, f"tags.mlflow.parentRunId = '{sweep}'", [parent.info.experiment_id])
            if df.is_empty():
                raise SelectionError(f"run {sweep} has no child runs (not a sweep parent?)")
            return _jobs_only(df, dedupe)
    df = _search(uri, f"tags.simllm.sweep_id LIKE '%{sweep.rstrip('/')}'")
    if df.is_empty():
        raise SelectionError(f"no runs of sweep {sweep!r} at {uri}")
    return _jobs_only(df, dedupe)


def select(uri: str, experiment: str | None = None, sweep: str | None = None,
           commit: str | None = None, run_ids: list[str] | None = None,
           dedupe: bool = True) -> pl.DataFrame:
    """Job runs matching all the criteria given (experiment, sweep, commit prefix, run ids)."""
    if sweep:
        df = sweep_runs(uri, sweep, dedupe=False)
        if experiment:
            df = df.filter(pl.col("experiment_id").is_in(experiment_ids(uri, experiment)))
    else:
        flt = []
        if commit:
            flt.append(f"tags.simllm.git_commit LIKE '{commit}%'")
        exps = experiment_ids(uri, experiment) if experiment else None
        df = _search(uri, " and ".join(flt), exps)
    if run_ids and not df.is_empty():
        df = df.filter(pl.col("run_id").is_in(run_ids))
    if commit and sweep and not df.is_empty():
        df = df.filter(pl.col("tags.simllm.git_commit").str.starts_with(commit))
    df = _jobs_only(df, dedupe)
    if df.is_empty():
        what = ", ".join(f"{k}={v}" for k, v in (("experiment", experiment), ("sweep", sweep),
                                                   ("commit", commit), ("runs", run_ids)) if v)
        raise SelectionError(f"no finished simllm job runs for {what or 'the store'} at {uri}")
    return df


def matching_run_ids(uri: str, prefix: str) -> list[str]:
    """Ids of the runs (any experiment) that start with ``prefix``."""
    rows = tracking.search_runs(uri, "")
    return sorted({r["run_id"] for r in rows if r["run_id"].startswith(prefix)})


def full_run_id(uri: str, run_id: str) -> str:
    """A run id, or a unique prefix of one (4 to 31 hex digits, as ``git`` takes short commit
    ids), -> the full 32-digit id. SelectionError for an unknown or ambiguous prefix."""
    rid = run_id.strip().lower()
    if _HEX32.match(rid):
        return rid
    if not _PREFIX.match(rid):
        raise SelectionError(f"{run_id!r} is not a run id (32 hex digits) or a prefix of one (at least 4)")
    ids = matching_run_ids(uri, rid)
    if not ids:
        raise SelectionError(f"no run id starts with {rid!r} at {uri}")
    if len(ids) > 1:
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        raise SelectionError(f"run id prefix {rid!r} is ambiguous at {uri}: {len(ids)} runs start with it "
                             f"({shown}); give more digits")
    return ids[0]


def runs_by_id(uri: str, run_ids: list[str]) -> pl.DataFrame:
    """The given runs (any experiment; full ids or unique prefixes), in the given order."""
    run_ids = [full_run_id(uri, r) for r in run_ids]
    flt = "attributes.run_id IN (" + ", ".join(f"'{r}'" for r in run_ids) + ")"
    df = _search(uri, flt)
    missing = set(run_ids) - set(df["run_id"].to_list() if not df.is_empty() else [])
    if missing:
        raise SelectionError(f"no run(s) {', '.join(sorted(missing))} at {uri}")
    order = {r: i for i, r in enumerate(run_ids)}
    return df.sort(pl.col("run_id").replace_strict(order, return_dtype=pl.Int64))


def resolve(uri: str, target: str, experiment: str | None = None) -> tuple[str, pl.DataFrame]:
    """A free-form target -> (kind, job runs): a sweep parent's id, a job run's id (or a unique
    prefix of one: 4+ hex digits), a sweep id, a git commit (with ``experiment``) or an
    experiment name. A prefix matching several runs is an error, not a guess."""
    if _PREFIX.match(target) and not (target.isdigit() and _experiment_exists(uri, target)):
        ids = matching_run_ids(uri, target)
        if len(ids) == 1:
            target = ids[0]
        elif len(ids) > 1:
            full_run_id(uri, target)        # raises: ambiguous, with the candidates
    if _HEX32.match(target):
        run = _run_or_none(uri, target)
        if run is not None:
            if run.data.tags.get(ROLE_TAG) == "sweep":
                return "sweep", sweep_runs(uri, target)
            return "run", runs_by_id(uri, [target])
    if re.match(r"^[0-9a-f]{7,40}(-dirty)?$", target):
        try:
            return "commit", select(uri, experiment=experiment, commit=target)
        except SelectionError:
            pass
    if "/" in target or re.match(r"^\d\d-\d\d-\d\d$", target):
        return "sweep", select(uri, experiment=experiment, sweep=target)
    try:
        return "experiment", select(uri, experiment=target)
    except SelectionError:
        if _PREFIX.match(target):
            raise SelectionError(f"{target!r} matches no run id, git commit or experiment at {uri}") from None
        raise


def _experiment_exists(uri: str, name_or_id: str) -> bool:
    try:
        experiment_ids(uri, name_or_id)
        return True
    except SelectionError:
        return False


def artifact(uri: str, run_id: str, name: str, dst: Path) -> Path | None:
    """Download artifact ``name`` of a run into ``dst``; None if the run has no such artifact."""
    dst.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        return Path(tracking.client(uri).download_artifacts(run_id, name, str(dst)))
    except Exception:  # noqa: BLE001 - absent artifact, or a store without artifacts
        return None


def params(row: dict) -> dict:
    """{'hardware.name': 'h200', ...} from one row of a selection."""
    return {k[7:]: v for k, v in row.items() if k.startswith("params.") and v is not None}


def metrics(row: dict) -> dict:
    return {k[8:]: v for k, v in row.items() if k.startswith("metrics.") and v is not None
            and v == v}


def tags(row: dict) -> dict:
    return {k[5:]: v for k, v in row.items() if k.startswith("tags.") and v is not None}
