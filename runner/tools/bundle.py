"""Reproducible bundles: ``simllm-bundle RUN_ID -o DIR`` and ``simllm-replay DIR``.

A bundle is a directory of a few KB:
    bundle.yaml     the run's resolved config as a primary Hydra config (schema-checked, tracking off)
    expected.json   the run's summary metrics, exactly as its job wrote them (summary.json)
    manifest.json   run id, experiment, engine, simllm version and commit, config hash, the exact
                    command, the replay command, Python/platform and package versions, tolerance,
                    and the trace (if the run read one)
    trace/NAME.gz   the request trace, gzip-compressed (only for runs that read a trace file)
    README.md       how to replay it
Replay composes ``bundle.yaml`` with Hydra's compose API, runs the job into a clean output
directory (no tracking) and compares its summary with ``expected.json``: bit-exact for the
deterministic analytical engine, within the manifest's relative tolerance otherwise. On a mismatch
it prints a metric-by-metric diff and exits 1. The same run from the command line:
``simllm --config-dir DIR --config-name bundle hydra.run.dir=OUT``.
"""

import argparse
import gzip
import hashlib
import json
import math
import platform
import shutil
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import yaml

from engine.errors import SpecError
from runner import tracking
from runner.tools import runs
from runner.tools.cli import guard

CONFIG = "bundle.yaml"
EXPECTED = "expected.json"
MANIFEST = "manifest.json"
#: Relative tolerance per engine: 0 = bit-exact (deterministic closed form); others default to 1e-9.
RTOL = {"analytical": 0.0}
DEFAULT_RTOL = 1e-9
PACKAGES = ("simllm", "hydra-core", "omegaconf", "mlflow", "numpy", "polars", "pyarrow", "pint",
            "pandas", "matplotlib")


def _versions() -> dict:
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


def _trace_keys(d: dict, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, path) of every non-empty ``path`` leaf under a ``trace`` node of the config."""
    out = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out += _trace_keys(v, key + ".")
        elif k == "path" and "trace" in prefix.split(".") and isinstance(v, str) and v:
            out.append((key, v))
    return out


def _trace_candidates(path: str, tags: dict) -> list[Path]:
    """Where the run's trace may be: as given, beside its job dir, in the runner's trace dirs."""
    from runner import convert

    return [Path(path), Path(tags.get("simllm.job_dir", ".")) / path,
            *(Path(d) / path for d in convert.trace_dirs())]


def _config_from_params(p: dict) -> dict:
    """Fallback when a run has no config.yaml artifact: unflatten params, YAML-typed values."""
    out: dict = {}
    for k, v in p.items():
        node = out
        *head, last = k.split(".")
        for h in head:
            node = node.setdefault(h, {})
        node[last] = yaml.safe_load(v) if v != "" else ""
    return out


def make(uri: str, run_id: str, out: Path) -> Path:
    """Write the bundle of run ``run_id`` into ``out`` (created; must be empty if it exists)."""
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"simllm-bundle: {out} exists and is not empty")
    run_id = runs.full_run_id(uri, run_id)        # a unique prefix is enough
    row = runs.runs_by_id(uri, [run_id]).row(0, named=True)
    tags, params = runs.tags(row), runs.params(row)
    if tags.get(runs.ROLE_TAG):
        raise SystemExit(f"simllm-bundle: run {run_id} is a {tags[runs.ROLE_TAG]} run, not a job")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = runs.artifact(uri, run_id, "config.yaml", Path(tmp))
        sum_path = runs.artifact(uri, run_id, "summary.json", Path(tmp))
        cfg = yaml.safe_load(cfg_path.read_text()) if cfg_path else _config_from_params(params)
        if sum_path:
            summary = json.loads(sum_path.read_text())["summary"]
        else:  # metrics (floats) + string metrics kept as summary.* tags
            summary = {**runs.metrics(row),
                       **{k[8:]: v for k, v in tags.items() if k.startswith("summary.")}}
        traces = []
        for key, path in _trace_keys(cfg):
            name = Path(path).name
            src = runs.artifact(uri, run_id, name, Path(tmp) / "trace")
            src = src or next((p for p in _trace_candidates(path, tags) if p.is_file()), None)
            if src is None:
                print(f"simllm-bundle: warning: trace {path} ({key}) not found; the bundle cannot "
                      "replay without it", file=sys.stderr)
                continue
            (out / "trace").mkdir(exist_ok=True)
            dst = out / "trace" / f"{name}.gz"
            with open(src, "rb") as f, gzip.open(dst, "wb", compresslevel=9) as g:
                shutil.copyfileobj(f, g)
            traces.append({"key": key, "original": path, "file": f"trace/{name}.gz",
                           "sha256": hashlib.sha256(Path(src).read_bytes()).hexdigest()})
            node = cfg  # the config names the bundled copy (relative to the bundle directory)
            for k in key.split(".")[:-1]:
                node = node[k]
            node["path"] = f"trace/{name}"
    cfg.setdefault("tracking", {}).update({"enabled": False, "uri": "", "experiment": "simllm"})
    cfg["print_table"] = False
    doc = {"defaults": ["config_schema", "_self_"], **cfg}
    (out / CONFIG).write_text("# Resolved config of MLflow run " + run_id + " (simllm-bundle)\n"
                              + yaml.safe_dump(doc, sort_keys=False))
    (out / EXPECTED).write_text(json.dumps(summary, indent=1, sort_keys=True))
    engine = tags.get("simllm.engine", params.get("engine.name", "?"))
    overrides = tags.get("simllm.overrides", "")
    manifest = {
        "run_id": run_id, "experiment_id": row["experiment_id"], "run_name": tags.get("mlflow.runName"),
        "engine": engine, "simllm_version": tags.get("simllm.version"),
        "git_commit": tags.get("simllm.git_commit"), "config_hash": tags.get("simllm.config_hash"),
        "command": f"simllm {overrides}".strip(),
        "replay": f"simllm-replay {out.name}",
        "replay_cli": ("cd BUNDLE && " + ("gunzip -k trace/*.gz && " if traces else "")
                       + "simllm --config-dir . --config-name bundle hydra.run.dir=OUT"),
        "rtol": RTOL.get(engine, DEFAULT_RTOL), "trace": traces,
        "bundled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "packages": _versions(),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    (out / "README.md").write_text(
        f"# simllm bundle of run {run_id}\n\nOriginal command: `{manifest['command']}` "
        f"(simllm {manifest['simllm_version']}, commit {manifest['git_commit']}).\n\n"
        f"Replay and check the metrics ({'bit-exact' if manifest['rtol'] == 0 else 'rtol ' + str(manifest['rtol'])}):"
        f" `simllm-replay {out.name}`\n\nOr rerun it with the CLI (no check): "
        f"`{manifest['replay_cli']}`\n")
    return out


def _close(a, b, rtol: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) \
            or not isinstance(b, (int, float)):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b if rtol == 0 else math.isclose(a, b, rel_tol=rtol, abs_tol=0.0)


def diff(expected: dict, got: dict, rtol: float) -> list[tuple[str, object, object]]:
    """(metric, expected, got) for every metric that differs (beyond rtol) or is missing."""
    return [(k, expected.get(k, "<absent>"), got.get(k, "<absent>"))
            for k in sorted(set(expected) | set(got))
            if k not in expected or k not in got or not _close(expected[k], got[k], rtol)]


def format_diff(rows, rtol: float) -> str:
    how = "bit-exact" if rtol == 0 else f"rtol {rtol:g}"
    lines = [f"{len(rows)} metric(s) differ ({how}):",
             f"  {'metric':<34} {'expected':>24} {'replayed':>24}  rel. diff"]
    for k, e, g in rows:
        rel = (f"{(g - e) / abs(e):+.3e}" if isinstance(e, (int, float)) and isinstance(g, (int, float))
               and not isinstance(e, bool) and e else "")
        lines.append(f"  {k:<34} {e!r:>24} {g!r:>24}  {rel}")
    return "\n".join(lines)


def replay(bundle: Path, out: Path, rtol: float | None = None) -> tuple[list, float]:
    """Rerun the bundle into ``out`` (must be empty or absent); returns (diff rows, rtol used)."""
    from runner.compose import compose
    from runner.job import run_job

    bundle = bundle.resolve()
    manifest = json.loads((bundle / MANIFEST).read_text())
    expected = json.loads((bundle / EXPECTED).read_text())
    rtol = manifest.get("rtol", DEFAULT_RTOL) if rtol is None else rtol
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"simllm-replay: output directory {out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    overrides = []
    for t in manifest.get("trace", []):
        dst = out / "trace" / Path(t["file"]).name[:-3]
        dst.parent.mkdir(exist_ok=True)
        with gzip.open(bundle / t["file"], "rb") as f, open(dst, "wb") as g:
            shutil.copyfileobj(f, g)
        overrides.append(f"{t['key']}={dst.resolve()}")
    cfg = compose(overrides, bundle, config_name=Path(CONFIG).stem)
    from runner.job import config_hash

    if not overrides and manifest.get("config_hash") and config_hash(cfg) != manifest["config_hash"]:
        print(f"simllm-replay: note: config hash {config_hash(cfg)} != the run's "
              f"{manifest['config_hash']} (schema defaults changed since?)", file=sys.stderr)
    run_job(cfg, out, [f"replay of {manifest['run_id']}"])
    got = json.loads((out / "summary.json").read_text())["summary"]
    return diff(expected, got, rtol), rtol


@guard("simllm-bundle")
def bundle_cli(argv=None) -> int:
    p = argparse.ArgumentParser(prog="simllm-bundle", description="Write a reproducible bundle of "
                                "one MLflow run (config, trace, command, versions, expected metrics).")
    p.add_argument("run_id")
    p.add_argument("-o", "--out", type=Path, required=True, help="bundle directory (new or empty)")
    p.add_argument("--uri", help=f"tracking URI (default $MLFLOW_TRACKING_URI or {tracking.DEFAULT_URI})")
    a = p.parse_args(argv)
    out = make(a.uri or tracking.default_uri(), a.run_id, a.out)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"bundle of run {a.run_id}: {out} ({size / 1024:.1f} KB); replay: simllm-replay {out}")
    return 0


@guard("simllm-replay")
def replay_cli(argv=None) -> int:
    p = argparse.ArgumentParser(prog="simllm-replay", description="Rerun a simllm bundle into a "
                                "clean directory and check its metrics; exit 1 with a diff if not.")
    p.add_argument("bundle", type=Path)
    p.add_argument("-o", "--out", type=Path, help="output directory (default: a new temp dir)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default: the manifest's)")
    a = p.parse_args(argv)
    if not (a.bundle / MANIFEST).is_file():
        raise SpecError("bundle", str(a.bundle), f"a bundle directory (with {MANIFEST}; simllm-bundle writes one)")
    out = a.out or Path(tempfile.mkdtemp(prefix="simllm-replay-"))
    rows, rtol = replay(a.bundle, out, a.rtol)
    n = len(json.loads((a.bundle / EXPECTED).read_text()))
    if rows:
        print(format_diff(rows, rtol), file=sys.stderr)
        print(f"simllm-replay: MISMATCH: {len(rows)} of {n} metrics differ; outputs in {out}",
              file=sys.stderr)
        from runner.job import git_commit

        then = json.loads((a.bundle / MANIFEST).read_text()).get("git_commit")
        if then != git_commit():
            rounding = all(isinstance(e, float) and isinstance(g, float) and e and
                           abs(g - e) <= 1e-12 * abs(e) for _, e, g in rows)
            print(f"simllm-replay: the run was made at commit {then}, this is {git_commit()}"
                  + (": rounding-level differences come from code changes; --rtol 1e-12 accepts "
                     "them" if rounding else ": the code changed since"), file=sys.stderr)
        sys.exit(1)
    print(f"simllm-replay: OK: {n} metrics reproduced "
          f"({'bit-exact' if rtol == 0 else f'rtol {rtol:g}'}); outputs in {out}")
    return 0
