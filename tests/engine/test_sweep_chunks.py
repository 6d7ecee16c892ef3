"""Chunked sweeps: evaluating a grid a few points at a time changes no number.

The reference is computed here independently of the chunking code: the whole cartesian product
built with np.meshgrid (row-major, "ij") and evaluated in one ``evaluate`` call, which is what
``sweep`` did before it chunked. Chunk sizes are primes that do not divide the grid, so the last
chunk is partial and chunks cut across every axis.
"""

import numpy as np
import polars as pl
from polars.testing import assert_frame_equal

from engine.analytical import pareto, sweep
from engine.analytical.pipeline import evaluate
from engine.spec import CalibrationSpec, HardwareSpec, ModelSpec, PartitionSpec, Specs, WorkloadSpec


def _specs(moe=False):
    hw = HardwareSpec(name="h100_sxm", peak_flops_bf16=989.4e12, hbm_capacity_bytes=80e9,
                      hbm_bandwidth_bytes_s=3.35e12, scaleup_bandwidth_bytes_s=450e9,
                      scaleup_latency_s=2e-6, scaleout_bandwidth_bytes_s=50e9, devices_per_node=8)
    extra = dict(num_experts=8, experts_per_token=2, expert_ffn_size=14336) if moe else {}
    m = ModelSpec(name="m", num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8,
                  head_dim=128, ffn_size=14336, vocab_size=128256, **extra)
    return Specs(hw, m, PartitionSpec(tp=1), WorkloadSpec(prompt_len=512, output_len=128, batch_size=16),
                 CalibrationSpec(0.88, 0.85, 0.75, 2e9, 0.9))


def test_grid_sweep_chunked_equals_one_meshgrid_pass():
    s = _specs()
    axes = dict(batch_size=np.arange(1, 31), prompt_len=[128, 2048], output_len=[1, 2, 500],
                hbm_bandwidth_bytes_s=[2e12, 8e12], tp=[1, 2, 4])
    names = list(axes)
    mesh = np.meshgrid(*[np.asarray(axes[a], dtype=float) for a in names], indexing="ij")
    res = evaluate(s, **{a: m.reshape(-1) for a, m in zip(names, mesh)})
    n = mesh[0].size
    ref = pl.DataFrame({k: np.broadcast_to(np.asarray(v), (n,)) for k, v in res.items()})
    for step in (10**9, 97, 29):
        got = sweep(s, points_per_pass=step, **axes)
        assert_frame_equal(got, ref)
    assert ref.height == 30 * 2 * 3 * 2 * 3


def test_pareto_sweep_chunked_equals_one_pass():
    s = _specs(moe=True)
    one = pareto.sweep(s, 16, list(range(1, 17)), [0, 512], max_sp=16, points_per_pass=10**9)
    for step in (1009, 13):
        table, front, dropped = pareto.sweep(s, 16, list(range(1, 17)), [0, 512], max_sp=16,
                                             points_per_pass=step)
        assert_frame_equal(table, one[0])
        assert_frame_equal(front, one[1])
        assert dropped == one[2]
    assert one[0].height > 500 and one[1].height > 3


def test_evaluate_fitting_counts_the_points_that_do_not_fit():
    s = _specs()
    axes, _ = pareto.grid(s, 8, [1, 64, 4096], [0])
    frame, unfit = pareto.evaluate_fitting(s, axes, ["tpot_ms"], points_per_pass=5)
    fits = np.broadcast_to(evaluate(s, lean=True, **axes)["fits_in_memory"], axes["tp"].shape)
    assert unfit == int((~fits).sum()) > 0
    assert frame.height == int(fits.sum())


def test_grid_sweep_streamed_to_parquet_parts_equals_in_memory(tmp_path):
    """``out=DIR`` writes one parquet part per chunk and returns a LazyFrame of them: collected, it
    equals the in-memory sweep row for row (reference: the one-pass sweep above); a 2-metric
    ``columns=`` sweep equals the same columns selected from the full frame."""
    s = _specs()
    axes = dict(batch_size=np.arange(1, 41), prompt_len=[128, 2048, 8192], tp=[1, 2])
    ref = sweep(s, points_per_pass=10**9, **axes)
    lazy = sweep(s, points_per_pass=37, out=tmp_path / "grid", **axes)
    assert len(list((tmp_path / "grid").glob("part-*.parquet"))) == -(-ref.height // 37) == 7
    assert not (tmp_path / "grid.partial").exists()
    assert_frame_equal(lazy.collect(), ref)
    narrow = sweep(s, points_per_pass=37, columns=["tpot_ms", "ttft_ms"], **axes)
    assert narrow.columns == ["batch_size", "prompt_len", "tp", "ttft_ms", "tpot_ms"]
    assert_frame_equal(narrow, ref.select(narrow.columns))


def test_grid_sweep_bad_input_and_interrupted_stream_leave_nothing(tmp_path, monkeypatch):
    """An unknown column is named; an existing ``out`` is refused; a sweep that fails half-way
    leaves neither ``out`` nor its ``.partial`` directory."""
    import importlib

    import pytest

    run_mod = importlib.import_module("engine.analytical.run")   # the package's `run` is the function

    s = _specs()
    with pytest.raises(ValueError, match=r"columns=\['tpot'\]"):
        sweep(s, columns=["tpot"], batch_size=[1, 2])
    (tmp_path / "taken").mkdir()
    with pytest.raises(ValueError, match="exists"):
        sweep(s, out=tmp_path / "taken", batch_size=[1, 2])
    calls = {"n": 0}
    real = run_mod.evaluate

    def failing(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("disk full")
        return real(*a, **k)

    monkeypatch.setattr(run_mod, "evaluate", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        sweep(s, points_per_pass=3, out=tmp_path / "g", batch_size=np.arange(1, 10))
    assert not (tmp_path / "g").exists() and not (tmp_path / "g.partial").exists()
