"""Framework profiles (engine.spec.framework, conf/framework/) and how they fill engine.des."""

import numpy as np
import pytest

from engine.errors import SpecError
from engine.spec import DesSpec, FrameworkSpec
from tests.conftest import compose_specs

PROFILES = ("generic", "vllm_v1", "vllm_v0", "sglang", "sglang_v03", "trtllm", "trtllm_v0")


def test_generic_is_the_pre_profile_des():
    # the scheduler settings conf/engine/des.yaml held before profiles existed (commit 6491ca9):
    # vllm, 256 seqs, 8192 tokens, chunk 512, 16-token blocks, watermark 0.01, recompute
    d = DesSpec().resolve(FrameworkSpec())
    s, k = d.scheduling, d.kv
    assert (s.scheduler, s.max_num_seqs, s.max_num_batched_tokens, s.chunk_size, k.block_size,
            k.watermark, s.preemption) == ("vllm", 256, 8192, 512, 16, 0.01, "recompute")
    assert DesSpec(scheduling=dict(scheduler="sarathi")).resolve(FrameworkSpec()).token_budget == 512


@pytest.mark.parametrize("name", PROFILES)
def test_each_profile_composes_and_fills_the_des(name):
    s = compose_specs(f"framework={name}")
    fw = s.framework
    assert fw.name == name
    assert name == "generic" or fw.sources      # every named profile cites its upstream defaults
    d = s.des.resolve(fw)
    assert (d.scheduling.scheduler, d.scheduling.max_num_seqs, d.kv.block_size) == (fw.scheduler, fw.max_num_seqs, fw.block_size)


def test_engine_des_value_overrides_the_profile():
    s = compose_specs("framework=vllm_v1", "engine.des.scheduling.max_num_seqs=64", "engine.des.scheduling.scheduler=vllm")
    d = s.des.resolve(s.framework).scheduling
    assert (d.max_num_seqs, d.scheduler, d.max_num_batched_tokens) == (64, "vllm", 8192)


def test_cuda_graph_padding_rounds_up_to_the_next_captured_size(base_specs):
    """The step model runs a decode-only pass on the next captured graph: by hand, 3 -> 4,
    5 -> 8, 16 -> 16, 17 is above the largest graph -> eager, unpadded; a mixed pass (T != Bd)
    is never padded; without padding the tokens stay as they are."""
    from dataclasses import replace

    from engine.analytical.step import StepModel

    fw = replace(base_specs.framework, cuda_graph_sizes=(1, 2, 4, 8, 16), cuda_graph_padding=True)
    sm = StepModel.from_specs(replace(base_specs, framework=fw))
    assert [sm.graph_tokens(b, b) for b in (1, 3, 5, 16, 17)] == [1, 4, 8, 16, 17]
    assert sm.graph_tokens(5, 3) == 5
    assert list(sm.graph_tokens(np.array([3.0, 5.0, 17.0]), np.array([3.0, 5.0, 17.0]))) == [4, 8, 17]
    assert StepModel.from_specs(base_specs).graph_tokens(3, 3) == 3


@pytest.mark.parametrize("kw, field", [
    (dict(scheduler="fifo"), "framework.scheduler"),
    (dict(cuda_graph_sizes=(8, 4)), "framework.cuda_graph_sizes"),
    (dict(cuda_graph_padding=True), "framework.cuda_graph_padding"),
    (dict(kv_usable_fraction=1.5), "framework.kv_usable_fraction"),
    (dict(scheduler="sarathi", chunked_prefill=False), "framework.chunked_prefill"),
    (dict(allreduce="mpi"), "framework.allreduce"),
    (dict(step_overhead_s=-1.0), "framework.step_overhead"),
])
def test_bad_profile_names_the_field(kw, field):
    with pytest.raises(SpecError, match=field.replace(".", r"\.")):
        FrameworkSpec(**kw)


def test_preemption_none_only_with_the_reservation_scheduler():
    with pytest.raises(SpecError, match=r"engine\.des\.scheduling\.preemption"):
        DesSpec(scheduling=dict(preemption="none")).resolve(FrameworkSpec())


def test_yaml_defaults_agree_with_the_specs_and_schemas():
    # conf/engine/des.yaml == DesSpec() == DesSchema(); conf/framework/generic.yaml == FrameworkSpec()
    import dataclasses
    from dataclasses import asdict, fields

    from omegaconf import OmegaConf

    from runner.schema import DES_RENAMED, DesSchema
    from tests.conftest import CONF

    des_yaml = OmegaConf.to_container(OmegaConf.load(CONF / "engine" / "des.yaml"))["des"]

    def plain(v):   # a tuple field is a list in the config (its metadata's config_type)
        return list(v) if isinstance(v, tuple) else v

    spec = {f.name: ({k: plain(x) for k, x in asdict(v).items()} if dataclasses.is_dataclass(v) else plain(v))
            for f in fields(DesSpec) if f.name != "framework" for v in [getattr(DesSpec(), f.name)]}
    # the schema also takes the flat keys of before the sub-nodes, null unless given
    moved = {old.rsplit(".", 1)[1] for old in DES_RENAMED}
    schema = asdict(DesSchema())
    assert all(schema.pop(k) is None for k in moved)
    assert des_yaml == spec == schema
    s = compose_specs("framework=generic")   # the neutral profile equals FrameworkSpec's defaults
    assert s.framework == FrameworkSpec(sources=s.framework.sources)
