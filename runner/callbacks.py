"""Hydra callback that groups a multirun in MLflow and reports it at the end."""

import json
import os
import sys
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from runner import outputs


class SweepTracking(Callback):
    """on_multirun_start: create the store/experiment once and a parent run; hand their ids to the
    jobs through the environment. on_multirun_end: print a one-screen summary of the jobs, close
    the parent (FAILED if any job failed) and exit non-zero if any job failed."""

    def __init__(self) -> None:
        self.parent = None

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        from runner import tracking

        sweep_dir = Path(config.hydra.sweep.dir)
        os.environ[tracking.SWEEP_ENV] = str(sweep_dir)
        if not config.tracking.enabled:
            return
        try:
            exp = tracking.experiment_id(config.tracking.uri, config.tracking.experiment)
            os.environ[tracking.EXPERIMENT_ENV] = exp
            self.parent = tracking.start_parent(
                config.tracking.uri, exp, f"sweep:{sweep_dir.name}",
                {"simllm.sweep_id": str(sweep_dir), "simllm.role": "sweep"})
            os.environ[tracking.PARENT_ENV] = self.parent
        except Exception as e:  # noqa: BLE001
            print(f"simllm: warning: MLflow unavailable at {config.tracking.uri} ({e}); "
                  "results stay in the job directories", file=sys.stderr)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from runner import tracking
        from runner.job import print_rows

        sweep_dir = Path(config.hydra.sweep.dir)
        done, failed = [], []
        for d in sorted((p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()),
                        key=lambda p: int(p.name)):
            if (d / outputs.SUMMARY).exists():
                doc = json.loads((d / outputs.SUMMARY).read_text())
                s = doc["summary"]
                done.append({"job": d.name, "overrides": " ".join(doc.get("overrides", [])),
                             "TTFT ms": _f(s.get("ttft_ms_p50")), "TPOT ms": _f(s.get("tpot_ms_p50")),
                             "tok/s": _f(s.get("throughput_tok_s"), 0), "bound": s.get("bound")})
            elif (d / outputs.ERROR).exists():
                failed.append((d.name, (d / outputs.ERROR).read_text().strip().splitlines()[-1]))
        print(f"\nsimllm multirun: {len(done)} done, {len(failed)} failed  ({sweep_dir})")
        print_rows(done)
        for num, reason in failed:
            print(f"  job {num} FAILED: {reason}")
        if self.parent:
            try:
                tracking.end_run(config.tracking.uri, self.parent, "FAILED" if failed else "FINISHED")
            except Exception as e:  # noqa: BLE001
                print(f"simllm: warning: could not close the sweep's MLflow run: {e}", file=sys.stderr)
        for k in (tracking.PARENT_ENV, tracking.EXPERIMENT_ENV, tracking.SWEEP_ENV):
            os.environ.pop(k, None)
        if failed:
            sys.exit(1)


def _f(v, nd=2):
    return "n/a" if v is None else f"{v:,.{nd}f}"
