"""Leave-one-chip-out (LOCO) error of the transfer backend: how far the transfer curves land on a
chip that was not among the chips they were fitted on, the situation of every spec-only chip.

For each measured table set ``chip`` and framework ``fw``, the curves are refitted on every other
chip (``transfer.fit_all(tables, fw, exclude=(chip,))``) and predict every measured grid point of
``chip``'s tables (``thin=False``: all points, not the fit's stride) from ``chip``'s spec-sheet
peaks alone. The residual of one grid point (dimensionless, log scale)::

    r = ln(t_transfer / t_measured)

with t in seconds per call on one GPU. Collectives are scored only on chips with a peer-to-peer
fabric (scale-up bandwidth >= ``transfer.MIN_FABRIC_BYTES_S``), the chips their curves are fitted
on (a PCIe chip's host-staged all-reduce says nothing about its link's spec bandwidth).

Cost: one ``fit_all`` per (chip, framework), 0.4-3 CPU-s each on the shipped tables (6 chips x 3
frameworks: 25-30 CPU-s here; the table's provenance records it); evaluating the held-out points
is a few ms per class. Used by ``simllm-kernels --loco`` (the shipped ``engine/uncertainty/data/transfer_loco.json``)
and ``benchmarks/bench_kernels.py``.
"""

import time

import numpy as np

from engine.cost import transfer


def held_out(tables: dict, chip: str, fw: str, fits: dict, cls: str):
    """(predicted, measured, points) on every measured grid point of one class of ``chip`` with the
    curves ``fits`` (fitted without ``chip``); seconds, seconds, and the points' roofline inputs
    (``transfer.op_points`` or ``transfer.comm_points``, unthinned). None when the chip has no such
    table, the fits lack the class, or (collectives) the chip has no peer-to-peer fabric."""
    if cls not in fits:
        return None
    if cls in transfer.COMM_CLASSES:
        if not transfer.chip_peaks(tables, chip)["scaleup_bandwidth"] >= transfer.MIN_FABRIC_BYTES_S:
            return None
        pts = transfer.comm_points(tables, chip, fw, cls)
        if pts is None:
            return None
        return transfer.comm_time(fits[cls]["params"], *pts[:-1]), pts[-1], pts
    pts = transfer.op_points(tables, chip, fw, cls, thin=False)
    if pts is None:
        return None
    return transfer.op_time(fits[cls]["params"], *pts[:-1]), pts[-1], pts


def chips_with(tables: dict, fw: str) -> list[str]:
    """The table sets with at least one ``fw`` table, in the tables' order."""
    return [c for c in tables["chips"].tolist() if any(k.startswith(f"{c}/{fw}/") for k in tables)]


def residuals(tables: dict, fw: str, chips=None) -> tuple[dict, dict]:
    """({chip: {class: r array}}, {chip: refit CPU-s}) of the module docstring, for ``chips``
    (default: every table set with ``fw`` tables). Raises ValueError naming an unknown chip."""
    known = chips_with(tables, fw)
    chips = known if chips is None else list(chips)
    bad = [c for c in chips if c not in known]
    if bad:
        raise ValueError(f"chips {', '.join(bad)}: no {fw} kernel tables (table sets with them: {', '.join(known)})")
    out, cpu = {}, {}
    for chip in chips:
        c0 = time.process_time()
        fits = transfer.fit_all(tables, fw, exclude=(chip,))
        cpu[chip] = time.process_time() - c0
        per = {}
        for cls in transfer.OP_CLASSES + transfer.COMM_CLASSES:
            h = held_out(tables, chip, fw, fits, cls)
            if h is None:
                continue
            pred, meas = np.asarray(h[0], float), np.asarray(h[1], float)
            ok = (pred > 0) & (meas > 0) & np.isfinite(pred) & np.isfinite(meas)
            if ok.any():
                per[cls] = np.log(pred[ok] / meas[ok])
        out[chip] = per
    return out, cpu
