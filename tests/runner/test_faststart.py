"""The start-up and per-job shortcuts change no config: each is checked against Hydra's or
OmegaConf's own behaviour, computed in the same test without the shortcut.

* batched sweeper, in-place overrides: applying and undoing a job's value overrides leaves the
  composed base exactly as composed (YAML text, interpolations and ``???`` included); the values
  set are those ``OmegaConf.update`` sets on a deep copy; a wrong type fails like a compose and
  leaves the base untouched;
* the per-process config-file cache: a cached load equals a fresh parse, is a new object each
  time, and a changed file is re-read;
* the mode-compose skip answers only where nothing can set ``hydra.mode``;
* the shared ConfigStore: a config composed with it equals one composed with Hydra's deep copy;
* the compose memo (one composition per config-group selection): the full config, hydra node
  included, equals Hydra's own compose for value, group, add, force-add, delete, dict and
  hydra.* overrides, after a changed config file or ConfigStore entry too, and bad overrides
  raise Hydra's own exception and message;
* the launcher plugins' schemas stored lazily by the plugin scan: each built node equals
  ``OmegaConf.structured`` of what the plugin stored; a selected launcher prints as without;
* .hydra/*.yaml written with libyaml: the text equals OmegaConf.to_yaml's (simllm's config,
  containers it must leave to OmegaConf, 300 random printable-ASCII containers).
"""

import copy
import os
import time

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf, open_dict

import runner.app  # noqa: F401 - installs the shortcuts, as the simllm process does
import runner.hydra_fast as app
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
    with pytest.raises(ConfigCompositionException, match="no such key"):   # Hydra's short error
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


@pytest.fixture
def fresh_memos(tmp_path, monkeypatch):
    """The cross-process parse memos on an empty cache folder; ``another_process()`` saves what
    this process kept and forgets it, as a new process would start."""
    from runner import compose_cache

    monkeypatch.setenv("SIMLLM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SIMLLM_COMPOSE_CACHE", raising=False)
    monkeypatch.delenv("SIMLLM_PERSIST", raising=False)
    memos = {}
    for name in ("_FILES", "_OVERRIDES"):
        old = getattr(app, name)
        memos[name] = compose_cache.Memo(old.name, old.sources, old.packages)
        monkeypatch.setattr(app, name, memos[name])

    def another_process():
        for name, m in memos.items():
            m.save()
            memos[name] = compose_cache.Memo(m.name, m.sources, m.packages)
            monkeypatch.setattr(app, name, memos[name])
        return memos

    return another_process


def test_config_file_memo_equals_a_fresh_parse(tmp_path, fresh_memos):
    """A config file parsed in an earlier process is read back equal to Hydra's own parse (header
    and node), a new object each time; a changed file is parsed again."""
    from hydra._internal.core_plugins.file_config_source import FileConfigSource

    d = tmp_path / "c"
    d.mkdir()
    (d / "a.yaml").write_text("# @package _global_\nx: 1\ny:\n- 1\n- z: ${x}\nw: '???'\n")
    parsed = FileConfigSource(provider="test", path=str(d)).load_config("a")
    memos = fresh_memos()
    assert len(memos["_FILES"]._load()) == 1
    src = FileConfigSource(provider="test", path=str(d))          # a new source: no in-process copy
    back = src.load_config("a")
    for r in (parsed, back):
        assert (r.header, r.provider, r.path, r.is_schema_source) == \
            ({"package": "_global_"}, "test", f"file://{d}", False)
        assert OmegaConf.to_yaml(r.config) == "x: 1\n'y':\n- 1\n- z: ${x}\nw: ???\n"
    assert back.config is not parsed.config and back.config == parsed.config
    time.sleep(0.01)
    (d / "a.yaml").write_text("x: 2\n")
    os.utime(d / "a.yaml", ns=(time.time_ns(), time.time_ns()))
    fresh_memos()
    assert FileConfigSource(provider="test", path=str(d)).load_config("a").config == {"x": 2}


#: Overrides of every kind Hydra's grammar has: values, quoting, escapes, interpolations, lists
#: and dicts, add / force-add / delete, packages, sweeps and grammar functions.
OVERRIDE_CORPUS = [
    "tracking=none", "hydra.run.dir=out/x y", "partition.tp=4", "x=1.5e3", "x=inf", "x=-nan", "x=true",
    "x=null", "x='quoted \\' str'", 'x="dq ${a.b}"', "x=${oc.env:HOME}", "x=a\\,b", "x=[1,2,[3]]",
    "x={a: 1, b: [x, y]}", "+x=1", "++x=2", "~x", "~x=3", "group@pkg=opt", "group@_global_=opt",
    "x=1,2,3", "x=range(1,5)", "x=choice(a,b)", "x=interval(0,1)", "x=tag(t,choice(1,2))",
    "x=sort(3,1,2)", "x=shuffle(1,2)", "x=glob(*)", "x=int(3.5)", "x=str(1)", "x=  spaced  ",
    "x=", "hydra/launcher=joblib", "model.name=Meta-Llama-3.1-8B",
]


def test_override_memo_equals_a_fresh_parse(fresh_memos):
    """Each override of the corpus parsed in an earlier process is read back equal to Hydra's own
    parse (every field, the value's type included) and as a new object; a bad override is not
    kept and fails with Hydra's own message."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    own = [OverridesParser.parse_rule._hydra(parser, s, "override") for s in OVERRIDE_CORPUS]
    first = parser.parse_overrides(OVERRIDE_CORPUS)
    memos = fresh_memos()
    assert set(memos["_OVERRIDES"]._load()) == set(OVERRIDE_CORPUS)
    back = OverridesParser.create().parse_overrides(OVERRIDE_CORPUS)
    for s, a, b, c in zip(OVERRIDE_CORPUS, own, first, back):
        assert repr(a) == repr(b) == repr(c), s                  # every field (a nan is not == itself)
        assert type(a._value) is type(c._value), s
        assert c is not b and c.input_line == s
    messages = []
    for rule in (OverridesParser.parse_rule, OverridesParser.parse_rule._hydra):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(OverridesParser, "parse_rule", rule)
            for bad in ("x=[1,2", "x=ü"):
                with pytest.raises(OverrideParseException) as e:
                    OverridesParser.create().parse_overrides([bad])
                messages.append(str(e.value))
    assert messages[:2] == messages[2:]
    assert not {"x=[1,2", "x=ü"} & set(memos["_OVERRIDES"]._load())


def test_mode_skip_only_where_nothing_can_set_it():
    assert app._mode_cannot_be_set(["model=llama_3_1_8b", "hydra.run.dir=x", "tracking=none"])
    for o in ("hydra.mode=MULTIRUN", "hydra/sweeper=simllm", "hydra=custom", "hydra.searchpath=[x]",
              "+something.mode=1"):
        assert not app._mode_cannot_be_set([o]), o


def test_mode_scan_reads_a_file_again_only_when_it_changed(tmp_path, monkeypatch):
    """The ``mode:`` scan of the config files keeps each file's answer under its stamp: a file
    read once is not read again while unchanged; an edit that adds a ``mode:`` key is seen."""
    from pathlib import Path

    monkeypatch.setenv("SIMLLM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(app, "_MODE_CACHE", [])
    root = tmp_path / "conf"
    (root / "group").mkdir(parents=True)
    (root / "config.yaml").write_text("defaults:\n  - group: a\n")
    (root / "group" / "a.yaml").write_text("x: 1\n")
    assert app._mode_cannot_be_set(["x=1"], roots=(root,))
    reads = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: (self.suffix == ".yaml" and reads.append(self))
                        or real(self, *a, **k))
    assert app._mode_cannot_be_set(["x=1"], roots=(root,)) and reads == []     # answers kept
    (root / "group" / "a.yaml").write_text("x: 1\nhydra:\n  mode: MULTIRUN\n")
    assert not app._mode_cannot_be_set(["x=1"], roots=(root,))
    assert reads == [root / "group" / "a.yaml"]
    app._mode_scan_cache().save()                        # what the process's exit writes
    monkeypatch.setattr(app, "_MODE_CACHE", [])           # another process: answers from the file
    reads.clear()
    assert not app._mode_cannot_be_set(["x=1"], roots=(root,)) and reads == []


def test_task_copy_equals_hydras_copy_less_its_hydra_node():
    """run_job's copy of a job's config for the task (``lean_task_copy``): with the hydra node
    left uncopied and then deleted, the task's config equals Hydra's own deep copy with the node
    deleted (YAML text, interpolations included, node types, flags and parent); the job's config
    is left as it was; any other deep copy is ``copy.deepcopy``."""
    import hydra.core.utils as hcu
    from omegaconf import read_write

    assert isinstance(hcu.copy, app._TaskCopy)          # applies to the installed Hydra
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(config_name="config", overrides=["tracking=none", "partition.tp=2"],
                          return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()
    OmegaConf.update(cfg, "tracking.run_name", "${model.name}-x", merge=True)
    OmegaConf.set_readonly(cfg.hydra, True)                 # as run_job has it (HydraConfig.set_config)
    before = OmegaConf.to_yaml(cfg)
    hydra_node = cfg._get_node("hydra")
    copies = []
    for deepcopy in (copy.deepcopy, hcu.copy.deepcopy):     # Hydra's own, then the shortcut
        task = deepcopy(cfg)
        with read_write(task):
            with open_dict(task):
                del task["hydra"]
        copies.append(task)
    own, lean = copies
    assert OmegaConf.to_yaml(lean) == OmegaConf.to_yaml(own) and "hydra" not in lean
    assert lean._get_parent() is None and lean is not cfg
    for key in own:
        a, b = own._get_node(key), lean._get_node(key)
        assert type(a) is type(b) and a._metadata == b._metadata and b._get_parent() is lean, key
    assert OmegaConf.is_readonly(lean) == OmegaConf.is_readonly(own)
    assert OmegaConf.to_yaml(cfg) == before and cfg._get_node("hydra") is hydra_node
    assert hydra_node._get_parent() is cfg
    only_hydra = OmegaConf.masked_copy(cfg, "hydra")        # the second copy of run_job: in full
    assert OmegaConf.to_yaml(hcu.copy.deepcopy(only_hydra)) == OmegaConf.to_yaml(only_hydra)
    assert hcu.copy.deepcopy([1, {"a": 2}]) == [1, {"a": 2}]


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


# ------------------------------------------------------------------ compose memo (basic sweeper)

def _compose_both(config_dir, overrides, config_name="config"):
    """(memoised, Hydra's own) compose of the same overrides: the full config with its hydra node
    as YAML text, computed twice with the memo (a miss, then a hit) and once with Hydra's
    create_defaults_list and _compose_config_from_defaults_list put back."""
    import hydra._internal.config_loader_impl as cli

    def run():
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            return OmegaConf.to_yaml(compose(config_name=config_name, overrides=list(overrides),
                                             return_hydra_config=True))

    memo = (cli.create_defaults_list, cli.ConfigLoaderImpl._compose_config_from_defaults_list)
    try:
        first, again = run(), run()
        cli.create_defaults_list = memo[0]._hydra
        cli.ConfigLoaderImpl._compose_config_from_defaults_list = memo[1]._hydra
        own = run()
    finally:
        cli.create_defaults_list, cli.ConfigLoaderImpl._compose_config_from_defaults_list = memo
        GlobalHydra.instance().clear()
    return first, again, own


@pytest.mark.parametrize("overrides", [
    [],
    ["partition.tp=2", "workload.batch_size=7", "hardware.hbm_bandwidth=5TB/s"],
    ["hardware=h200", "partition.tp=4"],
    ["partition.tp=4", "hardware=h200"],                       # value before group: same order kept
    ["engine=des", "workload=poisson_chat", "workload.num_requests=50", "+tracking.tags.a=1",
     "++print_table=false", "~resume", "+tracking.tags={b: 2}", "hydra.job.name=x"],
])
def test_memoised_compose_equals_hydras_own(overrides):
    first, again, own = _compose_both(CONF, overrides)
    assert first == own and again == own


def test_memoised_compose_shares_one_composition_per_group_selection():
    """Jobs differing in values only reuse one composition; each still gets its own values and
    its own hydra.overrides.task / override_dirname (filled by Hydra's code after the compose)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        a = compose(config_name="config", overrides=["workload.batch_size=3"], return_hydra_config=True)
        b = compose(config_name="config", overrides=["workload.batch_size=4"], return_hydra_config=True)
    GlobalHydra.instance().clear()
    assert (a.workload.batch_size, b.workload.batch_size) == (3, 4)
    assert list(a.hydra.overrides.task) == ["workload.batch_size=3"]
    assert b.hydra.job.override_dirname == "workload.batch_size=4"
    a.model.name = "changed"                                   # a job's edits stay its own
    assert b.model.name != "changed"


def test_memoised_compose_sees_changed_files_and_store(tmp_path):
    (tmp_path / "g").mkdir()
    (tmp_path / "config.yaml").write_text("defaults:\n  - g: a\n  - _self_\nx: 1\n")
    (tmp_path / "g" / "a.yaml").write_text("v: 1\n")
    (tmp_path / "g" / "b.yaml").write_text("v: 2\n")
    first, again, own = _compose_both(tmp_path, ["x=5"])
    assert first == again == own and "v: 1" in own and "x: 5" in own
    time.sleep(0.01)
    (tmp_path / "g" / "a.yaml").write_text("v: 3\nz: 4\n")   # edited while a process runs
    first, again, own = _compose_both(tmp_path, ["x=6"])
    assert first == again == own and "v: 3" in own and "z: 4" in own
    first, again, own = _compose_both(tmp_path, ["g=b"])
    assert first == again == own and "v: 2" in own
    time.sleep(0.01)
    (tmp_path / "config.yaml").write_text("defaults:\n  - g: a\n  - _self_\nx: 1\nw: 8\n")  # the primary
    first, again, own = _compose_both(tmp_path, ["x=7"])
    assert first == again == own and "w: 8" in own
    ConfigStore.instance().store(group="g", name="c", node={"v": 9})   # a new option in the store
    try:
        first, again, own = _compose_both(tmp_path, ["g=c"])
    finally:
        ConfigStore.instance().repo.pop("g", None)
    assert first == again == own and "v: 9" in own


def test_memoised_compose_fails_like_hydra():
    """Bad overrides raise the same exception (type and message) with the memo, a miss and a hit,
    as with Hydra's own compose."""
    import hydra._internal.config_loader_impl as cli

    def error(overrides):
        GlobalHydra.instance().clear()
        try:
            with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
                compose(config_name="config", overrides=overrides)
        except Exception as e:  # noqa: BLE001
            return type(e), str(e)
        finally:
            GlobalHydra.instance().clear()
        return None

    memo = (cli.create_defaults_list, cli.ConfigLoaderImpl._compose_config_from_defaults_list)
    for bad in (["partition.no_such_key=1"], ["partition.tp=abc"], ["hardware=no_such_option"],
                ["workload.batch_size=2", "+print_table=false"], ["++hardware=h200"]):
        first, again = error(bad), error(bad)
        try:
            cli.create_defaults_list = memo[0]._hydra
            cli.ConfigLoaderImpl._compose_config_from_defaults_list = memo[1]._hydra
            own = error(bad)
        finally:
            cli.create_defaults_list, cli.ConfigLoaderImpl._compose_config_from_defaults_list = memo
        assert own is not None and first == again == own, bad


# ------------------------------------------------------------------ .hydra/*.yaml with libyaml

def test_job_yaml_written_by_libyaml_only_where_identical(tmp_path, cfg_of):
    """The patched _save_config writes what OmegaConf.to_yaml writes: simllm's job config (C
    emitter), a container with line breaks / control characters / empty or long keys (OmegaConf's
    own path), and random printable-ASCII strings (quotes, colons, '#', long lines that fold)."""
    import random
    import string

    import hydra.core.utils as hcu

    assert hcu._save_config._simllm
    cfg = cfg_of("tracking=none")
    cases = [cfg, OmegaConf.create({"a": "two\nlines", "b": "tab\there", "": 1, "k" * 130: "v"}),
             OmegaConf.create(["x=1", "y=2"]), OmegaConf.create({"s": "caf\u00e9 \u2603"})]
    rnd = random.Random(7)
    alpha = string.printable[:95].replace("$", "") + "  ::##''\"\"{}[]-?|>"   # no ${interpolations}
    for _ in range(300):
        s = "".join(rnd.choice(alpha) for _ in range(rnd.choice([0, 1, 3, 20, 79, 81, 200])))
        cases.append(OmegaConf.create({"k": s, "l": [s, 1, 2.5, None, True], (s[:30] or "x"): {"a": s}}))
    for i, c in enumerate(cases):
        hcu._save_config(c, f"{i}.yaml", tmp_path)
        assert (tmp_path / f"{i}.yaml").read_text(encoding="utf-8") == OmegaConf.to_yaml(c), i
    assert not app._plain_ascii(OmegaConf.to_container(cases[1]))
    assert app._plain_ascii(OmegaConf.to_container(cfg))


@pytest.mark.slow
def test_basic_sweep_files_identical_without_the_shortcuts(tmp_path):
    """A basic-sweeper multirun (group and value overrides, an added tag) writes the same files,
    byte for byte, with the start-up/compose shortcuts and with Hydra's own behaviour
    (SIMLLM_HYDRA_SHORTCUTS=0); both runs use the same sweep directory (the first is moved away),
    so only each job's random job_uid differs."""
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "simllm")
    args = [exe, "-m", "hardware=h100_sxm,h200", "partition.tp=1,2", "workload.batch_size=3",
            "+tracking.tags.x=1", "tracking=none", "print_table=false", f"hydra.sweep.dir={tmp_path}/sweep"]
    out = {}
    for mode in ("1", "0"):
        env = {**os.environ, "SIMLLM_HYDRA_SHORTCUTS": mode}
        subprocess.run(args, check=True, cwd=tmp_path, env=env, capture_output=True, timeout=300)
        shutil.move(tmp_path / "sweep", tmp_path / f"sweep{mode}")
        out[mode] = tmp_path / f"sweep{mode}"
    files = sorted(p.relative_to(out["1"]) for p in out["1"].rglob("*") if p.is_file())
    assert sorted(p.relative_to(out["0"]) for p in out["0"].rglob("*") if p.is_file()) == files
    assert len([f for f in files if f.name == "config.yaml" and f.parent.name != ".hydra"]) == 4
    for f in files:
        a, b = (out["1"] / f).read_bytes(), (out["0"] / f).read_bytes()
        if f.name == "summary.json":
            a, b = json.loads(a), json.loads(b)
            a.pop("job_uid"), b.pop("job_uid")
        assert a == b, f


def test_group_listing_equals_hydras_own():
    """fast_group_listing: every group's options (and sub-groups), as ``--help`` lists them, are
    the same with the shared grammar functions and package-folder lookups as with Hydra's own."""
    import hydra._internal.core_plugins.importlib_resources_config_source as irc
    import hydra.core.override_parser.overrides_parser as op
    from hydra.core.object_type import ObjectType

    def listing():
        GlobalHydra.instance().clear()
        try:
            with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
                loader = GlobalHydra.instance().config_loader()
                out, todo = {}, [""]
                while todo:
                    g = todo.pop()
                    out[g] = (loader.get_group_options(g, ObjectType.CONFIG),
                              loader.get_group_options(g, ObjectType.GROUP))
                    todo += [f"{g}/{s}".lstrip("/") for s in out[g][1]]
                return out
        finally:
            GlobalHydra.instance().clear()

    assert op.create_functions._simllm and isinstance(irc.resources, app._PackageFiles)
    fast = listing()
    assert "experiment" in fast and "capacity" in fast["experiment"][0]
    assert "hydra/launcher" in fast and "basic" in fast["hydra/launcher"][0]
    patched = (op.create_functions, irc.resources)
    op.create_functions, irc.resources = patched[0]._hydra, patched[1]._resources
    try:
        assert listing() == fast
    finally:
        op.create_functions, irc.resources = patched
    assert op.OverridesParser.create().parse_overrides(["a=choice(1,2)", "b=range(3)"])[0].is_sweep_override()


def test_printed_configs_use_libyaml_only_where_identical(cfg_of):
    """fast_help: Hydra's module prints configs with libyaml's emitter where the text is
    OmegaConf.to_yaml's (simllm's config, resolved or not; containers with line breaks, control
    characters, odd keys or sort_keys take OmegaConf's own path)."""
    import hydra._internal.hydra as hh

    assert hh.OmegaConf._simllm and hh.OmegaConf is not OmegaConf and hh.Hydra.get_help._simllm
    cfg = cfg_of("tracking=none")
    cases = [cfg, OmegaConf.create({"a": "two\nlines", "b": "tab\there", "": 1, "k" * 130: "v"}),
             OmegaConf.create({"s": "caf\u00e9 \u2603", "n": None, "l": [1, 2.5, "x: y"]})]
    for c in cases:
        for resolve in (False, True):
            assert hh.OmegaConf.to_yaml(c, resolve=resolve) == OmegaConf.to_yaml(c, resolve=resolve)
        assert hh.OmegaConf.to_yaml(c, sort_keys=True) == OmegaConf.to_yaml(c, sort_keys=True)
    assert hh.OmegaConf.create({"a": 1}) == OmegaConf.create({"a": 1})   # the rest is OmegaConf's


@pytest.mark.parametrize("args", [["--help"], ["--cfg", "job", "hardware=h200", "partition.tp=2"],
                                  ["--cfg", "hydra", "hydra.run.dir=x"], ["--hydra-help"],
                                  ["--cfg", "hydra", "hydra/launcher=submitit_slurm"],
                                  ["--cfg", "hydra", "hydra/launcher=ray_aws"]])
def test_help_and_printed_config_equal_hydras_own(tmp_path, args):
    """``simllm --help`` / ``--cfg`` / ``--hydra-help`` print the same text with the shortcuts
    (the listing memo, libyaml, the compose cache: first and second process; the launcher
    plugins' schemas built on first load) as with Hydra's own behaviour
    (SIMLLM_HYDRA_SHORTCUTS=0)."""
    import subprocess
    import sys

    code = "import sys; from runner.app import main; sys.argv[0] = 'simllm'; main()"
    out = {}
    for mode in ("0", "1", "1 again"):
        env = {**os.environ, "SIMLLM_HYDRA_SHORTCUTS": mode[0], "SIMLLM_CACHE_DIR": str(tmp_path)}
        p = subprocess.run([sys.executable, "-c", code, *args], cwd=CONF.parent, env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        out[mode] = p.stdout
    assert out["1"] == out["0"] and out["1 again"] == out["0"]
    assert len(out["0"]) > 500


def test_plugin_schemas_stored_lazily_build_what_the_plugin_stored():
    """After the plugin scan (runner.app installs the shortcuts) the launcher plugins' entries are
    lazy; each loads as ``OmegaConf.structured`` of the dataclass (or instance) the plugin gave
    ``ConfigStore.store`` (compared as YAML, interpolations unresolved), and a second load is a
    new copy. The dataclasses are the plugins' own module attributes, found independently."""
    from hydra_plugins.hydra_joblib_launcher.config import JobLibLauncherConf
    from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf, SlurmQueueConf

    cs = ConfigStore.instance()
    expected = {"joblib": JobLibLauncherConf, "submitit_local": LocalQueueConf(),
                "submitit_slurm": SlurmQueueConf()}
    for name, node in expected.items():
        entry = cs.repo["hydra"]["launcher"][f"{name}.yaml"]
        assert isinstance(entry.node, app.LazyNode), name
        assert entry.provider in ("joblib_launcher", "submitit_launcher")
        a, b = cs.load(f"hydra/launcher/{name}.yaml"), cs.load(f"hydra/launcher/{name}.yaml")
        assert OmegaConf.to_yaml(a.node) == OmegaConf.to_yaml(OmegaConf.structured(node)), name
        assert a.node is not b.node and a.node == b.node


_HYDRA_CONF_CHECK = """
import json, sys
import runner.app  # first, as the simllm process: Hydra is imported by it
from hydra.conf import HydraConf
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf
from runner.hydra_fast import LazyNode

cs = ConfigStore.instance()
entry = cs.repo["hydra"]["config.yaml"]
a, b = cs.load("hydra/config.yaml"), cs.load("hydra/config.yaml")
ref = OmegaConf.structured(HydraConf())
print(json.dumps({"lazy": isinstance(entry.node, LazyNode),
                  "fields": [entry.name, entry.group, entry.package, entry.provider],
                  "same_yaml": OmegaConf.to_yaml(a.node) == OmegaConf.to_yaml(ref),
                  "same_type": OmegaConf.get_type(a.node) is OmegaConf.get_type(ref) is HydraConf,
                  "equal": a.node == ref, "new_copy": a.node is not b.node,
                  "finder_left": any(type(f).__name__ == "type" and f.__name__ == "_Finder"
                                     for f in sys.meta_path),
                  "own_loader": type(sys.modules["hydra.conf"].__loader__).__name__
                  == type(sys.modules["hydra.conf"].__spec__.loader).__name__ == "SourceFileLoader"}))
"""


@pytest.mark.parametrize("shortcuts", ["1", "0"])
def test_hydra_schema_stored_while_hydra_imports_builds_what_hydra_stored(tmp_path, shortcuts):
    """runner.hydra_import: with the shortcuts on, ``hydra/config`` (Hydra's own schema, stored
    by hydra.conf while Hydra is imported) is a lazy entry with Hydra's name, group, package and
    provider, and it loads as ``OmegaConf.structured(HydraConf())`` (built here independently:
    same YAML, type and equality), a new copy each load; with SIMLLM_HYDRA_SHORTCUTS=0 the entry
    is Hydra's own, built at import. No finder is left on sys.meta_path either way, and
    hydra.conf keeps its own loader."""
    import json
    import subprocess
    import sys

    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])     # this checkout, not the installed one
    env = {**os.environ, "SIMLLM_HYDRA_SHORTCUTS": shortcuts, "SIMLLM_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    p = subprocess.run([sys.executable, "-c", _HYDRA_CONF_CHECK], env=env, capture_output=True,
                       text=True, cwd=str(tmp_path), check=True)
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["lazy"] is (shortcuts == "1")
    assert got["fields"] == ["config.yaml", "hydra", None, "hydra"]
    assert got["same_yaml"] and got["same_type"] and got["equal"] and got["new_copy"]
    assert not got["finder_left"] and got["own_loader"]



def _same_tree(a, b, src, path="cfg"):
    """Two deep copies of the same OmegaConf tree are alike node by node: node types, instance
    dicts' keys, metadata (class, keys, each value's type and value; the flags dict and resolver
    cache new objects, not the source's), values kept as the same object (OmegaConf copies them
    shallowly), parents pointing into their own copy."""
    from collections import defaultdict

    assert type(a) is type(b), path
    da, db, ds = a.__dict__, b.__dict__, src.__dict__
    assert list(da) == list(db), path                  # the same keys, in the same order
    assert da.get("_flags_cache") == db.get("_flags_cache"), path
    ma, mb, ms = da["_metadata"], db["_metadata"], ds["_metadata"]
    assert type(ma) is type(mb) and ma.__dict__.keys() == mb.__dict__.keys(), path
    for k in ma.__dict__:
        va, vb = ma.__dict__[k], mb.__dict__[k]
        assert type(va) is type(vb) and va == vb, (path, k)
        if isinstance(va, dict):
            assert va is not ms.__dict__[k] and vb is not ms.__dict__[k], (path, k)
        if isinstance(va, defaultdict):
            assert va.default_factory is vb.default_factory, (path, k)
    if "_val" in da:
        assert da["_val"] is db["_val"] is ds["_val"], path
    content = da.get("_content")
    if isinstance(content, dict):
        for k in content:
            assert content[k]._get_parent() is a and db["_content"][k]._get_parent() is b, path
            _same_tree(content[k], db["_content"][k], ds["_content"][k], f"{path}.{k}")
    elif isinstance(content, list):
        for i, (x, y, z) in enumerate(zip(content, db["_content"], ds["_content"])):
            _same_tree(x, y, z, f"{path}[{i}]")
    else:
        assert content == db.get("_content"), path


def test_node_copies_equal_omegaconfs_own(cfg_of):
    """hydra_fast.fast_metadata_copy and fast_value_node_copy: a deep copy of a composed config
    (a read-only node and a resolver-cache entry included) and of a config holding every patched
    value-node type (path, bytes, enum-free scalars) is, node by node, the copy OmegaConf's own
    code makes (both patches taken off for the reference: copy's generic path for the metadata,
    each node class's own ``__deepcopy__``); the copy is independent of its source."""
    from pathlib import Path

    import omegaconf.nodes as nodes
    from omegaconf.base import Metadata

    assert getattr(Metadata.__dict__.get("__deepcopy__"), "_simllm", False)   # installed
    patched = {n: vars(getattr(nodes, n))["__deepcopy__"] for n in app._VALUE_NODES}
    assert all(getattr(f, "_simllm", False) for f in patched.values())
    src = cfg_of("tracking=none", "hardware=h200")
    OmegaConf.set_readonly(src.partition, True)
    src.tracking._get_node("uri")._metadata.resolver_cache["oc.env"][("X",)] = "y"
    other = OmegaConf.create({"p": Path("a/b"), "b": b"xy", "i": 3, "f": 0.5, "t": True, "s": "s",
                              "n": None, "l": [1, "two", {"k": Path("c")}]})
    for cfg in (src, other):
        fast = copy.deepcopy(cfg)
        meta = Metadata.__deepcopy__
        del Metadata.__deepcopy__
        for n, f in patched.items():
            setattr(getattr(nodes, n), "__deepcopy__", f._hydra)
        try:
            ref = copy.deepcopy(cfg)
        finally:
            Metadata.__deepcopy__ = meta
            for n, f in patched.items():
                setattr(getattr(nodes, n), "__deepcopy__", f)
        _same_tree(fast, ref, cfg)
        assert OmegaConf.to_yaml(fast) == OmegaConf.to_yaml(ref) == OmegaConf.to_yaml(cfg)
    assert OmegaConf.is_readonly(fast.l) is None or not OmegaConf.is_readonly(fast.l)
    fast = copy.deepcopy(src)
    assert OmegaConf.is_readonly(fast.partition) and not OmegaConf.is_readonly(fast.workload)
    with open_dict(fast):
        fast.workload.batch_size = 3
    assert src.workload.batch_size != 3
