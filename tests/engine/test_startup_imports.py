"""What importing the analytical engine loads: nothing of numpy's random and masked-array
packages (a one-point run uses neither), Hydra, OmegaConf or MLflow (engine/ never imports them). Each is checked in a fresh
interpreter, by the module names Python reports loaded."""

import subprocess
import sys

import numpy as np

from tests.conftest import CONF


def _loaded(code: str) -> set:
    p = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
                       cwd=CONF.parent, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return set(p.stdout.split())


def test_analytical_engine_import_is_lean():
    mods = _loaded("import engine.analytical, engine.result")
    for name in ("numpy.random", "numpy.ma", "hydra", "omegaconf", "mlflow"):
        assert name not in mods, name
    assert "numpy" in mods   # the engine computes with numpy


def test_kernel_grid_is_numpys_unique():
    """engine.analytical.kernels.GRID (sorted distinct token counts) equals np.unique of the same
    values, written out here from its definition: 0..128, then round(2^(j/16)) for j = 112..384."""
    from engine.analytical.kernels import GRID

    ref = np.unique(np.concatenate([np.arange(0, 129, dtype=float),
                                    np.round(2.0 ** (np.arange(112, 385) / 16.0))]))
    assert GRID.dtype == ref.dtype and GRID.shape == ref.shape and np.array_equal(GRID, ref)
