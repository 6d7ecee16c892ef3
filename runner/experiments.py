"""Register the named studies in ``experiments/`` as the Hydra group ``experiment``.

Each ``experiments/NAME.yaml`` is a ``# @package _global_`` preset (with ``override /group: opt``
entries in its defaults list) and is selected with ``experiment=NAME``.
"""

from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

EXPERIMENTS_DIR = Path(__file__).resolve().parent.parent / "experiments"


def register(directory: Path = EXPERIMENTS_DIR, lazy: bool | None = None) -> None:
    """Store each ``directory``/NAME.yaml in the ConfigStore as ``experiment/NAME``. ``lazy``
    (default: while the Hydra shortcuts are on) parses a file on its first load only
    (runner.hydra_fast.store_lazily; keyed by the file's path, mtime and size)."""
    from runner import hydra_fast

    if lazy is None:
        lazy = hydra_fast.enabled()
    cs = ConfigStore.instance()
    for path in sorted(directory.glob("*.yaml")):
        if lazy:
            st = path.stat()
            hydra_fast.store_lazily(path.stem, ("file", str(path), st.st_mtime_ns, st.st_size),
                                    lambda path=path: OmegaConf.load(path), group="experiment",
                                    package="_global_", provider="simllm-experiments")
        else:
            cs.store(group="experiment", name=path.stem, node=OmegaConf.load(path), package="_global_",
                     provider="simllm-experiments")
