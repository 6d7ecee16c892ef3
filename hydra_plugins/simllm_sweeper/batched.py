"""A lean multirun path for large grids of cheap jobs: ``simllm -m hydra/sweeper=simllm ...``.

Hydra's basic sweeper composes every job twice (to validate, then to run) and runs each through
the launcher's job machinery; a compose costs 100-190 ms here, so a grid of millisecond analytical
jobs is dominated by it. This sweeper expands the same cartesian product of the same override
syntax (command line and ``hydra.sweeper.params``), composes once per distinct combination of
config-group choices (``hardware=h200``), applies value overrides (``partition.tp=4``) to a copy
with OmegaConf (typed: a wrong type fails like a compose would) and runs each job in process
through ``runner.app.execute``: the same job function, files and MLflow run as the basic path.
The whole grid is validated before the first job runs. Jobs run one after another in this
process; for parallel jobs use the joblib or submitit launchers with the basic sweeper.
"""

import copy
import itertools
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.errors import ConfigCompositionException
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException


@dataclass
class SimllmSweeperConf:
    _target_: str = "hydra_plugins.simllm_sweeper.batched.SimllmSweeper"
    params: Optional[Dict[str, str]] = field(default_factory=dict)
    progress_every: int = 100   # print a progress line every N jobs (0: never)
    # MLflow params of each job: all (the flattened config, as the basic sweeper logs) | swept
    # (only the swept keys' values and every *.name; config.yaml keeps the rest): ~15 ms less a job
    log_params: str = "all"


ConfigStore.instance().store(group="hydra/sweeper", name="simllm", node=SimllmSweeperConf,
                             provider="simllm")


def _is_group_override(o: Override, groups: set[str]) -> bool:
    return o.key_or_group in groups or "/" in o.key_or_group


class SimllmSweeper(Sweeper):
    def __init__(self, params: Optional[Dict[str, str]] = None, progress_every: int = 100,
                 log_params: str = "all"):
        if log_params not in ("all", "swept"):
            raise ValueError(f"hydra.sweeper.log_params = {log_params!r}: expected all or swept")
        self.params = params or {}
        self.progress_every = progress_every
        self.log_params = log_params
        self.swept: List[str] = []
        self.config: Optional[DictConfig] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config

    def _expand(self, arguments: List[str]) -> List[List[Override]]:
        """The cartesian product of the sweeps, as lists of single-valued Override objects."""
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        args = [f"{k}={v}" for k, v in self.params.items()] + list(arguments)
        axes: Dict[str, List[str]] = {}
        for o in parser.parse_overrides(args):
            key = o.get_key_element()
            if o.is_sweep_override():
                if not o.is_discrete_sweep():
                    raise ConfigCompositionException(f"the simllm sweeper takes discrete sweeps only: {o.input_line}")
                axes[key] = [f"{key}={v}" for v in o.sweep_string_iterator()]
            else:
                axes[key] = [f"{key}={o.get_value_element_as_str()}"]
        self.swept = sorted(k for k, v in axes.items() if len(v) > 1)
        jobs = [list(x) for x in itertools.product(*axes.values())]
        return [parser.parse_overrides(j) for j in jobs]

    def sweep(self, arguments: List[str]) -> Any:
        from runner.app import execute

        loader = self.hydra_context.config_loader
        groups = set(loader.list_groups(""))  # hardware, model, ..., experiment, hydra
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        jobs = self._expand(arguments)
        cache: Dict[tuple, DictConfig] = {}
        plans = []
        tic = time.perf_counter()
        # compose and validate every job before running any (like the basic sweeper); a job's
        # value overrides are applied to its composed base and undone again, so one config per
        # distinct group selection is all that stays in memory
        for job in jobs:
            gkey = tuple(o.input_line for o in job if _is_group_override(o, groups))
            if gkey not in cache:
                base = loader.load_sweep_config(self.config, list(gkey))
                with open_dict(base):
                    del base["hydra"]
                cache[gkey] = base
            values = [o for o in job if not _is_group_override(o, groups)]
            base = cache[gkey]
            _undo(_apply(base if _in_place(base, values) else copy.deepcopy(base), values))
            plans.append((gkey, values, [o.input_line for o in job]))
        n = len(plans)
        print(f"[simllm sweeper] {n} jobs composed in {time.perf_counter() - tic:.2f} s "
              f"({len(cache)} distinct group selections)", file=sys.stderr)
        if self.log_params == "swept":
            from runner import tracking

            os.environ[tracking.PARAM_KEYS_ENV] = json.dumps(self.swept)
        try:
            self._run(plans, cache, sweep_dir, execute)
        finally:
            if self.log_params == "swept":
                os.environ.pop(tracking.PARAM_KEYS_ENV, None)
        return None

    def _run(self, plans: list, cache: Dict[tuple, DictConfig], sweep_dir: Path, execute) -> None:
        """Run the prepared jobs one after another in this process."""
        n = len(plans)
        tic = time.perf_counter()
        for num, (gkey, values, overrides) in enumerate(plans):
            job_dir = sweep_dir / str(num)
            (job_dir / ".hydra").mkdir(parents=True, exist_ok=True)
            (job_dir / ".hydra" / "overrides.yaml").write_text(OmegaConf.to_yaml(overrides))
            cfg = cache[gkey]
            if not _in_place(cfg, values):
                cfg = copy.deepcopy(cfg)
            undo = _apply(cfg, values)
            try:
                execute(cfg, job_dir, overrides, multirun=True, job_num=num)
            finally:
                _undo(undo)
            done = num + 1
            if self.progress_every and (done % self.progress_every == 0 or done == n):
                el = time.perf_counter() - tic
                print(f"[simllm sweeper] {done}/{n} jobs, {el / done * 1e3:.0f} ms/job, "
                      f"ETA {el / done * (n - done):.0f} s", file=sys.stderr)


_ABSENT = object()


def _in_place(cfg: DictConfig, values: List[Override]) -> bool:
    """Can these value overrides be applied to the shared base and undone exactly? Yes when each
    sets a leaf (not a dict or list, on either side): the old raw value (a number, a string, an
    interpolation or ``???``) is put back. Otherwise the job gets its own deep copy."""
    for o in values:
        if isinstance(o.value(), (dict, list)):
            return False
        parent, _, leaf = o.key_or_group.rpartition(".")
        node = OmegaConf.select(cfg, parent) if parent else cfg
        if not isinstance(node, DictConfig):
            return False   # e.g. +a.b.c=1 creating its parents: not undone by deleting one key
        if leaf in node.keys() and isinstance(node._get_node(leaf), (DictConfig, ListConfig)):
            return False
    return True


def _apply(cfg: DictConfig, values: List[Override]) -> list:
    """Apply value overrides to ``cfg`` in place, typed like a compose (a wrong type raises);
    returns the undo list for ``_undo`` (already undone if an override fails)."""
    undo = []
    o = None
    try:
        for o in values:
            key = o.key_or_group
            if o.is_delete():
                raise ValueError(f"the simllm sweeper does not take deletions: {o.input_line}")
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(cfg, parent) if parent else cfg
            old = _ABSENT
            if isinstance(node, DictConfig) and leaf in node.keys():
                child = node._get_node(leaf)
                old = child if isinstance(child, (DictConfig, ListConfig)) else child._value()
            if o.is_add() or o.is_force_add():
                with open_dict(cfg):
                    OmegaConf.update(cfg, key, o.value(), merge=True)
            else:
                if OmegaConf.select(cfg, key, default=KeyError) is KeyError:
                    raise ValueError(f"Could not override '{key}': no such key "
                                     f"(use +{o.input_line} to add it)")
                OmegaConf.update(cfg, key, o.value(), merge=True)
            undo.append((cfg, parent, leaf, old))
    except BaseException as e:
        _undo(undo)
        # Hydra prints these as the basic sweeper's compose errors: "Error merging override
        # KEY=VALUE" and OmegaConf's message naming the key (or the sweeper's own line), no traceback
        if isinstance(e, OmegaConfBaseException) and o is not None:
            raise ConfigCompositionException(f"Error merging override {o.input_line}") from e
        if isinstance(e, ValueError):
            raise ConfigCompositionException(str(e)) from e
        raise
    return undo


def _undo(undo: list) -> None:
    """Put back what ``_apply`` changed, last change first."""
    for cfg, parent, leaf, old in reversed(undo):
        node = OmegaConf.select(cfg, parent) if parent else cfg
        with open_dict(node):
            if old is _ABSENT:
                del node[leaf]
            elif not isinstance(old, (DictConfig, ListConfig)):
                node[leaf] = old
