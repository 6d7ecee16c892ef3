"""One job: composed config -> specs -> engine -> job-dir files -> MLflow."""

import hashlib
import json
import os
import subprocess
import sys
import traceback
import uuid
from functools import lru_cache

import yaml
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

import runner
from engine.errors import SpecError
from runner import outputs
from runner.convert import resolved_config, specs_from_config, without_moved
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # polars comes with engine.result: imported where a result is handled
    from engine.result import RunResult

#: Keys of the config that do not change a result (left out of the config hash).
_NON_RESULT_KEYS = ("tracking", "paths", "print_table", "resume")

#: Marker left in a job directory whose MLflow logging failed; ``simllm-sync`` uploads it later.
PENDING = "pending_sync.json"
SKIPPED = "skipped.json"


#: engine.name -> the package whose ``run(specs) -> RunResult`` runs it; every engine reads its
#: settings from the Specs bundle (the DES: Specs.des, its null settings from Specs.framework).
ENGINES = {"analytical": "engine.analytical", "des": "engine.des"}


def _engine(name: str, cfg: DictConfig | None = None):
    """The engine's ``run(specs) -> RunResult`` for ``engine.name`` (imported on demand).

    The cyclic garbage collector is off while the engine is imported the first time, and the
    objects made so far are then moved out of its reach (``runner.heap.loading``): numpy, polars
    and the engine's modules make ~10^5 objects that live as long as the process, which ~70
    collections would otherwise scan (~0.01 CPU-s of a one-job process; runner.app does the same
    for its own imports, runner.app.execute again after the first job)."""
    import importlib

    if name not in ENGINES:
        raise SpecError("engine.name", name, "one of: " + ", ".join(ENGINES))
    module = sys.modules.get(ENGINES[name])
    if module is None:
        from runner.heap import loading

        with loading():
            module = importlib.import_module(ENGINES[name])
    return module.run


@lru_cache(maxsize=1)
def git_commit() -> str:
    """Commit of the simllm checkout this runs from ('unknown' outside a git checkout)."""
    return commit_of(Path(runner.__file__).resolve().parent.parent)


def commit_of(root: Path) -> str:
    """HEAD's commit of the git checkout at ``root``, with "-dirty" when a tracked file differs
    from it (staged or not; untracked files do not count); 'unknown' outside a checkout or before
    its first commit. One git process: porcelain v2's ``# branch.oid`` header is HEAD's commit
    (``(initial)`` before the first) and every line not starting with "#" a changed tracked file."""
    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v2", "--branch",
                              "--untracked-files=no"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if out.returncode:
        return "unknown"
    lines = out.stdout.splitlines()
    sha = next((ln.split()[2] for ln in lines if ln.startswith("# branch.oid ")), "")
    if len(sha) < 40 or not all(c in "0123456789abcdef" for c in sha):
        return "unknown"
    return sha + ("-dirty" if any(ln and not ln.startswith("#") for ln in lines) else "")


def result_config(cfg: DictConfig | dict) -> dict:
    """The resolved config (a DictConfig, or its resolved container) without result-neutral keys
    (nor the moved flat engine.des keys, runner.convert.without_moved)."""
    d = without_moved(dict(cfg) if isinstance(cfg, dict) else OmegaConf.to_container(cfg, resolve=True))
    for k in _NON_RESULT_KEYS:
        d.pop(k, None)
    return d


def to_yaml(resolved: dict) -> str:
    """YAML text of a resolved config container (PyYAML's C dumper: ~10x OmegaConf.to_yaml)."""
    return yaml.dump(resolved, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)


def config_hash(cfg: DictConfig | dict) -> str:
    """sha256 (16 hex) of the result-relevant resolved config: equal hashes, equal results."""
    blob = json.dumps(result_config(cfg), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def flatten(d: dict, prefix: str = "") -> dict:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists stay as their string form."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _fmt(v, nd=2):
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return "n/a" if v != v else f"{v:,.{nd}f}"
    return str(v)


def summary_line(cfg: DictConfig, s: dict, ident: dict | None = None) -> dict:
    """The short row printed per job (and per job of a multirun). A DES run shows its request
    count and p50/p99 latencies instead of the static batch of the analytical view.

    ``ident`` (``identity``): the labels of what was computed (an overridden hardware field, the
    framework profile, a draft model). With ``engine.analytical.disagg.enabled`` the TTFT, TPOT
    and throughputs are the disaggregated ones (``disagg_*``; ``serving`` says so)."""
    from engine.result import row_metrics

    ident = ident or identity(cfg)
    row = {"hardware": ident["hardware"], "model": ident["model"], "framework": ident["framework"],
           "tp": cfg.partition.tp, "pp": cfg.partition.pp}
    if ident.get("draft_model"):
        row["draft"] = ident["draft_model"]
    if cfg.engine.name != "des":
        row.update({"batch": cfg.workload.batch_size, "prompt": cfg.workload.prompt_len,
                    "output": cfg.workload.output_len})
    s = shown_summary(s)
    if "serving" in s:
        row["serving"] = s["serving"]
    for m in row_metrics(cfg.engine.name):   # engine.result.METRICS: labels, decimals, which engine
        v = s.get(m.name)
        row[m.label] = v if m.text or isinstance(v, bool) else _fmt(v, m.digits)
        lo, hi = s.get(f"{m.name}_lo"), s.get(f"{m.name}_hi")
        if lo is not None and hi is not None and not m.text and "serving" not in s:   # uncertainty.enabled: "169.00 (150.00-190.00)"
            row[m.label] += f" ({_fmt(lo, m.digits)}-{_fmt(hi, m.digits)})"
    return row


#: Disaggregated prefill/decode: the headline metric -> the disaggregated figure printed instead.
_DISAGG_SHOWN = {"ttft_ms_p50": "disagg_ttft_ms", "tpot_ms_p50": "disagg_tpot_ms",
                 "throughput_tok_s_per_gpu": "disagg_throughput_tok_s_per_gpu"}


def shown_summary(s: dict) -> dict:
    """The summary as the printed row shows it: with disaggregated prefill/decode in the result
    (``disagg_ttft_ms``), TTFT, TPOT and tok/s/GPU are the disaggregated ones, tok/s their total
    over the prefill + decode devices (tok/s/GPU x ``disagg_devices``) and ``serving`` reads
    "disagg"; else ``s`` unchanged."""
    if s.get("disagg_ttft_ms") is None:
        return s
    out = {**s, "serving": "disagg"}
    for head, dis in _DISAGG_SHOWN.items():
        out[head] = s.get(dis)
    per_gpu, dev = s.get("disagg_throughput_tok_s_per_gpu"), s.get("disagg_devices")
    out["throughput_tok_s"] = per_gpu * dev if per_gpu is not None and dev is not None else None
    return out


def print_rows(rows: list[dict], file=None) -> None:
    """Print rows as an aligned text table (to ``file``, default the current sys.stdout)."""
    if not rows:
        return
    file = file or sys.stdout
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    print("  ".join(c.rjust(width[c]) for c in cols), file=file)
    for r in rows:
        print("  ".join(str(r.get(c, "")).rjust(width[c]) for c in cols), file=file)


def hashed_config(cfg: DictConfig) -> tuple[DictConfig, dict, str]:
    """A job's config as the engine will see it (``resolved_config``), its resolved container
    (without the moved flat keys) and its config hash: what ``run_job`` records and what
    ``resume=true`` looks up, computed the same way by a job and by the sweeper that skips
    finished points before launching (hydra_plugins/simllm_sweeper/basic.py)."""
    cfg = resolved_config(cfg)     # model.hf_config applied: the record names what is computed
    resolved = without_moved(OmegaConf.to_container(cfg, resolve=True))  # once: hash, files, params
    return cfg, resolved, config_hash(resolved)


def write_skipped(job_dir: Path, chash: str, overrides) -> None:
    """Mark ``job_dir`` as a point that ``resume=true`` skipped (skipped.json: its config hash and
    overrides), which the sweep's summary counts as skipped."""
    outputs.write_json(job_dir / SKIPPED, {"config_hash": chash, "overrides": list(overrides),
                                            "reason": "a FINISHED run with this config hash exists"})


def already_finished(cfg: DictConfig, chash: str) -> bool:
    """resume=true: is there a FINISHED run with this config hash in the target experiment?

    In a multirun the sweep callback fetched the finished hashes once (a JSON file named by
    SIMLLM_FINISHED_HASHES); a single run asks the tracking store itself.
    """
    from runner import tracking

    path = os.environ.get(tracking.FINISHED_ENV)
    if path and os.path.exists(path):
        return chash in set(json.loads(Path(path).read_text()))
    try:
        return chash in tracking.finished_hashes(cfg.tracking.uri, cfg.tracking.experiment)
    except Exception as e:  # noqa: BLE001
        print(f"simllm: warning: resume check failed ({e}); running the job", file=sys.stderr)
        return False


def run_job(cfg: DictConfig, job_dir: Path, overrides: list[str]) -> "RunResult | None":
    """Run one job and persist it. Raises SpecError for bad input (nothing written or logged).

    Returns None when ``resume`` skips a job that already has a FINISHED run.
    """
    cfg, resolved, chash = hashed_config(cfg)
    if cfg.get("resume") and cfg.tracking.enabled and already_finished(cfg, chash):
        write_skipped(job_dir, chash, overrides)
        print(f"simllm: skipped (resume): config {chash} already has a FINISHED run")
        return None
    specs = specs_from_config(cfg)
    result = _engine(cfg.engine.name, cfg)(specs)
    result.assumptions.extend(sheet_assumptions(cfg))
    result.assumptions.extend(intervals(cfg, specs, result.summary))
    ident = identity(resolved, overrides)
    meta = {"config_hash": chash, "engine": cfg.engine.name, "simllm_version": runner.__version__,
            "git_commit": git_commit(), "overrides": list(overrides), "job_uid": uuid.uuid4().hex,
            "identity": ident}
    meta.update(_sweep_meta())
    outputs.write_result(job_dir, result, to_yaml(resolved), meta)
    timeline = getattr(result, "timeline", None)   # engine=des, engine.des.outputs.record_iterations=true
    if timeline is not None:
        timeline.write_parquet(job_dir / "timeline.parquet")
    for name, frame in (getattr(result, "frames", None) or {}).items():   # DES cluster features
        frame.write_parquet(job_dir / f"{name}.parquet")
    if cfg.print_table:
        if result.summary.get("pareto_points") is None:   # a Pareto job's row is its frontier
            print_rows([summary_line(cfg, result.summary, ident)])
        axis = OmegaConf.select(cfg, "engine.analytical.pareto.throughput", default="decode")
        for line in extra_lines(result.summary, result.table, ident, axis):
            print(line)
        if not result.summary.get("fits_in_memory", True):
            print(f"does not fit in memory: {result.summary.get('memory_reason')}")
    if cfg.tracking.enabled:
        track_job_dir(cfg.tracking, job_dir, cfg=resolved, fresh=True)
    return result


def intervals(cfg: DictConfig, specs, summary: dict) -> list:
    """uncertainty.enabled: ``*_lo`` / ``*_hi`` of the headline metrics added to ``summary``
    (runner.intervals) and the assumptions naming their regimes; nothing (no import) when off."""
    unc = cfg.get("uncertainty")
    if unc is None or not unc.enabled or summary.get("pareto_points") is not None:
        return []
    from engine.errors import SpecError
    from runner.intervals import annotate

    level = float(unc.level)
    if not 0.0 < level < 1.0:
        raise SpecError("uncertainty.level", level, "a probability strictly between 0 and 1 (e.g. 0.8)")
    try:
        return annotate(summary, specs, cfg.engine.name, level, unc.table, unc.get("loco_table"))
    except SpecError:
        raise
    except (FileNotFoundError, ValueError) as e:
        raise SpecError("uncertainty.table", unc.table, str(e)) from None


def sheet_assumptions(cfg: DictConfig) -> list:
    """The conversions recorded when the hardware config was imported from a spec sheet (its
    ``assumptions`` list), as result assumptions, so assumptions.md holds them too."""
    from engine.result import Assumption

    return [Assumption(f"hardware sheet: {text.split(':', 1)[0]}", cfg.hardware.name,
                       text.split(":", 1)[1].strip() if ":" in text else text)
            for text in (cfg.hardware.get("assumptions") or [])]


def _sweep_meta() -> dict:
    """Parent run and sweep id handed down by the sweep callback (empty for a single run)."""
    from runner import tracking

    out = {}
    if os.environ.get(tracking.PARENT_ENV):
        out["parent_run_id"] = os.environ[tracking.PARENT_ENV]
    if os.environ.get(tracking.SWEEP_ENV):
        out["sweep_id"] = os.environ[tracking.SWEEP_ENV]
    return out


def run_params(cfg: DictConfig | dict, swept: list[str] | None = None) -> dict:
    """MLflow params: the flattened result-relevant config, minus engine.des.* on an analytical run
    (the DES options cannot change an analytical result; a DES run keeps engine.analytical.*, its
    step-time model). Each logged param costs ~0.1 ms of SQLite time; config.yaml (an artifact)
    and the config hash keep everything.

    ``swept`` (the batched sweeper's ``log_params=swept``): only the params under these override
    keys (``partition.tp``; a group such as ``hardware`` keeps all of ``hardware.*``) and every
    option's ``*.name``: the values that differ across the sweep, for a sweep of many cheap jobs.
    An old key (runner.schema.RENAMED) keeps the params at its new place.
    """
    d = result_config(cfg)
    eng = dict(d.get("engine") or {})
    if eng.get("name") == "analytical":
        eng.pop("des", None)
    d["engine"] = eng
    flat = flatten(d)
    if swept is None:
        return flat
    from runner.schema import RENAMED

    keys = {RENAMED.get(k, k) for k in (k.lstrip("+~") for k in swept)}   # a moved key: its new place
    prefixes = tuple(k + "." for k in keys)
    return {k: v for k, v in flat.items()
            if k in keys or k.startswith(prefixes) or k.endswith(".name") or k == "name"}


#: Overrides a run name leaves out: what its fixed part already says (engine, hardware, model,
#: framework, tp, the draft model), the resolved model of an hf_config, and result-neutral keys.
_NAMED = ("engine", "hardware", "model", "framework", "partition", "partition.tp", "model.hf_config",
          "engine.name", "hardware.name", "model.name", "framework.name",
          "engine.analytical.spec_decode.draft_model", "engine.analytical.spec_decode.method")
_NEUTRAL = ("tracking", "paths", "hydra", "print_table", "resume")


def short_overrides(overrides, engine: str = "analytical", limit: int = 200) -> str:
    """The job's overrides that its run name's fixed part does not already say, each key cut to
    its last component (``workload.rate_rps=4`` -> ``rate_rps=4``; the full key where two would
    read the same), space-separated, at most ``limit`` characters (cut with "...")."""
    skip = _NAMED + (("workload.batch_size",) if engine != "des" else ("workload",))
    kept = []
    for o in overrides or ():
        key, sep, val = str(o).partition("=")
        key = key.lstrip("+~")
        if not sep or key in skip or key.split(".", 1)[0] in _NEUTRAL:
            continue
        kept.append((key, val.strip("'\"")))
    lasts = [k.rsplit(".", 1)[-1] for k, _ in kept]
    text = " ".join(f"{last if lasts.count(last) == 1 else key}={val}"
                    for (key, val), last in zip(kept, lasts))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def run_name(cfg: DictConfig | dict, overrides=(), ident: dict | None = None) -> str:
    """tracking.run_name, else engine:hardware:model:framework[:draft]:tpN:bB (a DES run: its
    workload's name instead of the batch) followed by the job's other overrides, shortened
    (``short_overrides``: the swept values of a multirun). Names are the resolved ones
    (``identity``: the name in a model.hf_config JSON). Works on a config or its container."""
    if cfg["tracking"].get("run_name"):
        return cfg["tracking"]["run_name"]
    ident = identity(cfg) if ident is None else ident
    eng = cfg["engine"]["name"]
    parts = [eng, cfg["hardware"]["name"], ident.get("model.name", cfg["model"]["name"])]
    parts.append(ident.get("framework") or cfg["framework"]["name"])
    if ident.get("draft_model"):
        parts.append(f"draft={ident['draft_model']}")
    parts.append(f"tp{cfg['partition']['tp']}")
    parts.append(str(cfg["workload"].get("name") or "custom") if eng == "des"
                 else f"b{cfg['workload']['batch_size']}")
    extra = short_overrides(overrides, eng)
    return ":".join(parts) + (f" {extra}" if extra else "")


def _field_overrides(group: str, overrides, skip=()) -> list[str]:
    """``key=value`` of the overrides that set a field of ``group`` (``hardware.hbm_bandwidth=8TB/s``
    -> ``hbm_bandwidth=8TB/s``), ``skip`` fields left out."""
    out = []
    for o in overrides or ():
        key, sep, val = str(o).partition("=")
        key = key.lstrip("+~")
        if sep and key.startswith(group + ".") and key.split(".", 1)[1] not in skip:
            out.append(f"{key.split('.', 1)[1]}={val.strip(chr(39) + chr(34))}")
    return out


def identity(cfg: DictConfig | dict, overrides=()) -> dict:
    """What a job computed, by name: ``hardware`` and ``model`` labels (the option's name, with the
    fields the command line changed in brackets: ``h100_sxm[hbm_bandwidth=8TB/s]``), the resolved
    model's name and shape (a ``model.hf_config`` JSON's, once ``resolved_config`` applied it), the
    framework profile and, with speculative decoding, the draft model (its name, layers and
    experts; ``mtpN`` for N multi-token-prediction layers). Flat, str/int values (MLflow tags)."""
    hw, m = cfg["hardware"], cfg["model"]
    hw_over = _field_overrides("hardware", overrides, ("name", "description", "assumptions"))
    m_over = _field_overrides("model", overrides, ("name", "source", "hf_config"))
    fw = cfg.get("framework") or {}
    out = {"hardware": f"{hw['name']}[{','.join(hw_over)}]" if hw_over else str(hw["name"]),
           "hardware.name": str(hw["name"]),
           "model": f"{m['name']}[{','.join(m_over)}]" if m_over else str(m["name"]),
           "model.name": str(m["name"]), "model.num_layers": m.get("num_layers"),
           "model.num_experts": m.get("num_experts") or 0,
           "model.experts_per_token": m.get("experts_per_token") or 0,
           "model.attention": m.get("attention"),
           "framework": str(fw.get("name") or "generic")}
    if m.get("hf_config"):
        out["model.hf_config"] = str(m["hf_config"])
    sd = ((cfg["engine"].get("analytical") or {}).get("spec_decode") or {})
    method = sd.get("method") or "none"
    if method == "mtp":
        out["draft_model"] = f"mtp{sd.get('mtp_layers', 1)}"
    elif method == "draft" and sd.get("draft_model"):
        from runner.convert import draft_model_spec as load_model

        try:
            d = load_model(str(sd["draft_model"]))
            out.update({"draft_model": d.name, "draft_model.num_layers": d.num_layers,
                        "draft_model.num_experts": d.num_experts})
        except SpecError:   # the engine names the bad draft model (or a fixed fraction prices it)
            out["draft_model"] = str(sd["draft_model"])
    return out


def extra_lines(summary: dict, table=None, ident: dict | None = None, pareto_axis: str = "decode") -> list[str]:
    """Printed under the job's row: what the row cannot hold. Pareto sweep: its frontier (one row
    per winner, highest throughput first); disaggregated prefill/decode: the TTFT split and the
    co-located figures it replaces; C* (chunk search) and B* where the run computed them."""
    s = summary
    lines = []
    if s.get("pareto_points") is not None and table is not None and "on_frontier" in table.columns:
        lines += pareto_lines(s, table, ident, pareto_axis)
    if s.get("disagg_ttft_ms") is not None:
        lines.append(
            f"disaggregated prefill/decode over {_fmt(s.get('disagg_devices'), 0)} devices: TTFT "
            f"{_fmt(s.get('disagg_ttft_ms'))} ms (prefill {_fmt(s.get('disagg_prefill_ttft_ms'))} + "
            f"exposed KV hand-off {_fmt(s.get('disagg_exposed_handoff_ms'))}), TPOT "
            f"{_fmt(s.get('disagg_tpot_ms'))} ms, {_fmt(s.get('disagg_throughput_tok_s_per_gpu'), 0)} tok/s/GPU; "
            f"co-located instead: TTFT {_fmt(s.get('colocated_ttft_ms'))} ms, TPOT "
            f"{_fmt(s.get('colocated_tpot_ms'))} ms, {_fmt(s.get('colocated_throughput_tok_s_per_gpu'), 0)} tok/s/GPU")
    elif "disagg_prefill_fits" in s and not s["disagg_prefill_fits"]:
        lines.append("disaggregated prefill/decode: the prefill replica does not fit in memory")
    if s.get("num_rejected"):          # engine=des: requests that were never served, and why
        why = [f"{s[k]} {text}" for k, text in (
            ("rejected_too_long", f"longer than one replica's KV cache ({_fmt(s.get('max_request_tokens'), 0)} tokens)"),
            ("rejected_admission", "refused by the token-bucket admission")) if s.get(k)]
        lines.append(f"{_fmt(s.get('num_completed'), 0)} of {_fmt(s.get('num_requests'), 0)} requests served: "
                     f"{s['num_rejected']} rejected" + (f" ({', '.join(why)})" if why else ""))
    if s.get("chunk_star") is not None:
        lines.append(f"C* = {_fmt(s['chunk_star'], 0)} tokens (the prefill chunk of least TTFT among "
                     f"engine.analytical.chunk_candidates): TTFT {_fmt(s.get('ttft_at_chunk_star_ms'))} ms")
    if s.get("batch_star") is not None and s["batch_star"] == s["batch_star"]:
        b = s["batch_star"]
        text = ("none (the decode step stays memory-bound at any batch)" if b == float("inf")
                else f"{_fmt(b, 1)} sequences")
        mm = s.get("batch_star_matmul")
        if mm is not None and mm == mm:
            text += "; dense matmuls alone: " + ("never" if mm == float("inf") else _fmt(mm, 1))
        lines.append(f"B* (decode batch where a step turns compute-bound) = {text}")
    return lines


#: Pareto frontier columns printed: (table column, label, decimals). The frontier's x axis is
#: decode throughput (B / TPOT per GPU; engine.analytical.pareto.throughput=decode) or the e2e one.
_PARETO_COLUMNS = (("partition", "partition", None), ("batch_size", "batch", 0), ("prefill_chunk", "chunk", 0),
                   ("ttft_ms", "TTFT ms", 2), ("tpot_ms", "TPOT ms", 2),
                   ("decode_throughput_tok_s_per_gpu", "decode tok/s/GPU", 0),
                   ("throughput_tok_s_per_gpu", "e2e tok/s/GPU", 0),
                   ("interactivity_tok_s_per_user", "tok/s/user", 2), ("decode_bound", "bound", None))


def pareto_lines(s: dict, table, ident: dict | None = None, axis: str = "decode") -> list[str]:
    """The Pareto sweep's frontier as text rows (engine.analytical.pareto): the winners of
    throughput per GPU (``axis``: decode or e2e, the sweep's ``throughput``) against
    interactivity, highest throughput first."""
    import io

    front = table.filter(table["on_frontier"])
    x = "decode_throughput_tok_s_per_gpu" if axis == "decode" else "throughput_tok_s_per_gpu"
    if x in front.columns:
        front = front.sort(x, descending=True)
    rows = []
    for r in front.iter_rows(named=True):
        row = {}
        for col, label, nd in _PARETO_COLUMNS:
            if col in r:
                v = r[col]
                row[label] = str(v) if nd is None else ("n/a" if v is None else f"{v:,.{nd}f}")
        rows.append(row)
    buf = io.StringIO()
    print_rows(rows, file=buf)
    what = (f" of {ident['model']} on {ident['hardware']} ({ident['framework']})" if ident else "")
    head = (f"Pareto frontier{what}, {_fmt(s.get('devices'), 0)} devices: {len(rows)} winners of "
            f"{s.get('pareto_points')} points ({axis} tok/s/GPU vs tok/s/user)" + (f" ({s['pareto_dropped']} dropped: do not fit in memory)"
                                                  if s.get("pareto_dropped") else ""))
    return [head, *buf.getvalue().rstrip("\n").splitlines()]


def run_fields(tracking_cfg, job_dir: Path, doc: dict, cfg: DictConfig | dict | None = None) -> dict:
    """What a job directory logs to MLflow, read back from the directory (summary.json ``doc``,
    config.yaml unless ``cfg`` is given): run_name, params, summary, tags and the final status
    (FAILED where the job left error.txt). Used by a job and by ``simllm-sync`` alike."""
    from runner import tracking

    if cfg is None:
        cfg = OmegaConf.load(job_dir / outputs.CONFIG)
    tags = {"simllm.engine": doc["engine"], "simllm.version": doc["simllm_version"],
            "simllm.git_commit": doc["git_commit"], "simllm.config_hash": doc["config_hash"],
            "simllm.overrides": " ".join(doc["overrides"])[:5000], "simllm.job_dir": str(job_dir),
            "simllm.job_uid": doc["job_uid"],
            **{str(k): str(v) for k, v in (tracking_cfg.get("tags") or {}).items()}}
    try:
        ident = doc.get("identity") or identity(cfg, doc.get("overrides"))
    except Exception:  # noqa: BLE001 - a failed job's config may not resolve; its tags stay plain
        ident = {}
    tags.update({f"simllm.{k}": str(v) for k, v in ident.items() if v is not None})
    if doc.get("parent_run_id"):
        tags["mlflow.parentRunId"] = doc["parent_run_id"]
    if doc.get("sweep_id"):
        tags["simllm.sweep_id"] = doc["sweep_id"]
    status = "FAILED" if (job_dir / outputs.ERROR).exists() else "FINISHED"
    swept = os.environ.get(tracking.PARAM_KEYS_ENV)
    return {"run_name": run_name(cfg, doc.get("overrides"), ident), "params": run_params(cfg, json.loads(swept) if swept else None),
            "summary": doc.get("summary", {}), "tags": tags, "status": status}


def track_job_dir(tracking_cfg, job_dir: Path, quiet: bool = False,
                  cfg: DictConfig | dict | None = None, fresh: bool = False) -> str | None:
    """Log a complete job directory (summary.json + files) to MLflow; returns the run id.

    Everything logged is read back from the directory (``run_fields``), so a job logs the same
    way now or later from ``simllm-sync``. Idempotent: a directory whose job_uid already has a
    FINISHED run in the experiment is not logged twice (``fresh=True``: the directory was just
    written with a new job_uid, so the look-up is skipped). ``cfg``: the job's config when at hand
    (else read from config.yaml). The pending_sync.json marker is written before the first
    tracking call (naming this process) and removed once the run is logged: if tracking fails, or
    the process is killed meanwhile, the job still has its results and the marker for
    ``simllm-sync``. A store known to be unreachable (the sweep's probe, or an
    earlier job of the sweep, found it down: ``tracking.down_reason``) is not tried again, and is
    reported once per sweep, not once per job.
    """
    from runner import tracking

    doc = json.loads((job_dir / outputs.SUMMARY).read_text())
    uri, exp = tracking_cfg.uri, tracking_cfg.experiment
    # the marker comes first: a process killed during the upload leaves it for simllm-sync (which
    # leaves it alone while this process lives), and it goes only once the run is logged
    outputs.write_json(job_dir / PENDING, {"uri": uri, "experiment": exp, "state": "uploading",
                                           **tracking.owner_tags()})
    try:
        down = None if quiet else tracking.down_reason(uri)
        if down:
            raise down
        existing = None if fresh else tracking.run_with_uid(uri, exp, doc["job_uid"], doc.get("summary", {}))
        if existing is not None:
            (job_dir / PENDING).unlink(missing_ok=True)
            return existing.info.run_id
        f = run_fields(tracking_cfg, job_dir, doc, cfg)
        rid = tracking.log_job(uri, exp, f["run_name"], f["params"], f["summary"], f["tags"],
                               job_dir, status=f["status"])
        (job_dir / PENDING).unlink(missing_ok=True)
        return rid
    except Exception as e:  # noqa: BLE001 - tracking must never lose a computed result
        outputs.write_json(job_dir / PENDING, {"uri": uri, "experiment": exp,
                                               "error": f"{type(e).__name__}: {e}"})
        if not quiet and tracking.first_report(e, uri):
            print(f"simllm: warning: MLflow logging to {uri} failed ({type(e).__name__}: {e}); "
                  f"results are in {job_dir}; run `simllm-sync {job_dir}` once it is back",
                  file=sys.stderr)
        return None


def record_failure(cfg: DictConfig, job_dir: Path, exc: BaseException, overrides: list[str],
                   track: bool = True) -> None:
    """Leave the reason for a failed job in its directory (error.txt, with the traceback for
    unexpected errors) and, when tracking is on, a FAILED MLflow run holding it as an artifact.
    ``track=False`` (a single run stopped by bad input) only writes error.txt."""
    text = str(exc) if isinstance(exc, SpecError) else "".join(traceback.format_exception(exc))
    outputs.write_error(job_dir, text)
    if not (cfg.tracking.enabled and track):
        return
    try:
        resolved = OmegaConf.to_yaml(cfg, resolve=True)
    except Exception:  # noqa: BLE001 - a config that cannot resolve is itself the error
        resolved = OmegaConf.to_yaml(cfg)
    (job_dir / outputs.CONFIG).write_text(resolved)
    meta = {"config_hash": config_hash(cfg), "engine": cfg.engine.name,
            "simllm_version": runner.__version__, "git_commit": git_commit(),
            "overrides": list(overrides), "job_uid": uuid.uuid4().hex, "failed": True,
            "summary": {"error": text.strip().splitlines()[-1][:500]}, **_sweep_meta()}
    outputs.write_json(job_dir / outputs.SUMMARY, meta)
    track_job_dir(cfg.tracking, job_dir, fresh=True)
