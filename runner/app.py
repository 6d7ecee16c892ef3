"""The ``simllm`` console script: the Hydra app (compose -> specs -> dispatch -> job files -> MLflow).

    simllm                                   # default experiment, prints a short table
    simllm -m hardware=h100_sxm,h200 partition=tp1,tp2

Hydra composes; ``runner.job.run_job`` converts the config to specs, dispatches to the engine,
writes the job dir and logs to MLflow. What makes a short process start fast (Hydra patches,
``SIMLLM_HYDRA_SHORTCUTS=0`` to turn them off) is in runner/hydra_fast.py.
"""

import gc
import os
import sys
from pathlib import Path

# Start-up (Hydra, numpy, polars, the generated schemas) allocates ~10^5-10^6 objects that live
# as long as the process; the cyclic garbage collector would pass over them again and again while
# they are created and then on every full collection of a run or sweep (~0.03 CPU-s of a DES 1k
# process). Collection is off while this module loads; at its end the objects made so far are
# moved to the permanent generation (gc.freeze) and collection is on again.
_GC_ON = gc.isenabled()
gc.disable()

# numpy's OpenBLAS starts a thread per core when numpy is imported, and that start-up costs a
# whole ``simllm`` process ~0.04-0.11 CPU-s here (import numpy: 0.096 -> 0.055 CPU-s; one
# analytical run 0.60 -> 0.49). simllm's engines compute with element-wise numpy; BLAS only
# serves small fits, which OpenBLAS runs on one thread anyway at their sizes (results checked
# identical). Set before numpy is imported; an OPENBLAS_NUM_THREADS of the user's own stays.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from engine.errors import SpecError  # noqa: E402
from runner import experiments, hydra_fast, schema  # noqa: E402
from runner.job import record_failure, run_job  # noqa: E402

hydra_fast.install()          # unless SIMLLM_HYDRA_SHORTCUTS=0
schema.register()
if hydra_fast.may_use_experiments(sys.argv[1:]):
    experiments.register()
gc.freeze()
if _GC_ON:
    gc.enable()


def main() -> None:
    """The console script: a vendor spelling of an option (``model=Meta-Llama-3.1-8B``) stops with
    one line naming the option (runner.convert.misspelt_option, exit 2); else the Hydra app."""
    from runner.convert import misspelt_option

    msg = misspelt_option(sys.argv[1:])
    if msg:
        print(f"simllm: error: {msg}", file=sys.stderr)
        sys.exit(2)
    hydra_main()


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def hydra_main(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    execute(cfg, Path(hc.runtime.output_dir), list(hc.overrides.task), multirun=multirun,
            job_num=hc.job.num if multirun else 0)


#: Has a job of this process finished (and gc.freeze run after it)?
_FIRST_JOB_DONE = False


def execute(cfg: DictConfig, job_dir: Path, overrides: list[str], multirun: bool,
            job_num: int = 0) -> None:
    """One job with failure isolation (also called by the batched sweeper, once per job).

    After the first job of a process everything it will keep (the engine, polars, MLflow's
    store and models) is loaded: those objects are frozen out of the cyclic collector's passes
    too (gc.freeze), which each later job would otherwise pay for in full collections (~15 ms a
    job of a basic sweep here)."""
    global _FIRST_JOB_DONE
    try:
        _run(cfg, job_dir, overrides, multirun, job_num)
    finally:
        if not _FIRST_JOB_DONE:
            _FIRST_JOB_DONE = True
            gc.freeze()


def _run(cfg: DictConfig, job_dir: Path, overrides: list[str], multirun: bool, job_num: int) -> None:
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
