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

import os
from pathlib import Path

# hashlib, json and tempfile are imported where they are used: runner.compiled loads this module
# before anything else of a ``simllm`` process, so that what those modules compile as they load
# is kept too.

CACHE_DIR_ENV = "SIMLLM_CACHE_DIR"
ENABLE_ENV = "SIMLLM_PERSIST"


def cache_dir() -> Path:
    """The folder of the caches (module docstring)."""
    root = os.environ.get(CACHE_DIR_ENV)
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "simllm")
    return Path(root)


class StampedMap:
    """key -> value kept in one file shared by processes: read lazily on the first ``get`` or
    ``put``, new entries merged into it when the process exits (read, merge, atomic replace;
    errors ignored: a file that cannot be read or written costs only the computation). The
    subclass says where the file is (``_file``, stamped with what could change a value without
    changing its key), how it is read and written (``_read``, ``_write``), how old and new entries
    merge (``_merged``) and whether it is on (``enabled``)."""

    #: open files in binary mode (the subclass's format)
    binary = False

    def __init__(self, name: str, max_entries: int = 20_000):
        self.name = name
        self.max_entries = max_entries
        self.entries: dict | None = None
        self.new: dict = {}
        self.path: Path | None = None

    # --- the subclass's format
    def enabled(self) -> bool:
        return os.environ.get(ENABLE_ENV, "1") != "0"

    def _file(self) -> Path | None:
        """The file of the current stamps (None: nothing may be kept)."""
        raise NotImplementedError

    def _read(self, f) -> dict | None:
        raise NotImplementedError

    def _write(self, f, entries: dict) -> None:
        raise NotImplementedError

    def _merged(self, old: dict, new: dict) -> dict:
        return {**old, **new}

    # --- shared
    def _load(self) -> dict:
        if self.entries is not None:
            return self.entries
        self.entries = {}
        if not self.enabled():
            return self.entries
        try:
            self.path = self._file()
            self.entries = self._read_path(self.path) or {}
        except (OSError, ValueError, TypeError, ImportError, AttributeError):
            self.entries = {}
        return self.entries

    def _read_path(self, path: Path | None) -> dict | None:
        if path is None or not path.is_file():
            return None
        try:
            with open(path, "rb" if self.binary else "r", **({} if self.binary else {"encoding": "utf-8"})) as f:
                data = self._read(f)
        except Exception:  # noqa: BLE001 - missing, corrupt or foreign: compute instead
            return None
        return data if isinstance(data, dict) else None

    def get(self, key: str):
        """The cached value of ``key`` or None."""
        return self._load().get(key)

    def put(self, key: str, value) -> None:
        """Keep ``value`` for ``key``; written when the process exits."""
        entries = self._load()
        if self.path is None:
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
            entries = self._merged(self._read_path(self.path) or {}, self.new)
            import tempfile

            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.name}-")
            try:
                with os.fdopen(fd, "wb" if self.binary else "w", **({} if self.binary else {"encoding": "utf-8"})) as f:
                    self._write(f, entries)
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
            self.new = {}
        except Exception:  # noqa: BLE001 - a cache that cannot be written is only slower
            pass


class JsonCache(StampedMap):
    """key -> JSON value, persisted across processes (module docstring). ``max_entries`` bounds
    the file: beyond it new results are still returned, not kept."""

    def __init__(self, name: str, packages: tuple = (), sources: tuple = (), max_entries: int = 20_000):
        super().__init__(name, max_entries)
        self.packages = tuple(packages)
        self.sources = tuple(Path(s) for s in sources)

    def _stamp(self) -> str:
        import hashlib
        from importlib.util import find_spec

        h = hashlib.sha256(self.name.encode())
        for pkg in self.packages:
            spec = find_spec(pkg)
            st = os.stat(spec.origin)
            h.update(f"|{pkg}|{spec.origin}|{st.st_size}|{st.st_mtime_ns}".encode())
        for src in self.sources:
            h.update(src.read_bytes())
        return h.hexdigest()[:16]

    def _file(self) -> Path:
        return cache_dir() / f"{self.name}-{self._stamp()}.json"

    def _read(self, f):
        import json

        return json.load(f)

    def _write(self, f, entries: dict) -> None:
        import json

        json.dump(entries, f)

    def put(self, key: str, value) -> None:
        """Keep ``value`` (JSON numbers / lists) for ``key``; written when the process exits."""
        if len(self._load()) >= self.max_entries:
            return
        super().put(key, value)


__all__ = ["StampedMap", "JsonCache", "cache_dir", "CACHE_DIR_ENV", "ENABLE_ENV"]
