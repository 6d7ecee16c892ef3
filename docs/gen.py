"""Docs generator: the parts of the documentation that are computed, never typed.

Two kinds of generated regions live in the Markdown pages under ``docs/``:

1. **Executed command blocks.** A fenced ``console`` block preceded by an HTML comment

       <!-- exec -->
       ```console
       $ simllm tracking=none
       ...output written by this script...
       ```

   is run command by command (``$ `` starts a command, a trailing backslash continues it) and the
   lines after each command are replaced by what it printed (stdout and stderr together).
   Options go into the comment: ``<!-- exec rc=1 tol=0.02 requires=../shared/data/traces
   timeout=120 mask=REGEX -->``:

   - ``rc``: the exit status every command of the block must return (default 0);
   - ``tol``: numbers are compared within this relative tolerance in check mode (default: exact,
     as printed); the text around them must match exactly;
   - ``requires``: a path, relative to the project root, that the block needs (skipped, and said
     so, when absent);
   - ``mask``: a regular expression whose matches are replaced by ``...`` (wall-clock times);
   - ``timeout``: seconds per command (default 300).

   A fenced block preceded by ``<!-- file: NAME -->`` is written to ``NAME`` before the next
   command runs. All blocks of one page run in one scratch folder, in page order: ``../shared/data``
   there points at the project's shared data root (``paths.shared_data``), and ``conf``,
   ``experiments``, ``tests`` and ``benchmarks`` at the project's, so commands read as typed from
   the project root;
   job folders, MLflow stores and imported configs land in the scratch folder.

2. **Config-group pages.** ``docs/config/GROUP.md`` carries a region
   ``<!-- generated: config GROUP -->`` ... ``<!-- /generated -->`` listing every option file of
   ``conf/GROUP/`` (``experiments/`` for the ``experiment`` group) with its description and
   file, and the fields of the group's spec with their default unit. A group without a page gets
   one.

Usage::

    python docs/gen.py                 # regenerate everything (config pages, command outputs)
    python docs/gen.py --check         # exit 1 and print a diff where a page is stale
    python docs/gen.py --no-exec       # config pages only (fast)
    python docs/gen.py --list          # the executed commands, per page
    python docs/gen.py docs/engines/des.md   # only these pages
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
CONF = ROOT / "conf"
EXPERIMENTS = ROOT / "experiments"

EXEC_RE = re.compile(r"^<!--\s*exec\b(?P<opts>.*?)-->\s*$")
FILE_RE = re.compile(r"^<!--\s*file:\s*(?P<name>\S+)\s*-->\s*$")
GEN_RE = re.compile(r"^<!--\s*generated:\s*config\s+(?P<group>\S+)\s*-->\s*$")
GEN_END = "<!-- /generated -->"
FENCE_RE = re.compile(r"^(?P<fence>```+|~~~+)")
NUM_RE = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
HYDRA_LOG_RE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\]\[HYDRA\]")
DATE_DIR_RE = re.compile(r"\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d(?:-\d+)?")
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

#: Config groups: folder (relative to conf/, or the experiments folder) -> page name.
GROUPS = {
    "hardware": "hardware", "model": "model", "partition": "partition", "workload": "workload",
    "calibration": "calibration", "calibration/noise": "calibration-noise", "framework": "framework",
    "engine": "engine", "tracking": "tracking", "paths": "paths", "plan": "plan", "uncertainty": "uncertainty",
    "experiment": "experiment",
}


# ------------------------------------------------------------------------------ config pages
def group_files(group: str) -> list[Path]:
    folder = EXPERIMENTS if group == "experiment" else CONF / group
    return sorted(folder.glob("*.yaml"))


def config_groups() -> list[str]:
    """Every config group the project has: each folder of conf/ holding YAML options, and
    ``experiment``."""
    found = sorted(p.parent.relative_to(CONF).as_posix() for p in CONF.rglob("*.yaml") if p.parent != CONF)
    return sorted(set(found) | {"experiment"})


def _describe(path: Path) -> str:
    """An option's one-line description: its ``description:`` value, else its leading comment."""
    text = path.read_text()
    m = re.search(r"^description:\s*(.+)$", text, re.M)
    if m:
        return m.group(1).strip().strip("\"'")
    lines = []
    for line in text.splitlines():
        if line.startswith("# @package"):
            continue
        if line.startswith("#"):
            lines.append(line.lstrip("#").strip())
        elif lines or line.strip():
            break
    desc = " ".join(lines)
    first = re.split(r"(?<=[.:;])\s", desc, maxsplit=1)[0] if len(desc) > 220 else desc
    return first


def _spec_classes(group: str):
    from engine.spec import CalibrationSpec, HardwareSpec, ModelSpec, NoiseSpec, PartitionSpec, WorkloadSpec
    from engine.spec.analytical import AnalyticalSpec
    from engine.spec.des import DesSpec
    from engine.spec.framework import FrameworkSpec

    return {
        "hardware": [("hardware", HardwareSpec)], "model": [("model", ModelSpec)],
        "partition": [("partition", PartitionSpec)], "workload": [("workload", WorkloadSpec)],
        "calibration": [("calibration", CalibrationSpec)],
        "calibration/noise": [("calibration.noise", NoiseSpec)],
        "framework": [("framework", FrameworkSpec)],
        "engine": [("engine.analytical", AnalyticalSpec), ("engine.des", DesSpec)],
    }.get(group, [])


def _fmt_range(rng, unit) -> str:
    if not rng:
        return ""
    return f"{rng[0]:g} .. {rng[1]:g} (SI)" if unit else f"{rng[0]:g} .. {rng[1]:g}"


def _field_rows(prefix: str, cls) -> list[str]:
    from engine.spec.meta import config_fields

    rows = []
    for f, md in config_fields(cls):
        t = f.type
        if isinstance(t, type) and dataclasses.is_dataclass(t):
            rows += _field_rows(f"{prefix}.{md['key']}", t)
            continue
        rows.append(f"| `{prefix}.{md['key']}` | {md['unit'] or ''} | {_fmt_range(md['range'], md['unit'])} |")
    return rows


def config_region(group: str) -> str:
    files = group_files(group)
    sel = "experiment=NAME" if group == "experiment" else f"{group}=NAME"
    where = "experiments/" if group == "experiment" else f"conf/{group}/"
    out = [f"Options ({len(files)} files in `{where}`, selected with `{sel}`):", "",
           "| option | description |", "|---|---|"]
    for p in files:
        out.append(f"| `{p.stem}` | {_describe(p).replace('|', '/')} |")
    rows = [r for prefix, cls in _spec_classes(group) for r in _field_rows(prefix, cls)]
    if rows:
        out += ["", "Fields (from the spec's field metadata, `engine/spec/`): a quantity takes a unit "
                "string (`\"4.8 TB/s\"`) or a bare number in its default unit; the range is the "
                "plausible span in SI units that the tests hold every shipped value to.", "",
                "| key | default unit | plausible range |", "|---|---|---|", *rows]
    out += ["", "The option files as shipped:", ""]
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        body = p.read_text().rstrip("\n")
        out += [f'??? note "{rel}"', "", "    ```yaml"]
        out += [("    " + line) if line else "" for line in body.splitlines()]
        out += ["    ```", ""]
    return "\n".join(out).rstrip("\n")


def page_for(group: str) -> Path:
    return DOCS / "config" / f"{GROUPS.get(group, group.replace('/', '-'))}.md"


def render_config_page(group: str, text: str | None) -> str:
    if text is None:
        text = (f"# `{group}`\n\nThe `{group}` config group.\n\n"
                f"<!-- generated: config {group} -->\n{GEN_END}\n")
    lines = text.split("\n")
    out, i, done = [], 0, False
    while i < len(lines):
        m = GEN_RE.match(lines[i])
        if m and m.group("group") == group:
            out.append(lines[i])
            j = i + 1
            while j < len(lines) and lines[j].strip() != GEN_END:
                j += 1
            out += [config_region(group), GEN_END]
            i, done = j + 1, True
            continue
        out.append(lines[i])
        i += 1
    if not done:
        out += ["", f"<!-- generated: config {group} -->", config_region(group), GEN_END, ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------ command blocks
@dataclasses.dataclass
class Command:
    text: str                   # the command as shown (continuations joined with newlines)
    start: int                  # index of its first line in the page
    out_start: int              # first output line
    out_end: int                # one past the last output line
    output: list[str]           # the output as recorded


@dataclasses.dataclass
class Block:
    opts: dict
    start: int                  # index of the opening fence
    end: int                    # index of the closing fence
    commands: list[Command]


@dataclasses.dataclass
class FileBlock:
    name: str
    content: str
    start: int


def parse_opts(s: str) -> dict:
    opts = {}
    for tok in shlex.split(s):
        k, _, v = tok.partition("=")
        opts[k] = v
    return opts


def _fence_end(lines: list[str], i: int) -> int:
    fence = FENCE_RE.match(lines[i]).group("fence")
    j = i + 1
    while j < len(lines) and not lines[j].startswith(fence):
        j += 1
    if j >= len(lines):
        raise ValueError(f"line {i + 1}: unclosed fence")
    return j


def parse_page(text: str) -> list:
    lines = text.split("\n")
    items, i = [], 0
    while i < len(lines):
        m, mf = EXEC_RE.match(lines[i]), FILE_RE.match(lines[i])
        if (m or mf) and i + 1 < len(lines) and FENCE_RE.match(lines[i + 1]):
            start = i + 1
            end = _fence_end(lines, start)
            if mf:
                items.append(FileBlock(mf.group("name"), "\n".join(lines[start + 1:end]) + "\n", start))
                i = end + 1
                continue
            cmds, k = [], start + 1
            while k < end:
                if not lines[k].startswith("$ "):
                    raise ValueError(f"line {k + 1}: an exec block starts with '$ ' command lines")
                c0 = k
                parts = [lines[k][2:]]
                while parts[-1].endswith("\\") and k + 1 < end:
                    k += 1
                    parts.append(lines[k])
                k += 1
                o0 = k
                while k < end and not lines[k].startswith("$ "):
                    k += 1
                cmds.append(Command("\n".join(parts), c0, o0, k, lines[o0:k]))
            items.append(Block(parse_opts(m.group("opts")), start, end, cmds))
            i = end + 1
            continue
        i += 1
    return items


class Scratch:
    """The folder a page's commands run in (see the module docstring)."""

    def __init__(self):
        self.base = Path(tempfile.mkdtemp(prefix="simllm-docs-"))
        self.work = self.base / "project"
        self.work.mkdir()
        from runner.paths import shared_data

        self.shared = shared_data()
        shared_link = self.base / "shared" / "data"
        shared_link.parent.mkdir()
        if self.shared.exists():
            shared_link.symlink_to(self.shared, target_is_directory=True)
        for name in ("conf", "experiments", "tests", "benchmarks"):
            (self.work / name).symlink_to(ROOT / name, target_is_directory=True)

    def env(self) -> dict:
        env = dict(os.environ)
        env.update({"COLUMNS": "100", "LINES": "50", "PYTHONUNBUFFERED": "1", "NO_COLOR": "1",
                    "TERM": "dumb", "TZ": "UTC", "PYTHONHASHSEED": "0",
                    "SIMLLM_SHARED_DATA": str(self.base / "shared" / "data")})
        env.pop("MLFLOW_TRACKING_URI", None)
        env.pop("HYDRA_FULL_ERROR", None)
        return env

    def normalise(self, out: str, mask: str | None) -> list[str]:
        out = ANSI_RE.sub("", out.replace("\r\n", "\n"))
        subs = [(str(self.base / "shared" / "data"), "../shared/data"), (str(self.work), "."),
                (str(self.shared), "../shared/data"), (str(ROOT), "."), (str(self.base), "..")]
        for a, b in subs:
            out = out.replace(a + "/", b + "/").replace(a, b)
        out = out.replace("$SIMLLM_SHARED_DATA/", "../shared/data/")
        lines = []
        for line in out.split("\n"):
            if "\r" in line:                       # progress bars: keep the last state
                line = line.rsplit("\r", 1)[-1]
            if HYDRA_LOG_RE.match(line):
                continue
            line = DATE_DIR_RE.sub("DATE/TIME", line)
            if mask:
                line = re.sub(mask, "...", line)
            lines.append(line.rstrip())
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def close(self):
        shutil.rmtree(self.base, ignore_errors=True)


def run_command(scratch: Scratch, cmd: str, opts: dict) -> tuple[int, list[str], float]:
    t0 = time.monotonic()
    try:
        p = subprocess.run(["bash", "-c", "set -o pipefail\n" + cmd], cwd=scratch.work, env=scratch.env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=float(opts.get("timeout", 300)))
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, out = 124, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    return rc, scratch.normalise(out, opts.get("mask")), time.monotonic() - t0


def _skeleton(line: str) -> tuple[str, list[float]]:
    nums = []

    def repl(m):
        s = m.group(0).replace(",", "")
        try:
            nums.append(float(s))
        except ValueError:
            return m.group(0)
        return "#"

    return " ".join(NUM_RE.sub(repl, line).split()), nums


def same_output(recorded: list[str], now: list[str], tol: float | None) -> bool:
    if tol is None:
        return recorded == now
    if len(recorded) != len(now):
        return False
    for a, b in zip(recorded, now):
        sa, na = _skeleton(a)
        sb, nb = _skeleton(b)
        if sa != sb or len(na) != len(nb):
            return False
        for x, y in zip(na, nb):
            if abs(x - y) > tol * max(abs(x), abs(y)) + 1e-12:
                return False
    return True


class CommandFailed(Exception):
    pass


def exec_page(path: Path, text: str, check: bool, log) -> tuple[str, list[str]]:
    """Run the page's blocks. Returns (new text, problems). In check mode the text is unchanged and
    problems lists each stale output; a command whose exit status is not the expected one is a
    problem in both modes."""
    items = parse_page(text)
    if not any(isinstance(b, Block) for b in items):
        return text, []
    lines = text.split("\n")
    replacements, problems = [], []
    scratch = Scratch()
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    try:
        for item in items:
            if isinstance(item, FileBlock):
                target = scratch.work / item.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(item.content)
                continue
            req = item.opts.get("requires")
            if req and not (scratch.work / req).exists():
                log(f"{rel}:{item.start + 1}: skipped, {req} is absent")
                continue
            want_rc = int(item.opts.get("rc", 0))
            tol = float(item.opts["tol"]) if "tol" in item.opts else None
            for c in item.commands:
                rc, out, dt = run_command(scratch, c.text, item.opts)
                log(f"{rel}:{c.start + 1}: {dt:6.1f} s  $ {c.text.splitlines()[0][:90]}")
                if rc != want_rc:
                    problems.append(f"{rel}:{c.start + 1}: exit status {rc}, expected {want_rc}: "
                                    f"$ {c.text}\n" + "\n".join(out[-20:]))
                    continue
                if check:
                    if not same_output(c.output, out, tol):
                        diff = "\n".join(difflib.unified_diff(c.output, out, "documented", "now", lineterm=""))
                        problems.append(f"{rel}:{c.start + 1}: output differs: $ {c.text}\n{diff}")
                else:
                    replacements.append((c.out_start, c.out_end, out))
    finally:
        scratch.close()
    for a, b, new in sorted(replacements, reverse=True):
        lines[a:b] = new
    return "\n".join(lines), problems


# ------------------------------------------------------------------------------ driver
def pages(selected: list[str] | None = None) -> list[Path]:
    if selected:
        return [Path(p).resolve() for p in selected]
    return sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]


def commands(selected=None) -> list[tuple[str, str]]:
    """(page, command) of every executed command."""
    out = []
    for p in pages(selected):
        for item in parse_page(p.read_text()):
            if isinstance(item, Block):
                out += [(p.relative_to(ROOT).as_posix(), c.text) for c in item.commands]
    return out


def config_problems() -> list[str]:
    """Stale or missing config-group pages (the fast check)."""
    problems = []
    for group in config_groups():
        page = page_for(group)
        if not page.exists():
            problems.append(f"{page.relative_to(ROOT)}: missing (config group {group}); run python docs/gen.py")
            continue
        text = page.read_text()
        if render_config_page(group, text) != text:
            problems.append(f"{page.relative_to(ROOT)}: stale (config group {group}); run python docs/gen.py")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", help="pages to process (default: docs/**/*.md and README.md)")
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 where a page is stale")
    ap.add_argument("--no-exec", action="store_true", help="config pages only")
    ap.add_argument("--list", action="store_true", help="list the executed commands")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    log = (lambda s: None) if a.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    if a.list:
        for page, cmd in commands(a.pages or None):
            print(f"{page}: $ {cmd}")
        return 0
    problems = []
    if not a.pages:
        if a.check:
            problems += config_problems()
        else:
            for group in config_groups():
                page = page_for(group)
                old = page.read_text() if page.exists() else None
                new = render_config_page(group, old)
                if new != old:
                    page.parent.mkdir(parents=True, exist_ok=True)
                    page.write_text(new)
                    log(f"wrote {page.relative_to(ROOT)}")
    if not a.no_exec:
        t0 = time.monotonic()
        for p in pages(a.pages or None):
            text = p.read_text()
            new, probs = exec_page(p, text, a.check, log)
            problems += probs
            if not a.check and new != text:
                p.write_text(new)
                log(f"wrote {p.relative_to(ROOT)}")
        log(f"commands: {time.monotonic() - t0:.1f} s")
    for pr in problems:
        print(pr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
