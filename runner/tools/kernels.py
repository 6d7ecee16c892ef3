"""simllm-kernels: regenerate the compact kernel tables and transfer fits shipped in engine/cost/data.

    simllm-kernels [KERNELS_DIR] [--out DIR]
    simllm-kernels --loco [--out DIR] [--loco-out PATH]

KERNELS_DIR defaults to ../shared/data/kernels beside the repository. ``--loco`` derives nothing:
from the tables in DIR (default engine/cost/data) it computes the transfer backend's
leave-one-chip-out error (engine.cost.loco, about 25 CPU-s) and writes its quantiles
(engine.uncertainty.loco) to PATH (default engine/uncertainty/data/transfer_loco.json), the
table that widens the intervals of jobs priced by the transfer backend. The spec-sheet peaks of each
measured chip come from the conf/hardware/*.yaml that names it in ``kernel_tables``. The work is
done by engine.cost.derive (tables) and engine.cost.transfer (fits); this is the thin CLI.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from runner import paths
from runner.tools.cli import guard

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_KERNELS = paths.shared_file("kernels")     # $SIMLLM_SHARED_DATA overrides
OUT = ROOT / "engine" / "cost" / "data"
LOCO_OUT = ROOT / "engine" / "uncertainty" / "data" / "transfer_loco.json"

README = """# Derived kernel tables (engine/cost/data)

`tables.npz` and `transfer.json` are derived by `simllm-kernels` (runner/tools/kernels.py ->
engine/cost/derive.py, engine/cost/transfer.py) from the per-operator latency tables in
`../shared/data/kernels` (the `aiconfigurator-core` 0.12.0 wheel's measured tables).

Source data: Copyright NVIDIA CORPORATION & AFFILIATES, licensed under the Apache License,
Version 2.0 (SPDX-License-Identifier: Apache-2.0), https://www.apache.org/licenses/LICENSE-2.0.
Changes made here: reduced to fixed grids of the shape axes (some sizes dropped), latencies
converted from milliseconds to seconds (float32), collective message sizes converted from
elements to bytes, MoE restricted to balanced routing, attention to full (non-windowed) bf16
attention; the transfer-curve parameters are fitted to these derived tables.

- `tables.npz`: one array per (chip, framework, operator, dtype ...), keys `chip/framework/op/...`;
  axis grids under `axes/...`; spec-sheet peaks used for the fits under `peaks/<chip>`
  (order: bf16, fp8, fp4, int8 FLOP/s, HBM bandwidth, scale-up bandwidth byte/s; source in
  `peaks/<chip>/source`).
- `transfer.json`: fitted parameters of engine/cost/transfer.py per framework and operator class,
  with the chips fitted on and the median |log error| of each fit.
"""


def peaks_from_conf() -> dict:
    """Table set -> spec-sheet peaks, from every conf/hardware/*.yaml with ``kernel_tables`` set."""
    from runner.compose import compose
    from runner.convert import hardware_spec

    out = {}
    for path in sorted((ROOT / "conf" / "hardware").glob("*.yaml")):
        cfg = compose([f"hardware={path.stem}"], ROOT / "conf", experiments=False)
        hw = hardware_spec(cfg)
        if not hw.kernel_tables or hw.kernel_tables in out:
            continue
        pk = {"source": f"conf/hardware/{path.name}"}
        for p in ("bf16", "fp8", "fp4", "int8"):
            try:
                pk[p] = hw.peak_flops(p)
            except Exception:
                pk[p] = None
        pk["hbm_bandwidth"] = hw.hbm_bandwidth_bytes_s
        pk["scaleup_bandwidth"] = hw.scaleup_bandwidth_bytes_s
        out[hw.kernel_tables] = pk
    return out


def build(kernels_dir, out_dir) -> dict:
    """Derive the tables, fit the transfer curves, write both (+ README) into ``out_dir``."""
    from engine.cost import derive, transfer

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = derive.derive(kernels_dir, peaks_from_conf())
    derive.save(tables, out_dir / "tables.npz")
    fits = {fw: transfer.fit_all(tables, fw) for fw in derive.FRAMEWORKS}
    doc = {"source": "../shared/data/kernels (aiconfigurator-core 0.12.0 tables, NVIDIA, Apache-2.0)",
           "model": "engine/cost/transfer.py", "chips": tables["chips"].tolist(), "fits": fits}
    (out_dir / "transfer.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    (out_dir / "README.md").write_text(README)
    return tables


def _rel(path: Path) -> str:
    """``path`` relative to the repository root where it lies inside it, else its name alone
    (no absolute paths in shipped files)."""
    path = Path(path).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


def loco(tables_path, out, frameworks=None, command: str = "simllm-kernels --loco") -> tuple[Path, dict]:
    """Write the transfer backend's LOCO table (engine.uncertainty.loco.build) of the tables at
    ``tables_path`` for ``frameworks`` (default: all three) to ``out``; returns (path, table)."""
    import datetime as _dt
    import hashlib
    import time

    from engine.cost import derive
    from engine.cost import loco as cost_loco
    from engine.uncertainty import loco as unc_loco
    from runner.job import git_commit

    tables_path = Path(tables_path)
    tables = derive.load(tables_path)
    res, held, cpu = {}, {}, 0.0
    c0 = time.process_time()
    for fw in frameworks or derive.FRAMEWORKS:
        res[fw], refit = cost_loco.residuals(tables, fw)
        held[fw] = list(refit)
    cpu = time.process_time() - c0
    prov = {"tables": {"path": _rel(tables_path), "sha256": hashlib.sha256(tables_path.read_bytes()).hexdigest()},
            "transfer_model": "engine/cost/transfer.py", "residuals": "engine/cost/loco.py",
            "chips_held_out": held, "frameworks": list(res), "command": command,
            "cpu_s": round(cpu, 1), "git_commit": git_commit(), "date": _dt.date.today().isoformat()}
    table = unc_loco.build(res, prov)
    return unc_loco.save(table, out), table


@guard("simllm-kernels")
def main(argv=None) -> int:
    from engine.errors import SpecError
    from runner.tools.cli import Steps, add_quiet

    ap = argparse.ArgumentParser(prog="simllm-kernels", description=__doc__.splitlines()[0])
    ap.add_argument("kernels_dir", nargs="?", default=str(DEFAULT_KERNELS),
                    help="measured tables (default: ../shared/data/kernels beside the repository)")
    ap.add_argument("--out", default=str(OUT), help="output folder (default: engine/cost/data)")
    ap.add_argument("--loco", action="store_true",
                    help="derive nothing: write the transfer backend's leave-one-chip-out error table "
                         "from --out's tables.npz to --loco-out (one transfer refit per held-out chip "
                         "and framework; its provenance records the CPU-s)")
    ap.add_argument("--loco-out", default=str(LOCO_OUT),
                    help="--loco: where the table goes (default: engine/uncertainty/data/transfer_loco.json)")
    add_quiet(ap)
    a = ap.parse_args(argv)
    if a.loco:
        src = Path(a.out) / "tables.npz"
        if not src.is_file():
            raise SpecError("--out", a.out, "a folder with the derived tables.npz (default engine/cost/data)")
        cmd = "simllm-kernels --loco" + ("" if Path(a.out).resolve() == OUT.resolve() else f" --out {_rel(Path(a.out))}")
        with Steps(["refitting the transfer curves without each chip"], "simllm-kernels", a.quiet) as steps:
            steps.step("refitting the transfer curves without each chip")
            path, table = loco(src, a.loco_out, command=cmd)
        from engine.uncertainty.loco import GROUP
        for fw, groups in table["frameworks"].items():
            g = groups.get(GROUP)
            if g:
                q80 = g["q"][table["levels"].index(0.8)]
                print(f"{fw}: {GROUP} q80 = {q80:.3f} on {g['n']:,} points of {len(g['chips'])} held-out chips")
        print(f"wrote {path} ({table['provenance']['cpu_s']} CPU-s)")
        return 0
    if not Path(a.kernels_dir).is_dir():
        raise SpecError("kernels_dir", a.kernels_dir, "a folder of measured kernel tables "
                        "(../shared/data/kernels)")
    if not any(Path(a.kernels_dir).glob("*/*/*/*/*.parquet")):     # before anything is overwritten
        raise SpecError("kernels_dir", a.kernels_dir, "a folder of measured kernel tables "
                        "(CHIP/OPERATOR/FRAMEWORK/VERSION/NAME.parquet, as ../shared/data/kernels)")
    with Steps(["deriving the tables and fitting the transfer curves"], "simllm-kernels", a.quiet) as steps:
        steps.step("deriving the tables and fitting the transfer curves")
        tables = build(a.kernels_dir, a.out)
    size = sum(p.stat().st_size for p in Path(a.out).iterdir())
    n = sum(int(np.isfinite(v).sum()) for v in tables.values() if v.dtype == np.float32)
    print(f"wrote {a.out}: {n:,} measured grid points of {len(tables['chips'])} chips, {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
