"""Loading what lives as long as the process without the cyclic garbage collector's passes.

A ``simllm`` process loads its heavy parts once: the engine (numpy, polars, the engine's
modules) and, when it tracks, MLflow (``import mlflow`` and a SQLite store: ~2,400 modules,
SQLAlchemy's mappers and MLflow's entity classes). Every object they create lives until the
process ends, yet while they load the collector runs again and again over the growing heap
(each ~700 new container objects start a young collection; full ones follow as the heap grows)
and finds nothing to free. ``loading()`` turns collection off for the block and then moves
everything made so far to the permanent generation (``gc.freeze``), out of the reach of the
collections that the run's own work triggers later. Here ``python -c "import mlflow"`` took
~2.3 CPU-s with collection on and ~1.6 with it off; the whole process's figures are
benchmarks/bench_startup.py's (its ``tracked run: import mlflow`` rows, collector off and on).

What such a block leaves unreachable in reference cycles is frozen with the rest and never
freed: a few thousand objects for ``import mlflow`` and opening an existing store (~3,700 here),
~29,000 the one time a process creates and migrates a new store; a full collection to free them
would cost ~0.3 CPU-s, more than they weigh.
"""

import contextlib
import gc


@contextlib.contextmanager
def loading():
    """Collection off for the block (as it was before at its end), then ``gc.freeze()``."""
    on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if on:
            gc.enable()
