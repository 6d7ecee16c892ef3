"""Writing fitted calibrations as conf/calibration/NAME.yaml: one text layout, one writer.

``simllm-calibrate`` (runner/tools/calibrate.py) and ``simllm-validate --fit`` both end in a calibration
option file: comment lines saying how it was fitted, the defaults list, ``name``, ``provenance``
and one line per field with a comment. Paths in that text go through ``runner.paths.display``
(relative to the project root, e.g. ``../shared/data/reference/measured_dev.csv``): a shipped file
never carries the absolute path of the machine it was fitted on.
"""

from pathlib import Path

from runner.paths import display


def calibration_yaml_text(name: str, header: list[str], provenance: str,
                          fields: list[tuple[str, object, str]], noise: str = "none",
                          noise_comment: str = "step-time jitter/jumps for engine=des "
                                               "(conf/calibration/noise/)") -> str:
    """The option file: ``# header`` lines, defaults (schema, ``noise``), name, provenance (folded
    block), then ``key: value  # comment`` per field, in the order given."""
    lines = [f"# {h}" if h else "#" for h in header]
    lines += ["defaults:", "  - calibration_schema", f"  - noise: {noise}   # {noise_comment}",
              "  - _self_", f"name: {name}", "provenance: >-"]
    lines += [f"  {p}" for p in provenance.splitlines()]
    for key, value, comment in fields:
        lines.append(f"{key}: {value}" + (f"   # {comment}" if comment else ""))
    return "\n".join(lines) + "\n"


def write_calibration_yaml(path: str | Path, text: str, force: bool = False, log=print) -> Path:
    """Write ``text`` to ``path`` (folders made); an existing file that differs is kept unless
    ``force`` (FileExistsError naming it)."""
    path = Path(path)
    if path.exists() and not force and path.read_text() != text:
        raise FileExistsError(f"{path} exists and differs; pass --force to overwrite")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if log:
        log(f"wrote {display(path)}")
    return path


__all__ = ["calibration_yaml_text", "write_calibration_yaml", "display"]
