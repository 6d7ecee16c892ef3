"""Composed config -> engine specs, once, at the boundary. Quantities become SI floats here."""

from dataclasses import fields
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from engine.errors import SpecError
from engine.spec import (CalibrationSpec, HardwareSpec, ModelSpec, PartitionSpec, Specs,
                         WorkloadSpec)
from runner.schema import (UNITS, CalibrationSchema, HardwareSchema, ModelSchema,
                           PartitionSchema, WorkloadSchema)
from runner.units import to_si


#: Quantities for which zero is meaningful (no SRAM, no latency, no reserve).
_ZERO_OK = {"hardware.sram", "hardware.scaleup_latency", "hardware.scaleout_latency",
            "calibration.memory_reserve", "calibration.step_overhead",
            "calibration.per_token_overhead", "calibration.per_request_overhead"}

_SCHEMAS = {"hardware": HardwareSchema, "model": ModelSchema, "partition": PartitionSchema,
            "workload": WorkloadSchema, "calibration": CalibrationSchema}


def _q(cfg: DictConfig, group: str, key: str):
    """Field ``group.key`` of the config as an SI float (None stays None)."""
    full = f"{group}.{key}"
    return to_si(full, cfg[group][key], UNITS[full], allow_zero=full in _ZERO_OK)


def _no_extra_keys(cfg: DictConfig) -> None:
    """Keys added with ``+group.key=...`` that no schema knows would be silently ignored: refuse."""
    for group, schema in _SCHEMAS.items():
        known = {f.name for f in fields(schema)}
        for key in cfg[group]:
            if key not in known:
                raise SpecError(f"{group}.{key}", cfg[group][key],
                                f"a known key of {group} (no schema field {key!r}; known: {', '.join(sorted(known))})")


def hardware_spec(cfg: DictConfig) -> HardwareSpec:
    h = cfg.hardware
    return HardwareSpec(
        name=h.name,
        peak_flops_bf16=_q(cfg, "hardware", "peak_bf16"),
        peak_flops_fp8=_q(cfg, "hardware", "peak_fp8"),
        peak_flops_int8=_q(cfg, "hardware", "peak_int8"),
        peak_flops_fp4=_q(cfg, "hardware", "peak_fp4"),
        compute_figures_sparse=h.compute_figures_sparse,
        sparse_to_dense_factor=h.sparse_to_dense_factor,
        hbm_capacity_bytes=_q(cfg, "hardware", "hbm_capacity"),
        hbm_bandwidth_bytes_s=_q(cfg, "hardware", "hbm_bandwidth"),
        sram_bytes=_q(cfg, "hardware", "sram"),
        scaleup_bandwidth_bytes_s=_q(cfg, "hardware", "scaleup_bandwidth"),
        scaleup_latency_s=_q(cfg, "hardware", "scaleup_latency"),
        scaleout_bandwidth_bytes_s=_q(cfg, "hardware", "scaleout_bandwidth"),
        scaleout_latency_s=_q(cfg, "hardware", "scaleout_latency"),
        devices_per_node=h.devices_per_node,
        tdp_w=_q(cfg, "hardware", "tdp"),
    )


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


def specs_from_config(cfg: DictConfig) -> Specs:
    """Build and cross-validate the five specs. Raises SpecError naming the offending field."""
    _no_extra_keys(cfg)
    part = OmegaConf.to_container(cfg.partition, resolve=True)
    part.pop("name", None)
    wl = _resolve_trace(OmegaConf.to_container(cfg.workload, resolve=True))
    c = cfg.calibration
    return Specs(
        hardware=hardware_spec(cfg),
        model=model_spec(cfg),
        partition=PartitionSpec(**part),
        workload=WorkloadSpec(**wl),
        calibration=CalibrationSpec(
            name=c.name,
            compute_efficiency=c.compute_efficiency,
            memory_bandwidth_efficiency=c.memory_bandwidth_efficiency,
            comm_efficiency=c.comm_efficiency,
            memory_reserve_bytes=_q(cfg, "calibration", "memory_reserve"),
            kv_usable_fraction=c.kv_usable_fraction,
            step_overhead_s=_q(cfg, "calibration", "step_overhead"),
            per_token_overhead_s=_q(cfg, "calibration", "per_token_overhead"),
            per_request_overhead_s=_q(cfg, "calibration", "per_request_overhead"),
        ),
    )


#: Where a relative ``workload.trace.path`` is looked for, after the working directory: the
#: project root, the traces shipped in conf/workload/traces, and ../shared/data/traces.
_ROOT = Path(__file__).resolve().parent.parent
TRACE_DIRS = (_ROOT, _ROOT / "conf" / "workload" / "traces", _ROOT.parent / "shared" / "data" / "traces")


def _resolve_trace(wl: dict) -> dict:
    """Make ``workload.trace.path`` absolute (first match in the cwd, then TRACE_DIRS)."""
    path = (wl.get("trace") or {}).get("path") or ""
    if path and not Path(path).is_absolute():
        for base in (Path.cwd(), *TRACE_DIRS):
            if (base / path).is_file():
                wl["trace"]["path"] = str((base / path).resolve())
                break
    return wl


def des_spec(cfg: DictConfig):
    """``engine.des`` settings -> DesSpec (the discrete-event engine's deployment)."""
    from engine.des.config import DesSpec

    return DesSpec(**OmegaConf.to_container(cfg.engine.des, resolve=True))


__all__ = ["specs_from_config", "des_spec", "SpecError"]
