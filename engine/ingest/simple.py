"""Spec-sheet style simple configs -> hardware and model configs, the missing terms stated.

Quick simulator configs (seed document 000, sec. 3.2) carry only::

    model:     name, num_params, dtype_bits
    hardware:  compute_tflops_bf16, memory_bandwidth_gbps, memory_capacity_gb, sram_capacity_mb,
               interconnect_bandwidth_gbps, power_limit_w
    scheduler: kv_cache_capacity_gb, max_batch_size, preemption
    workload:  input_len_p50, output_len_p50, max_concurrent_requests, trace

(nested as above or flat). What simllm needs beyond that is filled in and stated:

- ``*_gbps`` bandwidths are read as GB/s (the seed's 4096 is 4 TB/s of HBM, its 900 an
  NVLink-class link), compute figures as dense;
- the architecture (layers, heads, KV heads, FFN, vocabulary) of the reference model nearest in
  parameter count (``REFERENCE_OPTIONS``, read from conf/model by the runner, or ``architecture:``
  naming one): it feeds only the attention and
  KV-cache terms, while ``num_params`` sets the weight bytes and 2*N FLOPs per token;
- ``kv_cache_capacity_gb`` is not an input: the engine derives KV capacity as (HBM - weights -
  activations - reserve) x kv_usable_fraction; the import compares the sheet's figure with the
  same rule, (capacity - weights) x 0.9;
- workload fields become suggested ``workload.*`` overrides for the analytical engine; for the
  discrete-event engine the scheduler and workload sections are imported whole
  (``SimpleImport.workload_fields`` -> conf/workload/NAME.yaml, ``des_overrides``):
    scheduler.max_batch_size         -> engine.des.scheduling.max_num_seqs (and workload.batch_size)
    scheduler.preemption true/false  -> engine.des.scheduling.preemption=recompute / scheduler=orca + none
    scheduler.kv_cache_capacity_gb   -> engine.des.kv.num_kv_blocks = floor(GB x 1e9 / (KV bytes per
                                        token x 16)), block_size 16 (the sheet's KV room, not derived)
    workload.max_concurrent_requests -> a closed loop of that many users (workload.concurrency),
                                        4 requests per user unless a trace gives the requests
    workload.input_len_p50 / output_len_p50 -> fixed prompt / output lengths at those medians
    workload.trace                   -> workload.trace.path when the file exists next to the
                                        config (else stated and the synthetic closed loop used).
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

from engine.ingest.hwcsv import HardwareSheet, _yaml_str, read_sheet

#: The model options (conf/model/NAME.yaml, each from its HF config.json) whose architecture a
#: model given only by its parameter count borrows. The runner reads them from conf/model and
#: passes them in (``references``: option -> the YAML's fields); no number is repeated here.
REFERENCE_OPTIONS = ("llama_2_7b", "llama_2_13b", "llama_3_1_8b", "llama_3_1_70b", "llama_3_1_405b")
#: The architecture fields taken from the reference.
ARCH_KEYS = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "ffn_size", "vocab_size",
             "attention")


def reference_params(fields: dict) -> float:
    """Total parameter count of a reference option's architecture (engine.analytical.params)."""
    from engine.analytical.params import param_counts
    from engine.spec import ModelSpec

    known = {f for f in ModelSpec.__dataclass_fields__}
    return param_counts(ModelSpec(**{k: v for k, v in fields.items() if k in known})).total


DTYPE_OF_BITS = {32: "fp32", 16: "bf16", 8: "fp8", 4: "fp4"}

KNOWN = {
    "model": {"name", "num_params", "dtype_bits", "architecture"},
    "hardware": {"name", "compute_tflops_bf16", "memory_bandwidth_gbps", "memory_capacity_gb",
                 "sram_capacity_mb", "interconnect_bandwidth_gbps", "power_limit_w", "tdp_w"},
    "scheduler": {"kv_cache_capacity_gb", "max_batch_size", "preemption"},
    "workload": {"trace", "max_concurrent_requests", "input_len_p50", "output_len_p50"},
}
_HW_ROWS = {  # simple key -> (sheet param, unit, precision)
    "compute_tflops_bf16": ("peak_bf16", "TFLOPS", "bf16"),
    "memory_bandwidth_gbps": ("hbm_bandwidth", "GB/s", ""),
    "memory_capacity_gb": ("hbm_capacity", "GB", ""),
    "sram_capacity_mb": ("sram_capacity", "MB", ""),
    "interconnect_bandwidth_gbps": ("scaleup_bandwidth", "GB/s", ""),
    "power_limit_w": ("tdp", "W", ""),
    "tdp_w": ("tdp", "W", ""),
}


class SimpleConfigError(ValueError):
    """A simple config key that is unknown, missing or not a number; names the key."""


@dataclass
class SimpleImport:
    hardware: HardwareSheet
    model_fields: dict
    model_notes: dict
    assumptions: list = field(default_factory=list)
    overrides: list = field(default_factory=list)
    #: the workload section as a conf/workload option (empty when the config has none)
    workload_fields: dict = field(default_factory=dict)
    #: engine.des.* overrides from the scheduler section
    des_overrides: list = field(default_factory=list)

    def workload_yaml(self, command: str = "") -> str:
        lines = [f"# {self.workload_fields['name']}: the workload section of a simple spec-sheet config"
                 + (f", imported by `{command}`" if command else ""), "defaults:", "  - workload_schema"]
        for k, v in self.workload_fields.items():
            if isinstance(v, dict):
                lines.append(f"{k}:")
                lines += [f"  {kk}: {_yaml_str(vv) if isinstance(vv, str) else vv}" for kk, vv in v.items()]
            else:
                lines.append(f"{k}: {_yaml_str(v) if isinstance(v, str) else v}")
        return "\n".join(lines) + "\n"

    def des_command(self, hardware: str, model: str) -> str:
        """The discrete-event run of the whole config."""
        wl = [f"workload={self.workload_fields['name']}"] if self.workload_fields else []
        return " ".join(["simllm", "engine=des", f"hardware={hardware}", f"model={model}", *wl,
                         *self.des_overrides])

    def model_yaml(self, command: str = "") -> str:
        f = self.model_fields
        lines = [f"# {f['name']}: a simple spec-sheet config (num_params, dtype_bits) made runnable"
                 + (f" by `{command}`" if command else "") + ".",
                 "# num_params sets the weight bytes and 2*N FLOPs per token; the architecture below",
                 "# (a reference model of similar size) feeds only the attention and KV-cache terms.",
                 "defaults:", "  - model_schema"]
        for k, v in f.items():
            shown = f"{v:.6g}" if k == "num_params" else (_yaml_str(v) if k == "source" else v)
            text = f"{k}: {shown}"
            note = self.model_notes.get(k, "")
            lines.append(f"{text:<26} # {note}" if note else text)
        lines.append("# Assumptions:")
        lines += [f"#  - {a}" for a in self.assumptions]
        return "\n".join(lines) + "\n"


def _flat(cfg: dict) -> dict:
    """Nested (model/hardware/scheduler/workload) or flat -> {section: {key: value}}; unknown keys raise."""
    out = {s: {} for s in KNOWN}
    for k, v in cfg.items():
        if k in KNOWN and isinstance(v, dict):
            for kk, vv in v.items():
                if kk not in KNOWN[k]:
                    raise SimpleConfigError(f"{k}.{kk}: unknown key (known: {', '.join(sorted(KNOWN[k]))})")
                out[k][kk] = vv
            continue
        sec = next((s for s, keys in KNOWN.items() if k in keys), None)
        if sec is None:
            raise SimpleConfigError(f"{k}: unknown key (known: "
                                    f"{', '.join(sorted(set().union(*KNOWN.values())))})")
        out[sec][k] = v
    return out


def _num(sec: str, key: str, v) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise SimpleConfigError(f"{sec}.{key} = {v!r}: expected a number") from None
    if not math.isfinite(x) or x <= 0:
        raise SimpleConfigError(f"{sec}.{key} = {v!r}: expected a number > 0")
    return x


def nearest_reference(num_params: float, references: dict) -> str:
    """The reference option nearest in log(parameter count) (``references``: option -> fields)."""
    return min(references, key=lambda k: abs(math.log(reference_params(references[k]) / num_params)))


def import_simple(cfg: dict, name: str, path: str = "simple.yaml", *, references: dict) -> SimpleImport:
    """Map a simple spec-sheet config to a HardwareSheet and ModelSpec fields (+ assumptions);
    ``references``: the REFERENCE_OPTIONS' fields, option -> {num_layers: ..., source: ...}."""
    c = _flat(cfg)
    hw, m, sch, wl = c["hardware"], c["model"], c["scheduler"], c["workload"]
    for sec, key in (("hardware", "compute_tflops_bf16"), ("hardware", "memory_bandwidth_gbps"),
                     ("hardware", "memory_capacity_gb"), ("model", "num_params"), ("model", "dtype_bits")):
        if key not in c[sec]:
            raise SimpleConfigError(f"{sec}.{key}: missing (a simple config needs compute_tflops_bf16, "
                                    "memory_bandwidth_gbps, memory_capacity_gb, num_params, dtype_bits)")
    rows = ["param,value,unit,precision,source,dense_or_sparse,direction"]
    for key, (param, unit, prec) in _HW_ROWS.items():
        if key in hw:
            x = _num("hardware", key, hw[key])
            dense = "dense" if unit == "TFLOPS" else ""
            direction = "per_direction" if param == "scaleup_bandwidth" else ""
            rows.append(f"{param},{x:g},{unit},{prec},{path}: hardware.{key},{dense},{direction}")
    hw_name = str(hw.get("name") or name)
    sheet = read_sheet(path, hw_name, text="\n".join(rows) + "\n",
                       description=f"{hw_name}: simple spec-sheet config {path}")
    a = sheet.assumptions
    a.insert(0, "simple config: *_gbps bandwidths read as GB/s (bytes), compute_tflops_bf16 as a dense "
                "figure, interconnect_bandwidth_gbps as per direction")

    n = _num("model", "num_params", m["num_params"])
    bits = int(_num("model", "dtype_bits", m["dtype_bits"]))
    if bits not in DTYPE_OF_BITS:
        raise SimpleConfigError(f"model.dtype_bits = {bits}: expected one of {sorted(DTYPE_OF_BITS)}")
    dtype = DTYPE_OF_BITS[bits]
    ref_name = m.get("architecture") or nearest_reference(n, references)
    if ref_name not in references:
        raise SimpleConfigError(f"model.architecture = {ref_name!r}: expected one of {', '.join(references)}")
    ref = references[ref_name]
    mname = str(m.get("name") or name).replace("-", "_").replace(".", "_")
    fields_ = {"name": mname, "source": f"{path} (simple config), architecture of {ref['source']}",
               "num_params": n}
    notes = {"num_params": f"model.num_params: {n / 1e9:g} B; weights {n * bits / 8 / 1e9:g} GB at {bits} bit"}
    for k in ARCH_KEYS:
        fields_[k] = ref[k]
        notes[k] = f"assumed: {ref_name}"
    fields_["weight_dtype"] = fields_["kv_dtype"] = fields_["activation_dtype"] = dtype if bits <= 16 else "fp32"
    if bits < 16:
        fields_["kv_dtype"] = fields_["activation_dtype"] = "bf16"
    notes["weight_dtype"] = f"dtype_bits: {bits}"
    how = "given" if m.get("architecture") else f"nearest in parameter count to {n / 1e9:g} B"
    ma = [f"architecture of {ref_name} ({reference_params(ref) / 1e9:.3g} B, {how}) for the attention and KV-cache "
          f"terms; num_params {n / 1e9:g} B sets the weights and 2*N FLOPs per token",
          f"dtype_bits {bits} -> weights {fields_['weight_dtype']}, KV cache {fields_['kv_dtype']}"]
    kv = sch.get("kv_cache_capacity_gb")
    if kv is not None:
        kv = _num("scheduler", "kv_cache_capacity_gb", kv)
        cap = _num("hardware", "memory_capacity_gb", hw["memory_capacity_gb"])
        rule = (cap - n * bits / 8 / 1e9) * 0.9
        agree = abs(kv / rule - 1) if rule > 0 else float("inf")
        verdict = (f"agrees within {agree:.1%}" if agree <= 0.05 else
                   f"differs by {agree:.0%}: set calibration.kv_usable_fraction / memory_reserve to match")
        ma.append(f"kv_cache_capacity_gb {kv:g} is not an input: the engine derives (HBM - weights - "
                  f"activations - reserve) x kv_usable_fraction; the sheet's own rule (capacity - weights) "
                  f"x 0.9 = ({cap:g} - {n * bits / 8 / 1e9:g}) x 0.9 = {rule:.1f} GB {verdict}")
    overrides = []
    if "input_len_p50" in wl:
        overrides.append(f"workload.prompt_len={int(_num('workload', 'input_len_p50', wl['input_len_p50']))}")
    if "output_len_p50" in wl:
        overrides.append(f"workload.output_len={int(_num('workload', 'output_len_p50', wl['output_len_p50']))}")
    for sec, key in (("workload", "trace"), ("workload", "max_concurrent_requests"),
                     ("scheduler", "preemption"), ("scheduler", "max_batch_size")):
        if key in c[sec]:
            ma.append(f"{sec}.{key} = {c[sec][key]!r}: not used by the analytical engine (batch comes from "
                      "workload.batch_size); the DES run takes it (des_command)")
    wf, des = _des_sections(c, fields_, name, path, ma)
    return SimpleImport(hardware=sheet, model_fields=fields_, model_notes=notes, assumptions=ma,
                        overrides=overrides, workload_fields=wf, des_overrides=des)


#: KV page of the imported DES config (block_size) [tokens]
DES_BLOCK = 16
#: requests per closed-loop user when no trace gives the requests
REQUESTS_PER_USER = 4


def _des_sections(c: dict, model_fields: dict, name: str, path: str, notes: list):
    """(workload option fields, engine.des overrides) of the scheduler and workload sections
    (module docstring); ``notes`` gets what was assumed."""
    sch, wl = c["scheduler"], c["workload"]
    des = []
    if "max_batch_size" in sch:
        seqs = int(_num('scheduler', 'max_batch_size', sch['max_batch_size']))
        des.append(f"engine.des.scheduling.max_num_seqs={seqs}")
    if "preemption" in sch:
        p = sch["preemption"]
        if not isinstance(p, bool):
            raise SimpleConfigError(f"scheduler.preemption = {p!r}: expected true or false")
        des += (["engine.des.scheduling.preemption=recompute"] if p else
                ["engine.des.scheduling.scheduler=orca", "engine.des.scheduling.preemption=none"])
        notes.append("scheduler.preemption " + ("true -> recompute (vLLM's default)" if p else
                     "false -> orca's prompt + output reservation, which never preempts"))
    if "kv_cache_capacity_gb" in sch:
        from engine.analytical.memory import kv_bytes_per_token
        from engine.spec import ModelSpec

        known = set(ModelSpec.__dataclass_fields__)
        kvpt = kv_bytes_per_token(ModelSpec(**{k: v for k, v in model_fields.items() if k in known}))
        gb = _num("scheduler", "kv_cache_capacity_gb", sch["kv_cache_capacity_gb"])
        blocks = int(gb * 1e9 // (kvpt * DES_BLOCK))
        des += [f"engine.des.kv.block_size={DES_BLOCK}", f"engine.des.kv.num_kv_blocks={blocks}"]
        notes.append(f"DES: kv_cache_capacity_gb {gb:g} -> {blocks} blocks of {DES_BLOCK} tokens "
                     f"({kvpt / 1e3:g} kB of KV per token), the sheet's figure instead of the derived one")
    if not wl:
        return {}, des
    wname = str(name).replace("-", "_").replace(".", "_")
    wf = {"name": wname}
    if "input_len_p50" in wl:
        wf["prompt_len"] = int(_num("workload", "input_len_p50", wl["input_len_p50"]))
    if "output_len_p50" in wl:
        wf["output_len"] = int(_num("workload", "output_len_p50", wl["output_len_p50"]))
    for k, d in (("prompt_len", 512), ("output_len", 128)):
        if k not in wf:
            wf[k] = d
            notes.append(f"workload: no {k} median given, {d} assumed")
    if "max_batch_size" in sch:
        wf["batch_size"] = int(_num("scheduler", "max_batch_size", sch["max_batch_size"]))
    trace = wl.get("trace")
    found = None
    if trace:
        cand = Path(str(trace))
        cand = cand if cand.is_absolute() else Path(path).parent / cand
        found = cand if cand.is_file() else None
        notes.append(f"workload.trace {trace}: " + (f"read from {found}" if found else
                     "not found next to the config; the synthetic closed loop below stands in"))
    if "max_concurrent_requests" in wl:
        users = int(_num("workload", "max_concurrent_requests", wl["max_concurrent_requests"]))
        wf.update(arrival="closed_loop", concurrency=users)
        if not found:
            wf["num_requests"] = REQUESTS_PER_USER * users
            notes.append(f"workload: max_concurrent_requests {users} -> a closed loop of {users} users, "
                         f"{REQUESTS_PER_USER} requests each, no think time; lengths fixed at the p50s")
    if found:
        wf["trace"] = {"path": str(found)}
    return wf, des
