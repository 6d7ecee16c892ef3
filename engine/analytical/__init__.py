"""Analytical (first-principles roofline) engine.

``run(specs) -> RunResult`` for one configuration; ``sweep(specs, **axes) -> polars.DataFrame`` for
the cartesian product of grid axes, evaluated in vectorised chunks (``columns=`` narrows the
result, ``out=DIR`` streams it to parquet parts and returns a LazyFrame, as a result above
``engine.analytical.sweep_stream_mb`` is by default; ``sweep_chunks`` yields the chunks).
"""

from engine.analytical.pipeline import GRID_AXES, evaluate
from engine.analytical.run import run, sweep, sweep_chunks

__all__ = ["run", "sweep", "sweep_chunks", "evaluate", "GRID_AXES"]
