"""Accuracy and speed of engine.cost (measured-kernel and transfer backends).

    python benchmarks/bench_kernels.py [--framework trtllm] [--chips h100_sxm,h200_sxm,b200_sxm]
                                       [--plot docs/kernel_efficiency_h100.png]

Leave-one-chip-out: for each held-out chip the transfer curves are refitted on the other measured
chips (engine.cost.transfer.fit_all with exclude) and predict every measured grid point of the
held-out chip's tables from its spec-sheet peaks alone. Printed per operator class: median and p90
of |predicted / measured - 1| for

* transfer  — the held-out prediction above;
* measured  — interpolation self-consistency: every other interior grid point along the main size
              axis (GEMM m, attention length, MoE tokens, message bytes) is removed and predicted by
              log-space interpolation from its neighbours (the measured backend's own method);
* anchored  — the "anchored" backend with the held-out chip excluded: the nearest other measured
              chip's tables x the transfer model's time ratio (held-out chip / anchor);
* no twin   — anchored, also excluding the held-out chip's twin (h100_sxm <-> h200_sxm, same GPU
              die and peaks; b200_sxm <-> gb200), as for a chip with no close measured relative;
* roofline  — max(F / (P x 0.688), Q / (B x 0.623)), the project's default global efficiencies
              (collectives: bus bytes / (link x 0.449) + (n - 1) x 2 us).

Then the evaluation speed of gemm_s on an 8192-long token array: CPU-s per call alone and wall
(min/median of --reps batches of 50 calls), each chip's refit as CPU-s; this process's CPU-s and
peak RSS; a JSON beside the table (benchmarks/results/bench_kernels.json, --track: MLflow).
"""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.cost import grid, kernel_model, loco, transfer
from engine.cost.derive import GRIDS
from engine.cost.model import shipped_tables
from engine.spec import HardwareSpec

COMPUTE_EFF, BW_EFF, COMM_EFF, HOP_S = 0.688, 0.623, 0.449, 2e-6
CLASSES = ("bf16", "fp8", "fp8_block", "nvfp4", "attn_prefill", "attn_decode", "mla_prefill", "mla_decode",
           "moe", "all_reduce")


def _stats(e):
    e = np.abs(np.asarray(e))
    return (np.median(e), np.percentile(e, 90), len(e)) if len(e) else (np.nan, np.nan, 0)


def transfer_errors(t, chip, fw, fits, cls):
    """(transfer, roofline) relative errors on every measured point of one class: the transfer
    prediction is engine.cost.loco.held_out's (the one LOCO computation, also behind
    simllm-kernels --loco), the roofline uses the same points."""
    h = loco.held_out(t, chip, fw, fits, cls)
    if h is None:
        return [], []
    pred, meas, pts = h
    if cls in transfer.COMM_CLASSES:
        bus, n, link, _ = pts
        roof = bus / (link * COMM_EFF) + (n - 1) * HOP_S
    else:
        Tc, Tb = pts[0], pts[1]
        roof = np.maximum(Tc / COMPUTE_EFF, Tb / BW_EFF)
    return pred / meas - 1, roof / meas - 1


def _holdout(arr, axes, slopes, hold_axis):
    """Relative errors predicting every other interior grid point along ``hold_axis`` from the rest."""
    lax = [np.log(np.asarray(a, float)) for a in axes]
    n = arr.shape[hold_axis]
    held = np.arange(1, n - 1, 2)
    kept = np.setdiff1d(np.arange(n), held)
    lv = np.log(arr.astype(float))
    sub = np.take(lv, kept, axis=hold_axis)
    sub_axes = list(lax)
    sub_axes[hold_axis] = lax[hold_axis][kept]
    filled = grid.padded_min(grid.fill_missing(sub, tuple(sub_axes), slopes), slopes)
    truth = np.take(lv, held, axis=hold_axis)
    mesh = np.meshgrid(*[a if d != hold_axis else a[held] for d, a in enumerate(lax)], indexing="ij")
    pred = grid.interp(tuple(sub_axes), filled, tuple(mesh), slopes)
    ok = np.isfinite(truth)
    return np.exp(pred[ok] - truth[ok]) - 1


def measured_errors(t, chip, fw, cls):
    errs = []
    if cls in ("bf16", "fp8", "fp8_block", "nvfp4"):
        k = f"{chip}/{fw}/gemm/{cls}"
        if k in t:
            errs.append(_holdout(t[k], (GRIDS["gemm/m"], GRIDS["gemm/n"], GRIDS["gemm/k"]), (1, 1, 1), 0))
    elif cls in ("attn_prefill", "attn_decode"):
        sl = (1.0, 2.0) if cls == "attn_prefill" else (1.0, 1.0)
        for k in [k for k in t if k.startswith(f"{chip}/{fw}/{cls}/") and k.count("/") == 4]:
            for a in t[k]:
                errs.append(_holdout(a, (GRIDS[f"{cls}/batch"], GRIDS[f"{cls}/len"]), sl, 1))
    elif cls in ("mla_prefill", "mla_decode"):
        sl = (1.0, 1.0, 2.0) if cls == "mla_prefill" else (1.0, 1.0, 1.0)
        for k in [k for k in t if k.startswith(f"{chip}/{fw}/{cls}/") and not k.endswith("version")]:
            errs.append(_holdout(t[k], (GRIDS["mla/heads"], GRIDS[f"{cls}/batch"], GRIDS[f"{cls}/len"]), sl, 2))
    elif cls == "moe":
        for k in [k for k in t if k.startswith(f"{chip}/{fw}/moe/") and k.count("/") == 3 and not k.endswith("version")]:
            for a in t[k]:
                errs.append(_holdout(a, (GRIDS["moe/tokens"],), (1.0,), 0))
    elif cls == "all_reduce":
        for k in (f"{chip}/nccl/all_reduce", f"{chip}/{fw}/custom_allreduce"):
            if k in t:
                errs.append(_holdout(t[k], (GRIDS["comm/n_gpus"], GRIDS["comm/bytes"]), (0.0, 1.0), 1))
    return np.concatenate(errs) if errs else []


def _hw(t, chip):
    pk = transfer.chip_peaks(t, chip)
    val = lambda v: None if not np.isfinite(v) else float(v)
    return HardwareSpec(name=chip, peak_flops_bf16=pk["bf16"], peak_flops_fp8=val(pk["fp8"]), peak_flops_fp4=val(pk["fp4"]),
                        peak_flops_int8=val(pk["int8"]), hbm_capacity_bytes=80e9, hbm_bandwidth_bytes_s=pk["hbm_bandwidth"],
                        scaleup_bandwidth_bytes_s=val(pk["scaleup_bandwidth"]), devices_per_node=8)


TWINS = {"h100_sxm": "h200_sxm", "h200_sxm": "h100_sxm", "b200_sxm": "gb200", "gb200": "b200_sxm"}


def anchored_errors(t, chip, fw, cls, exclude=None):
    """Relative errors of the anchored backend (held-out chip excluded) on the chip's grid points."""
    km = kernel_model(_hw(t, chip), fw, "anchored", exclude=exclude or (chip,))
    errs = []
    if cls in ("bf16", "fp8", "fp8_block", "nvfp4"):
        k = f"{chip}/{fw}/gemm/{cls}"
        if k not in t:
            return []
        m = np.asarray(GRIDS["gemm/m"], float)
        for j, n in enumerate(GRIDS["gemm/n"]):
            for l, kk in enumerate(GRIDS["gemm/k"]):
                col = t[k][:, j, l].astype(float)
                ok = np.isfinite(col)
                if ok.any():
                    errs.append(km.gemm_s(m[ok], n, kk, cls) / col[ok] - 1)
    elif cls in ("attn_prefill", "attn_decode"):
        fn = km.attn_prefill_s if cls == "attn_prefill" else km.attn_decode_s
        b, L = np.meshgrid(GRIDS[f"{cls}/batch"], GRIDS[f"{cls}/len"], indexing="ij")
        for k in [k for k in t if k.startswith(f"{chip}/{fw}/{cls}/") and k.count("/") == 4]:
            kv, hd = k.split("/")[3], int(k.split("/")[4][2:])
            for (h, g), a in zip(t[k + "/combos"].tolist(), t[k]):
                ok = np.isfinite(a)
                errs.append(fn(b[ok], L[ok], h, g, hd, kv) / a[ok] - 1)
    elif cls in ("mla_prefill", "mla_decode"):
        fn = km.mla_prefill_s if cls == "mla_prefill" else km.mla_decode_s
        b, L = np.meshgrid(GRIDS[f"{cls}/batch"], GRIDS[f"{cls}/len"], indexing="ij")
        for k in [k for k in t if k.startswith(f"{chip}/{fw}/{cls}/") and not k.endswith("version")]:
            for hi, h in enumerate(GRIDS["mla/heads"]):
                a = t[k][hi]
                ok = np.isfinite(a)
                errs.append(fn(b[ok], L[ok], h, k.split("/")[-1]) / a[ok] - 1)
    elif cls == "moe":
        tok = np.asarray(GRIDS["moe/tokens"], float)
        for k in [k for k in t if k.startswith(f"{chip}/{fw}/moe/") and k.count("/") == 3 and not k.endswith("version")]:
            for cfg, a in zip(t[k + "/configs"].tolist(), t[k]):
                ok = np.isfinite(a)
                errs.append(km.moe_s(tok[ok], *cfg, k.split("/")[-1]) / a[ok] - 1)
    elif cls == "all_reduce":
        arrs = [t[k] for k in (f"{chip}/nccl/all_reduce", f"{chip}/{fw}/custom_allreduce") if k in t]
        if not arrs:
            return []
        a = np.fmin.reduce(arrs)
        by = np.asarray(GRIDS["comm/bytes"], float)
        for i, n in enumerate(GRIDS["comm/n_gpus"]):
            ok = np.isfinite(a[i])
            errs.append(km.allreduce_s(by[ok], n) / a[i][ok] - 1)
    return np.concatenate(errs) if errs else []


def speed(bench, calls=50):
    """gemm_s calls per CPU-second per backend (batches of ``calls`` calls, --reps batches)."""
    h100 = HardwareSpec(name="h100_sxm", peak_flops_bf16=989.4e12, peak_flops_fp8=1978.9e12, hbm_capacity_bytes=80e9,
                        hbm_bandwidth_bytes_s=3.35e12, scaleup_bandwidth_bytes_s=450e9, kernel_tables="h100_sxm")
    m = np.arange(1, 8193)
    out = {}
    for backend in ("measured", "transfer"):
        km = kernel_model(h100, "trtllm", backend)
        bench.region(f"gemm_s 8192 tokens, {backend}",
                     lambda: [km.gemm_s(m, 4096, 4096, "bf16") for _ in range(calls)], n=calls, unit="calls")
        out[backend] = calls / bench.rows[-1]["cpu_s"]["min"]
    return out


def plot(path, chip="h100_sxm", fw="trtllm"):
    """Measured vs predicted achieved efficiency (fraction of the roofline) on one chip: measured
    grid points (dots), the measured backend (solid) and transfer fitted without that chip (dashed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from engine.cost import shapes

    t = shipped_tables()
    pk = transfer.chip_peaks(t, chip)
    hw = HardwareSpec(name=chip, peak_flops_bf16=pk["bf16"], peak_flops_fp8=pk["fp8"], hbm_capacity_bytes=80e9,
                      hbm_bandwidth_bytes_s=pk["hbm_bandwidth"], scaleup_bandwidth_bytes_s=pk["scaleup_bandwidth"],
                      kernel_tables=chip)
    me = kernel_model(hw, fw, "measured")
    tr = kernel_model(hw, fw, "transfer", exclude=(chip,))
    fig, axs = plt.subplots(2, 2, figsize=(12, 9))
    mg = np.asarray(GRIDS["gemm/m"], float)
    mm = np.unique(np.geomspace(1, 32768, 200).round())
    for ax, dt in zip(axs[0], ("bf16", "fp8")):
        P = transfer.peak(pk, shapes.GEMM_DTYPES[dt][0])
        tab = t[f"{chip}/{fw}/gemm/{dt}"]
        for c, (n, k) in zip(("C0", "C1", "C2"), ((4096, 4096), (16384, 4096), (1024, 8192))):
            j, l = GRIDS["gemm/n"].index(n), GRIDS["gemm/k"].index(k)
            ax.plot(mg, 2 * mg * n * k / tab[:, j, l] / P, "o", color=c, ms=4, label=f"measured n={n} k={k}")
            ax.plot(mm, 2 * mm * n * k / me.gemm_s(mm, n, k, dt) / P, "-", color=c, lw=1)
            ax.plot(mm, 2 * mm * n * k / tr.gemm_s(mm, n, k, dt) / P, "--", color=c, lw=1.5)
        ax.set(xscale="log", xlabel="m (tokens)", ylabel=f"achieved / dense {shapes.GEMM_DTYPES[dt][0]} peak",
               title=f"GEMM {dt}")
        ax.legend(fontsize=7)
        ax.set_ylim(0, 1)
    ax = axs[1, 0]
    cg = np.asarray(GRIDS["attn_decode/len"], float)
    cc = np.geomspace(2, 131072, 200)
    key = f"{chip}/{fw}/attn_decode/bf16/hd128"
    i = t[key + "/combos"].tolist().index([32, 8])
    for c, b in zip(("C0", "C1", "C2", "C3"), (1, 16, 128, 1024)):
        bi = GRIDS["attn_decode/batch"].index(b)
        q = shapes.attn_decode(b, cg, 32, 8, 128, "bf16")[1]
        ax.plot(cg, q / t[key][i][bi] / pk["hbm_bandwidth"], "o", color=c, ms=4, label=f"measured batch {b}")
        qq = shapes.attn_decode(b, cc, 32, 8, 128, "bf16")[1]
        ax.plot(cc, qq / me.attn_decode_s(b, cc, 32, 8, 128, "bf16") / pk["hbm_bandwidth"], "-", color=c, lw=1)
        ax.plot(cc, qq / tr.attn_decode_s(b, cc, 32, 8, 128, "bf16") / pk["hbm_bandwidth"], "--", color=c, lw=1.5)
    ax.set(xscale="log", xlabel="context (tokens)", ylabel="KV bytes / time / HBM bandwidth", ylim=(0, 1.1),
           title="decode attention 32 q / 8 kv heads, hd 128, bf16 KV")
    ax.legend(fontsize=7)
    ax = axs[1, 1]
    sg = np.asarray(GRIDS["attn_prefill/len"], float)
    ss = np.geomspace(1, 16384, 200)
    key = f"{chip}/{fw}/attn_prefill/bf16/hd128"
    i = t[key + "/combos"].tolist().index([32, 8])
    for c, b in zip(("C0", "C1", "C2"), (1, 8, 64)):
        bi = GRIDS["attn_prefill/batch"].index(b)
        f = shapes.attn_prefill(b, sg, 32, 8, 128, "bf16")[0]
        ax.plot(sg, f / t[key][i][bi] / pk["bf16"], "o", color=c, ms=4, label=f"measured batch {b}")
        ff = shapes.attn_prefill(b, ss, 32, 8, 128, "bf16")[0]
        ax.plot(ss, ff / me.attn_prefill_s(b, ss, 32, 8, 128, "bf16") / pk["bf16"], "-", color=c, lw=1)
        ax.plot(ss, ff / tr.attn_prefill_s(b, ss, 32, 8, 128, "bf16") / pk["bf16"], "--", color=c, lw=1.5)
    ax.set(xscale="log", xlabel="prompt length (tokens)", ylabel="causal FLOPs / time / bf16 peak", ylim=(0, 1),
           title="prefill attention 32 q / 8 kv heads, hd 128")
    ax.legend(fontsize=7)
    fig.suptitle(f"{chip} / {fw}: dots = measured grid points, solid = measured backend, "
                 f"dashed = transfer fitted without {chip}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main(argv=None):
    from benchmarks._measure import Bench

    bench = Bench("bench_kernels", __doc__)
    ap = bench.parser
    ap.add_argument("--framework", default="trtllm")
    ap.add_argument("--chips", default="h100_sxm,h200_sxm,b200_sxm")
    ap.add_argument("--plot", help="also write the efficiency figure for h100_sxm to this PNG "
                                   "(docs/kernel_efficiency_h100.png)")
    a = bench.parse_args(argv)
    if a.plot:
        plot(a.plot, fw=a.framework)
    t = shipped_tables()
    print(f"leave-one-chip-out, framework {a.framework}: |predicted/measured - 1| median / p90 (points)")
    print(f"{'held out':10} {'class':13} {'transfer':>17} {'anchored':>17} {'no twin':>17} {'measured':>17} "
          f"{'roofline':>17}")
    for chip in a.chips.split(","):
        c0, t0 = time.process_time(), time.perf_counter()
        fits = transfer.fit_all(t, a.framework, exclude=(chip,))
        fit_s = time.process_time() - c0
        bench.record(f"refit without {chip}", [fit_s], [time.perf_counter() - t0])
        for cls in CLASSES:
            tr, roof = transfer_errors(t, chip, a.framework, fits, cls)
            me = measured_errors(t, chip, a.framework, cls)
            an = anchored_errors(t, chip, a.framework, cls)
            nt = anchored_errors(t, chip, a.framework, cls, exclude=(chip, TWINS.get(chip, chip)))
            if not len(tr) and not len(me):
                continue
            cells = []
            for e in (tr, an, nt, me, roof):
                md, p90, n = _stats(e)
                cells.append(f"{md * 100:5.1f}% /{p90 * 100:6.1f}% ({n:>5})" if n else f"{'-':>17}")
            print(f"{chip:10} {cls:13} " + " ".join(f"{c:>17}" for c in cells))
        anchors = [kernel_model(_hw(t, chip), a.framework, "anchored", exclude=ex).name.split()[2].rstrip(",")
                   for ex in ((chip,), (chip, TWINS.get(chip, chip)))]
        print(f"{chip:10} (refit without it: {fit_s:.2f} CPU-s; anchors: {anchors[0]}, without twin {anchors[1]})")
    sp = speed(bench)
    print(f"gemm_s on an 8192-token array: measured {sp['measured']:,.0f} calls per CPU-s "
          f"({sp['measured'] * 8192:,.0f} GEMM evaluations per CPU-s), transfer {sp['transfer']:,.0f} calls per CPU-s")
    bench.finish()


if __name__ == "__main__":
    main()
