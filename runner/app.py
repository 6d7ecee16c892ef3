"""The ``simllm`` console script: the Hydra app (compose -> specs -> dispatch -> job files -> MLflow).

    simllm                                   # default experiment, prints a short table
    simllm -m hardware=h100_sxm,h200 partition=tp1,tp2

Hydra composes; ``runner.job.run_job`` converts the config to specs, dispatches to the engine,
writes the job dir and logs to MLflow. What makes a short process start fast (Hydra patches,
``SIMLLM_HYDRA_SHORTCUTS=0`` to turn them off) is in runner/hydra_fast.py.
"""

import gc
import os
import signal
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

# The methods @dataclass writes and the regular expressions modules compile at import are
# compiled once and read back in later processes (~0.06 CPU-s a process here): before Hydra,
# whose config schemas are dataclasses (runner/compiled.py).
from runner import compiled, hydra_import  # noqa: E402

compiled.install()
hydra_import.install()        # Hydra's own schema stored by name, built on first load

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from engine.errors import SpecError  # noqa: E402
from runner import experiments, hydra_fast, schema  # noqa: E402

hydra_import.finish()
hydra_fast.install()          # unless SIMLLM_HYDRA_SHORTCUTS=0
# with the shortcuts on, both store names only and build a node when a compose loads it (not at
# all when the compose cache has the composition: runner.compose_cache)
schema.register()
if hydra_fast.enabled() or hydra_fast.may_use_experiments(sys.argv[1:]):
    experiments.register()
gc.freeze()
if _GC_ON:
    gc.enable()


#: The signal that stopped this process (its name), once ``_stop`` has seen one.
STOPPED_BY: str | None = None
#: Set by the sweep callback to the launching process's PID: a launcher's worker process
#: (joblib) that finds it is that process's child ends with it (``_die_with_launcher``).
LAUNCHER_ENV = "SIMLLM_LAUNCHER_PID"


def _stop(signum, frame) -> None:
    """SIGTERM / SIGINT: unwind like an error (``finally`` blocks and atexit hooks run, so the
    sweep's parent run ends KILLED instead of staying RUNNING); exit status 128 + the signal's
    number, as the default action would give. A run being logged (``tracking.uninterrupted``)
    is first completed."""
    from runner import tracking

    global STOPPED_BY
    STOPPED_BY = signal.Signals(signum).name
    signal.signal(signum, signal.SIG_DFL)   # a second one stops at once
    if not tracking.hold_signal(signum):    # an MLflow run being created/ended: at its end
        raise tracking.stop_exception(signum)


def install_stop_handlers() -> None:
    """``_stop`` on SIGTERM and SIGINT (main thread only; a signal the user ignores stays so)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(sig) not in (signal.SIG_IGN, _stop):
            signal.signal(sig, _stop)


_WORKER_SET = False


def _die_with_launcher() -> None:
    """In a worker process of a parallel launcher (joblib), once: the stop handlers (a worker
    sent SIGTERM completes the run it is logging, then stops), and, for a direct child of the launching process
    (the PID in $SIMLLM_LAUNCHER_PID), SIGKILL when that process dies (Linux
    ``prctl(PR_SET_PDEATHSIG)``), so a killed sweep leaves no workers behind. (SIGKILL: loky's
    worker loop swallows a SIGTERM between tasks. The job run a worker was logging is then
    RUNNING with a dead PID, which ``resume=true`` and ``simllm-sync`` end KILLED.)"""
    global _WORKER_SET
    if _WORKER_SET:
        return
    _WORKER_SET = True
    launcher = os.environ.get(LAUNCHER_ENV)
    if not launcher or launcher == str(os.getpid()):
        return
    install_stop_handlers()
    if sys.platform.startswith("linux") and str(os.getppid()) == launcher:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG = 1
        if str(os.getppid()) != launcher:              # it died before the call
            os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    """The console script: a vendor spelling of an option (``model=Meta-Llama-3.1-8B``) stops with
    one line naming the option (runner.convert.misspelt_option, exit 2); else the Hydra app, with
    SIGTERM and SIGINT unwinding it (``_stop``)."""
    from runner.convert import misspelt_option

    msg = misspelt_option(sys.argv[1:])
    if msg:
        print(f"simllm: error: {msg}", file=sys.stderr)
        sys.exit(2)
    install_stop_handlers()
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
    if multirun:
        _die_with_launcher()
    try:
        _run(cfg, job_dir, overrides, multirun, job_num)
    finally:
        if not _FIRST_JOB_DONE:
            _FIRST_JOB_DONE = True
            gc.freeze()


def _run(cfg: DictConfig, job_dir: Path, overrides: list[str], multirun: bool, job_num: int) -> None:
    # here, not at import: --help, --cfg and --info never run a job (runner.job: ~0.01 CPU-s)
    from runner.job import record_failure, run_job

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
