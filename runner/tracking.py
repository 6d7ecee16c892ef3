"""The one MLflow module: the default tracking URI, the client, logging a job, reading runs back.

Everything goes through ``MlflowClient(tracking_uri=...)`` (public API; the process-wide tracking
URI is never changed). ``import mlflow`` costs seconds: it happens inside the functions. Every
key of a job's summary is logged (numbers as metrics, text as ``summary.<name>`` tags): no list of
metrics to extend (engine.result.METRICS only says how tables show them).

Every call that writes goes through ``_retry``: SQLite stores shared by parallel jobs answer
"database is locked" under contention, and a tracking server can drop a request; both are retried
with exponential backoff before the job gives up on tracking (its files stay on disk, marked for
``simllm-sync``).
"""

import functools
import os
import random
import time
from pathlib import Path

# MLflow's usage telemetry posts to a remote endpoint from every client call: off unless the user
# has chosen otherwise (it costs time per call and cluster nodes are often offline).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

#: The default tracking store (relative to the working directory), unless $MLFLOW_TRACKING_URI is
#: set: conf/tracking/mlflow.yaml and every tool's --uri/--tracking-uri default are this.
DEFAULT_URI = "sqlite:///outputs/mlflow.db"

PARENT_ENV = "SIMLLM_MLFLOW_PARENT_RUN_ID"
EXPERIMENT_ENV = "SIMLLM_MLFLOW_EXPERIMENT_ID"
SWEEP_ENV = "SIMLLM_SWEEP_ID"
FINISHED_ENV = "SIMLLM_FINISHED_HASHES"
#: Set by the sweep callback when the tracking store could not be reached at the start: the jobs
#: then write their pending markers at once instead of each waiting for the server.
DOWN_ENV = "SIMLLM_TRACKING_DOWN"
#: Set by the batched sweeper with ``hydra.sweeper.log_params=swept``: a JSON list of the swept
#: override keys; a job then logs only the params under them (and every ``*.name``).
PARAM_KEYS_ENV = "SIMLLM_PARAM_KEYS"

#: MLflow's limit on one param value.
_MAX_PARAM = 6000
_RETRIES = 8


def default_uri() -> str:
    """$MLFLOW_TRACKING_URI, else DEFAULT_URI."""
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI


def _transient(e: Exception) -> bool:
    """SQLite lock contention between parallel jobs. (HTTP errors from a tracking server are
    already retried by MLflow's own client, MLFLOW_HTTP_REQUEST_MAX_RETRIES.)"""
    text = f"{type(e).__name__}: {e}".lower()
    return "database is locked" in text or "database table is locked" in text


def _retry(fn, *args, **kwargs):
    """Call fn, retrying transient failures with exponential backoff (0.05 s .. ~6 s, jittered)."""
    delay = 0.05
    for attempt in range(_RETRIES):
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001
            if attempt == _RETRIES - 1 or not _transient(e):
                raise
            time.sleep(delay * (1 + random.random()))
            delay *= 2


@functools.lru_cache(maxsize=8)
def _client(uri: str):
    """One MlflowClient per tracking URI per process (creating one costs tens of ms)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///"):])
        path.parent.mkdir(parents=True, exist_ok=True)
        _retry(client.search_experiments, max_results=1)  # creates and migrates a new store
        _wal(path)
    return client


def client(uri: str):
    """The MlflowClient of ``uri`` (one per URI per process)."""
    return _client(uri)


def _wal(path: Path) -> None:
    """Switch the embedded SQLite store to write-ahead logging (persistent, set once per file).

    With the default rollback journal every commit rewrites and fsyncs a journal file and writers
    lock out readers; WAL appends instead, which cut MLflow's cost per logged run here about 3x
    (create/log_batch/artifacts/terminate: ~210 -> ~70 ms wall on a loaded 2-core machine) and
    lets parallel jobs read while one writes. WAL needs the file on a local disk.
    """
    import sqlite3

    con = sqlite3.connect(path, timeout=30)
    try:
        if con.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            con.execute("PRAGMA journal_mode=WAL")
    finally:
        con.close()


def _artifact_location(uri: str) -> str | None:
    """Artifacts of the embedded SQLite store live beside it (outputs/mlartifacts)."""
    if uri.startswith("sqlite:///"):
        return (Path(uri[len("sqlite:///"):]).parent / "mlartifacts").resolve().as_uri()
    return None


def experiment_id(uri: str, name: str) -> str:
    """Id of experiment ``name`` on ``uri``, created (with its store) if missing."""
    client = _client(uri)
    exp = _retry(client.get_experiment_by_name, name)
    if exp is not None:
        return exp.experiment_id
    try:
        return _retry(client.create_experiment, name, artifact_location=_artifact_location(uri))
    except Exception:  # created meanwhile by another process
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def start_parent(uri: str, exp_id: str, name: str, tags: dict) -> str:
    """Create the parent run grouping a sweep; returns its id."""
    run = _retry(_client(uri).create_run, exp_id, run_name=name, tags=tags)
    return run.info.run_id


def end_run(uri: str, run_id: str, status: str) -> None:
    _retry(_client(uri).set_terminated, run_id, status=status)


def finish_parent(uri: str, run_id: str, metrics: dict, params: dict, tags: dict, files,
                  status: str = "FINISHED") -> None:
    """Log a parent run's own results (metrics, params, tags, files as artifacts) and end it with
    ``status``; FAILED if logging raises, so it is never left RUNNING."""
    client = _client(uri)

    def upload():
        for f in files:
            _retry(client.log_artifact, run_id, str(f))

    _log_and_end(client, run_id, metrics, params, status, upload, tags)


def _log_and_end(client, run_id: str, metrics: dict, params: dict, status: str, upload,
                 tags: dict | None = None) -> None:
    """Log ``tags``, then metrics and params in one batch, call ``upload()`` (the artifacts) and
    end the run with ``status``; if any of it raises, the run ends FAILED (never left RUNNING)
    and the error propagates. Shared by job runs and parent runs."""
    from mlflow.entities import Metric, Param

    try:
        now = int(time.time() * 1000)
        for k, v in (tags or {}).items():
            _retry(client.set_tag, run_id, k, str(v)[:5000])
        _retry(client.log_batch, run_id,
               metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
               params=[Param(k, str(v)[:_MAX_PARAM]) for k, v in params.items()])
        upload()
        _retry(client.set_terminated, run_id, status=status)
    except BaseException:
        try:
            client.set_terminated(run_id, status="FAILED")
        finally:
            raise


def finished_hashes(uri: str, exp_name: str) -> set[str]:
    """Config hashes of the FINISHED runs of an experiment (for resume)."""
    client = _client(uri)
    exp = _retry(client.get_experiment_by_name, exp_name)
    if exp is None:
        return set()
    out, token = set(), None
    while True:
        page = _retry(client.search_runs, [exp.experiment_id],
                      filter_string="attributes.status = 'FINISHED'", max_results=5000,
                      page_token=token)
        out.update(r.data.tags["simllm.config_hash"] for r in page
                   if "simllm.config_hash" in r.data.tags)
        token = page.token
        if not token:
            return out


def run_with_uid(uri: str, exp_name: str, job_uid: str):
    """The run already logged for a job directory (tag simllm.job_uid), or None."""
    client = _client(uri)
    exp = _retry(client.get_experiment_by_name, exp_name)
    if exp is None:
        return None
    runs = _retry(client.search_runs, [exp.experiment_id],
                  filter_string=f"tags.`simllm.job_uid` = '{job_uid}'", max_results=1)
    return runs[0] if runs else None


def _split_summary(summary: dict):
    metrics, tags = {}, {}
    for k, v in summary.items():
        if isinstance(v, bool):
            metrics[k] = float(v)
            tags[f"summary.{k}"] = str(v).lower()
        elif isinstance(v, (int, float)):
            if v == v:  # NaN (e.g. latency of a config that does not fit) is not logged as a metric
                metrics[k] = float(v)
        elif v is not None:
            tags[f"summary.{k}"] = str(v)[:5000]
    return metrics, tags


def log_job(uri: str, exp_name: str, run_name: str, params: dict, summary: dict, tags: dict,
            artifact_dir: Path, status: str = "FINISHED") -> str:
    """One job -> one MLflow run: params (flattened config), metrics (summary), tags, artifacts.

    Parent run and experiment come from the sweep callback via environment variables when this job
    is part of a multirun. The run ends with ``status`` (FINISHED, or FAILED for a failed job),
    or FAILED if anything here raises; it is never left RUNNING.
    """
    client = _client(uri)
    exp_id = os.environ.get(EXPERIMENT_ENV) or experiment_id(uri, exp_name)
    all_tags = dict(tags)
    parent = os.environ.get(PARENT_ENV)
    if parent:
        all_tags.setdefault("mlflow.parentRunId", parent)
    if os.environ.get(SWEEP_ENV):
        all_tags.setdefault("simllm.sweep_id", os.environ[SWEEP_ENV])
    metrics, summary_tags = _split_summary(summary)
    all_tags.update(summary_tags)
    run = _retry(client.create_run, exp_id, run_name=run_name, tags=all_tags)
    rid = run.info.run_id
    _log_and_end(client, rid, metrics, params, status,
                 lambda: _retry(_log_artifacts, client, uri, run.info.artifact_uri, rid, artifact_dir))
    return rid


def _log_artifacts(client, uri: str, artifact_uri: str, run_id: str, local_dir: Path) -> None:
    """Upload a directory to the run's artifact location.

    ``MlflowClient.log_artifacts`` first reads the whole run back (params, metrics, tags) only to
    learn its artifact URI, which ``create_run`` already returned: about 5 ms of a job's ~40 ms
    on SQLite. The repository is the one the client would pick (``get_artifact_repository`` with
    the tracking URI, which resolves ``mlflow-artifacts:`` on a server); Databricks URIs, which
    need the client's profile handling, keep the client path.
    """
    if uri.startswith("databricks") or artifact_uri.startswith("dbfs:"):
        client.log_artifacts(run_id, str(local_dir))
        return
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    get_artifact_repository(artifact_uri, tracking_uri=uri).log_artifacts(str(local_dir))


def _experiment_ids(c) -> list[str]:
    """Ids of all active experiments of the store (paged)."""
    out, token = [], None
    while True:
        page = _retry(c.search_experiments, max_results=1000, page_token=token)
        out += [e.experiment_id for e in page]
        token = page.token
        if not token:
            return out


def search_runs(uri: str, filter_string: str = "", experiment_ids=None) -> list[dict]:
    """Runs matching ``filter_string`` (MLflow's search syntax) in ``experiment_ids`` (default: all
    experiments), newest first, as flat rows: run_id, experiment_id, status, artifact_uri,
    start_time / end_time (ms since the epoch), ``params.*``, ``metrics.*`` (latest value),
    ``tags.*``."""
    c = _client(uri)
    ids = list(experiment_ids) if experiment_ids else _experiment_ids(c)
    if not ids:
        return []
    rows, token = [], None
    while True:
        page = _retry(c.search_runs, ids, filter_string=filter_string, max_results=5000,
                      order_by=["attributes.start_time DESC"], page_token=token)
        for r in page:
            i, d = r.info, r.data
            row = {"run_id": i.run_id, "experiment_id": i.experiment_id, "status": i.status,
                   "artifact_uri": i.artifact_uri, "start_time": i.start_time, "end_time": i.end_time}
            row.update({f"params.{k}": v for k, v in d.params.items()})
            row.update({f"metrics.{k}": v for k, v in d.metrics.items()})
            row.update({f"tags.{k}": v for k, v in d.tags.items()})
            rows.append(row)
        token = page.token
        if not token:
            return rows
