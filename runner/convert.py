"""Composed config -> engine specs, once, at the boundary: each group by its spec's field metadata
(runner.fields.from_mapping; quantities become SI floats here, with pint)."""

import copy
from dataclasses import fields
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from engine.errors import SpecError
from engine.spec import (CalibrationSpec, FrameworkSpec, HardwareSpec, ModelSpec, PartitionSpec,
                         Specs, WorkloadSpec)
from runner.fields import from_mapping
from runner.schema import (CalibrationSchema, FrameworkSchema, HardwareSchema, ModelSchema,
                           PartitionSchema, WorkloadSchema)

_SCHEMAS = {"hardware": HardwareSchema, "model": ModelSchema, "partition": PartitionSchema,
            "workload": WorkloadSchema, "calibration": CalibrationSchema, "framework": FrameworkSchema}


def _no_extra_keys(cfg: DictConfig) -> None:
    """Keys added with ``+group.key=...`` that no schema knows would be silently ignored: refuse."""
    for group, schema in _SCHEMAS.items():
        if group not in cfg:
            continue
        known = {f.name for f in fields(schema)}
        for key in cfg[group]:
            if key not in known:
                raise SpecError(f"{group}.{key}", cfg[group][key],
                                f"a known key of {group} (no schema field {key!r}; known: {', '.join(sorted(known))})")


def hardware_spec(cfg: DictConfig) -> HardwareSpec:
    """``hardware`` -> HardwareSpec by its field metadata (quantities to SI with pint)."""
    return from_mapping(HardwareSpec, OmegaConf.to_container(cfg.hardware, resolve=True), "hardware")


def model_spec(cfg: DictConfig) -> ModelSpec:
    m = OmegaConf.to_container(cfg.model, resolve=True)
    m.pop("source", None)
    hf = m.pop("hf_config", None)
    if hf:  # the config.json supplies the architecture and name; dtypes, num_params stay from the config
        from engine.ingest.hf_config import apply_hf_config
        m = apply_hf_config(m, hf)
    if m.get("num_params") is not None:
        m["num_params"] = float(m["num_params"])
    return ModelSpec(**m)


_DRAFT_KEY = "engine.analytical.spec_decode.draft_model"


def resolved_config(cfg: DictConfig) -> DictConfig:
    """The config as the engine will see it, so that the record (printed table, config.yaml,
    MLflow params, run name) names what was computed:

    - ``model.hf_config``: the JSON's architecture fields and name replace the option's
      (``engine.ingest.hf_config.apply_hf_config``, the same mapping ``model_spec`` applies), and
      ``model.source`` names the JSON;
    - a vendor spelling of a draft model (``Meta-Llama-3.1-8B``) becomes its conf/model option;
    - a moved key (``calibration.kernels``) stands at its new place (``renamed``).

    Returns ``cfg`` itself when nothing changes, else a changed copy (``cfg`` is left alone: a
    sweeper may share it between jobs). Raises SpecError for an unreadable config.json."""
    out = renamed(cfg)
    hf = OmegaConf.select(cfg, "model.hf_config")
    if hf:
        from engine.ingest.hf_config import apply_hf_config

        model = apply_hf_config(OmegaConf.to_container(cfg.model, resolve=True), hf)
        model["source"] = str(hf)
        out = copy.deepcopy(cfg) if out is cfg else out
        for k, v in model.items():
            if k in out.model and out.model[k] != v:
                out.model[k] = v
    draft = OmegaConf.select(cfg, _DRAFT_KEY)
    opt = draft_option(draft) if draft else None
    if opt and opt != draft:
        out = copy.deepcopy(cfg) if out is cfg else out
        OmegaConf.update(out, _DRAFT_KEY, opt)
    return out


def draft_model_spec(name: str) -> ModelSpec:
    """The draft ModelSpec of ``engine.analytical.spec_decode.draft_model``: ``name`` is a
    conf/model option (``llama_3_1_8b``), a model YAML of that form, or a HuggingFace config.json
    (``engine.ingest.hf_config``). The engine prices it (``SpecDecodeSpec.draft``) and reads no
    file itself. Raises SpecError naming the key."""
    from engine.ingest import hf_config

    model_dir = _ROOT / "conf" / "model"
    p = Path(name)
    if p.suffix == ".json":
        if not p.is_file():
            raise SpecError(_DRAFT_KEY, name, "an existing HF config.json, a model YAML or a conf/model name")
        return hf_config.read(p).model_spec()
    path = p if p.suffix in (".yaml", ".yml") else model_dir / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(f.stem for f in model_dir.glob("*.yaml")))
        raise SpecError(_DRAFT_KEY, name, f"a conf/model option ({known}), a model YAML or an HF config.json")
    import yaml   # PyYAML (installed with omegaconf): a plain model YAML, no interpolation

    doc = yaml.safe_load(path.read_text()) or {}
    for k in ("defaults", "source"):
        doc.pop(k, None)
    hf = doc.pop("hf_config", None)
    if hf:
        doc = hf_config.apply_hf_config(doc, hf)
    if doc.get("num_params") is not None:
        doc["num_params"] = float(doc["num_params"])
    try:
        return ModelSpec(**doc)
    except TypeError as e:
        raise SpecError(_DRAFT_KEY, name, f"a model YAML with ModelSpec fields ({e})") from None


def with_draft(spec):
    """AnalyticalSpec with ``spec_decode.draft`` resolved (``draft_model_spec``) where the engine
    prices a draft model: method=draft with a named draft and no fixed ``draft_cost_fraction``."""
    from dataclasses import replace

    sd = spec.spec_decode
    if sd.method != "draft" or sd.draft_cost_fraction > 0 or not sd.draft_model or sd.draft is not None:
        return spec
    return replace(spec, spec_decode=replace(sd, draft=draft_model_spec(sd.draft_model)))


def draft_option(name: str) -> str:
    """A draft-model name as ``draft_model_spec`` takes it: a file path or a
    conf/model option stays; a vendor spelling of a shipped model (``meta-llama/Llama-3.1-8B``)
    becomes its option (runner.tools.rowgrammar.resolve_model); anything else stays (the engine
    names it in its error)."""
    from runner.tools.rowgrammar import resolve_model

    if Path(name).suffix in (".json", ".yaml", ".yml") or (_ROOT / "conf" / "model" / f"{name}.yaml").is_file():
        return name
    opt, _, quant = resolve_model(name)
    return opt if opt and not quant else name


def misspelt_option(args) -> str | None:
    """One line for a command line whose ``model=``, ``hardware=`` or ``framework=`` names no option
    of conf/ but a known spelling of one (``model=Meta-Llama-3.1-8B``: ``model=llama_3_1_8b``;
    ``hardware=H100-SXM5-80GB``: ``hardware=h100_sxm``; runner.tools.rowgrammar's aliases, else the
    closest option name), else None (Hydra reports anything else itself). Sweeps are checked
    value by value; a command line that adds config directories or search paths is not checked."""
    if any(a.startswith(("-cp", "-cd", "-cn", "--config")) or "searchpath" in a for a in args):
        return None
    for arg in args:
        key, sep, value = arg.partition("=")
        group = key.lstrip("+")
        if not sep or group not in ("model", "hardware", "framework") or "(" in value:
            continue
        options = sorted(f.stem for f in (_ROOT / "conf" / group).glob("*.yaml"))
        for v in (x.strip() for x in value.split(",")):
            if not v or v in options:
                continue
            import difflib   # here: a command line naming existing options never needs them

            from runner.tools import rowgrammar as rg

            if group == "model":
                opt, _, quant = rg.resolve_model(v)
                hint = (f"; its {quant} checkpoint: model={opt} with model.weight_dtype={quant}"
                        if opt and quant else "")
            elif group == "hardware":
                opt, hint = rg.resolve_hardware(v), ""
                opt = opt if isinstance(opt, str) else None
            else:
                opt, hint = rg.pick_framework(v, "")[0], ""
                opt = opt if opt != "generic" or "generic" in v.lower() else None
            why = "the same model" if group == "model" else f"that {group}"
            if opt is None:
                close = difflib.get_close_matches(v.lower().replace("-", "_"), options, n=1, cutoff=0.75)
                if not close:
                    continue
                opt, why = close[0], "the closest name"
            return f"{key}={v}: no conf/{group} option '{v}'; {why} is the option {group}={opt}{hint}"
    return None


def _overlap(value) -> float:
    """engine.analytical.overlap: none -> 0, full -> 1, or a fraction in [0, 1]."""
    words = {"none": 0.0, "full": 1.0}
    if isinstance(value, str) and value.strip().lower() in words:
        return words[value.strip().lower()]
    try:
        f = float(value)
    except (TypeError, ValueError):
        f = float("nan")
    if not 0.0 <= f <= 1.0:
        raise SpecError("engine.analytical.overlap", value, "none, full or a fraction in [0, 1]")
    return f


def analytical_spec(cfg: DictConfig):
    """``engine.analytical`` settings -> AnalyticalSpec by its field metadata (quantities to SI
    with pint; ``overlap`` words to a fraction)."""
    from engine.spec.analytical import AnalyticalSpec

    node = cfg.engine.get("analytical")
    if node is None:
        return AnalyticalSpec()
    a = OmegaConf.to_container(node, resolve=True)
    a["overlap"] = _overlap(a["overlap"])
    return with_draft(from_mapping(AnalyticalSpec, a, "engine.analytical"))


#: Old keys already reported in this process (``renamed``).
_SAID: set = set()


def renamed(cfg: DictConfig) -> DictConfig:
    """``cfg`` with the values of moved keys (runner.schema.RENAMED: ``calibration.kernels`` ->
    ``calibration.cost.backend``, ``engine.des.max_num_seqs`` -> ``engine.des.scheduling.max_num_seqs``,
    ...) at their new place and the old keys null; the same for the old keys inside
    ``engine.des.counterfactual`` ("queue_policy=priority" -> "scheduling.queue_policy=priority").
    A one-line deprecation line on stderr per old key given (once per process). An old key, when
    given, wins over the new one's default. Returns ``cfg`` itself when no old key is set, else a
    changed copy."""
    from runner.schema import RENAMED

    out = cfg
    given = _maybe_set(cfg)
    for old, new in RENAMED.items():
        if old not in given:
            continue
        value = OmegaConf.select(cfg, old)
        if value is None:
            continue
        _deprecated(old, new, value)
        out = copy.deepcopy(cfg) if out is cfg else out
        OmegaConf.update(out, new, value, merge=False)
        OmegaConf.update(out, old, None)
    cf = OmegaConf.select(cfg, _CF_KEY)
    new_cf = _renamed_counterfactual(cf) if cf else cf
    if new_cf != cf:
        out = copy.deepcopy(cfg) if out is cfg else out
        OmegaConf.update(out, _CF_KEY, new_cf)
    return out


_CF_KEY = "engine.des.counterfactual"


def _maybe_set(cfg: DictConfig) -> set:
    """The old keys of runner.schema.RENAMED whose raw value in ``cfg`` is anything but null (an
    interpolation or ``???`` included): the only ones ``OmegaConf.select`` can find set. One
    unresolved look at each parent node (``calibration``, ``engine.des``) instead of a select
    per old key (~2 ms a call, three calls a job). Computed per call: a config can change."""
    from runner.schema import RENAMED

    leaves: dict = {}
    for old in RENAMED:
        parent, leaf = old.rsplit(".", 1)
        leaves.setdefault(parent, []).append(leaf)
    out = set()
    for parent, keys in leaves.items():
        node = OmegaConf.select(cfg, parent)
        if not isinstance(node, DictConfig) or node._is_none() or node._is_missing():
            continue                        # absent, null or ???: no old key under it is set
        out.update(f"{parent}.{k}" for k, v in node.items_ex(resolve=False, keys=keys) if v is not None)
    return out


def without_moved(resolved: dict) -> dict:
    """A resolved config container without the flat engine.des keys of runner.schema.DES_RENAMED
    (null once ``renamed`` moved them), so the record (config.yaml, params, hash) holds each DES
    setting once, at its new key. ``resolved`` is left alone; a changed copy comes back."""
    from runner.schema import DES_RENAMED

    des = (resolved.get("engine") or {}).get("des")
    if not isinstance(des, dict):
        return resolved
    flat = {old.rsplit(".", 1)[1] for old in DES_RENAMED}
    return {**resolved, "engine": {**resolved["engine"],
                                   "des": {k: v for k, v in des.items() if not (k in flat and v is None)}}}


def _deprecated(old: str, new: str, value) -> None:
    """The one deprecation line of an old key (once per process: a sweep converts many jobs)."""
    import sys

    if old not in _SAID:
        _SAID.add(old)
        print(f"simllm: {old} is deprecated, use {new} (taken as {new}={value})", file=sys.stderr)


def _renamed_counterfactual(text: str) -> str:
    """The counterfactual's "key=value,..." with old flat engine.des keys at their new place."""
    from runner.schema import RENAMED

    parts = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        new = RENAMED.get(f"engine.des.{key.strip()}")
        if sep and new:
            rel = new[len("engine.des."):]
            _deprecated(f"{_CF_KEY} key {key.strip()}", f"{_CF_KEY} key {rel}", value)
            part = f"{rel}={value}"
        parts.append(part)
    return ",".join(parts)


def calibration_spec(cfg: DictConfig) -> CalibrationSpec:
    """``calibration`` (with its ``noise`` and ``cost``; old keys moved by ``renamed``) ->
    CalibrationSpec by its field metadata."""
    return from_mapping(CalibrationSpec, OmegaConf.to_container(renamed(cfg).calibration, resolve=True),
                        "calibration")


def specs_from_config(cfg: DictConfig) -> Specs:
    """Build and cross-validate the five specs. Raises SpecError naming the offending field."""
    _no_extra_keys(cfg)
    part = OmegaConf.to_container(cfg.partition, resolve=True)
    part.pop("name", None)
    wl = _resolve_trace(OmegaConf.to_container(cfg.workload, resolve=True),
                        OmegaConf.select(cfg, "paths.shared_data"))
    return Specs(
        hardware=hardware_spec(cfg),
        model=model_spec(cfg),
        partition=from_mapping(PartitionSpec, part, "partition"),
        workload=from_mapping(WorkloadSpec, wl, "workload"),
        calibration=calibration_spec(cfg),
        analytical=analytical_spec(cfg),
        framework=framework_spec(cfg),
        des=des_spec(cfg),
    )


def framework_spec(cfg: DictConfig) -> FrameworkSpec:
    """``framework`` (conf/framework/) -> FrameworkSpec (host costs to seconds with pint). A config
    without the group (composed before profiles existed) gets the neutral ``generic`` profile."""
    f = cfg.get("framework")
    if f is None:
        return FrameworkSpec()
    return from_mapping(FrameworkSpec, OmegaConf.to_container(f, resolve=True), "framework")


#: Where a relative ``workload.trace.path`` is looked for, after the working directory: the
#: project root and the traces shipped in conf/workload/traces; then ``trace_dirs`` adds the shared
#: data's traces/ (``paths.shared_data``, runner.paths).
_ROOT = Path(__file__).resolve().parent.parent
TRACE_DIRS = (_ROOT, _ROOT / "conf" / "workload" / "traces")


def trace_dirs(shared_data=None) -> tuple:
    """TRACE_DIRS + <shared data>/traces (``shared_data``: a composed ``paths.shared_data``)."""
    from runner import paths

    return (*TRACE_DIRS, paths.shared_file("traces", value=shared_data))


def _resolve_trace(wl: dict, shared_data=None) -> dict:
    """Make ``workload.trace.path`` absolute (first match in the cwd, then ``trace_dirs``)."""
    path = (wl.get("trace") or {}).get("path") or ""
    if path and not Path(path).is_absolute():
        for base in (Path.cwd(), *trace_dirs(shared_data)):
            if (base / path).is_file():
                wl["trace"]["path"] = str((base / path).resolve())
                break
    return wl


def des_spec(cfg: DictConfig):
    """``engine.des`` settings -> DesSpec (the discrete-event engine's deployment; its null
    scheduler settings are taken from the framework profile when the DES runs)."""
    from engine.spec.des import DesSpec

    node = renamed(cfg).engine.get("des")
    if node is None:
        return DesSpec()
    return from_mapping(DesSpec, OmegaConf.to_container(node, resolve=True), "engine.des")


__all__ = ["specs_from_config", "resolved_config", "des_spec", "SpecError"]
