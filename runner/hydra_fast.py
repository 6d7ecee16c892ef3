"""Hydra speed patches of the ``simllm`` process: what each saves is in its docstring.

Hydra 1.3 spends most of a short ``simllm`` process composing (the mode compose, the defaults
list, YAML parsing, a deep copy of the ConfigStore) and writing ``.hydra/*.yaml`` with a
pure-Python emitter. Each function below patches one of those steps in place, checks that it
applies, and is idempotent; none changes a composed config or a written file
(tests/runner/test_faststart.py compares each with Hydra's own). ``install()`` applies them all
unless ``SIMLLM_HYDRA_SHORTCUTS=0`` (Hydra's own behaviour throughout). runner/app.py, the thin
app, calls it at import; nothing else here runs on import. Also here: ConfigStore entries built
on first load (``store_lazily``; runner.schema and runner.experiments register that way while
the shortcuts are on) and the compose memo's use of the cross-process compose cache
(runner.compose_cache; tests/runner/test_compose_cache.py).
"""

import copy
import dataclasses
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

from hydra.core.config_store import ConfigStore

from runner import compose_cache, experiments
#: Set to 0 for Hydra's own behaviour throughout (none of the patches); the outputs are the same
#: either way (tests/runner/test_faststart.py compares a sweep's files).
from runner.hydra_import import SHORTCUTS_ENV


def share_config_store() -> None:
    """Let copies of Hydra's config repository share the one ConfigStore instead of copying it.

    Every compose (twice per run, once per basic-sweeper job, 123 times for ``--help``) builds a
    ``CachingConfigRepository`` that deep-copies its sources, and the structured-config source
    holds the ConfigStore singleton with every generated schema: that copy was ~70 % of a
    compose here (3.9 CPU-s of ``simllm --help``). The copy protects nothing: ``ConfigStore.load``
    already hands out a deep copy of the node it loads, and the store is a process-wide
    singleton (Hydra's main branch stopped holding it on the source, facebookresearch/hydra#2928;
    the 1.3 release installed here still copies it). Idempotent; composed configs are unchanged.
    """
    if "__deepcopy__" not in ConfigStore.__dict__:
        ConfigStore.__deepcopy__ = lambda self, memo: self


def cache_config_files() -> None:
    """Parse each config file once per process: Hydra re-reads and re-parses every YAML file of
    the defaults list on each compose (twice for a plain run: once to find the mode, once to
    run; twice per job of the basic sweeper), and OmegaConf's pure-Python YAML loader costs ~2 ms
    a file where a deep copy of the parsed node costs ~0.3 ms. Each call still gets its own deep
    copy (Hydra edits what it loads); a file is re-read when its mtime or size changes.
    Idempotent; composed configs are unchanged.
    """
    from hydra.core.plugins import Plugins
    from hydra.plugins.config_source import ConfigSource

    # Hydra's plugin scan (once per process) re-executes its core plugin modules, replacing these
    # classes: patch the ones the scan leaves in place
    for cls in Plugins.instance().discover(ConfigSource):
        if cls.__name__ not in ("FileConfigSource", "ImportlibResourcesConfigSource"):
            continue
        if getattr(cls.load_config, "_simllm_cached", False):
            continue
        cache: dict = {}

        def load_config(self, config_path, _orig=cls.load_config, _cache=cache):
            stamp = None
            root = source_dir(self)
            _files = root is not None   # a zipped package does not change while a process runs
            if _files:                  # files may (a package's too: conf/ is one)
                full = os.path.realpath(os.path.join(root, self._normalize_file_name(config_path)))
                stamp = compose_cache.stamp(full)
                if stamp is None:
                    return _orig(self, config_path)   # raises Hydra's own "not found"
            key = (self.path, self.provider, config_path)
            hit = _cache.get(key)
            if hit is None or hit[0] != stamp:
                hit = _cache[key] = (stamp, _parsed(self, config_path, full, stamp, _orig) if _files
                                     else _orig(self, config_path))
            if _files and _LOADED is not None:   # a compose being memoised: remember the file
                _LOADED.append((full, stamp))
            res = hit[1]
            return dataclasses.replace(res, config=copy.deepcopy(res.config), header=dict(res.header))

        load_config._simllm_cached = True
        cls.load_config = load_config


#: Config files as parsed (runner.compose_cache.Memo): a process whose composition comes from
#: the compose cache still reads the primary config (for ``hydra.searchpath``), ~5 ms of
#: OmegaConf's pure-Python YAML loader, and one that composes reads ~20 files.
_FILES = compose_cache.Memo("config-files", sources=(__file__, compose_cache.__file__),
                            packages=("hydra", "omegaconf", "yaml"))


def _parsed(source, config_path: str, full: str, stamp, orig):
    """``orig(source, config_path)`` (Hydra's load of a config file on disk, ``full`` with its
    ``stamp``), read back from ``_FILES`` when this version of the file was parsed before."""
    key = repr((type(source).__name__, source.provider, source.path, config_path, full, stamp))
    res = _FILES.get(key)
    if res is None:
        res = orig(source, config_path)
        _FILES.put(key, res)
    return res


_SOURCE_DIRS: dict = {}


def source_dir(source) -> str | None:
    """The folder on disk of a config source's files: a file source's path (absolute: a relative
    one is read from the current directory), a package source's folder (``pkg://conf``: conf/ is
    a package); None for the ConfigStore and zipped packages."""
    k = (type(source).__name__, source.path)
    if k[0] == "FileConfigSource":
        return os.path.abspath(source.path)
    if k not in _SOURCE_DIRS:
        d = None
        if k[0] == "ImportlibResourcesConfigSource":
            try:
                from importlib import resources

                files = resources.files(source.path)
                d = str(files) if isinstance(files, Path) and files.is_dir() else None
            except Exception:  # noqa: BLE001 - not a package on disk
                d = None
        _SOURCE_DIRS[k] = d
    return _SOURCE_DIRS[k]


#: (path, (mtime, size)) of each config file read while a compose is being memoised (else None).
_LOADED: list | None = None


class LazyNode:
    """The node of a ConfigStore entry, built on its first load (``store_lazily``): ``key``
    identifies what it is built from (a schema class, a file and its stamp), ``load()`` returns
    what ``ConfigStore.store`` would have been given (a dataclass, a DictConfig); the built node
    is kept."""

    __slots__ = ("key", "load", "node")

    def __init__(self, key, load):
        self.key, self.load, self.node = key, load, None

    def __deepcopy__(self, memo):
        """Shared, not copied: Hydra deep-copies the ConfigStore per compose where
        ``share_config_store`` is not installed (runner.compose in the tools), and a copy would
        build the node again each time; the built node is never handed out, only copies of it
        (``ConfigStore.load``)."""
        return self

    def get(self):
        if self.node is None:
            from omegaconf import OmegaConf

            self.node = OmegaConf.structured(self.load())   # what ConfigStore.store does
        return self.node


def lazy_configs() -> None:
    """Let a ConfigStore entry's node be built on its first load (``store_lazily``).

    Registering simllm's schemas builds every generated dataclass into an OmegaConf node
    (``OmegaConf.structured``: ~0.07 CPU-s a process) and registering the experiment presets
    parses each experiments/*.yaml (~0.1 CPU-s); a process whose compose is found in the compose
    cache (runner.compose_cache) or that selects no preset loads none of them. Listing a group
    (``--help``, Hydra's "Available options") needs only the entry's name, which is stored at
    once. ``ConfigStore.load`` hands out a deep copy of the built node, as of any node.
    Idempotent."""
    if getattr(ConfigStore._load, "_simllm", False):
        return
    orig = ConfigStore._load

    def _load(self, config_path):
        ret = orig(self, config_path)
        if isinstance(ret.node, LazyNode):
            ret = dataclasses.replace(ret, node=ret.node.get())
        return ret

    _load._simllm = True
    ConfigStore._load = _load


#: How many entries were stored in the ConfigStore in this process (``store`` and
#: ``store_lazily`` calls) and how many of them by ``store`` since ``install`` (a node whose
#: content the compose cache cannot stamp: it is off for the rest of the process).
_STORES = {"generation": 0, "eager": 0}


def store_lazily(name: str, key, load, group: str | None = None, package: str | None = None,
                 provider: str | None = None) -> None:
    """``ConfigStore.store(name, load(), group, package, provider)`` with the node built on its
    first load (``lazy_configs``). Storing again what is stored (the same ``key``) changes
    nothing."""
    from hydra.core.config_store import ConfigNode

    lazy_configs()
    cur = ConfigStore.instance().repo
    if group is not None:
        for d in group.split("/"):
            cur = cur.setdefault(d, {})
    if not name.endswith(".yaml"):
        name = f"{name}.yaml"
    old = cur.get(name)
    if (isinstance(old, ConfigNode) and isinstance(old.node, LazyNode) and old.node.key == key
            and (old.group, old.package, old.provider) == (group, package, provider)):
        return
    cur[name] = ConfigNode(name=name, node=LazyNode(key, load), group=group, package=package,
                           provider=provider)
    _STORES["generation"] += 1


def lazy_plugin_configs() -> None:
    """Scan Hydra's plugins with the schemas they store built on first load (``store_lazily``).

    Hydra imports every module under ``hydra_plugins`` once per process (``Plugins.instance()``)
    and the launcher plugins store their config schemas while they load (joblib, submitit and
    Ray here: 7 schemas built into OmegaConf nodes by ``OmegaConf.structured``; the scan took
    ~0.048 CPU-s of every ``simllm`` process, --help included, ~0.027 with this), though only a
    run selecting that launcher reads its schema. While the scan runs, a ``ConfigStore.store`` of a
    dataclass (type or instance) stores it lazily (anything else is stored as Hydra does); ``ConfigStore.load``
    hands out the node ``OmegaConf.structured`` builds from it, as ``store`` would have built.
    Runs the scan now if it has not run (idempotent; a later scan is Hydra's own)."""
    import dataclasses as dc

    from hydra.core.plugins import Plugins
    from hydra.core.singleton import Singleton

    if Plugins in Singleton._instances:
        return
    lazy_configs()
    orig = ConfigStore.store

    def store(self, name, node, group=None, package=None, provider=None):
        if dc.is_dataclass(node) and self is ConfigStore.instance():   # a schema or an instance of one
            store_lazily(name, ("plugin", node), lambda node=node: node, group, package, provider)
        else:
            orig(self, name, node, group, package, provider)

    ConfigStore.store = store
    try:
        Plugins.instance()
    finally:
        ConfigStore.store = orig


def store_listing() -> list:
    """Every ConfigStore entry as (path, provider, package, what its node is built from: the
    lazy entry's key, else None): what the compose cache keys the store by."""
    out = []

    def walk(d, prefix):
        for k in sorted(d):
            v = d[k]
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}/")
            else:
                node = getattr(v, "node", None)
                key = node.key if isinstance(node, LazyNode) else None
                out.append((prefix + k, getattr(v, "provider", None), getattr(v, "package", None),
                            _key_text(key)))

    walk(ConfigStore.instance().repo, "")
    return out


def _key_text(key):
    """A lazy entry's key as text: a class by its name (its source is stamped separately)."""
    if key is None:
        return None
    return repr(tuple(k.__qualname__ if isinstance(k, type) else k for k in key))


#: The compose memo: "entries" key -> [DefaultsList, file stamps, composed config or None,
#: compose-cache key or None]; "by_defaults" id(DefaultsList.defaults) -> entry.
_MEMO: dict = {"entries": {}, "by_defaults": {}}


def forget_compositions() -> None:
    """Drop this process's memoised compositions: the next compose of each selection reads the
    compose cache (runner.compose_cache) or composes (tests)."""
    _MEMO["entries"].clear()
    _MEMO["by_defaults"].clear()


def memoize_compose() -> None:
    """Compose each distinct selection of config-group options once per process; a job that
    differs only in values (``partition.tp=4``, ``hardware.hbm_bandwidth=5TB/s``) starts from a
    copy of that composition (read back from its pickle, compose_cache.Frozen: ~2 ms where a
    deep copy costs ~10 ms; a deep copy where it does not pickle), and Hydra's own code applies
    its value overrides and fills
    ``hydra.*`` (overrides, choices, override_dirname, ...) exactly as for a fresh compose.

    Hydra's basic sweeper composes every job twice (validate, then launch) and a compose of
    simllm's config (~470 keys of generated schemas merged from ~30 sources) costs ~75 ms where a
    deep copy of the result costs ~5 ms. What is memoised are the two steps that depend only on
    the group selection: the defaults list (``create_defaults_list``, called with the group
    overrides alone; the value overrides, classified as Hydra's ``Overrides`` classifies them --
    not a config group, or a dict value -- are handed back as its ``config_overrides`` in their
    order) and the merge of that defaults list (``_compose_config_from_defaults_list``).
    A memoised entry is used only while the config search path, the ConfigStore (every
    ``store`` call counts) and the stamps (mtime, size) of the config files it read are
    unchanged; sweep overrides and anything that fails take Hydra's own path. A selection this
    process has not composed is looked up in the compose cache (runner.compose_cache: the same
    two results, kept across processes) before it is composed, and written there after.
    Idempotent.
    """
    import hydra._internal.config_loader_impl as cli

    if getattr(cli.create_defaults_list, "_simllm", False):
        return
    orig_defaults = cli.create_defaults_list
    orig_compose = cli.ConfigLoaderImpl._compose_config_from_defaults_list
    orig_store = ConfigStore.store

    def store(self, *args, **kwargs):
        _STORES["generation"] += 1
        _STORES["eager"] += 1
        return orig_store(self, *args, **kwargs)

    ConfigStore.store = store
    entries, by_defaults = _MEMO["entries"], _MEMO["by_defaults"]

    def remember(key, entry):
        """Memo ``entry`` ([DefaultsList, file stamps, composed config or None, disk key]) under
        ``key``, replacing (and unindexing) an older entry of the same key."""
        old = entries.pop(key, None)
        if old is not None:
            by_defaults.pop(id(old[0].defaults), None)
        entries[key] = entry
        by_defaults[id(entry[0].defaults)] = entry

    def create_defaults_list(repo, config_name, overrides_list, prepend_hydra, skip_missing):
        global _LOADED
        try:
            if any(o.is_sweep_override() or o.input_line is None for o in overrides_list):
                raise LookupError
            values = [o for o in overrides_list
                      if isinstance(o.value(), dict) or not repo.group_exists(o.key_or_group)]
            groups = [o for o in overrides_list if not any(o is v for v in values)]
            sources = tuple((type(s).__name__, s.provider, s.path, source_dir(s))
                            for s in repo.get_sources())
            key = (sources, config_name, tuple(o.input_line for o in groups), prepend_hydra,
                   skip_missing, _STORES["generation"])
        except Exception:  # noqa: BLE001 - Hydra's own path raises its own error
            return orig_defaults(repo, config_name, overrides_list, prepend_hydra, skip_missing)
        entry = entries.get(key)
        if entry is not None and all(compose_cache.stamp(f) == st for f, st in entry[1]):
            return dataclasses.replace(entry[0], config_overrides=values)
        disk_key = None
        if _STORES["eager"] == 0 and compose_cache.enabled():   # the cross-process cache
            disk_key = compose_cache.key(key[:-1], store_listing())
            hit = compose_cache.load(disk_key)
            if hit is not None:
                dl, loaded, cfg = hit
                remember(key, [dl, loaded, cfg, None])
                return dataclasses.replace(dl, config_overrides=values)
        outer = _LOADED       # the files this compose read so far (the primary config), if any
        if outer is None:
            _LOADED = []
        try:
            dl = orig_defaults(repo, config_name, groups, prepend_hydra, skip_missing)
        finally:
            loaded = list(_LOADED)
            if outer is None:
                _LOADED = None
        if dl.config_overrides:   # cannot happen (every value override was taken out): no memo
            return orig_defaults(repo, config_name, overrides_list, prepend_hydra, skip_missing)
        remember(key, [dl, loaded, None, disk_key])
        return dataclasses.replace(dl, config_overrides=values)

    def compose_config_from_defaults_list(self, defaults, repo):
        entry = by_defaults.get(id(defaults))
        if entry is None or entry[0].defaults is not defaults:
            return orig_compose(self, defaults, repo)
        if entry[2] is None:
            cfg = orig_compose(self, defaults, repo)
            frozen = compose_cache.freeze(cfg)   # its pickle: a copy costs a fifth of a deep copy
            entry[2] = frozen if frozen is not None else copy.deepcopy(cfg)
            if frozen is not None and entry[3] is not None and _STORES["eager"] == 0:
                compose_cache.save(entry[3], entry[0], entry[1], frozen,
                                   [d for d in map(source_dir, repo.get_sources()) if d is not None])
            return cfg
        if isinstance(entry[2], compose_cache.Frozen):
            return entry[2].thaw()
        return copy.deepcopy(entry[2])

    orig_impl = cli.ConfigLoaderImpl._load_configuration_impl

    def load_configuration_impl(self, *args, **kwargs):
        """Hydra's compose, recording the config files it reads (the primary config is read
        before the defaults list, and Hydra's per-compose cache does not read it again)."""
        global _LOADED
        outer, _LOADED = _LOADED, []
        try:
            return orig_impl(self, *args, **kwargs)
        finally:
            _LOADED = outer

    create_defaults_list._simllm = True
    create_defaults_list._hydra = orig_defaults            # Hydra's own (tests compare with it)
    compose_config_from_defaults_list._hydra = orig_compose
    load_configuration_impl._hydra = orig_impl
    cli.create_defaults_list = create_defaults_list
    cli.ConfigLoaderImpl._compose_config_from_defaults_list = compose_config_from_defaults_list
    cli.ConfigLoaderImpl._load_configuration_impl = load_configuration_impl


def fast_group_listing() -> None:
    """List config groups and options without rebuilding the same helpers for every group.

    ``simllm --help`` (and Hydra's "Available options" of a bad option) lists each config group's
    options: 128 calls of ``ConfigLoaderImpl.get_group_options`` here, each building a new
    overrides parser (``create_functions``: the grammar's functions registered again, each with
    ``inspect.signature``) and asking ``importlib.resources.files`` for conf/'s package again for
    every file it looks at (~1,700 calls): ~0.03 CPU-s of a 0.35 CPU-s ``--help``. The
    functions registry is built once (Hydra registers the same built-ins every time and never
    changes them after) and a package's folder is looked up once per process (``pkg://``
    sources: conf/ and Hydra's own). Listings, parses and composed configs are unchanged.
    Idempotent."""
    import hydra._internal.core_plugins.importlib_resources_config_source as irc
    import hydra.core.override_parser.overrides_parser as op

    if not getattr(op.create_functions, "_simllm", False):
        orig_create = op.create_functions
        made: list = []

        def create_functions():
            if not made:
                made.append(orig_create())
            return made[0]

        create_functions._simllm = True
        create_functions._hydra = orig_create
        op.create_functions = create_functions
    if not isinstance(irc.resources, _PackageFiles):
        irc.resources = _PackageFiles(irc.resources)


#: Overrides as parsed (runner.compose_cache.Memo): Hydra's ANTLR parser costs ~3 ms an
#: override in a fresh process.
_OVERRIDES = compose_cache.Memo("overrides", sources=(__file__, compose_cache.__file__),
                                packages=("hydra", "antlr4"))


def memoize_override_parses() -> None:
    """Parse each command-line override once across processes: ``OverridesParser.parse_rule`` of
    an override (with Hydra's own grammar functions, ``fast_group_listing``'s shared registry)
    is read back from ``_OVERRIDES`` when the same text was parsed before (a new copy each time:
    Hydra sets the copy's config loader); what fails to parse is not kept and fails as Hydra
    fails. Parsed overrides are equal to a fresh parse (tests/runner/test_faststart.py).
    Idempotent; after ``fast_group_listing``."""
    import hydra.core.override_parser.overrides_parser as op

    if getattr(op.OverridesParser.parse_rule, "_simllm", False):
        return
    orig = op.OverridesParser.parse_rule

    def parse_rule(self, s, rule_name):
        if (rule_name != "override" or not isinstance(s, str)
                or not getattr(op.create_functions, "_simllm", False) or self.functions is not op.create_functions()):
            return orig(self, s, rule_name)
        hit = _OVERRIDES.get(s)
        if hit is not None:
            return hit
        ret = orig(self, s, rule_name)
        _OVERRIDES.put(s, ret)
        return ret

    parse_rule._simllm = True
    parse_rule._hydra = orig
    op.OverridesParser.parse_rule = parse_rule


class _PackageFiles:
    """``importlib.resources`` with ``files(package)`` looked up once per package and process
    (fast_group_listing); every other attribute is the module's."""

    def __init__(self, resources):
        self._resources = resources
        self._files: dict = {}

    def files(self, package):
        if not isinstance(package, str):
            return self._resources.files(package)
        hit = self._files.get(package)
        if hit is None:
            hit = self._files[package] = self._resources.files(package)
        return hit

    def __getattr__(self, name):
        return getattr(self._resources, name)


def _plain_ascii(obj) -> bool:
    """Is this container made only of dicts (keys: printable-ASCII strings of 1-99 characters),
    lists, printable-ASCII strings, numbers, booleans and None?"""
    if isinstance(obj, str):
        return obj.isascii() and obj.isprintable()
    if obj is None or isinstance(obj, (bool, int, float)):
        return True
    if isinstance(obj, list):
        return all(_plain_ascii(v) for v in obj)
    if isinstance(obj, dict):
        return all(type(k) is str and 0 < len(k) < 100 and _plain_ascii(k) and _plain_ascii(v)
                   for k, v in obj.items())
    return False


#: The lines of Hydra's ``run_job`` that ``lean_task_copy`` relies on (checked in its source).
_RUN_JOB_LINES = ("task_cfg = copy.deepcopy(config)", 'del task_cfg["hydra"]',
                  "hydra_cfg = copy.deepcopy(HydraConfig.instance().cfg)")


class _TaskCopy:
    """``hydra.core.utils``' view of the ``copy`` module (``lean_task_copy``): ``deepcopy`` of a
    job's whole config (a root DictConfig holding ``hydra`` and the task's keys) leaves its
    ``hydra`` node uncopied (an empty node stands there, which run_job deletes next); every other
    call is ``copy.deepcopy``."""

    def __getattr__(self, name):
        return getattr(copy, name)

    @staticmethod
    def deepcopy(x, memo=None):
        from omegaconf import DictConfig

        if memo is None and type(x) is DictConfig and x._get_parent() is None and not x._is_none() \
                and not x._is_missing():
            content = x.__dict__["_content"]
            if isinstance(content, dict) and "hydra" in content and len(content) > 1:
                return copy.deepcopy(x, {id(content["hydra"]): DictConfig({})})
        return copy.deepcopy(x, memo)


def lean_task_copy() -> None:
    """Hydra's ``run_job`` deep-copies the job's whole config to hand the task its config, then
    deletes ``hydra`` from the copy: the copy of the hydra node (~3.5 ms of a ~12 ms copy for
    simllm's config) is thrown away at once. With this its deep copy is skipped (``_TaskCopy``):
    the task's config is the same deep copy, without the node it never holds. Applied only where
    ``run_job``'s source has the lines this relies on (``_RUN_JOB_LINES``). Idempotent."""
    import hydra.core.utils as hcu

    if isinstance(hcu.copy, _TaskCopy):
        return
    from runner.compiled import source_of

    source = source_of(hcu.run_job)
    if source is None:
        return
    if all(line in source for line in _RUN_JOB_LINES) and source.count("copy.deepcopy(") == 2:
        hcu.copy = _TaskCopy()


#: What makes copy.deepcopy take another path than its generic one for an instance of a class.
_COPY_HOOKS = ("__deepcopy__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__",
               "__slots__", "__getnewargs__", "__getnewargs_ex__")


def _metadata_deepcopy(self, memo):
    """``copy.deepcopy`` of an OmegaConf node's metadata, as copy's generic path for a plain
    instance makes it (``__reduce_ex__`` -> ``cls.__new__(cls)``, memoised, then the instance
    dict's values deep-copied into the new one), without its ~10 calls of reduce machinery: each
    value is deep-copied with ``memo``, an atomic one (type, None, str, bool, number) kept as it
    is, an empty ``defaultdict`` (the resolver cache) made anew with its deep-copied factory and
    memoised, as copy reconstructs one."""
    cls = type(self)
    res = cls.__new__(cls)
    memo[id(self)] = res
    dispatch, atomic = copy._deepcopy_dispatch, copy._deepcopy_atomic
    state = {}
    for k, v in self.__dict__.items():
        t = type(v)
        if dispatch.get(t) is atomic:
            state[k] = v
        elif t is defaultdict and not v:
            y = state[k] = defaultdict(copy.deepcopy(v.default_factory, memo))
            memo[id(v)] = y
        else:
            state[k] = copy.deepcopy(v, memo)
    res.__dict__.update(state)
    return res


_metadata_deepcopy._simllm = True


def fast_metadata_copy() -> None:
    """Deep copies of OmegaConf configs (Hydra copies a job's config and its ``hydra`` node ~4
    times per job; a compose copies every node it loads) spend about half their time copying
    each node's metadata through copy's generic reduce path (``Metadata``, a plain dataclass:
    ~14.5 -> ~8 ms for a copy of simllm's config here). ``Metadata`` gets ``_metadata_deepcopy``,
    which makes the same copy directly; applied only where neither it nor ``ContainerMetadata``
    nor a base class customises copying or pickling (``_COPY_HOOKS``), so that copy's generic
    path is what it replaces (tests/runner/test_faststart.py compares the copies node by node).
    Idempotent."""
    from omegaconf.base import ContainerMetadata, Metadata

    if getattr(Metadata.__dict__.get("__deepcopy__"), "_simllm", False):
        return
    for cls in {*Metadata.__mro__, *ContainerMetadata.__mro__} - {object}:
        if any(h in vars(cls) for h in _COPY_HOOKS):
            return
    Metadata.__deepcopy__ = _metadata_deepcopy


#: OmegaConf's value nodes whose ``__deepcopy__`` is ``res = <Class>(); self._deepcopy_impl(res,
#: memo); return res`` (``_VALUE_COPY``), and the lines of ``ValueNode._deepcopy_impl``.
_VALUE_NODES = ("AnyNode", "StringNode", "PathNode", "IntegerNode", "BytesNode", "FloatNode", "BooleanNode")
_VALUE_COPY = ("res = {name}()", "self._deepcopy_impl(res, memo)", "return res")
_DEEPCOPY_IMPL = ('res.__dict__["_metadata"] = copy.deepcopy(self._metadata, memo=memo)',
                  'res.__dict__["_val"] = self._val', 'res.__dict__["_parent"] = self._parent')
#: The instance dict a value node's ``__init__`` leaves, in order.
_VALUE_NODE_KEYS = ["_metadata", "_parent", "_flags_cache", "_val"]


def _body(func) -> list | None:
    """The statements of a function's body (stripped lines without comments or the docstring
    line), None where its source cannot be read."""
    from runner.compiled import source_of

    src = source_of(func)
    if src is None:
        return None
    lines = [ln.split("#", 1)[0].strip() for ln in src.splitlines()[1:]]
    return [ln for ln in lines if ln]


def _value_copier(cls):
    """``cls.__deepcopy__`` as OmegaConf writes it (``_VALUE_COPY``), without building the new
    node through ``cls()`` (a metadata object, a validated ``None`` value and two flag changes,
    all then replaced): the instance dict ``cls()`` leaves (``_VALUE_NODE_KEYS``, in order) with
    the values ``_deepcopy_impl`` puts there and the flag cache ``cls()`` leaves (None)."""

    def __deepcopy__(self, memo):
        res = cls.__new__(cls)
        d = res.__dict__
        d["_metadata"] = copy.deepcopy(self._metadata, memo=memo)
        d["_parent"] = self._parent
        d["_flags_cache"] = None
        d["_val"] = self._val
        return res

    __deepcopy__._simllm = True
    return __deepcopy__


def fast_value_node_copy() -> None:
    """A deep copy of an OmegaConf config builds each of its value nodes as a fresh node
    (``AnyNode()``: metadata, a validated ``None``, read-write flags set and reset) and then
    replaces its metadata, value and parent (``ValueNode._deepcopy_impl``); with
    ``_value_copier`` the node is made with the same instance dict directly (~8 -> ~5 ms for a
    copy of simllm's config here, after ``fast_metadata_copy``). Applied to each class of
    ``_VALUE_NODES`` only where its ``__deepcopy__`` and ``_deepcopy_impl`` are the code this
    repeats and a new node of the class has the instance dict this makes
    (tests/runner/test_faststart.py compares the copies node by node). Idempotent."""
    import omegaconf.nodes as nodes

    impl = _body(nodes.ValueNode._deepcopy_impl)
    if impl is None or [ln for ln in impl if not ln.startswith('"""')] != list(_DEEPCOPY_IMPL):
        return
    for name in _VALUE_NODES:
        cls = getattr(nodes, name, None)
        own = vars(cls).get("__deepcopy__") if isinstance(cls, type) else None
        if own is None or getattr(own, "_simllm", False):
            continue
        if _body(own) != [line.format(name=name) for line in _VALUE_COPY]:
            continue
        try:
            fresh = cls()
        except Exception:  # noqa: BLE001 - a node that cannot be built empty keeps its own copy
            continue
        if list(vars(fresh)) != _VALUE_NODE_KEYS or fresh.__dict__["_flags_cache"] is not None:
            continue
        new = _value_copier(cls)
        new._hydra = own
        cls.__deepcopy__ = new


def fast_job_yaml() -> None:
    """Write the ``.hydra/*.yaml`` files of a job with libyaml's emitter where its text is the
    same as OmegaConf's.

    Hydra writes config.yaml, hydra.yaml and overrides.yaml of every job with
    ``OmegaConf.to_yaml`` (PyYAML's pure-Python emitter; ~3 ms for simllm's job config). The C
    emitter with the same representers (OmegaConf's ``str`` representer on PyYAML's
    ``Representer``) writes the same text for plain data; the two emitters differ on control
    characters and line breaks inside quoted strings and on empty or long (128+) keys, so a
    container holding anything but printable-ASCII strings (keys of 1-99 characters), numbers,
    booleans, None, lists and dicts -- hydra.yaml's multi-line help templates, for one -- keeps
    OmegaConf's own path. Same call as ``OmegaConf.to_yaml(cfg)`` otherwise (resolve=False,
    sort_keys=False, enums as strings). Idempotent.
    """
    import hydra.core.utils as hcu
    import yaml
    from omegaconf import OmegaConf
    from omegaconf._utils import OmegaConfDumper, get_omega_conf_dumper

    if getattr(hcu._save_config, "_simllm", False) or not hasattr(yaml, "CDumper"):
        return

    class CDumper(yaml.CDumper):
        pass

    CDumper.add_representer(str, OmegaConfDumper.str_representer)

    def _save_config(cfg, filename, output_dir):   # hydra.core.utils._save_config's steps
        container = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
        dumper = CDumper if _plain_ascii(container) else get_omega_conf_dumper()
        output_dir.mkdir(parents=True, exist_ok=True)
        with open(str(output_dir / filename), "w", encoding="utf-8") as file:
            file.write(yaml.dump(container, default_flow_style=False, allow_unicode=True,
                                 sort_keys=False, Dumper=dumper))

    _save_config._simllm = True
    hcu._save_config = _save_config


def fast_help() -> None:
    """``--help``, ``--cfg`` and ``--info`` print the same text with less work.

    * Hydra prints the composed config with ``OmegaConf.to_yaml`` (PyYAML's pure-Python emitter,
      ~0.012 CPU-s for simllm's config): within Hydra's ``hydra._internal.hydra`` module it is
      written by libyaml's emitter where that gives the same text, as ``fast_job_yaml`` decides
      (plain printable-ASCII data, ``sort_keys=False``; anything else takes OmegaConf's path);
    * ``--help`` lists each config group's options twice (once to find the groups, once to print
      them), each listing building a new config repository: while one help text is rendered, a
      listing is done once (the files and the ConfigStore cannot change in between).
    Idempotent."""
    import hydra._internal.hydra as hh
    from hydra.core.object_type import ObjectType

    if getattr(hh.Hydra.get_help, "_simllm", False):
        return
    to_yaml = _libyaml_to_yaml()
    if to_yaml is not None and not getattr(hh.OmegaConf, "_simllm", False):
        class OmegaConf(hh.OmegaConf):   # the module's OmegaConf: only to_yaml differs
            _simllm = True

        OmegaConf.to_yaml = staticmethod(to_yaml)
        hh.OmegaConf = OmegaConf
    orig = hh.Hydra.get_help

    def get_help(self, help_cfg, cfg, args_parser, resolve):
        loader = self.config_loader
        listings: dict = {}
        own = loader.get_group_options

        def get_group_options(group_name, results_filter=ObjectType.CONFIG, config_name=None,
                              overrides=None):
            k = (group_name, results_filter, config_name, tuple(overrides or ()))
            if k not in listings:
                listings[k] = own(group_name, results_filter, config_name, overrides)
            return list(listings[k])

        loader.get_group_options = get_group_options
        try:
            return orig(self, help_cfg, cfg, args_parser, resolve)
        finally:
            del loader.get_group_options

    get_help._simllm = True
    get_help._hydra = orig
    hh.Hydra.get_help = get_help


def _libyaml_to_yaml():
    """``OmegaConf.to_yaml`` written by libyaml's emitter where the text is the same
    (``fast_job_yaml``), else by OmegaConf; None without libyaml."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf._utils import OmegaConfDumper, _ensure_container, get_omega_conf_dumper

    if not hasattr(yaml, "CDumper"):
        return None

    class CDumper(yaml.CDumper):
        pass

    CDumper.add_representer(str, OmegaConfDumper.str_representer)

    def to_yaml(cfg, *, resolve: bool = False, sort_keys: bool = False) -> str:
        container = OmegaConf.to_container(_ensure_container(cfg), resolve=resolve, enum_to_str=True)
        dumper = CDumper if not sort_keys and _plain_ascii(container) else get_omega_conf_dumper()
        return yaml.dump(container, default_flow_style=False, allow_unicode=True,
                         sort_keys=sort_keys, Dumper=dumper)

    return to_yaml


#: Roots whose config files could set ``hydra.mode`` (conf/ and the experiment presets).
_CONFIG_ROOTS = (Path(__file__).resolve().parent.parent / "conf", experiments.EXPERIMENTS_DIR)


_MODE_KEY = re.compile(r"\bmode\s*:")


def _mode_cannot_be_set(overrides, roots=_CONFIG_ROOTS) -> bool:
    """True when nothing but ``-m`` can make this a multirun: no override or command-line option
    that could bring in ``hydra.mode`` (a ``mode`` key, a ``hydra/`` group, ``hydra.searchpath``,
    another config dir or name; ``hydra.run.dir`` and the like cannot) and no config file of
    simllm's (under ``roots``) with a ``mode:`` key (``_has_mode_key``)."""
    for o in overrides:
        key = str(o).split("=", 1)[0].lstrip("+~")
        if (key in ("hydra", "mode") or key.endswith(".mode") or key.startswith("hydra/")
                or key.startswith("hydra.searchpath")):
            return False
    if any(a.startswith(("-cp", "-cn", "-cd", "--config", "--experimental")) for a in sys.argv[1:]):
        return False
    cache = _mode_scan_cache()
    for root in roots:
        for path in root.rglob("*.yaml"):
            try:
                if _has_mode_key(path, cache):
                    return False
            except OSError:
                return False
    return True


def _has_mode_key(path: Path, cache) -> bool:
    """Does the file have a ``mode:`` key? Read once per version of the file: the answer is kept
    in engine.persist's cache under its path and stamp (mtime, size), so a process reads ~3 MB of
    conf/ and experiments/ (~5 ms a process here) only when a file changed."""
    st = os.stat(path)
    key = f"{path}|{st.st_mtime_ns}|{st.st_size}"
    hit = cache.get(key)
    if hit is None:
        hit = bool(_MODE_KEY.search(path.read_text(encoding="utf-8")))
        cache.put(key, hit)
    return hit


_MODE_CACHE: list = []


def _mode_scan_cache():
    """The persistent cache of ``_has_mode_key`` (one per process; its file is stamped with this
    module's source, the pattern's home; ``SIMLLM_PERSIST=0`` keeps nothing)."""
    if not _MODE_CACHE:
        from engine.persist import JsonCache

        _MODE_CACHE.append(JsonCache("hydra-mode-keys", sources=(__file__,)))
    return _MODE_CACHE[0]


def skip_mode_compose() -> None:
    """Skip the compose Hydra spends only on reading ``hydra.mode`` when nothing can set it.

    Before every ``simllm`` process Hydra composes the whole config once (``Hydra.get_mode``)
    just to read ``hydra.mode`` (RUN, MULTIRUN or unset), then composes it again to run: ~0.15
    CPU-s, a sixth of a one-job process. When no override, option or config file of simllm's can
    set ``hydra.mode`` that compose can only answer "unset" (``None``, the value it also returns
    on any error), so this answers it directly; otherwise Hydra's own method runs. Idempotent.
    """
    from hydra._internal.hydra import Hydra

    if getattr(Hydra.get_mode, "_simllm", False):
        return
    orig = Hydra.get_mode

    def get_mode(self, config_name, overrides):
        if _mode_cannot_be_set(overrides):
            return None
        return orig(self, config_name, overrides)

    get_mode._simllm = True
    Hydra.get_mode = get_mode


def _may_use_experiments(argv) -> bool:
    """Could this command line select or list an ``experiment`` preset? (Registering the presets
    parses every experiments/*.yaml: ~0.075 CPU-s a process.) Yes when an argument names
    ``experiment``, when Hydra is asked to list or print config (help, info, cfg, completion) or
    to use another config, and when conf/config.yaml's defaults select one."""
    if any("experiment" in a for a in argv):
        return True
    if any(a.split("=", 1)[0] in _LISTING_FLAGS or a.startswith(("-c", "--c", "-s", "--s", "-i", "--i", "-h",
                                                                   "--h")) for a in argv):
        return True
    primary = _CONFIG_ROOTS[0] / "config.yaml"
    try:
        return bool(re.search(r"^\s*-\s*experiment\s*:\s*(?!null\b)\S", primary.read_text(), re.M))
    except OSError:
        return True


_LISTING_FLAGS = {"--help", "-h", "--hydra-help", "--info", "-i", "--cfg", "-c", "--resolve",
                  "--package", "-p", "--config-path", "-cp", "--config-name", "-cn", "--config-dir",
                  "-cd", "--shell-completion", "-sc", "--experimental-rerun"}


def enabled() -> bool:
    """Are the shortcuts on (``SIMLLM_HYDRA_SHORTCUTS`` unset or not 0)?"""
    return os.environ.get(SHORTCUTS_ENV, "1") != "0"


def install() -> None:
    """Apply every patch of this module, unless ``SIMLLM_HYDRA_SHORTCUTS=0``. Idempotent."""
    if not enabled():
        return
    share_config_store()
    lazy_plugin_configs()
    cache_config_files()
    skip_mode_compose()
    memoize_compose()
    lean_task_copy()
    fast_metadata_copy()
    fast_value_node_copy()
    fast_job_yaml()
    fast_group_listing()
    memoize_override_parses()
    fast_help()


#: Should this command line register the experiment presets? (public name of the check above)
may_use_experiments = _may_use_experiments
