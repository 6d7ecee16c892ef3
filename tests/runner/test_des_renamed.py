"""The flat engine.des keys of before the sub-nodes (``engine.des.max_num_seqs``) still work: the one
rename map (runner.schema.DES_RENAMED) moves each to its sub-node with one deprecation line, on the
command line, in a multirun sweep, in an experiment YAML and inside a counterfactual; the record
holds each setting once, at its new key. And the generic field checker: every field's declared rule
refuses a bad value, naming the full key."""

import dataclasses
import json

import pytest
import yaml

from engine.errors import SpecError
from engine.spec import _check
from engine.spec.des import SUBSPECS, DesSpec
from runner import convert
from runner.schema import DES_RENAMED
from tests.conftest import run_cli


@pytest.fixture
def fresh_said(monkeypatch):
    """Each test sees the deprecation lines of its own keys (they are said once per process)."""
    monkeypatch.setattr(convert, "_SAID", set())


def test_the_map_has_every_sub_spec_field_once():
    # by hand: the sub-spec fields, each under engine.des.<its sub-spec>.<field>
    expect = {f"engine.des.{f.name}": f"engine.des.{sub}.{f.name}"
              for sub, cls in SUBSPECS.items() for f in dataclasses.fields(cls)}
    assert DES_RENAMED == expect
    assert DES_RENAMED["engine.des.scheduler"] == "engine.des.scheduling.scheduler"
    assert DES_RENAMED["engine.des.block_size"] == "engine.des.kv.block_size"
    # no old key is the name of a new sub-node (``engine.des.scheduler`` stays a setting)
    assert not {k.rsplit(".", 1)[1] for k in DES_RENAMED} & set(SUBSPECS)


def test_flat_and_nested_keys_give_the_same_spec(cfg_of, capsys, fresh_said):
    nested = convert.des_spec(cfg_of(*["engine=des", "engine.des.scheduling.scheduler=sarathi",
                                       "engine.des.scheduling.max_num_seqs=64", "engine.des.kv.block_size=32",
                                       "engine.des.cluster.replicas=2"]))
    assert capsys.readouterr().err == ""
    flat = convert.des_spec(cfg_of(*["engine=des", "engine.des.scheduler=sarathi", "engine.des.max_num_seqs=64",
                                     "engine.des.block_size=32", "engine.des.replicas=2"]))
    assert flat == nested
    assert (flat.scheduling.scheduler, flat.scheduling.max_num_seqs, flat.kv.block_size,
            flat.cluster.replicas) == ("sarathi", 64, 32, 2)
    err = capsys.readouterr().err.splitlines()
    assert "simllm: engine.des.scheduler is deprecated, use engine.des.scheduling.scheduler " \
           "(taken as engine.des.scheduling.scheduler=sarathi)" in err
    assert len([e for e in err if "deprecated" in e]) == 4


def test_an_old_key_wins_over_the_new_default_only(cfg_of, fresh_said):
    d = convert.des_spec(cfg_of(*["engine=des", "engine.des.max_num_seqs=64"]))
    assert d.scheduling.max_num_seqs == 64
    d = convert.des_spec(cfg_of(*["engine=des"]))
    assert d.scheduling.max_num_seqs is None           # not given: the framework profile's


def test_counterfactual_keys_are_moved_too(cfg_of, capsys, fresh_said):
    d = convert.des_spec(cfg_of(*["engine=des", 'engine.des.counterfactual="queue_policy=priority,seed=3"']))
    assert d.counterfactual == "scheduling.queue_policy=priority,seed=3"
    assert "engine.des.counterfactual key queue_policy is deprecated" in capsys.readouterr().err
    from engine.des.cluster.counterfactual import alternative
    alt = alternative(d, d.counterfactual)
    assert (alt.scheduling.queue_policy, alt.seed, alt.counterfactual) == ("priority", 3, "")
    with pytest.raises(SpecError, match="'queue_policy' is not one"):
        alternative(d, "queue_policy=priority")          # the engine takes the new keys only


def test_a_bad_old_key_value_names_the_new_key(cfg_of, fresh_said):
    with pytest.raises(SpecError, match=r"engine\.des\.kv\.watermark = 1\.5: expected a fraction in \[0, 1\)"):
        convert.des_spec(cfg_of(*["engine=des", "engine.des.watermark=1.5"]))


def test_swept_params_of_an_old_key_are_its_new_place(cfg_of, fresh_said):
    from omegaconf import OmegaConf

    from runner.job import run_params

    cfg = OmegaConf.to_container(convert.resolved_config(cfg_of("engine=des", "engine.des.max_num_seqs=8")),
                                 resolve=True)
    some = run_params(cfg, ["engine.des.max_num_seqs"])
    assert some["engine.des.scheduling.max_num_seqs"] == 8
    assert "engine.des.max_num_seqs" not in run_params(cfg)     # the record holds it once


def _job_dirs(root):
    return sorted(p.parent for p in root.rglob("summary.json"))


def test_cli_flat_key_runs_as_the_nested_one_and_records_it_once(tmp_path):
    common = ["engine=des", "workload.num_requests=12", "workload.prompt_len=64", "workload.output_len=8",
              "tracking.enabled=false", "print_table=false"]
    old = run_cli([*common, "engine.des.scheduler=sarathi", "engine.des.max_num_seqs=4",
                   f"hydra.run.dir={tmp_path / 'old'}"], cwd=tmp_path)
    assert old.returncode == 0, old.stderr
    assert "engine.des.scheduler is deprecated, use engine.des.scheduling.scheduler" in old.stderr
    new = run_cli([*common, "engine.des.scheduling.scheduler=sarathi", "engine.des.scheduling.max_num_seqs=4",
                   f"hydra.run.dir={tmp_path / 'new'}"], cwd=tmp_path)
    assert new.returncode == 0, new.stderr
    assert "deprecated" not in new.stderr
    s_old, s_new = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("old", "new"))
    assert s_old["summary"]["ttft_ms_p50"] == s_new["summary"]["ttft_ms_p50"]
    assert s_old["config_hash"] == s_new["config_hash"]       # the same config, recorded the same way
    des = yaml.safe_load((tmp_path / "old" / "config.yaml").read_text())["engine"]["des"]
    assert des["scheduling"]["scheduler"] == "sarathi" and des["scheduling"]["max_num_seqs"] == 4
    assert "scheduler" not in des and "max_num_seqs" not in des   # no flat copy in the record


@pytest.mark.parametrize("sweeper", [[], ["hydra/sweeper=simllm"]], ids=["basic", "batched"])
def test_multirun_sweeps_the_flat_key(tmp_path, sweeper):
    r = run_cli(["-m", *sweeper, "engine=des", "engine.des.scheduler=vllm,sarathi", "engine.des.max_num_seqs=4",
                 "workload.num_requests=12", "workload.prompt_len=64", "workload.output_len=8",
                 "tracking.enabled=false", "print_table=false", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    seen = set()
    for d in _job_dirs(tmp_path / "sweep"):
        des = yaml.safe_load((d / "config.yaml").read_text())["engine"]["des"]
        seen.add(des["scheduling"]["scheduler"])
        assert des["scheduling"]["max_num_seqs"] == 4 and "scheduler" not in des
    assert seen == {"vllm", "sarathi"}


def test_experiment_yaml_with_flat_keys(tmp_path):
    exp = tmp_path / "conf_extra" / "experiment"
    exp.mkdir(parents=True)
    (exp / "flat_des.yaml").write_text("# @package _global_\ndefaults:\n  - override /engine: des\n"
                                       "engine:\n  des:\n    scheduler: orca\n    num_kv_blocks: 900\n"
                                       "    preemption: none\n")
    r = run_cli(["experiment=flat_des", f"hydra.searchpath=[file://{tmp_path / 'conf_extra'}]",
                 "workload.num_requests=12", "workload.prompt_len=64", "workload.output_len=8",
                 "tracking.enabled=false", "print_table=false", f"hydra.run.dir={tmp_path / 'run'}"],
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "engine.des.num_kv_blocks is deprecated, use engine.des.kv.num_kv_blocks" in r.stderr
    des = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["engine"]["des"]
    assert (des["scheduling"]["scheduler"], des["kv"]["num_kv_blocks"], des["scheduling"]["preemption"]) == \
        ("orca", 900, "none")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["summary"]["kv_blocks"] == 900


# ------------------------------------------------------------------ the generic field checker

def _bad(rule):
    """A value the rule must refuse, chosen from the rule's own parameters."""
    if isinstance(rule, _check.IntAtLeast):
        return rule.minimum - 1
    if rule is _check.POSITIVE:
        return 0.0
    if rule is _check.NON_NEGATIVE:
        return -1.0
    if isinstance(rule, _check.OneOf):
        return "bogus"
    if rule is _check.BOOL:
        return "yes"
    if isinstance(rule, _check.Within):
        if rule.zero:
            return rule.low / 2       # between the off value 0 and the range
        return rule.high if rule.high_open else rule.low - 1
    if isinstance(rule, _check.EachPositive):
        return (1.0, 0.0)
    raise AssertionError(f"no bad value for {rule!r}")


_RULED = [(sub, f) for sub, cls in [("", DesSpec), *SUBSPECS.items()] for f in dataclasses.fields(cls)
          if f.metadata.get("check") is not None]


def test_every_des_field_but_a_few_declares_its_rule():
    unruled = {f.name for cls in [DesSpec, *SUBSPECS.values()] for f in dataclasses.fields(cls)
               if f.metadata.get("check") is None}
    # the sub-specs themselves, the profile, the free-form counterfactual, the classes (checked
    # element by element) and the target checked only with autoscale on: cross-field code
    assert unruled == {*SUBSPECS, "framework", "counterfactual", "classes", "autoscale_target"}


@pytest.mark.parametrize("sub, f", _RULED, ids=[f"{s or 'des'}.{f.name}" for s, f in _RULED])
def test_each_rule_refuses_a_bad_value_naming_the_full_key(sub, f):
    bad = _bad(f.metadata["check"])
    key = f"engine.des.{sub}.{f.name}" if sub else f"engine.des.{f.name}"
    with pytest.raises(SpecError) as e:
        DesSpec(**({sub: {f.name: bad}} if sub else {f.name: bad}))
    assert e.value.field == key and "expected" in str(e.value)


def test_the_default_of_every_field_passes():
    d = DesSpec()
    assert d.scheduling.scheduler is None and d.kv.watermark is None   # None: the profile's


def test_messages_keep_the_expected_wording():
    with pytest.raises(SpecError, match=r"^engine\.des\.cluster\.replicas = -1: expected an integer >= 0$"):
        DesSpec(cluster={"replicas": -1})
    with pytest.raises(SpecError, match=r"engine\.des\.scheduling\.scheduler = 'fifo': expected one of vllm, "):
        DesSpec(scheduling={"scheduler": "fifo"})
    with pytest.raises(SpecError, match=r"engine\.des\.power\.throttle_min_clock = 2: expected a fraction in \[0\.05, 1\]"):
        DesSpec(power={"throttle_min_clock": 2})


def test_cross_field_checks_stay():
    with pytest.raises(SpecError, match="engine.des.cluster.traffic_len_s"):
        DesSpec(cluster={"traffic_shape": "spike"})
    with pytest.raises(SpecError, match="engine.des.scheduling.bucket_rate_rps"):
        DesSpec(scheduling={"admission": "token_bucket"})
    with pytest.raises(SpecError, match="engine.des.cluster.autoscale_target"):
        DesSpec(cluster={"autoscale": "queue", "autoscale_target": 0})
    from engine.spec import FrameworkSpec
    with pytest.raises(SpecError, match="engine.des.scheduling.preemption"):
        DesSpec(scheduling={"scheduler": "vllm", "preemption": "none"}).resolve(FrameworkSpec())


def test_a_sub_spec_mapping_with_an_unknown_key_is_refused():
    with pytest.raises(SpecError, match=r"engine\.des\.kv = \['blocksize'\]"):
        DesSpec(kv={"blocksize": 16})
    with pytest.raises(SpecError, match=r"engine\.des\.kv"):
        DesSpec().with_(kv={"blocksize": 16})


def test_a_flat_attribute_says_where_it_moved():
    with pytest.raises(AttributeError, match=r"des\.scheduling\.max_num_seqs"):
        DesSpec().max_num_seqs  # noqa: B018


def test_renamed_looks_only_past_the_old_keys_select_finds_null(cfg_of):
    """convert._maybe_set (one unresolved look per parent node) holds every old key that
    OmegaConf.select finds set: here each old key of RENAMED set at once (an interpolation among
    them), checked by a select per key as ``renamed`` did before; a key left null is not held."""
    from omegaconf import OmegaConf, open_dict

    from runner.schema import RENAMED

    cfg = cfg_of("engine=des")
    assert not {old for old in RENAMED if OmegaConf.select(cfg, old) is not None}
    assert not convert._maybe_set(cfg)
    olds = sorted(RENAMED)
    with open_dict(cfg):
        for i, old in enumerate(olds):
            if i % 3:                                       # two thirds set, a third left null
                OmegaConf.update(cfg, old, "${model.name}" if i % 7 == 1 else f"v{i}", merge=False)
    found = {old for old in olds if OmegaConf.select(cfg, old) is not None}
    assert found == {old for i, old in enumerate(olds) if i % 3}
    assert found <= convert._maybe_set(cfg)
    assert not convert._maybe_set(cfg) & {old for i, old in enumerate(olds) if not i % 3}
