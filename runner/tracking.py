"""MLflow logging of one job (imported lazily: ``import mlflow`` costs seconds)."""

import os
from pathlib import Path

PARENT_ENV = "SIMLLM_MLFLOW_PARENT_RUN_ID"
EXPERIMENT_ENV = "SIMLLM_MLFLOW_EXPERIMENT_ID"
SWEEP_ENV = "SIMLLM_SWEEP_ID"

#: MLflow's limit on one param value.
_MAX_PARAM = 6000


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=uri)


def _artifact_location(uri: str) -> str | None:
    """Artifacts of the embedded SQLite store live beside it (outputs/mlartifacts)."""
    if uri.startswith("sqlite:///"):
        return (Path(uri[len("sqlite:///"):]).parent / "mlartifacts").resolve().as_uri()
    return None


def experiment_id(uri: str, name: str) -> str:
    """Id of experiment ``name`` on ``uri``, created (with its store) if missing."""
    client = _client(uri)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    try:
        return client.create_experiment(name, artifact_location=_artifact_location(uri))
    except Exception:  # created meanwhile by another process
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def start_parent(uri: str, exp_id: str, name: str, tags: dict) -> str:
    """Create the parent run grouping a sweep; returns its id."""
    client = _client(uri)
    run = client.create_run(exp_id, run_name=name, tags=tags)
    return run.info.run_id


def end_run(uri: str, run_id: str, status: str) -> None:
    _client(uri).set_terminated(run_id, status=status)


def _split_summary(summary: dict):
    metrics, tags = {}, {}
    for k, v in summary.items():
        if isinstance(v, bool):
            metrics[k] = float(v)
            tags[f"summary.{k}"] = str(v).lower()
        elif isinstance(v, (int, float)):
            if v == v:  # NaN (e.g. latency of a config that does not fit) is not logged as a metric
                metrics[k] = float(v)
        else:
            tags[f"summary.{k}"] = str(v)[:5000]
    return metrics, tags


def log_job(uri: str, exp_name: str, run_name: str, params: dict, summary: dict, tags: dict,
            artifact_dir: Path, status: str = "FINISHED") -> str:
    """One job -> one MLflow run: params (flattened config), metrics (summary), tags, artifacts.

    Parent run and experiment come from the sweep callback via environment variables when this job
    is part of a multirun. The run ends FINISHED, or FAILED if anything here raises.
    """
    import time

    from mlflow.entities import Metric, Param, RunTag

    client = _client(uri)
    exp_id = os.environ.get(EXPERIMENT_ENV) or experiment_id(uri, exp_name)
    all_tags = dict(tags)
    parent = os.environ.get(PARENT_ENV)
    if parent:
        all_tags["mlflow.parentRunId"] = parent
    if os.environ.get(SWEEP_ENV):
        all_tags["simllm.sweep_id"] = os.environ[SWEEP_ENV]
    metrics, summary_tags = _split_summary(summary)
    all_tags.update(summary_tags)
    run = client.create_run(exp_id, run_name=run_name, tags=all_tags)
    rid = run.info.run_id
    try:
        now = int(time.time() * 1000)
        client.log_batch(
            rid,
            metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
            params=[Param(k, str(v)[:_MAX_PARAM]) for k, v in params.items()],
        )
        client.log_artifacts(rid, str(artifact_dir))
        client.set_terminated(rid, status=status)
    except BaseException:
        client.set_terminated(rid, status="FAILED")
        raise
    return rid
