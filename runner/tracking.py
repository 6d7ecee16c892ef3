"""The one MLflow module: the default tracking URI, the client, logging a job, reading runs back.

Everything goes through ``MlflowClient(tracking_uri=...)`` (public API; the process-wide tracking
URI is never changed). ``import mlflow`` costs seconds: it happens inside the functions. Every
key of a job's summary is logged (numbers as metrics, text as ``summary.<name>`` tags): no list of
metrics to extend (engine.result.METRICS only says how tables show them).

Every call that writes goes through ``_retry``: SQLite stores shared by parallel jobs answer
"database is locked" under contention, and a tracking server can drop a request; both are retried
with exponential backoff before the job gives up on tracking (its files stay on disk, marked for
``simllm-sync``).

A store that cannot be reached is found out once, quickly: ``probe`` (one request, a few
seconds' timeout, no retries) runs once per sweep (the callback) or per single-run process, and
MLflow's own HTTP retries are bounded here (HTTP_BUDGET: 2 retries, backoff factor 1, 10 s
timeout unless the user set MLFLOW_HTTP_REQUEST_*; MLflow's defaults wait ~4 minutes per call). A job of a sweep
whose store went away leaves ``.tracking_down.json`` in the sweep directory; the later jobs read
it (``down_reason``) and write their pending markers at once, without trying.
"""

import contextlib
import functools
import json
import os
import random
import sys
import time
from pathlib import Path

# MLflow's usage telemetry posts to a remote endpoint from every client call: off unless the user
# has chosen otherwise (it costs time per call and cluster nodes are often offline).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MlflowClient.set_terminated reads the whole run back from a server only to print its URL
# ("View run ... at"): a third of a run's ending time against `mlflow server`, and one line per run.
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
#: The tracking budget: bounded HTTP retries and timeout. MLflow's defaults (7 retries, backoff
#: factor 2, 120 s per request) keep a job ~2-4 minutes on each call to a dead server; with these a
#: call to a server that is gone (connection refused) gives up after ~2 s, and one to a server
#: that accepts but never answers after 3 x 10 s + 2 s of backoff. Only the first job of a sweep
#: pays it (the circuit breaker: DOWN_MARKER). A user's own settings win.
HTTP_BUDGET = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
               "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
for _k, _v in HTTP_BUDGET.items():
    os.environ.setdefault(_k, _v)

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
#: Set by the sweep callback when its probe reached the store: the jobs do not probe again.
PROBED_ENV = "SIMLLM_TRACKING_PROBED"
#: Left in the sweep directory by the first job that found the store unreachable mid-sweep (or by
#: the callback): {"uri", "error"}. Later jobs of the sweep do not try the store.
DOWN_MARKER = ".tracking_down.json"
#: Seconds the probe waits for the store to answer ($SIMLLM_TRACKING_PROBE_TIMEOUT_S).
PROBE_TIMEOUT_S = 3.0

#: MLflow's limit on one param value.
_MAX_PARAM = 6000
_RETRIES = 8


#: Depth of ``uninterrupted`` blocks running now, and the signal that arrived inside one.
_HELD = 0
_HELD_SIGNAL: list = []


def stop_exception(signum: int) -> BaseException:
    """What a stop signal raises (runner.app._stop): KeyboardInterrupt for SIGINT, else
    SystemExit with status 128 + the signal's number, as the default action would give."""
    import signal

    return KeyboardInterrupt() if signum == signal.SIGINT else SystemExit(128 + signum)


def hold_signal(signum: int) -> bool:
    """Called by the stop handler: inside an ``uninterrupted`` block, keep the signal for the
    block's end (True); else False (the handler raises at once)."""
    if _HELD:
        _HELD_SIGNAL.append(signum)
        return True
    return False


@contextlib.contextmanager
def uninterrupted():
    """Hold SIGTERM/SIGINT while a run is created, logged and ended: a signal between MLflow's
    commit of ``create_run`` and the code that would end the run could otherwise leave it
    RUNNING. The signal is raised when the outermost block ends (a second one stops the
    process at once: the handler is reset after the first)."""
    global _HELD
    _HELD += 1
    try:
        yield
    finally:
        _HELD -= 1
        if not _HELD and _HELD_SIGNAL:
            signum = _HELD_SIGNAL[0]
            _HELD_SIGNAL.clear()
            raise stop_exception(signum)


def default_uri() -> str:
    """$MLFLOW_TRACKING_URI, else DEFAULT_URI."""
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI


class TrackingDown(ConnectionError):
    """The tracking store is known to be unreachable (``announced``: already reported once)."""

    def __init__(self, reason: str, announced: bool = True):
        super().__init__(reason)
        self.announced = announced


#: Default ports of the database schemes a probe opens a TCP connection to.
_DB_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
#: Probe results of this process, by URI (a single run probes once).
_PROBED: dict = {}


def probe(uri: str, timeout_s: float | None = None) -> str | None:
    """One quick reachability check of a tracking store: None when it answers, else the reason.

    http(s): one GET of the experiments-search endpoint with a ``timeout_s`` timeout (default
    $SIMLLM_TRACKING_PROBE_TIMEOUT_S or 3 s) and no retries; any HTTP answer but 502/503/504 (a
    proxy whose backend is gone) counts as reachable, as does a TLS error (the server answered;
    MLflow's own client then reports it). A database URI (postgresql, mysql, mssql): a TCP connect
    to its host and port. sqlite: opening (creating, migrating) the store. Anything else: None.
    """
    from urllib.parse import urlsplit

    if timeout_s is None:
        timeout_s = float(os.environ.get("SIMLLM_TRACKING_PROBE_TIMEOUT_S") or PROBE_TIMEOUT_S)
    scheme = uri.split(":", 1)[0].lower()
    try:
        if scheme in ("http", "https"):
            import requests

            url = uri.rstrip("/") + "/api/2.0/mlflow/experiments/search"
            try:
                r = requests.get(url, params={"max_results": 1}, timeout=timeout_s)
            except requests.exceptions.SSLError:
                return None
            if r.status_code in (502, 503, 504):
                return f"HTTP {r.status_code} from {uri}"
            return None
        base = scheme.split("+", 1)[0]
        if base in _DB_PORTS:
            import socket

            parts = urlsplit(uri)
            with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or _DB_PORTS[base]),
                                          timeout=timeout_s):
                return None
        if scheme == "sqlite":
            _client(uri)
        return None
    except Exception as e:  # noqa: BLE001 - any failure to reach it is the answer
        return f"{type(e).__name__}: {e}"[:500]


def _sweep_dir() -> Path | None:
    d = os.environ.get(SWEEP_ENV)
    return Path(d) if d else None


def down_reason(uri: str) -> "TrackingDown | None":
    """Is the store at ``uri`` known to be unreachable? A TrackingDown to raise, else None.

    In a sweep: the callback's probe failed ($SIMLLM_TRACKING_DOWN) or an earlier job left
    DOWN_MARKER in the sweep directory (both already reported: ``announced``). Elsewhere (a
    single run, a sweep whose callback did not probe this URI): one ``probe`` per process and URI,
    reported by the caller (``announced=False``)."""
    if os.environ.get(DOWN_ENV):
        return TrackingDown(f"tracking unavailable at sweep start: {os.environ[DOWN_ENV]}")
    sweep = _sweep_dir()
    if sweep is not None and (sweep / DOWN_MARKER).exists():
        try:
            err = json.loads((sweep / DOWN_MARKER).read_text()).get("error", "?")
        except (OSError, ValueError):
            err = "?"
        return TrackingDown(f"tracking became unavailable during the sweep: {err}")
    if os.environ.get(PROBED_ENV) == uri:
        return None
    if uri not in _PROBED:
        _PROBED[uri] = probe(uri)
    return TrackingDown(_PROBED[uri], announced=False) if _PROBED[uri] else None


def mark_down(sweep_dir: Path, uri: str, error: str) -> bool:
    """Leave DOWN_MARKER in ``sweep_dir``; True if this call created it (the one to report it)."""
    try:
        fd = os.open(sweep_dir / DOWN_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    except OSError:
        return True
    with os.fdopen(fd, "w") as f:
        json.dump({"uri": uri, "error": error[:500]}, f)
    return True


def clear_down(sweep_dir: Path) -> None:
    (Path(sweep_dir) / DOWN_MARKER).unlink(missing_ok=True)


def unreachable(e: BaseException) -> bool:
    """Does this error say the store cannot be reached (refused, timed out, name not resolved,
    retries exhausted, 502-504), rather than that one request was wrong?"""
    seen = 0
    while e is not None and seen < 8:
        name = type(e).__name__
        text = str(e).lower()
        if isinstance(e, (ConnectionError, TimeoutError)) or name in (
                "ConnectionError", "ConnectTimeout", "ReadTimeout", "Timeout", "MaxRetryError",
                "NewConnectionError", "ProtocolError", "RemoteDisconnected"):
            return True
        if any(t in text for t in ("max retries exceeded", "connection refused", "failed to establish",
                                   "timed out", "name or service not known", "connection aborted",
                                   "temporary failure in name resolution", "too many 50",
                                   "could not connect to server", "connection reset")):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


def first_report(e: BaseException, uri: str = "") -> bool:
    """Should a job say that its logging failed with ``e``? Not when the failure was already
    reported for its sweep (a TrackingDown announced); a store found unreachable mid-sweep is
    reported by the job that finds it first (which leaves DOWN_MARKER for the others)."""
    if isinstance(e, TrackingDown):
        return not e.announced
    sweep = _sweep_dir()
    if sweep is None or not unreachable(e):
        return True
    return mark_down(sweep, uri, f"{type(e).__name__}: {e}")


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


#: Seconds a process waits for another one to finish creating or migrating an embedded store
#: ($SIMLLM_STORE_LOCK_TIMEOUT_S; a fresh store's migrations take seconds, tens on a loaded host).
STORE_LOCK_TIMEOUT_S = 300.0


@functools.lru_cache(maxsize=8)
def _client(uri: str):
    """One MlflowClient per tracking URI per process (creating one costs tens of ms; the first
    one also imports MLflow, with the cyclic collector off: ``runner.heap.loading``).

    An embedded SQLite store is opened under a lock file beside it (``mlflow.db.lock``): MLflow
    creates and migrates a new store on first use, and two processes doing that at once corrupt
    it (``duplicate column name``, ``_alembic_tmp_* already exists``). Whoever holds the lock
    opens the store; MLflow checks its schema again there, so a process that waited finds it
    created and migrated and only reads it."""
    from runner.heap import loading

    with loading():
        return _open_client(uri)


def _open_client(uri: str):
    from mlflow.tracking import MlflowClient

    if not uri.startswith("sqlite:///"):
        return MlflowClient(tracking_uri=uri)
    from filelock import FileLock, Timeout

    path = Path(uri[len("sqlite:///"):])
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = Path(f"{path}.lock")
    wait = float(os.environ.get("SIMLLM_STORE_LOCK_TIMEOUT_S") or STORE_LOCK_TIMEOUT_S)
    try:
        with FileLock(lock, timeout=wait):
            client = MlflowClient(tracking_uri=uri)   # opens the store: creates and migrates it
            _retry(client.search_experiments, max_results=1)
            _wal(path)
    except Timeout:
        raise TimeoutError(f"{lock}: another process held the store's creation lock for more "
                           f"than {wait:g} s (SIMLLM_STORE_LOCK_TIMEOUT_S); expected it to "
                           "finish creating the store") from None
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


#: Tags naming the process that opened a run (host, PID and the PID's start time): a run left
#: RUNNING by a process that is gone is ended KILLED by ``end_dead_runs``.
HOST_TAG, PID_TAG, PID_START_TAG = "simllm.host", "simllm.pid", "simllm.pid_start"


def _pid_start(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat field 22), or "" where
    /proc does not say (not Linux, or no such process): tells a reused PID from the one tagged."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def owner_tags() -> dict:
    """The host/PID tags of a run this process opens."""
    import socket

    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()), PID_START_TAG: _pid_start(os.getpid())}


def owner_alive(host: str | None, pid, pid_start: str | None = None) -> bool | None:
    """Is the process named by these tags still running? None when it cannot be told (another
    host, no PID tag)."""
    import socket

    if not host or host != socket.gethostname():
        return None
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass   # alive, another user's
    return not pid_start or _pid_start(pid) in ("", pid_start)


#: Runs per search_runs request to a tracking server (http/https) when runs are read in bulk
#: (resume's finished runs, the RUNNING runs to end, runs by tag, search_runs). A run comes back
#: with every param (the flattened config: hundreds), so one request for a thousand runs outlasts
#: the HTTP budget's 10 s timeout (benchmarks/bench_mlflow_scale.py: the resume's look-up at
#: 1,000 runs did); pages of this size keep each request short, the total still grows with the
#: experiment. A local store (SQLite) has no such timeout and reads in pages of LOCAL_PAGE.
SEARCH_PAGE = 100
LOCAL_PAGE = 5000


def _page(uri: str) -> int:
    return SEARCH_PAGE if uri.startswith(("http://", "https://")) else LOCAL_PAGE


def end_dead_runs(uri: str, exp_id: str) -> list[str]:
    """End KILLED every RUNNING run of experiment ``exp_id`` opened by a process of this host that
    is gone (killed: SIGKILL, power loss); their ids. Runs of live processes and of other hosts
    are left alone."""
    client = _client(uri)
    out, token = [], None
    while True:
        page = _retry(client.search_runs, [exp_id], filter_string="attributes.status = 'RUNNING'",
                      max_results=_page(uri), page_token=token)
        for r in page:
            t = r.data.tags
            if owner_alive(t.get(HOST_TAG), t.get(PID_TAG), t.get(PID_START_TAG)) is False:
                _retry(client.set_terminated, r.info.run_id, status="KILLED")
                out.append(r.info.run_id)
        token = page.token
        if not token:
            return out


def start_parent(uri: str, exp_id: str, name: str, tags: dict) -> str:
    """Create the parent run grouping a sweep (tagged with this process: ``owner_tags``); its id."""
    run = _retry(_client(uri).create_run, exp_id, run_name=name, tags={**tags, **owner_tags()})
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

    with uninterrupted():
        _log_and_end(client, run_id, metrics, params, status, upload, tags)


def _log_and_end(client, run_id: str, metrics: dict, params: dict, status: str, upload,
                 tags: dict | None = None) -> None:
    """Log metrics, params and ``tags`` in one batch, call ``upload()`` (the artifacts) and end
    the run with ``status``; if any of it raises, the run ends FAILED (never left RUNNING) and the
    error propagates. Shared by job runs and parent runs."""
    from mlflow.entities import Metric, Param, RunTag

    try:
        now = int(time.time() * 1000)
        _retry(client.log_batch, run_id,
               metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
               params=[Param(k, str(v)[:_MAX_PARAM]) for k, v in params.items()],
               tags=[RunTag(k, str(v)[:5000]) for k, v in (tags or {}).items()])
        upload()
        _retry(client.set_terminated, run_id, status=status)
    except BaseException as e:
        try:   # stopped (KeyboardInterrupt/SystemExit outside an ``uninterrupted`` block): KILLED
            client.set_terminated(run_id, status="KILLED" if isinstance(e, (KeyboardInterrupt, SystemExit))
                                  else "FAILED")
        finally:
            raise


def finished_hashes(uri: str, exp_name: str) -> set[str]:
    """Config hashes of the FINISHED runs of an experiment (for resume). Runs left RUNNING by
    processes of this host that are gone are ended KILLED first (``end_dead_runs``)."""
    down = down_reason(uri)
    if down:
        raise down
    client = _client(uri)
    exp = _retry(client.get_experiment_by_name, exp_name)
    if exp is None:
        return set()
    ended = end_dead_runs(uri, exp.experiment_id)
    if ended:
        print(f"simllm: resume: {len(ended)} run(s) left RUNNING by killed processes ended KILLED",
              file=sys.stderr)
    out, token = set(), None
    while True:
        page = _retry(client.search_runs, [exp.experiment_id],
                      filter_string="attributes.status = 'FINISHED'", max_results=_page(uri),
                      page_token=token)
        out.update(r.data.tags["simllm.config_hash"] for r in page
                   if "simllm.config_hash" in r.data.tags)
        token = page.token
        if not token:
            return out


def holds(run, summary: dict) -> bool:
    """Does this MLflow run hold every metric a job's ``summary`` logs (``_split_summary``)?"""
    return set(_split_summary(summary)[0]) <= set(run.data.metrics)


def run_with_uid(uri: str, exp_name: str, job_uid: str, summary: dict | None = None):
    """The FINISHED run already logged for a job directory (tag simllm.job_uid) holding the
    metrics of its ``summary``, or None. A FAILED, RUNNING or KILLED run with the uid (an upload
    that broke off), or a FINISHED one missing metrics, does not count as logged."""
    client = _client(uri)
    exp = _retry(client.get_experiment_by_name, exp_name)
    if exp is None:
        return None
    runs = _retry(client.search_runs, [exp.experiment_id],
                  filter_string=f"tags.`simllm.job_uid` = '{job_uid}' and attributes.status = 'FINISHED'",
                  max_results=10)
    return next((r for r in runs if summary is None or holds(r, summary)), None)


def runs_tagged(uri: str, exp_id: str, key: str, value: str) -> list:
    """All runs of experiment ``exp_id`` whose tag ``key`` is ``value`` (paged; MLflow Run objects)."""
    client = _client(uri)
    value = value.replace("'", "\\'")
    out, token = [], None
    while True:
        page = _retry(client.search_runs, [exp_id], filter_string=f"tags.`{key}` = '{value}'",
                      max_results=_page(uri), page_token=token)
        out += list(page)
        token = page.token
        if not token:
            return out


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
    exp_id = os.environ.get(EXPERIMENT_ENV) or experiment_id(uri, exp_name)
    all_tags = dict(tags)
    parent = os.environ.get(PARENT_ENV)
    if parent:
        all_tags.setdefault("mlflow.parentRunId", parent)
    if os.environ.get(SWEEP_ENV):
        all_tags.setdefault("simllm.sweep_id", os.environ[SWEEP_ENV])
    return log_run(uri, exp_id, run_name, params, summary, all_tags, artifact_dir, status)


def log_run(uri: str, exp_id: str, run_name: str, params: dict, summary: dict, tags: dict,
            artifact_dir: Path, status: str = "FINISHED", run_id: str | None = None) -> str:
    """Log one run in experiment ``exp_id`` exactly as given (no environment read): a new run, or
    ``run_id``, an existing run of the same job to complete (an upload that broke off: its params
    have the same values, artifacts are written again). Four requests and the artifacts; the run
    ends with ``status``, or FAILED if anything raises."""
    with uninterrupted():
        return _log_run(uri, exp_id, run_name, params, summary, tags, artifact_dir, status, run_id)


def _log_run(uri, exp_id, run_name, params, summary, tags, artifact_dir, status, run_id) -> str:
    client = _client(uri)
    metrics, summary_tags = _split_summary(summary)
    all_tags = {**tags, **summary_tags}
    if run_id is None:
        run = _retry(client.create_run, exp_id, run_name=run_name, tags={**all_tags, **owner_tags()})
        later_tags = None
    else:
        run = _retry(client.get_run, run_id)
        later_tags = {**all_tags, **owner_tags(), "mlflow.runName": run_name}
    rid = run.info.run_id
    _log_and_end(client, rid, metrics, params, status,
                 lambda: _retry(_log_artifacts, client, uri, run.info.artifact_uri, rid, artifact_dir),
                 later_tags)
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
        page = _retry(c.search_runs, ids, filter_string=filter_string, max_results=_page(uri),
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
