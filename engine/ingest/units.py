"""The pint unit registry of spec sheets: FLOP-rates, OP-rates and bit-rates as sheets write them.

Shared by the importers here and by ``runner.units`` (the config boundary), so "4.8 TB/s" means
the same thing in a CSV row and on the command line.
"""

import functools
import pickle

import pint


@functools.lru_cache(maxsize=1)
def registry() -> pint.UnitRegistry:
    """A pint registry that also knows FLOP-rates and bit-rates written the way sheets write them.

    FLOPS/OPS are FLOP per second (TOPS = 1e12 OP/s, an int8 op counted like a FLOP). ``Gb``,
    ``Tb`` ... are bits (pint's default reads ``Gb`` as gilbert). ``GB`` is 1e9 bytes, ``GiB`` 2^30;
    ``KB``/``Kb`` (capital K, as datasheets write kilo) are 1e3 bytes / bits, like ``kB``/``kb``.
    """
    try:
        # pint's own cache of its parsed definition files (the user cache folder): ~0.09 CPU-s of a
        # process's start-up saved; the definitions below are applied on top either way
        ureg = pint.UnitRegistry(on_redefinition="ignore", cache_folder=":auto:")
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError):
        # no writable cache folder, or a cache file another process is still writing (two test
        # workers or jobs starting together on a cold cache read a truncated pickle): parse the
        # definitions afresh
        ureg = pint.UnitRegistry(on_redefinition="ignore")
    ureg.define("FLOP = [computation] = flop")
    ureg.define("FLOPS = FLOP / second = flops")
    ureg.define("OPS = FLOP / second = ops")
    for prefix, factor in (("k", "1e3"), ("M", "1e6"), ("G", "1e9"), ("T", "1e12"), ("P", "1e15")):
        ureg.define(f"{prefix}b = {factor} * bit")
    # "KB" / "Kb" as sheets and datasheets write kilo (pint alone reads "K" as kelvin): 1e3 bytes / bits
    ureg.define("KB = 1e3 * byte")
    ureg.define("Kb = 1e3 * bit")
    return ureg


def quantity(value: float, unit: str) -> pint.Quantity:
    """``value`` in ``unit`` as a pint Quantity of the shared registry (raises pint errors)."""
    return registry().Quantity(float(value), unit)
