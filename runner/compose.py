"""Compose simllm's config without running a job: the one helper the tools, benchmarks, studies
and tests use (Hydra's compose API: ``initialize_config_dir`` + ``compose``).

    from runner.compose import compose, compose_specs
    cfg = compose(["model=llama_3_1_8b", "partition.tp=2"])          # DictConfig
    specs = compose_specs(["hardware=h200"])                         # engine Specs

Why one helper: Hydra keeps a process-wide ``GlobalHydra`` that a second ``initialize_*`` refuses
while another is set, the structured-config schemas (and the experiment presets) must be in the
ConfigStore before composing, and the config directory must be absolute. Each call clears
GlobalHydra before and after, so callers never see each other's state. The composed config is
Hydra's own (the same as a job's, less the ``hydra.*`` run-time node).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"


def register(experiments: bool = True) -> None:
    """Put the generated schemas (and, unless ``experiments=False``, the experiment presets) in
    Hydra's ConfigStore. Idempotent."""
    from runner import experiments as presets, schema

    schema.register()
    if experiments:
        presets.register()


def compose(overrides=(), config_dir=CONF, config_name: str = "config", experiments: bool = True):
    """The composed DictConfig of ``config_dir``/``config_name`` with Hydra ``overrides``.
    ``experiments=False`` skips registering the ``experiment`` presets (~0.075 s) for callers
    that never select one."""
    from hydra import compose as hydra_compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register(experiments)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
            return hydra_compose(config_name=config_name, overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()


def compose_specs(overrides=(), **kw):
    """The engine Specs of ``compose(overrides, **kw)`` (runner.convert.specs_from_config)."""
    from runner.convert import specs_from_config

    return specs_from_config(compose(overrides, **kw))
