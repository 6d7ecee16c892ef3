"""The compose cache: Hydra's composition of a config-group selection, kept across processes.

Every ``simllm`` process composed its config from scratch: build the generated schemas into
OmegaConf nodes, parse ~20 YAML files, merge ~30 sources (~0.2-0.25 CPU-s of a one-job process
here, a third of it). ``runner.hydra_fast.memoize_compose`` already composes each distinct
selection of config-group options once per process (the defaults list and its merge, before any
value override); this module keeps those two results in a file, so that the next process with the
same selection reads them (~0.01 CPU-s) instead. Hydra's own code then applies the value
overrides and fills ``hydra.*`` exactly as after a fresh compose, so a bad value
(``partition.tp=abc``) fails with the same message: the nodes read back carry their schema types.

A file is used only if all of this is unchanged since it was written, else the process composes
and writes a new one:

- the key: the config search path, the config name, the group overrides (text), Hydra's flags,
  the Python version and every ConfigStore entry (path, provider, package, and for the entries
  ``hydra_fast.store_lazily`` stored, what they are built from; a ``ConfigStore.store`` call
  after start-up turns the cache off for the process, since its node cannot be stamped);
- the stamps (mtime, size) of each config file the compose read, of every folder under each
  config directory (an option added or removed), and of the source file of every module loaded
  from hydra, omegaconf, hydra_plugins, yaml, antlr4, pint and simllm's own packages (the code
  that builds the schemas and composes: editing a schema default in engine/spec or
  runner/schema.py, or upgrading Hydra, starts a new entry), and of pint and
  engine/ingest/units.py (the unit conversions behind the defaults written in a unit, which a
  process may read from engine.persist's cache without importing them).

Files: ``compose/<key>.pkl`` in engine.persist's cache folder (``$SIMLLM_CACHE_DIR``, else
``~/.cache/simllm``), a header (key, stamps) then the pickled defaults list and config (the
generated schema classes by name: runner.schema.classes()); at most ``MAX_FILES`` (the least
recently used go). Any file that cannot be read, does not unpickle or does not match costs only
the compose. Beside them, ``Memo`` files (``compose/<name>.memo``) keep parses that depend only on
their input text and the parsing code: the config files Hydra reads (runner.hydra_fast._FILES;
a process whose composition is cached still reads the primary config) and the command-line
overrides (hydra_fast._OVERRIDES). ``SIMLLM_COMPOSE_CACHE=0`` or ``SIMLLM_PERSIST=0`` turns it off (nothing read or
written); so does ``SIMLLM_HYDRA_SHORTCUTS=0``, Hydra's own behaviour throughout.
"""

import hashlib
import io
import os
import pickle
import sys
from pathlib import Path

from engine.persist import StampedMap

ENABLE_ENV = "SIMLLM_COMPOSE_CACHE"
#: Bumped when what a file holds changes meaning.
FORMAT = 2
MAX_FILES = 64
#: Top-level packages whose loaded modules' sources are stamped.
PACKAGES = frozenset({"hydra", "omegaconf", "hydra_plugins", "yaml", "antlr4", "pint", "runner",
                      "engine", "conf", "experiments"})
_ROOT = str(Path(__file__).resolve().parent.parent) + os.sep


def enabled() -> bool:
    """Is the cache on (``SIMLLM_COMPOSE_CACHE`` and ``SIMLLM_PERSIST`` not 0)?"""
    return os.environ.get(ENABLE_ENV, "1") != "0" and os.environ.get("SIMLLM_PERSIST", "1") != "0"


def folder() -> Path:
    from engine.persist import cache_dir

    return cache_dir() / "compose"


def key(parts, listing) -> str:
    """The key of a composition: ``parts`` (config sources, config name, group overrides, Hydra's
    flags) and the ConfigStore's ``listing`` (hydra_fast.store_listing)."""
    text = repr((FORMAT, sys.version, sys.implementation.cache_tag, parts, listing))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def stamp(path: str):
    """(mtime ns, size) of ``path``, None when it cannot be read: what a cached entry checks."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


#: Code a schema default can depend on without being loaded when the composition is written:
#: the unit conversions behind the defaults written in a unit (runner.units.from_si reads them from
#: engine.persist's cache, stamped by these, and imports them only on a miss).
EXTRA_SOURCES = (str(Path(__file__).resolve().parent.parent / "engine" / "ingest" / "units.py"),)
EXTRA_PACKAGES = ("pint",)


def module_stamps() -> list:
    """(source file, stamp) of every loaded module of ``PACKAGES`` or of this checkout, and of
    ``EXTRA_SOURCES`` and the ``__init__`` of each ``EXTRA_PACKAGES`` (found without importing)."""
    from importlib.util import find_spec

    out = [(f, stamp(f)) for f in EXTRA_SOURCES]
    for pkg in EXTRA_PACKAGES:
        spec = find_spec(pkg)
        if spec is not None and spec.origin:
            out.append((spec.origin, stamp(spec.origin)))
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if not f or name == "__main__":
            continue
        if name.partition(".")[0] in PACKAGES or f.startswith(_ROOT):
            out.append((f, stamp(f)))
    return out


def folder_stamps(roots) -> list:
    """(folder, stamp) of each folder under the config directories ``roots``."""
    out = []
    for root in roots:
        for d, _, _ in os.walk(root):
            out.append((d, stamp(d)))
    return out


def _classes() -> dict:
    from runner.schema import classes

    return classes()


class _Pickler(pickle.Pickler):
    """Pickles the generated schema classes (made by dataclasses.make_dataclass, so not
    importable by name) as references into runner.schema.classes()."""

    classes = None

    def persistent_id(self, obj):
        if isinstance(obj, type) and obj.__module__ == "types":
            name = obj.__qualname__
            if self.classes is None:
                self.classes = _classes()
            if self.classes.get(name) is not obj:
                raise pickle.PicklingError(f"class {name} is not a generated schema")
            return ("schema", name)
        return None


class _Unpickler(pickle.Unpickler):
    classes = None

    def persistent_load(self, pid):
        kind, name = pid
        if kind != "schema":
            raise pickle.UnpicklingError(f"unknown reference {pid!r}")
        if self.classes is None:
            self.classes = _classes()
        return self.classes[name]


class Frozen:
    """A composed config kept as its pickle: ``thaw()`` returns a new copy of it, as
    ``copy.deepcopy`` of the config would (~2 ms for simllm's config, where a deep copy costs
    ~10 ms); the first ``thaw`` may hand out the copy already read (``first``)."""

    __slots__ = ("blob", "first")

    def __init__(self, blob: bytes, first=None):
        self.blob, self.first = blob, first

    def thaw(self):
        cfg, self.first = self.first, None
        if cfg is None:
            cfg = _Unpickler(io.BytesIO(self.blob)).load()
        return cfg


def freeze(cfg) -> "Frozen | None":
    """``cfg`` as a Frozen copy, or None where it does not pickle (then deep-copy it)."""
    try:
        buf = io.BytesIO()
        _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(cfg)
        return Frozen(buf.getvalue())
    except Exception:  # noqa: BLE001 - an object pickle cannot write by reference
        return None


def load(k: str):
    """(DefaultsList, config-file stamps, Frozen composed config) stored under key ``k``, or
    None when there is none, it is stale, or anything fails."""
    from hydra._internal.defaults_list import DefaultsList
    from omegaconf import DictConfig

    path = folder() / f"{k}.pkl"
    try:
        with open(path, "rb") as f:
            head = pickle.load(f)
            if not (isinstance(head, dict) and head.get("format") == FORMAT and head.get("key") == k):
                return None
            if any(stamp(p) != st for p, st in head["stamps"]):
                return None
            dl, loaded = _Unpickler(f).load()
            blob = f.read()
        cfg = _Unpickler(io.BytesIO(blob)).load()
        if not (isinstance(dl, DefaultsList) and isinstance(cfg, DictConfig)):
            return None
        try:
            os.utime(path)   # recently used: kept when old files are removed
        except OSError:
            pass
        return dl, loaded, Frozen(blob, first=cfg)
    except Exception:  # noqa: BLE001 - a missing, corrupt or foreign file: compose instead
        return None


def save(k: str, dl, loaded, frozen: Frozen, roots) -> None:
    """Keep (DefaultsList, config-file stamps ``loaded``, Frozen composed config) under key
    ``k``, with the stamps of the folders under ``roots`` and of the loaded modules (module
    docstring). Errors are ignored: the process has its compose."""
    import tempfile

    try:
        d = folder()
        d.mkdir(parents=True, exist_ok=True)
        stamps = [*loaded, *folder_stamps(roots), *module_stamps()]
        if any(st is None for _, st in stamps):
            return
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".compose-")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump({"format": FORMAT, "key": k, "stamps": stamps}, f, protocol=pickle.HIGHEST_PROTOCOL)
                _Pickler(f, protocol=pickle.HIGHEST_PROTOCOL).dump((dl, list(loaded)))
                f.write(frozen.blob)
            os.replace(tmp, d / f"{k}.pkl")
        except BaseException:
            os.unlink(tmp)
            raise
        _prune(d)
    except Exception:  # noqa: BLE001
        pass


def _prune(d: Path) -> None:
    """Remove the least recently used files beyond ``MAX_FILES``."""
    files = []
    for p in d.glob("*.pkl"):
        try:
            files.append((p.stat().st_mtime_ns, p))
        except OSError:
            pass
    for _, p in sorted(files, reverse=True)[MAX_FILES:]:
        try:
            p.unlink()
        except OSError:
            pass


class Memo(StampedMap):
    """A small map kept across processes beside the compositions (engine.persist.StampedMap): key
    (text) -> a value pickled as it was computed, for parses whose result depends only on the key
    and on the code that parses (a config file's text, named by its path and stamp; an override's
    text). ``get`` returns a new copy each time (read back from its pickle), or None; ``put`` keeps
    a value, written when the process exits (merged into the file, at most ``max_entries``, the
    newest kept). The file is used only while the stamps of ``sources`` (the parsing code: files,
    or packages found without importing them) are those it was written with. Off (nothing read or
    written) where the compose cache is off (``enabled``)."""

    FORMAT = 1
    binary = True

    def __init__(self, name: str, sources=(), packages=(), max_entries: int = 512):
        super().__init__(name, max_entries)
        self.sources, self.packages = tuple(map(str, sources)), tuple(packages)

    def enabled(self) -> bool:
        return enabled()

    def _stamps(self) -> list:
        from importlib.util import find_spec

        out = [(f, stamp(f)) for f in self.sources]
        for pkg in self.packages:
            spec = find_spec(pkg)
            out.append((pkg, stamp(spec.origin) if spec is not None and spec.origin else None))
        return out

    def _file(self) -> Path | None:
        self._stamped = self._stamps()
        return None if any(st is None for _, st in self._stamped) else folder() / f"{self.name}.memo"

    def _read(self, f):
        head = pickle.load(f)
        if not (isinstance(head, dict) and head.get("format") == self.FORMAT
                and head.get("stamps") == self._stamped):
            return None
        return pickle.load(f)

    def _write(self, f, entries: dict) -> None:
        pickle.dump({"format": self.FORMAT, "stamps": self._stamped}, f, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.dump(entries, f, protocol=pickle.HIGHEST_PROTOCOL)

    def _merged(self, old: dict, new: dict) -> dict:
        return dict(list({**old, **new}.items())[-self.max_entries:])

    def get(self, key: str):
        blob = super().get(key)
        if blob is None:
            return None
        try:
            return _Unpickler(io.BytesIO(blob)).load()
        except Exception:  # noqa: BLE001
            return None

    def put(self, key: str, value) -> None:
        try:
            buf = io.BytesIO()
            _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
        except Exception:  # noqa: BLE001 - a value pickle cannot write: not kept
            return
        super().put(key, buf.getvalue())
