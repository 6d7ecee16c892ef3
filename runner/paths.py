"""Where data outside the project lives: the one place that resolves the ``../shared/data`` root.

The root comes from the ``paths`` config group (conf/paths/default.yaml): ``$SIMLLM_SHARED_DATA``
when set, else ``../shared/data``, a path relative to the project root (the folder beside the
checkout, as CI lays it out). A clone without that folder still runs everything that does not read
external data; what does says which file it lacks.

Paths written into shipped files (a calibration's provenance) go through ``display``: relative to
the project root, or to ``$SIMLLM_SHARED_DATA``, never the absolute path of one machine.
"""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = "SIMLLM_SHARED_DATA"
#: The group's file: its ``shared_data`` value is the default when no composed config is at hand.
PATHS_YAML = ROOT / "conf" / "paths" / "default.yaml"


def _default_value() -> str:
    from omegaconf import OmegaConf

    return str(OmegaConf.load(PATHS_YAML).shared_data)  # resolves ${oc.env:SIMLLM_SHARED_DATA,...}


def shared_data(value: str | os.PathLike | None = None) -> Path:
    """The shared data root: ``value`` (a composed ``paths.shared_data``) or conf/paths/default.yaml's,
    made absolute against the project root."""
    p = Path(os.path.expanduser(str(value if value is not None else _default_value())))
    return p if p.is_absolute() else (ROOT / p).resolve()


def shared_file(*parts: str, value=None) -> Path:
    """A file under the shared data root (it may not exist: callers say so)."""
    return shared_data(value).joinpath(*parts)


def display(path: str | os.PathLike) -> str:
    """``path`` as written into shipped files: ``$SIMLLM_SHARED_DATA/...`` under an overridden
    root, ``../shared/data/...`` under the default one (also when it is a symbolic link, as CI
    lays it out), else relative to the project root."""
    p = Path(os.path.abspath(path))
    env = os.environ.get(ENV)
    shared = Path(os.path.abspath(os.path.expanduser(env) if env else ROOT / _default_value()))
    try:
        rel = p.resolve().relative_to(shared.resolve())
    except ValueError:
        return Path(os.path.relpath(p, ROOT)).as_posix()
    return f"${ENV}/{rel.as_posix()}" if env else Path(os.path.relpath(shared / rel, ROOT)).as_posix()
