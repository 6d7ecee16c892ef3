"""Issue 18's start-up and per-job shortcuts change no config: each is checked against Hydra's or
OmegaConf's own behaviour, computed in the same test without the shortcut.

* batched sweeper, in-place overrides: applying and undoing a job's value overrides leaves the
  composed base exactly as composed (YAML text, interpolations and ``???`` included); the values
  set are those ``OmegaConf.update`` sets on a deep copy; a wrong type fails like a compose and
  leaves the base untouched;
* the per-process config-file cache: a cached load equals a fresh parse, is a new object each
  time, and a changed file is re-read;
* the mode-compose skip answers only where nothing can set ``hydra.mode``;
* the shared ConfigStore: a config composed with it equals one composed with Hydra's deep copy.
"""

import copy
import os
import time

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf, open_dict

import runner.app as app
from hydra_plugins.simllm_sweeper.batched import _apply, _in_place, _undo
from tests.conftest import CONF


def _parse(*lines):
    return OverridesParser.create().parse_overrides(list(lines))


def test_in_place_overrides_round_trip(cfg_of):
    base = cfg_of("tracking=none")
    OmegaConf.update(base, "tracking.run_name", "${model.name}-x", merge=True)   # an interpolation
    before = OmegaConf.to_yaml(base)
    values = _parse("partition.tp=4", "hardware.hbm_bandwidth=5TB/s", "workload.batch_size=7",
                    "tracking.run_name=fixed", "+extra_key=3")
    assert _in_place(base, values)
    expected = copy.deepcopy(base)                 # what the old path did: update a deep copy
    for o in values:
        if o.is_add():
            with open_dict(expected):
                OmegaConf.update(expected, o.key_or_group, o.value(), merge=True)
        else:
            OmegaConf.update(expected, o.key_or_group, o.value(), merge=True)
    undo = _apply(base, values)
    assert OmegaConf.to_yaml(base) == OmegaConf.to_yaml(expected)
    assert base.partition.tp == 4 and base.hardware.hbm_bandwidth == "5TB/s" and base.extra_key == 3
    _undo(undo)
    assert OmegaConf.to_yaml(base) == before
    assert "extra_key" not in base
    assert OmegaConf.to_container(base)["tracking"]["run_name"] == "${model.name}-x"


def test_in_place_wrong_type_fails_and_leaves_base_untouched(cfg_of):
    base = cfg_of("tracking=none")
    before = OmegaConf.to_yaml(base)
    with pytest.raises(Exception) as e:   # partition.tp is an int field: a compose fails the same way
        _apply(base, _parse("workload.batch_size=9", "partition.tp=abc"))
    assert "partition.tp" in str(e.value) or "abc" in str(e.value)
    assert OmegaConf.to_yaml(base) == before
    with pytest.raises(ValueError, match="no such key"):
        _apply(base, _parse("partition.no_such=1"))
    assert OmegaConf.to_yaml(base) == before


def test_container_overrides_take_a_copy(cfg_of):
    base = cfg_of("tracking=none")
    assert not _in_place(base, _parse("tracking.tags={a: 1}"))
    assert not _in_place(base, _parse("+new.nested.key=1"))
    assert _in_place(base, _parse("partition.tp=2"))


def test_config_file_cache_equals_a_fresh_parse(tmp_path):
    from hydra._internal.core_plugins.file_config_source import FileConfigSource

    from hydra.core.plugins import Plugins
    from hydra.plugins.config_source import ConfigSource

    # the classes Hydra composes with (those left by its plugin scan) carry the cache
    used = {c.__name__: c for c in Plugins.instance().discover(ConfigSource)}
    assert used["FileConfigSource"] is FileConfigSource
    assert FileConfigSource.load_config._simllm_cached
    assert used["ImportlibResourcesConfigSource"].load_config._simllm_cached
    (tmp_path / "a.yaml").write_text("x: 1\ny: [1, 2]\n")
    src = FileConfigSource(provider="test", path=str(tmp_path))
    first, second = src.load_config("a"), src.load_config("a")
    assert first.config == second.config == OmegaConf.create({"x": 1, "y": [1, 2]})
    assert first.config is not second.config
    second.config.x = 5                        # Hydra edits what it loads: the cache must not see it
    assert src.load_config("a").config.x == 1
    time.sleep(0.01)
    (tmp_path / "a.yaml").write_text("x: 2\ny: [1, 2, 3]\n")
    os.utime(tmp_path / "a.yaml", ns=(time.time_ns(), time.time_ns()))
    assert src.load_config("a").config.x == 2


def test_mode_skip_only_where_nothing_can_set_it():
    assert app._mode_cannot_be_set(["model=llama_3_1_8b", "hydra.run.dir=x", "tracking=none"])
    for o in ("hydra.mode=MULTIRUN", "hydra/sweeper=simllm", "hydra=custom", "hydra.searchpath=[x]",
              "+something.mode=1"):
        assert not app._mode_cannot_be_set([o]), o


def test_shared_config_store_composes_the_same_config():
    def composed():
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            return OmegaConf.to_yaml(compose(config_name="config",
                                             overrides=["hardware=h200", "partition.tp=2"]))

    assert copy.deepcopy(ConfigStore.instance()) is ConfigStore.instance()
    shared = composed()
    del ConfigStore.__deepcopy__               # Hydra's own behaviour: a deep copy per compose
    try:
        assert copy.deepcopy(ConfigStore.instance()) is not ConfigStore.instance()
        assert composed() == shared
    finally:
        app.share_config_store()
        GlobalHydra.instance().clear()


def test_swept_params_are_the_swept_keys_and_the_names(cfg_of):
    from runner.job import run_params

    cfg = OmegaConf.to_container(cfg_of("tracking=none"), resolve=True)
    full = run_params(cfg)
    some = run_params(cfg, ["hardware", "partition.tp", "+workload.batch_size"])
    # every kept param has the same value as in the full set; nothing kept outside the rule
    assert all(full[k] == v for k, v in some.items())
    assert {k for k in full if k.startswith("hardware.")} <= set(some)
    assert "partition.tp" in some and "workload.batch_size" in some and "partition.pp" not in some
    assert {"model.name", "engine.name", "calibration.name"} <= set(some)
    assert set(some) == {k for k in full if k.startswith("hardware.") or k.endswith(".name")
                         or k in ("partition.tp", "workload.batch_size")}
    assert len(some) < len(full) / 3


def test_experiment_presets_registered_where_a_command_line_may_use_them():
    assert not app._may_use_experiments(["tracking=none", "partition.tp=2"])
    assert not app._may_use_experiments(["-m", "hydra/sweeper=simllm", "workload.batch_size=1,2"])
    for argv in (["experiment=pareto_hbm_l70b8"], ["-m", "+experiment=x"], ["--help"], ["--info"],
                 ["--cfg", "job"], ["-cn", "other"], ["--config-dir", "d"], ["-sc", "install=bash"]):
        assert app._may_use_experiments(argv), argv
