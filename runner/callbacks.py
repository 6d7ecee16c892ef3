"""Hydra callback that groups a multirun in MLflow and reports it at the end."""

import json
import os
import sys
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from runner import outputs


class SweepTracking(Callback):
    """Runs in the launching process (whatever the launcher).

    on_multirun_start: create the store and experiment once (parallel first-time creation races
    in MLflow's schema migration), open a parent run, fetch the finished config hashes when
    ``resume=true``, and hand all of it to the jobs through environment variables.
    on_multirun_end: print a one-screen summary (done / failed / skipped, with the failing
    overrides), close the parent (FAILED if any job failed) and exit non-zero if any failed.
    """

    def __init__(self) -> None:
        self.parent = None

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        from runner import tracking

        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        os.environ[tracking.SWEEP_ENV] = str(sweep_dir)
        if not config.tracking.enabled:
            return
        uri, exp_name = config.tracking.uri, config.tracking.experiment
        try:
            exp = tracking.experiment_id(uri, exp_name)
            os.environ[tracking.EXPERIMENT_ENV] = exp
            if config.get("resume"):
                path = sweep_dir / ".finished_hashes.json"
                path.write_text(json.dumps(sorted(tracking.finished_hashes(uri, exp_name))))
                os.environ[tracking.FINISHED_ENV] = str(path.resolve())
            self.parent = tracking.start_parent(
                uri, exp, f"sweep:{sweep_dir.name}",
                {"simllm.sweep_id": str(sweep_dir), "simllm.role": "sweep"})
            os.environ[tracking.PARENT_ENV] = self.parent
        except Exception as e:  # noqa: BLE001
            os.environ[tracking.DOWN_ENV] = f"{type(e).__name__}: {e}"[:500]
            print(f"simllm: warning: MLflow unavailable at {uri} ({e}); results stay in the job "
                  "directories; upload them later with `simllm-sync`", file=sys.stderr)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from engine.result import metric
        from runner import tracking
        from runner.job import PENDING, SKIPPED, print_rows

        sweep_dir = Path(config.hydra.sweep.dir)
        done, failed, skipped, pending = [], [], [], 0
        for d in sorted((p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()),
                        key=lambda p: int(p.name)):
            pending += (d / PENDING).exists()
            if (d / outputs.ERROR).exists():
                over = _overrides(d)
                reason = (d / outputs.ERROR).read_text().strip().splitlines()[-1]
                failed.append(f"  job {d.name} FAILED [{over}]: {reason}")
            elif (d / SKIPPED).exists():
                skipped.append(d.name)
            elif (d / outputs.SUMMARY).exists():
                doc = json.loads((d / outputs.SUMMARY).read_text())
                s = doc["summary"]
                row = {"job": d.name, "overrides": " ".join(doc.get("overrides", []))}
                for m in map(metric, _MULTIRUN_COLUMNS):
                    row[m.label] = s.get(m.name) if m.text else _f(s.get(m.name), m.digits)
                done.append(row)
        print(f"\nsimllm multirun: {len(done)} done, {len(failed)} failed, {len(skipped)} skipped "
              f"({sweep_dir})")
        if len(done) <= 40:
            print_rows(done)
        for line in failed:
            print(line)
        if pending:
            print(f"  {pending} job(s) not yet in MLflow: run `simllm-sync {sweep_dir}`")
        if self.parent:
            try:
                tracking.end_run(config.tracking.uri, self.parent, "FAILED" if failed else "FINISHED")
            except Exception as e:  # noqa: BLE001
                print(f"simllm: warning: could not close the sweep's MLflow run: {e}", file=sys.stderr)
        for k in (tracking.PARENT_ENV, tracking.EXPERIMENT_ENV, tracking.SWEEP_ENV,
                  tracking.FINISHED_ENV, tracking.DOWN_ENV):
            os.environ.pop(k, None)
        if failed:
            sys.exit(1)


def _overrides(job_dir: Path) -> str:
    """The job's overrides, from Hydra's record in .hydra/overrides.yaml."""
    path = job_dir / ".hydra" / "overrides.yaml"
    if not path.exists():
        return "?"
    from omegaconf import OmegaConf

    return " ".join(str(o) for o in OmegaConf.load(path))


#: The columns of the multirun summary (labels and decimals from engine.result.METRICS).
_MULTIRUN_COLUMNS = ("ttft_ms_p50", "tpot_ms_p50", "throughput_tok_s", "bound")


def _f(v, nd=2):
    return "n/a" if v is None else f"{v:,.{nd}f}"
