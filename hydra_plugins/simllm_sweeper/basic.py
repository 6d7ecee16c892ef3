"""simllm's default sweeper (``hydra/sweeper=simllm_basic``, chosen in conf/config.yaml): Hydra's
basic sweeper, which hands each batch of jobs to the launcher (basic, joblib, submitit, Ray),
plus one thing: with ``resume=true`` the points that already have a FINISHED run are skipped
here, in the launching process, before the launcher sees them.

Without it every point of a resumed grid is launched again (a SLURM task, a Ray task, a joblib
worker's job), composes its config, computes its config hash, finds it among the finished ones
and only then stops. Here each job of a batch is composed once (the compose Hydra's basic sweeper
does anyway, to validate the batch before launching it), its config hash is computed as the job
computes it (``runner.job.hashed_config``) and looked up in the finished hashes that the sweep
callback fetched once (``runner.callbacks.SweepTracking``: the file named by
``SIMLLM_FINISHED_HASHES``). A finished point gets its job folder with ``skipped.json`` and
``.hydra/overrides.yaml`` (the sweep's summary counts it as skipped, as before) and the launcher
gets only the rest. The launched jobs keep the batch's first job numbers, the skipped ones take
the numbers after them, so every job number of the sweep stays unique.

Without ``resume=true`` (or with tracking off, or without the sweep callback) this is Hydra's
basic sweeper unchanged.
"""

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict, read_write


@dataclass
class SimllmBasicSweeperConf:
    _target_: str = "hydra_plugins.simllm_sweeper.basic.SimllmBasicSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(group="hydra/sweeper", name="simllm_basic", node=SimllmBasicSweeperConf,
                             provider="simllm")


class SimllmBasicSweeper(BasicSweeper):
    def _finished(self) -> Optional[set]:
        """The config hashes to skip: those of the FINISHED runs, when this sweep resumes with
        tracking on and the sweep callback fetched them; else None (nothing is skipped here)."""
        from runner import tracking

        cfg = self.config
        path = os.environ.get(tracking.FINISHED_ENV)
        if not (cfg.get("resume") and cfg.tracking.enabled and path and os.path.exists(path)):
            return None
        return set(json.loads(Path(path).read_text()))

    def sweep(self, arguments: List[str]) -> Any:
        finished = self._finished()
        if finished is None:
            return super().sweep(arguments)
        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides(self._parse_config() + list(arguments))
        self.overrides = self.split_arguments(overrides, self.max_batch_size)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        returns = []
        initial_job_idx = 0
        while not self.is_done():
            batch = self.get_job_batch()
            tic = time.perf_counter()
            todo, skipped = self._split_batch(batch, finished)   # composes each job once
            for n, (job_dir, task_overrides, chash) in enumerate(skipped):
                _write_skipped(job_dir, initial_job_idx + len(todo) + n, task_overrides, chash)
            print(f"simllm: resume: {len(skipped)} of {len(batch)} points already have a FINISHED "
                  f"run (skipped, not launched); launching {len(todo)} "
                  f"({time.perf_counter() - tic:.1f} s to compose and hash them)", file=sys.stderr)
            results = self.launcher.launch(todo, initial_job_idx=initial_job_idx) if todo else []
            for r in results:
                _ = r.return_value   # raises for a failed job, as Hydra's basic sweeper does
            initial_job_idx += len(batch)
            returns.append(results)
        return returns

    def _split_batch(self, batch: Sequence[Sequence[str]], finished: set) -> tuple[list, list]:
        """The batch's jobs to launch (their overrides) and the finished ones to skip (their job
        folder as ``_job_dir`` gives it, the job's task overrides and its config hash: no composed
        config is kept, so a resumed grid of many points holds little). Each job is composed
        here: a job that does not compose raises, before any job of the batch runs (Hydra's
        ``validate_batch_is_legal``); one whose hash cannot be computed is launched, so that the
        job itself records why it fails."""
        from runner.job import hashed_config

        loader = self.hydra_context.config_loader
        todo, skipped = [], []
        for overrides in batch:
            cfg = loader.load_sweep_config(master_config=self.config, sweep_overrides=list(overrides))
            job_dir, task_overrides = _job_dir(cfg), [str(o) for o in cfg.hydra.overrides.task]
            with read_write(cfg), open_dict(cfg):
                del cfg["hydra"]   # the job's config, as Hydra's run_job hands it to the task
            try:
                chash = hashed_config(cfg)[2]
            except Exception:  # noqa: BLE001 - the job reports its own error
                chash = None
            if chash is not None and cfg.get("resume") and cfg.tracking.enabled and chash in finished:
                skipped.append((job_dir, task_overrides, chash))
            else:
                todo.append(list(overrides))
        return todo, skipped


#: A job number no grid reaches: a skipped job's folder is resolved with it (``_job_dir``), which
#: ``_write_skipped`` replaces by the job's number once the batch's launched jobs are counted.
_NUM = 987654321987


def _job_dir(sweep_cfg: DictConfig) -> str:
    """The folder the launcher would give this job (``hydra.sweep.dir`` / ``hydra.sweep.subdir``,
    resolved as Hydra's run_job resolves them), with the job number ``_NUM``."""
    with read_write(sweep_cfg), open_dict(sweep_cfg):
        sweep_cfg.hydra.job.id = _NUM
        sweep_cfg.hydra.job.num = _NUM
    hc = HydraConfig.instance()
    orig = hc.cfg
    hc.set_config(sweep_cfg)
    try:
        return os.path.join(str(sweep_cfg.hydra.sweep.dir), str(sweep_cfg.hydra.sweep.subdir))
    finally:
        hc.cfg = orig


def _write_skipped(job_dir: str, idx: int, task_overrides: list, chash: str) -> None:
    """The folder of skipped job ``idx``: its ``skipped.json`` and ``.hydra/overrides.yaml``."""
    from runner.job import write_skipped

    path = Path(job_dir.replace(str(_NUM), str(idx)))
    (path / ".hydra").mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(task_overrides), path / ".hydra" / "overrides.yaml")
    write_skipped(path, chash, task_overrides)
