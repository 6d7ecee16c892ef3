"""The ``simllm-import`` console script: spec sheets and config.json files -> conf/ YAMLs.

    simllm-import hwcsv conf/hardware/sheets/jalapeno.csv --name jalapeno   # -> conf/hardware/jalapeno.yaml
    simllm-import sheets                                                    # regenerate every sheet's YAML
    simllm-import hfconfig path/to/config.json --name qwen3_32b             # -> conf/model/qwen3_32b.yaml
    simllm-import simple study.yaml --name jalapeno_simple                  # -> conf/hardware + conf/model
    simllm-import hbm --stacks 5 --bus-width 1024 --gbps-per-pin 5.2        # HBM bandwidth from the interface
    simllm-import inference-perf ip.yaml --out trace.jsonl                  # inference-perf workload -> DES trace
    simllm-import servegen ServeGen/data/language/m-large --duration 3600 --out sg.csv  # ServeGen pool -> DES trace
    simllm-import hbm --generation hbm4 --stacks 8 --write-sheet jalapeno   # ... into the sheet + its YAML

The work is done by ``engine.ingest``; this module reads arguments, writes files and turns errors
into one line on stderr and exit status 2.
"""

import argparse
import sys
from pathlib import Path

from engine.errors import SpecError
from runner.tools.cli import guard

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
SHEETS = CONF / "hardware" / "sheets"


def _rel(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _text(path) -> str:
    """The UTF-8 text of an input file, or a SpecError naming the file."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(str(path), f"byte {e.object[e.start:e.start + 1]!r} at offset {e.start}",
                        "UTF-8 text") from None


def _write(path: Path, text: str, force: bool) -> None:
    path = Path(path)
    if path.exists() and not force and path.read_text() != text:
        raise FileExistsError(f"{_rel(path)} exists and differs; pass --force to overwrite")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {_rel(path)}")


def hwcsv_text(csv_path: Path, name: str, description: str | None = None,
               sparse_factor: float | None = None, device: str | None = None,
               text: str | None = None) -> str:
    """The YAML text ``simllm-import hwcsv CSV --name NAME`` writes (used by the regeneration test)."""
    from engine.ingest.hwcsv import read_sheet

    sheet = read_sheet(_rel(csv_path), name, description=description, sparse_to_dense=sparse_factor,
                       text=_text(csv_path) if text is None else text,
                       device=device)
    sheet.hardware_spec()                # the engine's own checks, before anything is written
    return sheet.yaml_text(f"simllm-import hwcsv {_rel(csv_path)} --name {name}")


def _cmd_hwcsv(a) -> None:
    text = hwcsv_text(Path(a.file), a.name, a.description, a.sparse_factor, a.device)
    out = Path(a.out) if a.out else CONF / "hardware" / f"{a.name}.yaml"
    _write(out, text, a.force)


def _cmd_sheets(a) -> None:
    for csv_path in sorted(SHEETS.glob("*.csv")):
        _write(CONF / "hardware" / f"{csv_path.stem}.yaml", hwcsv_text(csv_path, csv_path.stem), True)


def _cmd_hfconfig(a) -> None:
    from engine.ingest import hf_config

    hf = hf_config.read(a.file, a.name)
    hf.source = a.file
    hf.model_spec()                      # validate before writing
    out = Path(a.out) if a.out else CONF / "model" / f"{hf.fields['name']}.yaml"
    _write(out, hf_config.yaml_text(hf, f"simllm-import hfconfig {a.file} --name {hf.fields['name']}"), a.force)


def _cmd_hbm(a) -> None:
    from engine.ingest import dram

    sheet = _sheet_path(a.write_sheet) if a.write_sheet else None   # a bad path fails first

    if a.area_mm2 is not None:
        if a.bump_pitch_um is None or a.data_fraction is None or a.gbps_per_pin is None:
            raise ValueError("the area form needs --area-mm2, --bump-pitch-um, --data-fraction and --gbps-per-pin")
        d = dram.area_bandwidth(a.area_mm2, a.bump_pitch_um, a.data_fraction, a.gbps_per_pin,
                                a.stacks or 1, a.grid)
    elif a.generation:
        if not a.stacks:
            raise ValueError("--generation needs --stacks")
        d = dram.generation_bandwidth(a.generation, a.stacks, a.gbps_per_pin)
    else:
        if not (a.stacks and a.bus_width and a.gbps_per_pin):
            raise ValueError("give --stacks, --bus-width and --gbps-per-pin (or --generation, or the area form)")
        d = dram.interface_bandwidth(a.stacks, a.bus_width, a.gbps_per_pin)
    for step in d.steps:
        print(step)
    print(f"hbm_bandwidth = {d.tb_s:.4g} TB/s")
    print("sheet row:", d.sheet_row(a.source or ""))
    if sheet is not None:
        name = a.name or sheet.stem
        text = write_hbm_row(sheet, d.sheet_row(a.source or ""))
        yaml_text = hwcsv_text(sheet, name, text=text)   # the engine's checks pass before anything is written
        sheet.write_text(text, encoding="utf-8")
        print(f"wrote {_rel(sheet)} (hbm_bandwidth row replaced by the derivation)")
        _write(Path(a.out) if a.out else CONF / "hardware" / f"{name}.yaml", yaml_text, True)


def _sheet_path(arg: str) -> Path:
    """A sheet given as a path or as a hardware name (conf/hardware/sheets/NAME.csv)."""
    p = Path(arg)
    if not p.suffix:
        p = SHEETS / f"{arg}.csv"
    if not p.is_file():
        raise FileNotFoundError(f"--write-sheet {arg}: no spec sheet at {_rel(p)}")
    return p


def write_hbm_row(sheet: Path, row: str) -> str:
    """The sheet's text with every ``hbm_bandwidth`` row replaced by ``row`` (a per-device row as
    ``Derivation.sheet_row`` gives it: param,value,unit,precision,source), or the row appended when
    the sheet has none. Columns after ``source`` are left empty (per device, not a rack total)."""
    import csv
    import io

    lines = _text(sheet).splitlines()
    head = next(csv.reader(io.StringIO(lines[0]))) if lines else []
    if "param" not in head:
        raise ValueError(f"{_rel(sheet)}: expected a spec sheet with a header row naming 'param'")
    ip = head.index("param")
    new = next(csv.reader(io.StringIO(row)))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(new + [""] * (len(head) - len(new)))
    out, done = [], False
    for line in lines:                  # other rows stay byte for byte
        cells = next(csv.reader(io.StringIO(line)), [])
        if len(cells) > ip and cells[ip].strip() == "hbm_bandwidth":
            if not done:
                out.append(buf.getvalue())
                done = True
            continue
        out.append(line)
    if not done:
        out.append(buf.getvalue())
    return "\n".join(out) + "\n"


def reference_models(conf: Path = CONF) -> dict:
    """The reference architectures of simple configs: engine.ingest.simple.REFERENCE_OPTIONS as
    their conf/model YAMLs give them (option -> fields)."""
    from omegaconf import OmegaConf

    from engine.ingest.simple import REFERENCE_OPTIONS

    out = {}
    for name in REFERENCE_OPTIONS:
        path = Path(conf) / "model" / f"{name}.yaml"
        if not path.is_file():
            path = CONF / "model" / f"{name}.yaml"
        doc = OmegaConf.to_container(OmegaConf.load(path))
        doc.pop("defaults", None)
        out[name] = doc
    return out


def _cmd_simple(a) -> None:
    import yaml

    from engine.ingest.simple import import_simple

    try:
        cfg = yaml.safe_load(_text(a.file))
    except yaml.YAMLError as e:
        raise SpecError(a.file, f"not YAML ({str(e).splitlines()[0]})", "a simple config (a YAML mapping)") from None
    if not isinstance(cfg, dict):
        raise SpecError(a.file, f"a YAML {type(cfg).__name__}", "a simple config (a mapping of simple config keys)")
    conf = Path(a.conf_dir) if a.conf_dir else CONF
    imp = import_simple(cfg, a.name, a.file, references=reference_models(conf))
    imp.hardware.name = a.name
    cmd = f"simllm-import simple {a.file} --name {a.name}"
    imp.model_fields["name"] = a.name
    _write(conf / "hardware" / f"{a.name}.yaml", imp.hardware.yaml_text(cmd), a.force)
    _write(conf / "model" / f"{a.name}.yaml", imp.model_yaml(cmd), a.force)
    if imp.workload_fields:      # the scheduler + workload sections: a DES run of the whole config
        imp.workload_fields["name"] = a.name
        _write(conf / "workload" / f"{a.name}.yaml", imp.workload_yaml(cmd), a.force)
    print("run:", " ".join(["simllm", f"hardware={a.name}", f"model={a.name}", *imp.overrides]))
    print("run (DES):", imp.des_command(a.name, a.name))


def _cmd_inference_perf(a) -> None:
    """inference-perf config YAML -> a trace (JSON Lines, Mooncake layout) the DES reads."""
    import yaml

    from engine.des.trace import inference_perf_requests

    try:
        cfg = yaml.safe_load(_text(a.file))
    except yaml.YAMLError as e:
        raise SpecError(a.file, f"not YAML ({str(e).splitlines()[0]})", "an inference-perf config (a YAML mapping)") from None
    if not isinstance(cfg, dict):
        raise SpecError(a.file, type(cfg).__name__, "an inference-perf config (a YAML mapping)")
    df = inference_perf_requests(cfg, seed=a.seed, block_tokens=a.block_tokens)
    out = Path(a.out)
    if out.exists() and not a.force:
        raise FileExistsError(f"{out} exists (--force to overwrite)")
    out.parent.mkdir(parents=True, exist_ok=True)
    df.write_ndjson(out)
    print(f"wrote {out}: {df.height} requests over {df['timestamp'].max() / 1e3:.1f} s")
    model = inference_perf_model(cfg)
    print(f"run (DES): simllm engine=des workload.arrival=trace workload.trace.path={out} "
          f"workload.trace.block_tokens={a.block_tokens}" + (f" model={model[0]}" if model[0] else ""))
    if model[1]:
        print(model[1])


def inference_perf_model(cfg: dict) -> tuple[str, str]:
    """(conf/model option or '', a note) of the model an inference-perf config serves:
    ``server.model_name``, else ``tokenizer.pretrained_model_name_or_path``, resolved by the
    benchmark-row grammar (``rowgrammar.resolve_model``: 'meta-llama/Meta-Llama-3.1-8B-Instruct'
    -> llama_3_1_8b)."""
    from runner.tools.rowgrammar import resolve_model

    name = str(((cfg.get("server") or {}).get("model_name"))
               or ((cfg.get("tokenizer") or {}).get("pretrained_model_name_or_path")) or "")
    if not name:
        return "", ""
    opt, _, _ = resolve_model(name)
    if opt:
        return opt, ""
    return "", (f"model '{name}' has no conf/model option: simllm-import hfconfig its config.json, "
                "then model=<name>")


def _cmd_servegen(a) -> None:
    """ServeGen client-pool directory -> a trace (CSV, Vidur layout + client column) the DES reads."""
    from engine.des.trace import servegen_requests

    df = servegen_requests(a.directory, start_s=a.start, duration_s=a.duration, rate=a.rate,
                           rate_scale=a.rate_scale, seed=a.seed)
    out = Path(a.out)
    if out.exists() and not a.force:
        raise FileExistsError(f"{out} exists (--force to overwrite)")
    out.parent.mkdir(parents=True, exist_ok=True)
    df.write_csv(out)
    print(f"wrote {out}: {df.height} requests from {df['client'].n_unique()} clients over "
          f"{a.duration:g} s ({df.height / a.duration:.2f} req/s)")
    print(f"run (DES): simllm engine=des workload.arrival=trace workload.trace.path={out}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="simllm-import", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("hwcsv", help="spec-sheet CSV -> conf/hardware/NAME.yaml")
    h.add_argument("file")
    h.add_argument("--name", required=True, help="config option name (file stem)")
    h.add_argument("--description", help="one-line description (default: the sheet's device row)")
    h.add_argument("--sparse-factor", type=float, default=None,
                   help="sparse -> dense factor (default: the sheet's sparse_to_dense_factor row, else 0.5)")
    h.add_argument("--device", help="for a table of several chips (a device column): the chip to import")
    h.add_argument("--out", help="output path (default conf/hardware/NAME.yaml)")
    h.add_argument("--force", action="store_true", help="overwrite an existing, different file")
    h.set_defaults(func=_cmd_hwcsv)
    s = sub.add_parser("sheets", help="regenerate conf/hardware/NAME.yaml from every conf/hardware/sheets/NAME.csv")
    s.set_defaults(func=_cmd_sheets)
    m = sub.add_parser("hfconfig", help="HuggingFace config.json -> conf/model/NAME.yaml")
    m.add_argument("file")
    m.add_argument("--name", help="config option name (default: the file stem)")
    m.add_argument("--out", help="output path (default conf/model/NAME.yaml)")
    m.add_argument("--force", action="store_true", help="overwrite an existing, different file")
    m.set_defaults(func=_cmd_hfconfig)
    q = sub.add_parser("simple", help="simple spec-sheet config (num_params, compute_tflops_bf16, ...) -> "
                                      "conf/hardware/NAME.yaml + conf/model/NAME.yaml")
    q.add_argument("file")
    q.add_argument("--name", required=True, help="option name for both the hardware and the model config")
    q.add_argument("--force", action="store_true", help="overwrite existing, different files")
    q.add_argument("--conf-dir", help="config folder to write into (default: the project's conf/)")
    q.set_defaults(func=_cmd_simple)
    b = sub.add_parser("hbm", help="HBM / 3D-stacked DRAM bandwidth from the interface physics")
    b.add_argument("--stacks", type=int, help="number of stacks (dies) on the package")
    b.add_argument("--bus-width", type=int, help="interface width per stack in bits (HBM3: 1024)")
    b.add_argument("--gbps-per-pin", type=float, help="data rate per pin in Gb/s")
    b.add_argument("--generation", help="hbm2, hbm2e, hbm3, hbm3e or hbm4: its width (and nominal pin rate)")
    b.add_argument("--area-mm2", type=float, help="area form: interface area per stack in mm^2")
    b.add_argument("--bump-pitch-um", type=float, help="area form: bump pitch in um")
    b.add_argument("--data-fraction", type=float, help="area form: fraction of bumps that carry data")
    b.add_argument("--grid", choices=("square", "hex"), default="square", help="area form: bump grid")
    b.add_argument("--source", help="where the pin rate comes from (goes into the sheet row)")
    b.add_argument("--write-sheet", metavar="SHEET",
                   help="write the derived bandwidth into this spec sheet (a path, or a name under "
                        "conf/hardware/sheets/) and regenerate its conf/hardware YAML")
    b.add_argument("--name", help="with --write-sheet: the hardware option to regenerate (default: the sheet's stem)")
    b.add_argument("--out", help="with --write-sheet: the YAML path (default conf/hardware/NAME.yaml)")
    b.set_defaults(func=_cmd_hbm)
    ip = sub.add_parser("inference-perf", help="inference-perf config (load stages, data distributions) "
                                               "-> a DES trace (JSON Lines; mapping: engine.des.trace)")
    ip.add_argument("file")
    ip.add_argument("--out", required=True, help="trace path to write (.jsonl)")
    ip.add_argument("--seed", type=int, default=0, help="seed when the config has no load.base_seed")
    ip.add_argument("--block-tokens", type=int, default=512, help="prompt tokens per prefix hash block")
    ip.add_argument("--force", action="store_true", help="overwrite an existing file")
    ip.set_defaults(func=_cmd_inference_perf)
    sg = sub.add_parser("servegen", help="ServeGen client pool (data/<category>/<model>: chunk-<id>-trace.csv "
                                         "+ chunk-<id>-dataset.json) -> a DES trace (CSV; mapping: engine.des.trace)")
    sg.add_argument("directory")
    sg.add_argument("--out", required=True, help="trace path to write (.csv)")
    sg.add_argument("--start", type=float, default=0.0, help="span start in the pool's day [s]")
    sg.add_argument("--duration", type=float, default=3600.0, help="span length [s]")
    sg.add_argument("--rate", type=float, default=0.0,
                    help="total req/s of every window (client rates scaled to sum to it; 0 = recorded)")
    sg.add_argument("--rate-scale", type=float, default=1.0, help="factor on the recorded rates (without --rate)")
    sg.add_argument("--seed", type=int, default=0)
    sg.add_argument("--force", action="store_true", help="overwrite an existing file")
    sg.set_defaults(func=_cmd_servegen)
    return p


@guard("simllm-import", also=(ValueError,))
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
