"""The operator-cost backends by name: one registry, ``name -> factory``, and no if-chain.

    roofline   spec-sheet peaks, no measured data (engine.cost.roofline); the engines price its
               passes in closed form (``KernelModel.closed_form``)
    measured   the chip's own measured tables (engine.cost.model._Measured); a what-if chip whose
               sheet differs from the measured one is moved by the transfer-model ratio
    transfer   roofline-efficiency curves fitted on the measured chips (engine.cost.transfer)
               applied to this chip's sheet
    anchored   the nearest measured chip's tables x the transfer-model ratio between the chips
    auto       roofline when the framework names no kernel tables, else measured when the chip has
               tables for the framework, else transfer

Each factory takes (hardware, framework kernel tables, transfer_exclude) and returns a
``KernelModel``; ``kernel_model`` validates the shared arguments once and looks the name up here.
A new backend is one function and one entry of ``BACKENDS``.
"""

import functools
from typing import Callable

import numpy as np

from engine.cost import roofline, transfer
from engine.cost.model import (FRAMEWORKS, KernelModel, _Anchored, _EXTRAPOLATION, _fmt, _known_sets,
                               _Measured, _MOE, _nearest_set, _PADDED, _peaks_of, _same_figure, _SHAPES,
                               _Transfer, _UNITS, fits_for, shipped_tables, tables_for)
from engine.errors import SpecError
from engine.result import Assumption
from engine.spec import HardwareSpec

#: Framework value meaning "no measured kernel tables" (``framework.kernel_tables``).
NO_TABLES = "none"


def _has_tables(hardware: HardwareSpec, framework: str) -> bool:
    chip = tables_for(hardware)
    return chip is not None and any(k.startswith(f"{chip}/{framework}/") for k in shipped_tables())


def _needs_tables(framework: str, backend: str) -> None:
    if framework == NO_TABLES:
        raise SpecError("framework.kernel_tables", framework,
                        f"trtllm, vllm or sglang for calibration.cost.backend={backend} (the framework "
                        "names no kernel tables)")
    if framework not in FRAMEWORKS:
        raise SpecError("framework.kernel_tables", framework, "one of " + ", ".join(FRAMEWORKS))


def _transfer_of(hardware: HardwareSpec, framework: str, exclude: tuple):
    fits = fits_for(framework, tuple(sorted(exclude)))
    fitted_on = sorted({c for f in fits.values() for c in f["chips"]})
    return fits, _Transfer(_peaks_of(hardware), fits, hardware.name), fitted_on


def roofline_backend(hardware: HardwareSpec, framework: str, exclude: tuple) -> KernelModel:
    """Spec-sheet roofline of each operator (engine.cost.roofline); no tables, no fits."""
    return KernelModel("roofline", (), roofline.Roofline(_peaks_of(hardware), hardware.name), closed_form=True)


def transfer_backend(hardware: HardwareSpec, framework: str, exclude: tuple) -> KernelModel:
    """Fitted roofline-efficiency curves applied to this chip's spec-sheet peaks."""
    _needs_tables(framework, "transfer")
    _, tr, fitted_on = _transfer_of(hardware, framework, exclude)
    name = f"transfer from {','.join(fitted_on)} to {hardware.name} ({framework})"
    notes = (Assumption("kernel backend", "transfer",
                        f"roofline-efficiency curves fitted on {', '.join(fitted_on)} ({framework} tables) "
                        f"applied to {hardware.name}'s spec-sheet peaks"),) + tuple(tr.notes)
    return KernelModel(name, notes, tr)


def anchored_backend(hardware: HardwareSpec, framework: str, exclude: tuple) -> KernelModel:
    """t = t_measured(anchor) x t_transfer(this chip) / t_transfer(anchor); anchor = the nearest
    measured chip (log bf16 peak, log HBM bandwidth) not in ``exclude``."""
    _needs_tables(framework, "anchored")
    fits, tr, fitted_on = _transfer_of(hardware, framework, exclude)
    anchor = _nearest_set(tr.pk, framework, exclude)
    apk = {k: (None if not np.isfinite(v) else v) for k, v in transfer.chip_peaks(shipped_tables(), anchor).items()}
    ta = _Transfer(apk, fits, anchor)
    name = f"anchored on {anchor}/{framework}, transfer ratio to {hardware.name}"
    notes = (Assumption("kernel backend", name,
                        f"measured {anchor} tables x (transfer-model time on {hardware.name} / on {anchor}); "
                        f"curves fitted on {', '.join(fitted_on)}"),) + tuple(tr.notes)
    return KernelModel(name, notes, _Anchored(_Measured(anchor, framework, ta), tr, ta))


def _version(chip: str, framework: str) -> str:
    t = shipped_tables()
    return next((str(t[k]) for k in (f"{chip}/{framework}/gemm/version", f"{chip}/{framework}/attn_decode/version")
                 if k in t), "?")


def measured_backend(hardware: HardwareSpec, framework: str, exclude: tuple) -> KernelModel:
    """Interpolation in the chip's own tables; a sheet that differs from the measured chip's (a
    what-if such as hardware.hbm_bandwidth=8TB/s on h100_sxm) moves the measured times by the
    transfer-model ratio between the two sheets."""
    _needs_tables(framework, "measured")
    if not _has_tables(hardware, framework):
        raise SpecError("hardware.kernel_tables", hardware.kernel_tables,
                        f"a measured table set with {framework} tables for {hardware.name} "
                        f"(sets: {', '.join(_known_sets())}); or use the transfer backend")
    chip = tables_for(hardware)
    fits, tr, _ = _transfer_of(hardware, framework, exclude)
    stored = {k: (None if not np.isfinite(v) else v) for k, v in transfer.chip_peaks(shipped_tables(), chip).items()}
    changed = [k for k in ("bf16", "fp8", "fp4", "hbm_bandwidth", "scaleup_bandwidth")
               if not _same_figure(tr.pk.get(k), stored.get(k))]
    common = (_EXTRAPOLATION, _PADDED, _SHAPES, _MOE, _UNITS)
    if changed:
        ts = _Transfer(stored, fits, chip)
        m = _Measured(chip, framework, ts)
        name = f"measured {chip}/{framework} {_version(chip, framework)} scaled to {hardware.name} " \
               f"({', '.join(changed)} changed)"
        what = "; ".join(f"{k} {_fmt(stored.get(k))} -> {_fmt(tr.pk.get(k))}" for k in changed)
        notes = (Assumption("kernel backend", name,
                            f"{hardware.name} differs from the measured {chip} sheet ({what}): measured times x "
                            f"transfer-model time ratio (this hardware / {chip})"),) \
            + common + tuple(m.notes) + tuple(tr.notes)
        return KernelModel(name, notes, _Anchored(m, tr, ts))
    m = _Measured(chip, framework, tr)
    name = f"measured {chip}/{framework} {_version(chip, framework)}"
    notes = (Assumption("kernel backend", name, "per-kernel latencies measured by NVIDIA (aiconfigurator-core "
                        "tables, Apache-2.0), interpolated in log space"),) + common + tuple(m.notes)
    return KernelModel(name, notes, m)


def auto_backend(hardware: HardwareSpec, framework: str, exclude: tuple) -> KernelModel:
    """roofline (framework names no tables) | measured (the chip has tables for it) | transfer."""
    return BACKENDS[resolve("auto", framework, hardware)](hardware, framework, exclude)


Factory = Callable[[HardwareSpec, str, tuple], KernelModel]

#: name -> factory (module docstring). ``engine.spec.calibration.KERNEL_BACKENDS`` lists the names.
BACKENDS: dict[str, Factory] = {
    "roofline": roofline_backend,
    "measured": measured_backend,
    "transfer": transfer_backend,
    "anchored": anchored_backend,
    "auto": auto_backend,
}


def resolve(backend: str, framework: str, hardware: HardwareSpec | None = None) -> str:
    """The registry name a request prices with: ``auto`` becomes roofline when the framework names
    no kernel tables and (given ``hardware``) measured or transfer; measured, transfer and anchored
    need a framework with tables (SpecError naming framework.kernel_tables); others unchanged."""
    if backend not in BACKENDS:
        raise SpecError("calibration.cost.backend", backend, "one of " + ", ".join(BACKENDS))
    if backend == "auto":
        if framework == NO_TABLES:
            return "roofline"
        if hardware is None:
            return "auto"
        return "measured" if _has_tables(hardware, framework) else "transfer"
    if backend != "roofline":
        _needs_tables(framework, backend)
    return backend


@functools.lru_cache(maxsize=64)
def _build(hardware: HardwareSpec, framework: str, backend: str, exclude: tuple) -> KernelModel:
    if resolve(backend, framework, hardware) == "roofline":
        return roofline_backend(hardware, framework, exclude)   # reads no table: nothing to check
    known = _known_sets()
    bad = [c for c in exclude if c not in known]
    if bad:
        raise SpecError("calibration.transfer_exclude", bad, "measured table sets: " + ", ".join(known))
    chip = tables_for(hardware)
    if chip is not None and chip not in known:
        raise SpecError("hardware.kernel_tables", chip, 'one of ' + ", ".join(known) + ' or "" (none)')
    return BACKENDS[backend](hardware, framework, exclude)


def kernel_model(hardware: HardwareSpec, framework: str, backend: str = "auto",
                 exclude: tuple = ()) -> KernelModel:
    """The operator-cost model for a chip and framework (cached per arguments): ``BACKENDS[backend]``
    (module docstring). ``framework``: the kernel tables' framework (trtllm | vllm | sglang; none:
    roofline only); ``exclude``: measured table sets the transfer curves are fitted without.
    SpecError names the offending field (calibration.cost.backend, framework.kernel_tables,
    hardware.kernel_tables, calibration.transfer_exclude)."""
    if not isinstance(hardware, HardwareSpec):
        raise SpecError("hardware", type(hardware).__name__, "a HardwareSpec")
    return _build(hardware, framework, backend, tuple(exclude))
