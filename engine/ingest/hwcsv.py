"""Spec-sheet CSV -> hardware config, every number with its source and every conversion stated.

A sheet is the CSV engineers keep next to the slides, one figure a row::

    param,value,unit,precision,source
    peak_bf16_tflops,512,TFLOPS,bf16,hotchips_p24
    hbm_bandwidth,4096,GB/s,,hotchips_p25

Optional columns: ``dense_or_sparse`` (dense | sparse | "sparse (2:4)" ...), ``per`` (chip, stack,
die, link ... multiply by ``count``; system, rack, node, board, pod divide by it), ``count``,
``direction`` (per_direction | bidirectional, for link bandwidths), ``wins`` (true on the row that
settles a duplicate), ``notes`` (kept in the comment; say UNCERTAIN there when sources disagree).
A row whose ``source`` starts with "assumption" is a figure the sheet lacks, stated as such; a row
with no value is "not published" (stated; the schema default stays). A ``device`` column (a table
of several chips) selects one chip's rows.

Conversions (each is listed in the result's ``assumptions``):

- units with pint: ``TB/s`` vs ``Tb/s``, ``GB`` vs ``GiB``, ``TOPS`` read as ``TFLOPS``;
- per-stack / per-die figures x count, per-system figures / count;
- bidirectional link figures / 2 (the configs hold per-direction bandwidths);
- sparse compute figures: when the sheet prints only sparse figures, they are kept with
  ``compute_figures_sparse: true`` and the engine takes dense = figure x ``sparse_to_dense_factor``;
  when only some precisions are sparse-only, those are converted here (dense = sparse x factor).

Which params a sheet may carry, their aliases, units and plausibility limits: ``sheet_vocab``.

Errors (:class:`SheetError`) name the file, the line and the row: unknown param, missing unit, a
unit of the wrong kind for the param (a bandwidth in TFLOPS), a negative, zero or absurd value
(HBM above 100 TB/s for one chip), and a duplicate param with two values unless one row wins.
"""

import csv
import io
import math
from dataclasses import MISSING, dataclass, field
from pathlib import Path

import pint

from engine.ingest.sheet_vocab import (CHIP, DIVIDE, FIELD_ORDER, KINDS, MULTIPLY, REQUIRED_FIELDS, display,
                                       fmt, limit, resolve, same_text)
from engine.ingest.units import registry
from engine.spec import HardwareSpec
from engine.spec.hardware import VISIBLE_FRACTION_RANGE
from engine.spec.meta import config_fields

#: Columns a sheet may have; the first five are required.
REQUIRED_COLUMNS = ("param", "value", "unit", "precision", "source")
OPTIONAL_COLUMNS = ("dense_or_sparse", "per", "count", "direction", "wins", "notes", "device")

#: Default factor from a 2:4-sparse peak to the dense peak: 2:4 structured sparsity doubles the
#: math rate, so dense = sparse x 0.5. A sheet may state another (row ``sparse_to_dense_factor``).
DEFAULT_SPARSE_TO_DENSE = 0.5


class SheetError(ValueError):
    """A row of a spec-sheet CSV that cannot be imported; names the file, line and row."""

    def __init__(self, path: str, line: int, row: str, reason: str):
        self.path, self.line, self.row, self.reason = path, line, row, reason
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {reason}" + (f"\n  row: {row}" if row else ""))


@dataclass
class Figure:
    """One accepted row, converted: SI value, sparsity, the text for its YAML comment."""

    key: tuple
    field: str | None
    kind: str
    si: float | None
    line: int
    row: str
    source: str
    notes: str
    precision: str = ""
    sparse: bool = False
    wins: bool = False
    steps: list = field(default_factory=list)   # conversions applied, as text
    sheet: str = ""                             # value and unit as the sheet wrote them


@dataclass
class Entry:
    """One field of the written config: value (SI) and the comment that carries its provenance."""

    value: object
    display: str
    comment: str


@dataclass
class HardwareSheet:
    """An imported sheet: the config fields with provenance, and the conversions made."""

    name: str
    description: str
    entries: dict
    assumptions: list
    path: str = ""

    def si(self, fld: str):
        e = self.entries.get(fld)
        return None if e is None else e.value

    def hardware_spec(self) -> HardwareSpec:
        """The HardwareSpec the written config converts to (SI floats)."""
        kw = {"name": self.name}
        for f, md in config_fields(HardwareSpec):   # every field by its config key (engine.spec.meta)
            if f.name != "name":
                v = self.si(md["key"])
                kw[f.name] = v if v is not None else (None if f.default is MISSING else f.default)
        return HardwareSpec(**kw)

    def yaml_text(self, command: str = "") -> str:
        """The conf/hardware/NAME.yaml text: schema fields, each with its source as a comment."""
        head = f"# {self.description}. Generated from the spec sheet {self.path}"
        head += f" by `{command}`" if command else ""
        lines = [head + ".", "# Edit the sheet and regenerate; every conversion is in `assumptions` below.",
                 "defaults:", "  - hardware_schema", f"name: {self.name}",
                 f"description: {_yaml_str(self.description)}"]
        for f in FIELD_ORDER:
            e = self.entries.get(f)
            if e is None:
                continue
            text = f"{f}: {e.display}"
            lines.append(f"{text:<30} # {e.comment}" if e.comment else text)
        lines.append("assumptions:" if self.assumptions else "assumptions: []")
        lines += [f"  - {_yaml_str(a)}" for a in self.assumptions]
        return "\n".join(lines) + "\n"


#: Marker step: a per-stack figure without a count, multiplied by the hbm_stacks row later.
NEEDS_STACKS = "__needs_stacks__"


def _yaml_str(s: str) -> str:
    """A YAML double-quoted scalar (safe for colons, hashes and quotes)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _bool(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "y", "wins", "x")


def read_sheet(path, name: str, *, description: str | None = None,
               sparse_to_dense: float | None = None, text: str | None = None,
               device: str | None = None) -> HardwareSheet:
    """Import the CSV at ``path`` (or ``text``) as hardware config ``name``.

    A collected table with a ``device`` column (several chips in one file) needs ``device``: only
    that chip's rows are read.

    ``sparse_to_dense`` overrides the sheet's (or the default 0.5) sparse -> dense factor.
    Raises SheetError naming the line and row for each bad row kind (see module docstring).
    """
    path = str(path)
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as e:
            raise SheetError(path, 0, "", f"not UTF-8 text (byte {e.start}: {e.reason}); save the "
                                          "sheet as UTF-8 CSV") from None
        except OSError as e:
            raise SheetError(path, 0, "", f"cannot read the file ({e.strerror})") from None
    text = text.removeprefix("\ufeff")        # a byte-order mark, as Excel saves "CSV UTF-8"
    raw_lines = text.splitlines()
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        raise SheetError(path, 0, "", "empty sheet (expected a header row param,value,unit,precision,source)")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    unknown = [c for c in header if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
    if missing or unknown:
        raise SheetError(path, 1, raw_lines[0], (f"missing columns {missing}; " if missing else "")
                         + (f"unknown columns {unknown}; " if unknown else "")
                         + f"expected {', '.join(REQUIRED_COLUMNS)} (+ optional {', '.join(OPTIONAL_COLUMNS)})")
    figures: list[Figure] = []
    unpublished: list[str] = []
    desc_rows: list[str] = []
    devices: dict = {}                  # device column value -> first line
    kernel_tables = None                # (value, source) of a kernel_tables row
    prev_line = 1
    for cells in reader:
        start, prev_line = prev_line + 1, reader.line_num
        row_text = "\n".join(raw_lines[start - 1:reader.line_num])
        if not any(c.strip() for c in cells) or cells[0].lstrip().startswith("#"):
            continue
        if len(cells) > len(header):
            raise SheetError(path, start, row_text, f"{len(cells)} cells for {len(header)} columns")
        r = {h: (cells[i].strip() if i < len(cells) else "") for i, h in enumerate(header)}
        if "device" in r and r["param"].lower() not in ("device", "description"):
            devices.setdefault(r["device"], start)
            if device is not None and r["device"].lower() != device.lower():
                continue
        if r["param"].lower() in ("device", "description"):
            desc_rows.append(r["value"])
            continue
        if r["param"].lower() == "kernel_tables":   # text row: which measured kernel tables (engine/cost)
            kernel_tables = (r["value"], r["source"])
            continue
        out = _parse_row(path, start, row_text, r)
        if isinstance(out, Figure):
            figures.append(out)
        elif out:
            unpublished.append(out)
    if device is None and len(devices) > 1:
        raise SheetError(path, 0, "", f"the sheet holds {len(devices)} devices ({'; '.join(devices)}); pick one with "
                                      "device=... (--device)")
    if device is not None:
        if not any(d.lower() == device.lower() for d in devices):
            raise SheetError(path, 0, "", f"no rows for device {device!r} (devices: {'; '.join(devices)})")
        desc_rows = desc_rows or [device]
    sheet = _assemble(path, name, figures, description or (desc_rows[0] if desc_rows else name), sparse_to_dense)
    for u in unpublished:
        fld = u.split(":", 1)[0]
        sheet.assumptions = [x for x in sheet.assumptions if not x.startswith(f"{fld}: not on the sheet")]
        sheet.assumptions.append(u)
    if kernel_tables is not None:
        sheet.entries["kernel_tables"] = Entry(kernel_tables[0], kernel_tables[0] or '""', kernel_tables[1])
    return sheet


def _parse_row(path: str, line: int, row_text: str, r: dict):
    """One CSV row -> a converted Figure, a "not published" note (str), or None (nothing to keep)."""

    def err(reason):
        raise SheetError(path, line, row_text, reason)

    p, fld, kind, prec, direction = resolve(r["param"], r["precision"], err)
    k = KINDS[kind]
    fig = Figure(key=(), field=fld, kind=kind, si=None, line=line, row=row_text, source=r["source"],
                 notes=r.get("notes", ""), precision=prec, wins=_bool(r.get("wins", "")))
    sp = r.get("dense_or_sparse", "").lower()
    fig.sparse = sp.startswith("sparse")
    if sp and not (fig.sparse or sp.startswith("dense") or sp in ("n/a", "na")):
        err(f"dense_or_sparse must be dense, sparse or n/a (got {sp!r})")
    if fig.sparse and kind != "compute":
        err(f"only compute figures can be sparse ({r['param']} is {k.what})")
    value = r["value"].replace(",", "").replace("_", "")
    if not value:
        if sp.endswith("n/a") and sp != "n/a":
            return None                                   # "sparse: n/a": no sparse figure published
        if kind == "compute":                             # a precision the chip lacks: null + the note
            fig.key = (fld, fig.sparse)
            return fig
        return (f"{fld or p}: not published ({r.get('notes') or 'no value on the sheet'}"
                f"{'; ' + r['source'] if r['source'] else ''}); schema default used")
    if kind == "compute" and not sp:
        fig.steps.append(f"{r['param']}: taken as a dense figure (the sheet does not mark dense or sparse)")
    v, si, unit = _value_si(r, kind, fld, prec, fig.steps, err)
    si = _per_count(r, kind, fld, si, fig.steps, err)
    si = _direction(r, kind, fld, direction, si, fig.steps, err)
    fig.si, fig.sheet = si, f"{r['value']} {unit}".strip()
    fig.key = (fld or p, fig.sparse) if kind == "compute" else (fld or p, False, None)
    if kind == "factor" and not (0 < si <= 1):
        err(f"{r['param']} = {r['value']} is not a fraction in (0, 1]")
    if fld and kind != "factor" and si > limit(kind, fld) * (1 + 1e-9):
        err(f"{r['param']} = {r['value']} {unit} = {display(kind, si, fld)} is absurd for one chip "
            f"(limit {display(kind, limit(kind, fld), fld)}; check TB/s vs Tb/s, per-stack vs total, per-chip vs per-system)")
    return fig


def _value_si(r: dict, kind: str, fld, prec: str, steps: list, err):
    """The row's value in SI units (pint), with the unit conversion recorded; sign checks."""
    k = KINDS[kind]
    try:
        v = float(r["value"].replace(",", "").replace("_", ""))
    except ValueError:
        err(f"value {r['value']!r} is not a number")
    if not math.isfinite(v):
        err(f"value {r['value']!r} is not finite")
    unit = r["unit"]
    if kind in ("count", "factor"):
        if unit.lower() not in ("", "count", "x", "gpus", "devices", "accelerators", "chips", "stacks", "dies"):
            err(f"{r['param']} is {k.what}; a unit {unit!r} makes no sense here")
        si = v
    else:
        if not unit:
            err(f"missing unit for {r['param']} = {r['value']} (expected {k.what})")
        try:
            si = float(registry().Quantity(v, unit).to(k.si).magnitude)
        except pint.DimensionalityError:
            err(f"unit {unit!r} is the wrong kind for {r['param']}: expected {k.what}")
        except Exception:  # noqa: BLE001 - pint's parser raises many kinds (tokenize, syntax, key ...)
            err(f"unit {unit!r} is not a unit pint knows (expected {k.what})")
        up = unit.upper()
        if kind == "compute" and prec != "int8" and "OPS" in up and "FLOPS" not in up:
            steps.append(f"{r['param']}: {unit} read as {up.replace('OPS', 'FLOPS')} (one {prec} op = one FLOP)")
        if not same_text(f"{v:g} {unit}", display(kind, si, fld)) and not (kind == "compute" and unit in ("TFLOPS", "TOPS")):
            steps.append(f"{r['param']}: {r['value']} {unit} = {display(kind, si, fld)}")
    if v < 0:
        err(f"{r['param']} = {r['value']} {unit} is negative")
    if v == 0 and kind != "latency" and fld != "sram":
        err(f"{r['param']} = 0 {unit}: expected a value > 0 (leave the row out if not published)")
    return v, si, unit


def _per_count(r: dict, kind: str, fld, si: float, steps: list, err) -> float:
    """per-stack / per-die figures x count, per-rack / per-system figures / count."""
    per = r.get("per", "").lower().replace("per-", "").replace("per_", "")
    per = per[:-1] if per.endswith("s") and per[:-1] in (MULTIPLY | DIVIDE) else per
    count_text = r.get("count", "")
    if per in CHIP:
        if count_text:
            err(f"count {count_text!r} given for a per-chip figure (set per to stack, die, system ...)")
        return si
    if per not in MULTIPLY | DIVIDE:
        err(f"per must be one of chip, {', '.join(sorted(MULTIPLY | DIVIDE))} (got {per!r})")
    if not count_text:
        if per != "stack":
            err(f"a per-{per} figure needs a count (how many {per}s per chip, or chips per {per})")
        steps.append(NEEDS_STACKS)                       # resolved with the hbm_stacks row
        return si
    try:
        n = float(count_text)
    except ValueError:
        err(f"count {count_text!r} is not a number")
    if n <= 0:
        err(f"count {count_text!r} must be > 0")
    if per in MULTIPLY:
        steps.append(f"{r['param']}: per {per} x {fmt(n)} {per}s = {display(kind, si * n, fld)} per chip")
        return si * n
    steps.append(f"{r['param']}: per {per} / {fmt(n)} chips = {display(kind, si / n, fld)} per chip")
    return si / n


def _direction(r: dict, kind: str, fld, implied, si: float, steps: list, err) -> float:
    """Link bandwidths are per direction in the config: bidirectional figures / 2, unstated ones said."""
    col = r.get("direction", "").lower().replace("-", "_").replace(" ", "_")
    if col and col not in ("per_direction", "bidirectional", "unidirectional"):
        err(f"direction must be per_direction or bidirectional (got {col!r})")
    col = {"unidirectional": "per_direction"}.get(col, col) or None
    if implied and col and implied != col:
        err(f"param {r['param']!r} says {implied} but the direction column says {col}")
    direction = implied or col
    if kind != "bandwidth":
        return si
    if direction == "bidirectional":
        steps.append(f"{r['param']}: bidirectional / 2 = {display(kind, si / 2, fld)} per direction")
        return si / 2
    if direction is None:
        steps.append(f"{r['param']}: taken as per direction (the sheet does not say)")
    return si


def _pick(path: str, figs: list) -> tuple:
    """One figure per key: equal values merge; differing values need exactly one ``wins`` row."""
    by_key: dict = {}
    for f in figs:
        by_key.setdefault(f.key, []).append(f)
    chosen = {}
    for key, group in by_key.items():
        vals = {None if f.si is None else round(f.si, 6) for f in group}
        if len(vals) == 1:
            chosen[key] = (group[0], group[1:])
            continue
        winners = [f for f in group if f.wins]
        if len(winners) != 1:
            a, b = group[0], group[1]
            shown = [("no value" if f.si is None else display(f.kind, f.si, f.field or "")) for f in (a, b)]
            raise SheetError(path, b.line, b.row,
                             f"duplicate {b.field or key[0]}: line {a.line} gives {shown[0]} and line {b.line} "
                             f"gives {shown[1]}; mark the one to use with wins=true")
        chosen[key] = (winners[0], [f for f in group if f is not winners[0]])
    return chosen


def _uncertain(fld: str, shown: str, notes: str) -> str:
    tag = "" if "uncertain" in notes.lower() else "UNCERTAIN: "
    return f"{fld}{' = ' + shown if shown else ''}: {tag}{notes}"


def _comment(fig: Figure, others=()) -> str:
    parts = [fig.source.split(" ; cross-checked")[0] + (" (cross-checked)" if " ; cross-checked" in fig.source else "")
             if fig.source else "no source given"]
    if fig.kind == "compute" and fig.si is not None:
        parts.append("sparse figure" if fig.sparse else "dense")
    if fig.si is not None and fig.sheet and fig.kind != "count" and not same_text(fig.sheet, display(fig.kind, fig.si, fig.field or "")):
        parts.append(f"sheet: {fig.sheet}")
    if fig.notes:
        parts.append(fig.notes)
    for o in others:
        if o.si is not None and fig.si is not None and round(o.si, 6) != round(fig.si, 6):
            parts.append(f"line {o.line} ({o.source}) gives {display(o.kind, o.si, o.field)}; this row wins")
        elif o.notes and o.notes not in parts:
            parts.append(f"line {o.line}: {o.notes}")
    return "; ".join(p for p in parts if p)


def _assemble(path, name, figures, description, sparse_override) -> HardwareSheet:
    chosen = _pick(path, figures)
    assumptions: list[str] = []
    entries: dict = {}
    stacks = next((f for (k, *_), (f, _) in chosen.items() if k == "hbm_stacks"), None)

    def note_steps(f):
        for s in f.steps:
            if s == NEEDS_STACKS:
                if stacks is None:
                    raise SheetError(path, f.line, f.row, "a per-stack figure needs a count column or an hbm_stacks row")
                f.si *= stacks.si
                if f.si > limit(f.kind, f.field):
                    raise SheetError(path, f.line, f.row, f"{display(f.kind, f.si, f.field)} over {fmt(stacks.si)} "
                                                          "stacks is absurd for one chip (is the figure per stack?)")
                s = (f"{f.field}: per stack x {fmt(stacks.si)} stacks (hbm_stacks, line {stacks.line}) = "
                     f"{display(f.kind, f.si, f.field)} per chip")
            assumptions.append(s)

    # sparse -> dense factor
    factor_fig = chosen.get(("sparse_to_dense_factor", False, None), (None,))[0]
    if sparse_override is not None:
        factor, factor_src = float(sparse_override), "given on the command line"
    elif factor_fig is not None:
        factor, factor_src = factor_fig.si, f"{factor_fig.source} (line {factor_fig.line})"
    else:
        factor, factor_src = DEFAULT_SPARSE_TO_DENSE, "default: 2:4 structured sparsity doubles the peak"
    if not (0 < factor <= 1):
        raise SheetError(path, 0, "", f"sparse_to_dense_factor {factor} is not a fraction in (0, 1]")

    # compute: per precision prefer dense; sparse-only sheets keep sparse figures + flag
    comp = {}
    for (key, (f, others)) in chosen.items():
        if f.kind == "compute" and f.field:
            comp.setdefault(f.field, {})[f.sparse] = (f, others)
    dense_any = any(False in v and v[False][0].si is not None for v in comp.values())
    sparse_only_sheet = bool(comp) and not dense_any and any(True in v for v in comp.values())
    if "peak_bf16" not in comp and "peak_fp16" in comp:
        comp["peak_bf16"] = comp.pop("peak_fp16")
        assumptions.append("peak_bf16: the sheet gives fp16 only; bf16 runs at the fp16 rate on every current chip")
    for fld, variants in comp.items():
        if fld in ("peak_fp16", "peak_tf32"):
            continue                                     # not used by the engine
        if sparse_only_sheet:
            f, others = variants[True]
            entries[fld] = Entry(f.si, display("compute", f.si, fld), _comment(f, others))
            note_steps(f)
            continue
        if False in variants:
            f, others = variants[False]
            if f.si is None:
                entries[fld] = Entry(None, "null", _comment(f) or "not supported")
                continue
            note_steps(f)
            extra = []
            if True in variants and variants[True][0].si is not None:
                extra = [f"{display('compute', variants[True][0].si, fld)} sparse (line {variants[True][0].line})"]
            entries[fld] = Entry(f.si, display("compute", f.si, fld), "; ".join([_comment(f, others)] + extra))
        else:
            f, others = variants[True]
            note_steps(f)
            dense = f.si * factor
            entries[fld] = Entry(dense, display("compute", dense, fld),
                                 _comment(f, others) + f"; dense = sparse {display('compute', f.si, fld)} x {fmt(factor)}")
            assumptions.append(f"{fld}: sparse {display('compute', f.si, fld)} x {fmt(factor)} = dense "
                               f"{display('compute', dense, fld)} ({factor_src})")
    entries["compute_figures_sparse"] = Entry(sparse_only_sheet, "true" if sparse_only_sheet else "false",
                                              "the compute figures above are sparse; the engine multiplies them by the factor below"
                                              if sparse_only_sheet else "")
    entries["sparse_to_dense_factor"] = Entry(factor, fmt(factor), factor_src)
    if sparse_only_sheet:
        assumptions.append(f"compute figures are sparse (the sheet prints no dense ones): the engine takes "
                           f"dense = figure x {fmt(factor)} ({factor_src})")

    for key, (f, others) in chosen.items():
        if f.kind in ("compute", "factor") or f.field is None:
            continue
        note_steps(f)
        entries[f.field] = Entry(int(round(f.si)) if f.kind == "count" else f.si,
                                 display(f.kind, f.si, f.field), _comment(f, others))
        if f.source.lower().startswith("assumption"):
            assumptions.append(f"{f.field} = {display(f.kind, f.si, f.field)}: not on the sheet; {f.source}"
                               + (f" ({f.notes})" if f.notes else ""))
        for g in [f] + [o for o in others if o.si is not None and round(o.si, 6) == round(f.si, 6)]:
            if "uncertain" in g.notes.lower() or "moderate confidence" in g.notes.lower():
                assumptions.append(_uncertain(f.field, display(f.kind, f.si, f.field), g.notes))
    # the runtime's total (an hbm_visible row) -> hbm_visible_fraction, a ratio to hbm_capacity
    vis = next((fo for (k, *_), fo in chosen.items() if k == "hbm_visible"), None)
    if vis is not None and vis[0].si is not None and entries.get("hbm_capacity") is not None:
        f, others = vis
        cap = entries["hbm_capacity"].value
        frac = f.si / cap
        lo, hi = VISIBLE_FRACTION_RANGE
        if not lo <= frac <= hi:
            raise SheetError(path, f.line, f.row, f"hbm_visible {display('capacity', f.si)} is "
                                                  f"{fmt(frac)} x hbm_capacity {display('capacity', cap)}: "
                                                  f"expected {lo:g}-{hi:g} (the runtime's total of the same memory)")
        entries["hbm_visible_fraction"] = Entry(frac, fmt(round(frac, 6)), _comment(f, others))
        assumptions.append(f"hbm_visible_fraction: the runtime's total {display('capacity', f.si)} / "
                           f"hbm_capacity {display('capacity', cap)} = {fmt(round(frac, 6))}")
    for fld, variants in comp.items():
        for f, _ in variants.values():
            if f.si is not None and ("uncertain" in f.notes.lower() or "moderate confidence" in f.notes.lower()):
                assumptions.append(_uncertain(fld, "", f.notes))
    defaults = {"scaleup_latency": "0 us", "scaleout_latency": "0 us", "devices_per_node": "1",
                "sram": "0 MB", "scaleup_bandwidth": "none (single device)",
                "scaleout_bandwidth": "none (single node)", "tdp": "none"}
    for fld, default in defaults.items():
        if fld not in entries:
            assumptions.append(f"{fld}: not on the sheet; schema default {default}")
    for req in REQUIRED_FIELDS:
        if entries.get(req) is None or entries[req].value is None:
            raise SheetError(path, 0, "", f"the sheet gives no {req} (required by HardwareSchema); add a row for it")
    # duplicates in assumptions (same step recorded twice) are dropped, order kept
    seen, uniq = set(), []
    for a in assumptions:
        if a not in seen:
            seen.add(a)
            uniq.append(a)
    return HardwareSheet(name=name, description=description, entries=entries, assumptions=uniq, path=path)
