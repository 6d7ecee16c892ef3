"""Register the named studies in ``experiments/`` as the Hydra group ``experiment``.

Each ``experiments/NAME.yaml`` is a ``# @package _global_`` preset (with ``override /group: opt``
entries in its defaults list) and is selected with ``experiment=NAME``.
"""

from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

EXPERIMENTS_DIR = Path(__file__).resolve().parent.parent / "experiments"


def register(directory: Path = EXPERIMENTS_DIR) -> None:
    cs = ConfigStore.instance()
    for path in sorted(directory.glob("*.yaml")):
        cs.store(group="experiment", name=path.stem, node=OmegaConf.load(path), package="_global_",
                 provider="simllm-experiments")
