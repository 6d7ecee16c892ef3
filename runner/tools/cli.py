"""What every console script shares at its boundary: user errors as one line, and progress bars.

``@guard("simllm-x")`` around a tool's ``main(argv) -> int`` turns a user error (bad file, bad
field, bad override) into ``simllm-x: error: <file/field> = <value>: expected <what>`` on stderr and
exit status 2 (also for a ``sys.exit("simllm-x: ...")`` deeper down), as ``simllm`` itself does for a SpecError (runner/app.py). What counts as a user
error: SpecError (and MeasurementError), a config.json or spec sheet that cannot be mapped, a file
that cannot be opened, created or overwritten, a run selection that matches nothing, and Hydra's
composition and override-parsing errors. Anything else is a bug and keeps its traceback.

``progress(...)`` is tqdm on stderr (stdout stays the tool's output), shown only on a terminal
and not with ``--quiet`` or ``SIMLLM_QUIET=1`` (tqdm's own ``TQDM_DISABLE=1`` works too).

``add_tracking(ap, experiment)`` adds the MLflow flags the tracking tools share (``--no-tracking``,
``--tracking-uri``, ``--experiment``) and ``log_run(prog, args, ...)`` logs a tool's run with them
(best effort: the files are written first). ``table_text(df)`` formats a table (polars'
Markdown or plain-text formatting) for the tools that print one.
"""

import functools
import os
import re
import sys
import threading

from engine.errors import SpecError

#: Set to 1 (or true/yes) to hide every progress bar, like each tool's --quiet.
QUIET_ENV = "SIMLLM_QUIET"


def _short(value, limit: int = 120) -> str:
    s = str(value)
    return s if len(s) <= limit else s[:limit] + f"... ({len(s)} characters)"


def _hydra_line(e, argv=()) -> str:
    """One line for Hydra's composition / override errors, naming the override."""
    from hydra.errors import MissingConfigException, OverrideParseException

    msg = str(e).strip()
    if isinstance(e, MissingConfigException):
        m = re.search(r"Could not find '([^']+)'", msg)
        if m and "/" in m.group(1):
            group, opt = m.group(1).rsplit("/", 1)
            options = [o for o in (getattr(e, "options", None) or []) if not o.endswith("_schema")]
            what = f"one of {', '.join(options)}" if options else f"an option of the {group} group"
            return f"{group} = {opt!r}: expected {what}"
        return msg.splitlines()[0]
    if isinstance(e, OverrideParseException):
        m = re.search(r"Error parsing override '(.*)'", msg)
        ov = m.group(1) if m else msg.splitlines()[0]
        rest = msg.splitlines()[1:2]
        detail = f" ({rest[0].strip()})" if rest else ""
        return f"override {ov!r}: expected KEY=VALUE in Hydra's override grammar{detail}"
    m = re.match(r"Could not override '([^']+)'", msg)
    if m:
        key = m.group(1)
        v = re.search(r"use \+" + re.escape(key) + r"=(.*)$", msg, re.M)
        value = v.group(1).strip() if v else "?"
        argv = [str(a) for a in argv or ()]
        if key.split(".")[0] == "plan" and any(a.startswith(("experiment=", "+plan=", "plan=")) for a in argv):
            what = "a key of the plan group (conf/plan/default.yaml lists them: check the spelling)"
        elif key.split(".")[0] == "plan":
            what = ("a key of the plan group, which only experiment=capacity (or capacity_l70b, "
                    "or +plan=default) adds: add experiment=capacity before plan.* overrides")
        else:
            what = f"a key of the composed config (check the spelling; +{key}={value} would add it)"
        return f"{key} = {value!r}: expected {what}"
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    return "; ".join(lines[:2]) if lines else type(e).__name__


def _loaded(module: str, name: str):
    m = sys.modules.get(module)
    return getattr(m, name, None) if m is not None else None


def error_line(e: BaseException, argv=()) -> str | None:
    """The one-line message of a user error ``e``, or None if ``e`` is not one (a bug)."""
    # the error classes of modules already loaded (an exception of one means its module is)
    named = tuple(c for c in (_loaded("engine.ingest.hf_config", "HFConfigError"),
                              _loaded("engine.ingest.hwcsv", "SheetError"),
                              _loaded("runner.tools.runs", "SelectionError")) if c is not None)
    hydra_error = _loaded("hydra.errors", "HydraException")
    if hydra_error is not None and isinstance(e, hydra_error):
        return _hydra_line(e, argv)
    if isinstance(e, SpecError):
        return f"{e.field} = {_short(repr(e.value))}: expected {e.expected}"
    if isinstance(e, (*named, FileExistsError)):
        return _short(str(e), 400)
    if isinstance(e, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
        if e.filename is None:
            return _short(str(e), 400)
        kind = "an existing folder" if isinstance(e, NotADirectoryError) else "an existing, readable file"
        return f"{e.filename} = {e.strerror or type(e).__name__}: expected {kind}"
    if isinstance(e, UnicodeDecodeError):
        return f"(input) = byte {e.object[e.start:e.start + 1]!r} at offset {e.start}: expected UTF-8 text"
    return None


def guard(prog: str, also: tuple = ()):
    """Decorator for ``main(argv=None) -> int``: a user error (``error_line``; or one of the
    exception types in ``also``, shown as its message) prints ``PROG: error: ...`` and returns 2;
    Ctrl-C returns 130 with one line."""

    def wrap(main):
        @functools.wraps(main)
        def inner(*args, **kw):
            try:
                return main(*args, **kw)
            except KeyboardInterrupt:
                print(f"{prog}: interrupted", file=sys.stderr)
                return 130
            except SystemExit as e:   # sys.exit("PROG: message") deeper down: the same one line, exit 2
                if not (isinstance(e.code, str) and e.code.startswith(f"{prog}:")):
                    raise
                line = e.code[len(prog) + 1:].strip()
                line = line[len("error:"):].strip() if line.startswith("error:") else line
                print(f"{prog}: error: {line}", file=sys.stderr)
                return 2
            except Exception as e:  # noqa: BLE001 - a user error is shown; a bug is raised again
                argv = args[0] if args and isinstance(args[0], (list, tuple)) else \
                    kw.get("argv") or sys.argv[1:]
                line = error_line(e, argv)
                if line is None and isinstance(e, also):
                    line = _short(str(e), 400) or type(e).__name__
                if line is None:
                    raise
                line = " ".join(part.strip() for part in line.splitlines() if part.strip())
                print(f"{prog}: error: {line}", file=sys.stderr)
                return 2
        return inner

    return wrap


def count_type(low: int):
    """argparse type: an integer >= ``low`` (argparse reports anything else as a usage error)."""
    import argparse

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= {low}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= {low}")
        return v

    parse.__name__ = f"integer >= {low}"
    return parse


def positive_type(text: str) -> float:
    """argparse type: a finite number > 0."""
    import argparse
    import math

    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number > 0")
    return v


def add_quiet(ap) -> None:
    """``-q/--quiet``: no progress bars (also ``SIMLLM_QUIET=1``)."""
    ap.add_argument("-q", "--quiet", action="store_true",
                    help=f"no progress bars (also {QUIET_ENV}=1); results still go to stdout")


def quiet_env() -> bool:
    return os.environ.get(QUIET_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def show_progress(quiet: bool = False) -> bool:
    """Bars are drawn on a terminal's stderr only, and not when quiet (flag or environment)."""
    if quiet or quiet_env() or os.environ.get("TQDM_DISABLE", "").strip().lower() in ("1", "true", "yes"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def progress(iterable=None, *, total=None, desc: str = "", unit: str = "it", quiet: bool = False, **kw):
    """A tqdm bar on stderr, disabled off a terminal or when quiet (see ``show_progress``)."""
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                disable=not show_progress(quiet), mininterval=kw.pop("mininterval", 0.5),
                dynamic_ncols=True, leave=kw.pop("leave", False), **kw)


class Steps:
    """A bar over a tool's named steps: ``with Steps(["read", "fit"], prog, quiet) as s: s.step("read")``."""

    def __init__(self, names, desc: str, quiet: bool = False):
        self.names = list(names)
        self.desc = desc
        self.bar = progress(total=len(self.names), desc=desc, unit="step", quiet=quiet,
                            mininterval=0.1, bar_format="{desc}: {n_fmt}/{total_fmt} steps "
                                                        "[{elapsed}]{postfix}")
        self._started = False
        self.shown = not self.bar.disable
        self._stop = threading.Event()
        if self.shown:     # a step can run for many seconds without an update: keep the clock moving
            threading.Thread(target=self._tick, daemon=True).start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self.bar.refresh()

    def step(self, name: str) -> None:
        if self._started:
            self.bar.update(1)
        self._started = True
        self.bar.set_postfix_str(name, refresh=True)

    def note(self, text: str) -> None:
        """Show ``text`` for the current step (e.g. a count inside it)."""
        self.bar.set_postfix_str(text, refresh=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._started and exc[0] is None:
            self.bar.update(1)
        self.bar.close()
        return False


def add_tracking(ap, experiment: str) -> None:
    """``--no-tracking``, ``--tracking-uri URI`` and ``--experiment NAME`` (default ``experiment``)."""
    ap.add_argument("--no-tracking", action="store_true", help="do not log the run to MLflow")
    ap.add_argument("--tracking-uri", default=None,
                    help="MLflow tracking URI (default $MLFLOW_TRACKING_URI or sqlite:///outputs/mlflow.db)")
    ap.add_argument("--experiment", default=experiment, help=f"MLflow experiment (default {experiment})")


def log_run(prog: str, args, name: str, params: dict, metrics: dict, tags: dict, out) -> str | None:
    """Log a tool's run (params, metrics, tags, the files of ``out``) with ``args.tracking_uri``
    (default runner.tracking's; set on ``args``) and ``args.experiment``; prints the run id. A
    store that fails is a warning naming ``out``, where the results already are. Returns the run
    id (None when logging failed)."""
    from runner import tracking

    try:
        args.tracking_uri = args.tracking_uri or tracking.default_uri()
        rid = tracking.log_job(args.tracking_uri, args.experiment, name, params, metrics, tags, out)
    except Exception as e:  # noqa: BLE001 - the files are written; tracking is best effort
        print(f"{prog}: warning: MLflow logging failed ({e}); results are in {out}", file=sys.stderr)
        return None
    print(f"MLflow run {rid} ({args.tracking_uri}, experiment {args.experiment})")
    return rid


def text_table(columns: dict, markdown: bool = True) -> str:
    """``{header: [cell text, ...]}`` (cells already formatted) as a table (``table_text``); no
    columns: the empty string."""
    import polars as pl

    if not columns:
        return ""
    return table_text(pl.DataFrame({k: [str(v) for v in col] for k, col in columns.items()},
                                   schema={k: pl.String for k in columns}), markdown)


def table_text(df, markdown: bool = True) -> str:
    """A polars DataFrame as text: a Markdown table (numbers right-aligned), or with
    ``markdown=False`` plain columns without borders; every row and column, no truncation, no
    dtype or shape lines. Format the cells first where a column needs a number format."""
    import polars as pl

    with pl.Config(tbl_formatting="MARKDOWN" if markdown else "NOTHING", tbl_hide_column_data_types=True,
                   tbl_hide_dataframe_shape=True, tbl_hide_dtype_separator=True, tbl_rows=-1, tbl_cols=-1,
                   fmt_str_lengths=10_000, tbl_width_chars=65_000, tbl_cell_numeric_alignment="RIGHT"):
        text = str(df)
    return "\n".join(line.rstrip() for line in text.splitlines())
