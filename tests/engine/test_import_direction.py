"""The import arrow of DESIGN.md: ``runner -> engine``; inside the engine ``engine.calibration``
may use ``engine.des`` and ``engine.analytical``, never the reverse (no package cycle), and no
engine module imports hydra, omegaconf or mlflow.

Checked on the source text with ``ast`` (every ``import``/``from ... import`` statement, lazy ones
inside functions included), so no module is executed and a lazy import cannot hide a cycle.
"""

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "engine"


def _imports(path: Path) -> set[str]:
    """Every absolute module name imported anywhere in ``path`` (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    pkg = ".".join(path.relative_to(ENGINE.parent).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                out.add(".".join(base + ([node.module] if node.module else [])))
            else:
                out.add(node.module)
    return out


def _hits(sub: str, banned: tuple[str, ...]) -> list[str]:
    return [f"{p.relative_to(ENGINE.parent)} imports {m}"
            for p in sorted((ENGINE / sub).rglob("*.py")) for m in sorted(_imports(p))
            if any(m == b or m.startswith(b + ".") for b in banned)]


@pytest.mark.parametrize("sub", ["des", "analytical", "cost", "spec"])
def test_lower_layers_do_not_import_calibration(sub):
    assert _hits(sub, ("engine.calibration",)) == []


def test_engine_never_imports_the_runner_or_hydra_or_mlflow():
    assert _hits(".", ("runner", "hydra", "omegaconf", "mlflow")) == []


def test_the_checker_sees_lazy_imports(tmp_path):
    """A lazy ``from engine.calibration.x import y`` inside a function is found (the old cycle)."""
    d = tmp_path / "engine" / "des"
    d.mkdir(parents=True)
    (d / "m.py").write_text("def f():\n    from engine.calibration.noise import make_noise\n")
    globals()["ENGINE"], old = tmp_path / "engine", ENGINE
    try:
        assert _hits("des", ("engine.calibration",)) == ["engine/des/m.py imports engine.calibration.noise"]
    finally:
        globals()["ENGINE"] = old
