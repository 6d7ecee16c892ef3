"""Sweeps evaluated once per pass and streamed above a size: the same numbers as the plain path.

References are computed here without the sweep's shortcuts: the Pareto table from one full
``evaluate`` over the whole grid (its own StepModel, every column, the roofline's decode pass
evaluated by ``decode.tpot`` itself) with the partition labels from ``pareto.label``'s polars
expression; the frontier by a brute-force pairwise definition; a streamed grid sweep against the
in-memory one.
"""

import tempfile
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from engine.analytical import decode, pareto, step, sweep
from engine.analytical.pipeline import evaluate
from engine.errors import SpecError
from engine.spec import AnalyticalSpec
from tests.engine.test_sweep_chunks import _specs

KEEP = ["tp", "pp", "ep", "sp", "dp", "batch_size", "prefill_chunk", "ttft_ms", "tpot_ms",
        "throughput_tok_s_per_gpu", "decode_throughput_tok_s_per_gpu",
        "interactivity_tok_s_per_user", "weights_gb", "kv_cache_gb", "decode_bound"]


def _kernel_specs():
    """The llama-3.1-8B on H100 job priced by the shipped measured vLLM V1 kernel tables."""
    from runner.compose import compose_specs
    return compose_specs(["model=llama_3_1_8b", "hardware=h100_sxm", "framework=vllm_v1",
                          "calibration.cost.backend=measured", "tracking=none"])


def _reference_table(s, devices, batches, chunks, max_sp):
    axes, _ = pareto.grid(s, devices, batches, chunks, max_sp=max_sp)
    res = evaluate(s, **axes)          # one pass, every column, its own StepModel
    n = axes["tp"].size
    fits = np.broadcast_to(res["fits_in_memory"], (n,))
    df = pl.DataFrame({k: np.broadcast_to(np.asarray(res[k]), (n,))[fits] for k in KEEP})
    return df.with_columns(pareto.label(s).alias("partition"))


@pytest.mark.parametrize("which", ["moe_roofline", "dense_kernels"])
def test_pareto_table_equals_one_full_evaluate(which):
    s = _specs(moe=True) if which == "moe_roofline" else _kernel_specs()
    devices = 16 if which == "moe_roofline" else 8
    table, front, dropped = pareto.sweep(s, devices, [1, 3, 16, 64, 300], [0, 512], max_sp=4,
                                         points_per_pass=97)
    ref = _reference_table(s, devices, [1, 3, 16, 64, 300], [0, 512], 4)
    assert_frame_equal(table.drop("on_frontier"), ref)
    assert table.height > 50 and set(table["decode_bound"].unique()) <= {"compute", "memory", "comm"}


def test_kernel_priced_bound_columns_are_the_roofline_pass():
    """Under kernel pricing the decode bound columns are the roofline's decode cycle: equal to
    ``decode.tpot`` on the same StepModel without its kernel tables, and the times to the kernel
    pass (not the roofline's)."""
    s = _kernel_specs()
    B, S, N = np.array([1.0, 8, 64, 256]), 2048.0, 256.0
    res = evaluate(s, batch_size=B, prompt_len=S, output_len=N)
    sm = step.build(s, 1.0, 1.0, 1.0, 1.0)
    assert sm.kern is not None
    roof = decode.tpot(replace(sm, kern=None), s.model, B, S, N, 1.0, 0)
    for k in ("compute", "memory", "comm"):
        assert np.array_equal(res[f"decode_{k}_ms"], roof[f"{k}_s"] * 1e3)
    cmp, mem, com = roof["compute_s"], roof["memory_s"], roof["comm_s"]
    want = np.where(com > np.maximum(cmp, mem), "comm", np.where(cmp >= mem, "compute", "memory"))
    assert res["decode_bound"].tolist() == want.tolist()
    kern = decode.tpot(sm, s.model, B, S, N, 1.0, 0)["tpot_s"]
    fit = res["fits_in_memory"]
    assert 2 <= fit.sum() < 4          # the 256-sequence batch does not fit: NaN there
    assert np.allclose(res["tpot_ms"][fit], kern[fit] * 1e3, rtol=1e-12)
    assert not np.allclose(kern, roof["tpot_s"], rtol=1e-3)


def test_step_model_take_equals_a_build_over_the_points():
    s = _kernel_specs()
    tp, ep, sp = np.array([1.0, 2, 4, 8]), np.ones(4), np.array([1.0, 1, 2, 1])
    idx = np.array([3, 0, 0, 2, 1, 3, 2])
    once = step.build(s, tp, np.ones(4), ep, sp).take(idx)
    each = step.build(s, tp[idx], np.ones(7), ep[idx], sp[idx])
    for k, v in each.__dict__.items():
        if k == "kern":
            continue
        assert np.array_equal(np.asarray(getattr(once, k), dtype=object), np.asarray(v, dtype=object)), k
    T = np.array([1.0, 7, 64, 300, 5000, 2e5, 9e6])
    for curve in ("dense", "lm_head", "experts", "comm"):
        assert np.array_equal(getattr(once.kern, curve)(T), getattr(each.kern, curve)(T)), curve
    for a in ("att_pf", "att_pt", "att_pp", "att_df", "att_ds", "att_dp"):
        assert np.array_equal(getattr(once.kern, a), getattr(each.kern, a)), a


def _frontier_brute(x, y):
    """p is kept iff no finite q comes before it in (x desc, y desc, index asc) order with y_q >= y_p."""
    ok = np.isfinite(x) & np.isfinite(y)
    i = np.arange(x.size)
    xq, xp, yq, yp = x[:, None], x[None, :], y[:, None], y[None, :]
    before = (xq > xp) | ((xq == xp) & (yq > yp)) | ((xq == xp) & (yq == yp) & (i[:, None] < i[None, :]))
    beaten = (before & (yq >= yp) & ok[:, None]).any(axis=0)
    return ok & ~beaten


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_frontier_mask_with_pruning_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 6000                            # above the pruning threshold
    assert n > pareto._PRUNE_ABOVE
    if seed == 0:        # heavy ties
        x, y = rng.integers(0, 40, n).astype(float), rng.integers(0, 40, n).astype(float)
    else:                # a trade-off cloud with NaNs
        x = rng.random(n)
        y = rng.random(n) * (1.2 - x)
        x[::11] = np.nan
    got = pareto.frontier_mask(x, y)
    assert got.tolist() == _frontier_brute(x, y).tolist()
    assert 1 <= got.sum() < 200


def test_grid_sweep_streams_above_the_configured_size(tmp_path, monkeypatch):
    """Above ``engine.analytical.sweep_stream_mb`` of result the sweep writes parquet parts in a new
    temporary folder and returns their LazyFrame, equal row for row to the in-memory frame;
    below it (or with 0) a DataFrame."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    s = _specs()
    axes = dict(batch_size=np.arange(1, 51), prompt_len=[128, 2048, 8192], tp=[1, 2])
    ref = sweep(s, stream_mb=0, **axes)
    assert isinstance(ref, pl.DataFrame) and ref.height == 300
    assert isinstance(sweep(s, **axes), pl.DataFrame)              # 256 MB default: in memory
    small = replace(s, analytical=replace(s.analytical, sweep_stream_mb=0.05))
    mb = ref.estimated_size() / 1e6
    assert 0.05 < mb < 256
    lazy = sweep(small, points_per_pass=64, **axes)
    assert isinstance(lazy, pl.LazyFrame)
    parts = sorted(tmp_path.glob("simllm-sweep-*/grid/part-*.parquet"))
    assert len(parts) == -(-300 // 64) == 5
    assert_frame_equal(lazy.collect(), ref)
    assert isinstance(sweep(small, stream_mb=0, **axes), pl.DataFrame)     # the argument wins
    assert isinstance(sweep(s, stream_mb=mb / 2, **axes), pl.LazyFrame)


def test_sweep_stream_mb_must_not_be_negative():
    with pytest.raises(SpecError, match=r"engine.analytical.sweep_stream_mb.*-1.*MB >= 0"):
        AnalyticalSpec(sweep_stream_mb=-1)
