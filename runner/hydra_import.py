"""Hydra's own config schema stored by name while Hydra is imported, built on its first load.

``import hydra`` runs ``hydra.conf``, which stores Hydra's schema (``hydra/config``: HydraConf,
the job, run, sweep, help and logging settings) in the ConfigStore, building it into an
OmegaConf node at once (``OmegaConf.structured``: ~7 ms of every ``simllm`` process here),
though only a compose that is not read from the compose cache (runner.compose_cache) loads it.
``install()`` (runner.app, before it imports Hydra) puts a finder first on ``sys.meta_path``
that, the one time ``hydra.conf`` is loaded, runs that module with ``ConfigStore.store`` keeping
what it is given (a dataclass instance or type) instead of building it; ``finish()``, right
after ``import hydra``, stores each with runner.hydra_fast.store_lazily, which builds on first
load the node ``OmegaConf.structured`` builds from it, as ``store`` would have built
(tests/runner/test_faststart.py compares them). Anything else ``hydra.conf`` stores, and every
store of another module, is Hydra's own. Where Hydra was imported before ``install()`` nothing
changes. Applied only while the Hydra shortcuts are on (runner.hydra_fast.enabled); the finder
is removed by ``finish()`` or after its one use.
"""

import dataclasses
import os
import sys
from importlib.machinery import PathFinder

#: Set to 0 for Hydra's own behaviour throughout (runner.hydra_fast: none of its patches).
SHORTCUTS_ENV = "SIMLLM_HYDRA_SHORTCUTS"

#: The module whose stores are deferred.
MODULE = "hydra.conf"
#: (name, node, group, package, provider) of each deferred store, until ``finish()``.
_PENDING: list = []


class _Loader:
    """``hydra.conf``'s own loader, running the module with the deferring ``store``."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        from hydra.core.config_store import ConfigStore   # what hydra.conf imports first

        orig = ConfigStore.store

        def store(self, name, node, group=None, package=None, provider=None):
            if dataclasses.is_dataclass(node) and self is ConfigStore.instance():
                _PENDING.append((name, node, group, package, provider))
            else:
                orig(self, name, node, group, package, provider)

        ConfigStore.store = store
        try:
            self.loader.exec_module(module)
        finally:
            ConfigStore.store = orig
            # the module as Python's own import leaves it: its own loader on it and its spec
            module.__loader__ = self.loader
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = self.loader

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _Finder:
    """First on ``sys.meta_path`` until ``hydra.conf`` is found once: its spec with ``_Loader``."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != MODULE:
            return None
        _remove()
        spec = PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader)
        return spec


def _remove() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if f is not _Finder]


def install() -> None:
    """The finder, where Hydra is not imported yet and the shortcuts are on (idempotent)."""
    if os.environ.get(SHORTCUTS_ENV, "1") == "0" or MODULE in sys.modules or _Finder in sys.meta_path:
        return
    sys.meta_path.insert(0, _Finder)


def finish() -> None:
    """After ``import hydra``: the finder removed and the deferred entries stored lazily."""
    _remove()
    if not _PENDING:
        return
    from runner.hydra_fast import store_lazily

    while _PENDING:
        name, node, group, package, provider = _PENDING.pop(0)
        store_lazily(name, ("hydra", node), lambda node=node: node, group, package, provider)
