"""The compose cache (runner.compose_cache) and the lazily built ConfigStore entries change no
config and no error:

* a composition read back from the cache (a new process's first compose) equals Hydra's own
  compose, hydra node included, for group and value overrides; bad overrides (a wrong type, an
  unknown key, an unknown option) fail with Hydra's own exception and message after a hit;
* it is used only while what it was built from is unchanged: an edited config file, an option
  added to a group, an eager ``ConfigStore.store`` and (in a copy of the checkout, run in new
  processes) an edited schema default each lead to a fresh compose with the new content;
* a corrupt, truncated or foreign file costs only the compose (and is replaced);
* lazily stored schemas and presets build the same nodes as ``ConfigStore.store``.
"""

import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

import runner.app  # noqa: F401 - installs the shortcuts, as the simllm process does
from runner import compose_cache, hydra_fast
from tests.conftest import CONF, ROOT


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty compose cache in ``tmp_path``/cache; records each load's result in ``loads``."""
    monkeypatch.setenv("SIMLLM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(compose_cache.ENABLE_ENV, raising=False)
    monkeypatch.delenv("SIMLLM_PERSIST", raising=False)
    # an earlier test's ConfigStore.store turned the cache off for this process (the tests that
    # store a node remove it again): on again for this test, as in a new process
    monkeypatch.setitem(hydra_fast._STORES, "eager", 0)
    loads = []
    orig = compose_cache.load

    def load(k):
        hit = orig(k)
        loads.append(hit is not None)
        return hit

    monkeypatch.setattr(compose_cache, "load", load)
    hydra_fast.forget_compositions()
    yield loads
    hydra_fast.forget_compositions()


def _compose(config_dir, overrides, own=False):
    """The full composed config (hydra node included) as YAML text, or (type, message) of the
    error; ``own``: with Hydra's create_defaults_list and merge (no memo, no cache)."""
    import hydra._internal.config_loader_impl as cli

    memo = (cli.create_defaults_list, cli.ConfigLoaderImpl._compose_config_from_defaults_list)
    if own:
        cli.create_defaults_list = memo[0]._hydra
        cli.ConfigLoaderImpl._compose_config_from_defaults_list = memo[1]._hydra
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
        return OmegaConf.to_yaml(cfg)
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    finally:
        cli.create_defaults_list, cli.ConfigLoaderImpl._compose_config_from_defaults_list = memo
        GlobalHydra.instance().clear()


def _files(tmp_path):
    return sorted((tmp_path / "cache" / "compose").glob("*.pkl"))


@pytest.mark.parametrize("overrides", [
    [],
    ["hardware=h200", "partition.tp=4", "hardware.hbm_bandwidth=5TB/s"],
    ["engine=des", "workload=poisson_chat", "workload.num_requests=50", "+tracking.tags.a=1"],
])
def test_cached_composition_equals_hydras_own(cache, tmp_path, overrides):
    first = _compose(CONF, overrides)                 # composes, writes the file
    assert cache == [False] and len(_files(tmp_path)) == 1
    hydra_fast.forget_compositions()                  # as a new process
    again = _compose(CONF, overrides)
    assert cache == [False, True]
    assert first == again == _compose(CONF, overrides, own=True)


def test_bad_overrides_fail_the_same_after_a_hit(cache):
    assert isinstance(_compose(CONF, []), str)
    for bad in (["partition.tp=abc"], ["hardware.typo=1"], ["partition.no_such_key=1"],
                ["workload.batch_size=2", "+print_table=false"]):
        hydra_fast.forget_compositions()
        err = _compose(CONF, bad)
        assert cache[-1] is True, bad                 # the base composition came from the file
        assert isinstance(err, tuple) and err == _compose(CONF, bad, own=True), bad
    assert "partition.tp" in _compose(CONF, ["partition.tp=abc"])[1]
    hydra_fast.forget_compositions()
    err = _compose(CONF, ["hardware=no_such_option"])
    assert isinstance(err, tuple) and err == _compose(CONF, ["hardware=no_such_option"], own=True)


def _tmp_conf(tmp_path):
    d = tmp_path / "conf"
    (d / "g").mkdir(parents=True)
    (d / "config.yaml").write_text("defaults:\n  - g: a\n  - _self_\nx: 1\n")
    (d / "g" / "a.yaml").write_text("v: 1\n")
    return d


def _touch_later(path: Path, text: str) -> None:
    time.sleep(0.01)
    path.write_text(text)
    os.utime(path, ns=(time.time_ns(), time.time_ns()))


def test_edited_config_file_or_new_option_is_not_served_stale(cache, tmp_path):
    d = _tmp_conf(tmp_path)
    assert "v: 1" in _compose(d, ["x=2"])
    hydra_fast.forget_compositions()
    assert "v: 1" in _compose(d, ["x=3"]) and cache[-1] is True
    _touch_later(d / "g" / "a.yaml", "v: 5\n")        # an option's file
    hydra_fast.forget_compositions()
    out = _compose(d, ["x=3"])
    assert cache[-1] is False and "v: 5" in out and out == _compose(d, ["x=3"], own=True)
    _touch_later(d / "config.yaml", "defaults:\n  - g: a\n  - _self_\nx: 1\nw: 8\n")   # the primary
    hydra_fast.forget_compositions()
    out = _compose(d, [])
    assert cache[-1] is False and "w: 8" in out
    hydra_fast.forget_compositions()
    assert _compose(d, []) == out and cache[-1] is True
    time.sleep(0.01)
    (d / "g" / "b.yaml").write_text("v: 2\n")          # a new option: the folder's stamp changes
    hydra_fast.forget_compositions()
    assert _compose(d, []) == out and cache[-1] is False


def test_corrupt_or_foreign_file_falls_back(cache, tmp_path):
    good = _compose(CONF, ["partition.tp=2"])
    (path,) = _files(tmp_path)
    data = path.read_bytes()
    for bad in (b"", b"not a pickle", data[: len(data) // 2],
                pickle.dumps({"format": compose_cache.FORMAT, "key": "other", "stamps": []}),
                data[: len(data) - 50]):
        path.write_bytes(bad)
        hydra_fast.forget_compositions()
        assert _compose(CONF, ["partition.tp=2"]) == good
        assert cache[-1] is False
        assert path.read_bytes() == data or pickle.loads(path.read_bytes())["key"] == path.stem  # rewritten
    hydra_fast.forget_compositions()
    assert _compose(CONF, ["partition.tp=2"]) == good and cache[-1] is True


def test_eager_store_turns_the_cache_off_for_the_process(cache, tmp_path, monkeypatch):
    d = _tmp_conf(tmp_path)
    _compose(d, [])
    monkeypatch.setitem(hydra_fast._STORES, "eager", hydra_fast._STORES["eager"])
    ConfigStore.instance().store(group="g", name="c", node={"v": 9})
    try:
        hydra_fast.forget_compositions()
        assert "v: 9" in _compose(d, ["g=c"])
        hydra_fast.forget_compositions()
        n = len(cache)
        assert "v: 1" in _compose(d, [])
        assert len(cache) == n                           # not looked up: the store cannot be stamped
    finally:
        ConfigStore.instance().repo.pop("g", None)


def test_off_switches(cache, tmp_path, monkeypatch):
    monkeypatch.setenv(compose_cache.ENABLE_ENV, "0")
    _compose(CONF, ["partition.tp=3"])
    monkeypatch.setenv(compose_cache.ENABLE_ENV, "1")
    monkeypatch.setenv("SIMLLM_PERSIST", "0")
    hydra_fast.forget_compositions()
    _compose(CONF, ["partition.tp=3"])
    assert cache == [] and _files(tmp_path) == []


def test_lazy_entries_build_what_store_builds():
    from runner import experiments, schema

    cs = ConfigStore.instance()
    lazy = {}
    for name in ("config_schema", "hardware/hardware_schema", "engine/engine_schema",
                 "experiment/capacity"):
        lazy[name] = OmegaConf.to_yaml(cs.load(f"{name}.yaml").node)
    saved = cs.repo
    cs.repo = {}
    try:
        schema.register(lazy=False)
        experiments.register(lazy=False)
        for name, text in lazy.items():
            assert OmegaConf.to_yaml(cs.load(f"{name}.yaml").node) == text, name
    finally:
        cs.repo = saved
    node = cs.repo["hardware"]["hardware_schema.yaml"].node
    assert isinstance(node, hydra_fast.LazyNode)
    import copy as copy_

    assert copy_.deepcopy(node) is node     # Hydra's per-compose copy of the store (no runner.app)
    gen = hydra_fast._STORES["generation"]
    schema.register()                                  # again: nothing changes
    assert cs.repo["hardware"]["hardware_schema.yaml"].node is node
    assert hydra_fast._STORES["generation"] == gen


def _compose_in(checkout: Path, env, overrides=()):
    code = ("import sys; from omegaconf import OmegaConf; import runner.app; "
            "from runner.compose import compose; "
            f"print(OmegaConf.to_yaml(compose({list(overrides)!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=checkout, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_changed_schema_default_invalidates_across_processes(tmp_path):
    """A copy of the checkout composes in new processes: the second reads the cache; after a
    schema default is edited (runner/schema.py) the next one composes again and sees it."""
    copy = tmp_path / "checkout"
    for part in ("runner", "engine", "conf", "experiments", "hydra_plugins"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__", "*.npz"))
    env = {**os.environ, "SIMLLM_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(copy)}
    env.pop(compose_cache.ENABLE_ENV, None)
    env.pop("SIMLLM_PERSIST", None)
    first = _compose_in(copy, env)
    files = sorted((tmp_path / "cache" / "compose").glob("*.pkl"))
    assert len(files) == 1 and "plan: null" in first
    stamp = files[0].stat().st_mtime_ns
    assert _compose_in(copy, env) == first
    assert files[0].stat().st_mtime_ns > stamp            # read (marked used), not rewritten
    src = copy / "runner" / "schema.py"
    text = src.read_text()
    assert "    plan: Optional[Any] = None\n" in text
    time.sleep(0.01)
    src.write_text(text.replace("    plan: Optional[Any] = None\n", "    plan: Optional[Any] = 7\n"))
    changed = _compose_in(copy, env)
    assert "plan: 7" in changed and changed == first.replace("plan: null", "plan: 7")
    assert sorted((tmp_path / "cache" / "compose").glob("*.pkl")) == files   # same key, new stamps
    assert _compose_in(copy, env) == changed


def test_frozen_copies_are_independent_deep_copies(cfg_of):
    """compose_cache.Frozen: each thaw is a new config equal to a deep copy (same YAML, same
    flags, the schema types kept: a wrong type still fails); a config that does not pickle is
    not frozen (the memo deep-copies it)."""
    import copy as copy_
    from dataclasses import dataclass

    cfg = cfg_of("tracking=none")
    OmegaConf.set_struct(cfg, True)
    frozen = compose_cache.freeze(cfg)
    a, b = frozen.thaw(), frozen.thaw()
    assert a is not b and OmegaConf.to_yaml(a) == OmegaConf.to_yaml(b) == OmegaConf.to_yaml(copy_.deepcopy(cfg))
    assert OmegaConf.is_struct(a) and OmegaConf.get_type(a.hardware) is OmegaConf.get_type(cfg.hardware)
    a.model.name = "changed"
    assert b.model.name != "changed" and frozen.thaw().model.name != "changed"
    with pytest.raises(Exception, match="partition.tp"):
        b.partition.tp = "abc"

    @dataclass
    class Local:
        x: int = 1

    assert compose_cache.freeze(OmegaConf.structured(Local)) is None


def test_relative_config_dirs_key_by_the_folder_they_name(tmp_path, monkeypatch):
    """A relative file source (``--config-dir conf``, ``hydra.searchpath=[file://conf]``) is read
    from the current directory: the key and the file stamps name the absolute folder, so two
    directories' ``conf`` never share a composition."""
    from types import SimpleNamespace

    FileConfigSource = type("FileConfigSource", (), {})
    src = FileConfigSource()
    src.path = "conf"
    for d in ("a", "b"):
        (tmp_path / d / "conf").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a")
    in_a = hydra_fast.source_dir(src)
    monkeypatch.chdir(tmp_path / "b")
    in_b = hydra_fast.source_dir(src)
    assert (in_a, in_b) == (str(tmp_path / "a" / "conf"), str(tmp_path / "b" / "conf"))
    assert hydra_fast.source_dir(SimpleNamespace(path="")) is None   # the ConfigStore's source
