"""Where the CPU of a tracked ``simllm`` run goes on MLflow's side: run by bench_startup.py as a
fresh process per repetition, it prints each part's CPU-s (``time.process_time``) and wall-s as
JSON, with the numbers of params, metrics and tags the run logs.

    python benchmarks/_tracking_parts.py URI JOB_DIR [--collector-on]

URI: an existing SQLite store (the benchmark's warm-up created and migrated it); JOB_DIR: a job
directory a tracked run wrote (summary.json, config.yaml, ...). The parts, in order, the store's
through runner.tracking as a job uses it:
  import mlflow        ``import mlflow`` with the cyclic collector off and then ``gc.freeze()``, as
                       ``runner.tracking._client`` has it (runner.heap.loading), and the compiled
                       dataclass methods and regular expressions read back (runner.compiled);
                       ``--collector-on`` leaves it on
  store set-up         the client of an existing store: MLflow's SQLAlchemy store modules, the
                       engine, the schema check against alembic's head revision, one query
  experiment look-up   ``experiment_id`` (get_experiment_by_name)
  log, batched         what a job logs (runner.job.run_fields): create_run with the tags, one
                       log_batch of params and metrics, the artifacts, set_terminated
  log, a call per value  the same run logged with log_param / log_metric / set_tag per value
"""

import gc
import json
import os
import sys
import time
from pathlib import Path

# as runner.app sets it before numpy loads (here with pandas, under mlflow): one OpenBLAS thread
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
if not os.environ.get("PYTHONPATH"):   # bench_startup.py puts the checkout measured there
    sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

try:   # as runner.app installs it before anything loads (a checkout that has it)
    from runner import compiled
except ImportError:
    pass
else:
    compiled.install()


def main() -> None:
    uri, job_dir = sys.argv[1], Path(sys.argv[2])
    collector_on = "--collector-on" in sys.argv[3:]
    from omegaconf import OmegaConf

    from runner import job, outputs, tracking

    doc = json.loads((job_dir / outputs.SUMMARY).read_text())
    tracking_cfg = OmegaConf.create({"uri": uri, "experiment": "startup-parts", "tags": {}})
    fields = job.run_fields(tracking_cfg, job_dir, doc)
    out = {}
    t = (time.process_time(), time.perf_counter())

    def lap(name):
        nonlocal t
        now = (time.process_time(), time.perf_counter())
        out[name] = {"cpu_s": now[0] - t[0], "wall_s": now[1] - t[1]}
        t = now

    if not collector_on:
        gc.disable()
    import mlflow  # noqa: F401
    if not collector_on:
        gc.freeze()
        gc.enable()
    lap("import mlflow")
    client = tracking.client(uri)
    lap("store set-up")
    exp = tracking.experiment_id(uri, "startup-parts")
    lap("experiment look-up")
    tracking.log_run(uri, exp, fields["run_name"], fields["params"], fields["summary"], fields["tags"],
                     job_dir)
    lap("log, batched")
    metrics, summary_tags = tracking._split_summary(fields["summary"])
    rid = client.create_run(exp, run_name=fields["run_name"]).info.run_id
    for k, v in fields["params"].items():
        client.log_param(rid, k, str(v)[:6000])
    for k, v in metrics.items():
        client.log_metric(rid, k, v)
    for k, v in {**fields["tags"], **summary_tags, **tracking.owner_tags()}.items():
        client.set_tag(rid, k, str(v)[:5000])
    client.log_artifacts(rid, str(job_dir))
    client.set_terminated(rid)
    lap("log, a call per value")
    out["params"], out["metrics"] = len(fields["params"]), len(metrics)
    out["tags"] = len(fields["tags"]) + len(summary_tags)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
