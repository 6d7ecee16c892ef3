"""One job: composed config -> specs -> engine -> job-dir files -> MLflow."""

import hashlib
import json
import subprocess
import sys
import traceback
from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

import runner
from engine.errors import SpecError
from engine.result import RunResult
from runner import outputs
from runner.convert import specs_from_config

#: Keys of the config that do not change a result (left out of the config hash).
_NON_RESULT_KEYS = ("tracking", "print_table")


def _engine(name: str):
    """The engine's ``run(specs) -> RunResult`` for ``engine.name`` (imported on demand)."""
    if name == "analytical":
        from engine.analytical import run
        return run
    raise SpecError("engine.name", name, "one of: analytical")


@lru_cache(maxsize=1)
def git_commit() -> str:
    """Commit of the simllm checkout this runs from ('unknown' outside a git checkout)."""
    root = Path(runner.__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        sha = out.stdout.strip()
        if out.returncode or not sha:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def result_config(cfg: DictConfig) -> dict:
    """The resolved config without Hydra's own node and without result-neutral keys."""
    d = OmegaConf.to_container(cfg, resolve=True)
    for k in _NON_RESULT_KEYS:
        d.pop(k, None)
    return d


def config_hash(cfg: DictConfig) -> str:
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


def summary_line(cfg: DictConfig, s: dict) -> dict:
    """The short row printed per job (and per job of a multirun)."""
    return {
        "hardware": cfg.hardware.name, "model": cfg.model.name,
        "tp": cfg.partition.tp, "pp": cfg.partition.pp, "batch": cfg.workload.batch_size,
        "prompt": cfg.workload.prompt_len, "output": cfg.workload.output_len,
        "TTFT ms": _fmt(s.get("ttft_ms_p50")), "TPOT ms": _fmt(s.get("tpot_ms_p50")),
        "tok/s": _fmt(s.get("throughput_tok_s"), 0),
        "tok/s/gpu": _fmt(s.get("throughput_tok_s_per_gpu"), 0),
        "bound": s.get("bound"), "fits": s.get("fits_in_memory"),
    }


def print_rows(rows: list[dict], file=sys.stdout) -> None:
    """Print rows as an aligned text table."""
    if not rows:
        return
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    print("  ".join(c.rjust(width[c]) for c in cols), file=file)
    for r in rows:
        print("  ".join(str(r.get(c, "")).rjust(width[c]) for c in cols), file=file)


def run_job(cfg: DictConfig, job_dir: Path, overrides: list[str]) -> RunResult:
    """Run one job and persist it. Raises SpecError for bad input (nothing written or logged)."""
    specs = specs_from_config(cfg)
    result = _engine(cfg.engine.name)(specs)
    chash = config_hash(cfg)
    meta = {"config_hash": chash, "engine": cfg.engine.name, "simllm_version": runner.__version__,
            "git_commit": git_commit(), "overrides": list(overrides)}
    outputs.write_result(job_dir, result, OmegaConf.to_yaml(cfg, resolve=True), meta)
    if cfg.print_table:
        print_rows([summary_line(cfg, result.summary)])
        if not result.summary.get("fits_in_memory", True):
            print(f"does not fit in memory: {result.summary.get('memory_reason')}")
    if cfg.tracking.enabled:
        _track(cfg, result, job_dir, meta)
    return result


def _track(cfg: DictConfig, result: RunResult, job_dir: Path, meta: dict) -> None:
    """Log to MLflow; if tracking fails the job still succeeds, with its files on disk."""
    from runner import tracking

    name = cfg.tracking.run_name or (
        f"{cfg.engine.name}:{cfg.hardware.name}:{cfg.model.name}:tp{cfg.partition.tp}"
        f":b{cfg.workload.batch_size}")
    tags = {"simllm.engine": meta["engine"], "simllm.version": meta["simllm_version"],
            "simllm.git_commit": meta["git_commit"], "simllm.config_hash": meta["config_hash"],
            "simllm.overrides": " ".join(meta["overrides"])[:5000], "simllm.job_dir": str(job_dir),
            **{str(k): str(v) for k, v in (cfg.tracking.tags or {}).items()}}
    try:
        tracking.log_job(cfg.tracking.uri, cfg.tracking.experiment, name,
                         flatten(result_config(cfg)), result.summary, tags, job_dir)
    except Exception as e:  # noqa: BLE001 - tracking must never lose a computed result
        print(f"simllm: warning: MLflow logging to {cfg.tracking.uri} failed ({type(e).__name__}: "
              f"{e}); results are in {job_dir}", file=sys.stderr)


def record_failure(job_dir: Path, exc: BaseException) -> None:
    """Leave the reason for a failed job in its directory (error.txt)."""
    text = str(exc) if isinstance(exc, SpecError) else "".join(traceback.format_exception(exc))
    outputs.write_error(job_dir, text)
