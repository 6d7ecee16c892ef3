"""Analytical (first-principles roofline) engine.

``run(specs) -> RunResult`` for one configuration; ``sweep(specs, **axes) -> polars.DataFrame`` for
the cartesian product of grid axes, evaluated in one vectorised pass.
"""

from engine.analytical.pipeline import GRID_AXES, evaluate
from engine.analytical.run import run, sweep

__all__ = ["run", "sweep", "evaluate", "GRID_AXES"]
