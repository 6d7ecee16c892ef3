"""A small content-addressed JSON cache shared by processes: results of pure computations whose
library costs more to import than the result costs to read (pint's unit conversions, scipy's
NNLS fits of the kernel tables' attention lines).

Each cache is one JSON file ``<name>-<stamp>.json`` in ``$SIMLLM_CACHE_DIR`` (else
``$XDG_CACHE_HOME/simllm``, else ``~/.cache/simllm``). The stamp hashes what could change a
cached value without changing its key: the installed copy of each library named (path, size and
mtime of its ``__init__``, found without importing it) and the source of the modules that define
the computation; any change starts a new file. Keys are strings the caller builds from the exact
inputs; values are JSON numbers and lists (Python writes floats with ``repr``: exact round trip).
New entries are merged into the file when the process exits (read, merge, atomic replace).
A file that cannot be read or written costs only the computation; ``SIMLLM_PERSIST=0`` turns
every cache off (nothing read or written). Nothing here changes a number: a hit returns what
the computation returned for the same key.
"""

import hashlib
import json
import os
import tempfile
from pathlib import Path

CACHE_DIR_ENV = "SIMLLM_CACHE_DIR"
ENABLE_ENV = "SIMLLM_PERSIST"


def cache_dir() -> Path:
    """The folder of the caches (module docstring)."""
    root = os.environ.get(CACHE_DIR_ENV)
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "simllm")
    return Path(root)


class JsonCache:
    """key -> JSON value, persisted across processes (module docstring). ``max_entries`` bounds
    the file: beyond it new results are still returned, not kept."""

    def __init__(self, name: str, packages: tuple = (), sources: tuple = (), max_entries: int = 20_000):
        self.name = name
        self.packages = tuple(packages)
        self.sources = tuple(Path(s) for s in sources)
        self.max_entries = max_entries
        self.entries: dict | None = None
        self.new: dict = {}
        self.path: Path | None = None

    def _stamp(self) -> str:
        from importlib.util import find_spec

        h = hashlib.sha256(self.name.encode())
        for pkg in self.packages:
            spec = find_spec(pkg)
            st = os.stat(spec.origin)
            h.update(f"|{pkg}|{spec.origin}|{st.st_size}|{st.st_mtime_ns}".encode())
        for src in self.sources:
            h.update(src.read_bytes())
        return h.hexdigest()[:16]

    def _load(self) -> dict:
        if self.entries is not None:
            return self.entries
        self.entries = {}
        if os.environ.get(ENABLE_ENV, "1") == "0":
            return self.entries
        try:
            self.path = cache_dir() / f"{self.name}-{self._stamp()}.json"
            if self.path.is_file():
                data = json.loads(self.path.read_text(encoding="utf-8"))
                if isinstance(data, dict):
                    self.entries = data
        except (OSError, ValueError, TypeError, ImportError, AttributeError):
            self.entries = {}
        return self.entries

    def get(self, key: str):
        """The cached value of ``key`` or None."""
        return self._load().get(key)

    def put(self, key: str, value) -> None:
        """Keep ``value`` (JSON numbers / lists) for ``key``; written when the process exits."""
        entries = self._load()
        if self.path is None or len(entries) >= self.max_entries:
            return
        if not self.new:
            import atexit

            atexit.register(self.save)
        entries[key] = value
        self.new[key] = value

    def save(self) -> None:
        """Merge this process's new entries into the file (atomic replace; errors ignored)."""
        if not self.new or self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            old: dict = {}
            if self.path.is_file():
                try:
                    loaded = json.loads(self.path.read_text(encoding="utf-8"))
                    old = loaded if isinstance(loaded, dict) else {}
                except ValueError:
                    old = {}
            old.update(self.new)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.name}-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(old, f)
                os.replace(tmp, self.path)
            except OSError:
                os.unlink(tmp)
                raise
            self.new = {}
        except OSError:
            pass


__all__ = ["JsonCache", "cache_dir", "CACHE_DIR_ENV", "ENABLE_ENV"]
