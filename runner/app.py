"""The ``simllm`` console script: the Hydra app.

    simllm                                   # default experiment, prints a short table
    simllm -m hardware=h100_sxm,h200 partition=tp1,tp2
"""

import sys
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from engine.errors import SpecError
from runner import experiments, schema
from runner.job import record_failure, run_job


def share_config_store() -> None:
    """Let copies of Hydra's config repository share the one ConfigStore instead of copying it.

    Every compose (twice per run, once per basic-sweeper job, 123 times for ``--help``) builds a
    ``CachingConfigRepository`` that deep-copies its sources, and the structured-config source
    holds the ConfigStore singleton with every generated schema: that copy was ~70 % of a
    compose here (3.9 CPU-s of ``simllm --help``). The copy protects nothing: ``ConfigStore.load``
    already hands out a deep copy of the node it loads, and the store is a process-wide
    singleton (Hydra >= 1.3.3 stopped holding it on the source for this reason, facebookresearch/
    hydra#2928). Idempotent; composed configs are unchanged.
    """
    if "__deepcopy__" not in ConfigStore.__dict__:
        ConfigStore.__deepcopy__ = lambda self, memo: self


share_config_store()
schema.register()
experiments.register()


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    execute(cfg, Path(hc.runtime.output_dir), list(hc.overrides.task), multirun=multirun,
            job_num=hc.job.num if multirun else 0)


def execute(cfg: DictConfig, job_dir: Path, overrides: list[str], multirun: bool,
            job_num: int = 0) -> None:
    """One job with failure isolation (also called by the batched sweeper, once per job)."""
    try:
        run_job(cfg, job_dir, overrides)
    except SpecError as e:
        # bad input: a single run stops here with one line; in a multirun the job is recorded
        # as a FAILED run and the others go on
        record_failure(cfg, job_dir, e, overrides, track=multirun)
        print(f"simllm: error: {e}", file=sys.stderr)
        if not multirun:
            sys.exit(2)
    except Exception as e:  # noqa: BLE001
        record_failure(cfg, job_dir, e, overrides)
        if not multirun:
            raise
        print(f"simllm: job {job_num} failed: {type(e).__name__}: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
