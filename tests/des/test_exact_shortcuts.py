"""The event loop's and the results' shortcuts give what the plain computations give, to the bit:
percentiles from one sort against numpy.percentile; the request table's columns against polars'
public constructor (and neither imports numpy.ma); decode lines proven a block of batch sizes at a
time against one batch size at a time; the ITL histogram split by weight against one weighted
bincount written out here; the count of prefilling sequences against the slot arrays at every plan.
"""

import subprocess
import sys

import numpy as np
import polars as pl
import pytest

from engine.analytical.step import StepModel
from engine.des import DesSpec, simulate
from engine.des.features.power import roof_s
from engine.des.metrics import frame, percentiles
from engine.des.pricing import LINE_BLOCK, _PROBE_CTX, decode_line, line_memo, probe_line, probe_lines
from engine.des.replica import Replica
from engine.des.state import ITL_BINS_PER_DECADE, ITL_LO, State
from engine.des.workload import RequestStream


def test_percentiles_are_numpys_to_the_bit():
    rng = np.random.default_rng(7)
    qs = [50.0, 90.0, 99.0, 99.9, 0.0, 100.0, 37.5]
    for n in [1, 2, 3, 10, 101, 1000, 4097]:
        for scale in (1e-3, 1.0, 1e4):
            v = rng.lognormal(0.0, 2.0, n) * scale
            assert percentiles(v, qs) == [float(np.percentile(v, q)) for q in qs]
            w = np.round(v)                 # ties: equal order statistics
            assert percentiles(w, qs) == [float(np.percentile(w, q)) for q in qs]
    assert all(np.isnan(percentiles(np.zeros(0), [50.0, 99.0])))


def test_table_columns_are_polars_public_ones():
    n = 257
    rng = np.random.default_rng(3)
    f = rng.random(n)
    f[::7] = np.nan                         # NaN stays NaN (not null), as nan_to_null=False
    cols = {"i64": np.arange(n, dtype=np.int64), "f64": f, "i32": np.arange(n, dtype=np.int32),
            "b": f > 0.5, "view": f[::-1]}  # a reversed view: not contiguous
    got = frame(cols)
    want = pl.DataFrame(cols, nan_to_null=False)
    assert got.schema == want.schema
    assert got.equals(want)                 # NaN equal to NaN, dtypes and order the same
    assert got["f64"].null_count() == 0 and got["f64"].is_nan().sum() == int(np.isnan(f).sum())


def test_table_falls_back_when_polars_private_constructor_changes(monkeypatch):
    """A polars whose private typed constructor is called differently: the public path, the
    same columns (compared with pl.DataFrame of the same arrays)."""
    import engine.des.metrics as metrics

    def changed(*args, **kwargs):           # a constructor with another signature
        raise TypeError("numpy_type_to_constructor() takes 1 positional argument")

    monkeypatch.setattr(metrics, "_numpy_constructor", changed)
    cols = {"i64": np.arange(5, dtype=np.int64), "f64": np.array([0.5, np.nan, 2.0, 3.0, 4.0])}
    got = frame(cols)
    assert got.equals(pl.DataFrame(cols, nan_to_null=False))
    assert got["f64"].null_count() == 0


def test_results_do_not_import_numpy_ma():
    # polars' numpy path and numpy.percentile both import numpy.ma (~0.01 CPU-s on first use)
    code = ("import sys, numpy as np; from engine.des.metrics import frame, percentiles; "
            "frame({'a': np.arange(5.0), 'b': np.arange(5)}); percentiles(np.arange(9.0), [50.0, 99.0]); "
            "print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("framework", ["generic", "vllm_v1"])
def test_lines_by_block_are_the_lines_one_by_one(framework):
    from tests.fixtures import specs
    sm = StepModel.from_specs(specs(framework=framework))
    f_time = lambda B, P: sm.time(B, B, decode_seqs=B, decode_ctx=P)  # noqa: E731
    f_roof = lambda B, P: roof_s(sm, B, B, 0.0, 0.0, sm.decode_positions(B, P), B)  # noqa: E731
    for lo in (1, 1 + LINE_BLOCK):
        block = probe_lines(f_time, lo, LINE_BLOCK)
        roofs = probe_lines(f_roof, lo, LINE_BLOCK)
        for i, B in enumerate(range(lo, lo + LINE_BLOCK)):
            assert block[i] == decode_line(sm, B)
            one = probe_line(lambda P: np.asarray(roof_s(sm, float(B), float(B), 0.0, 0.0,
                                                         sm.decode_positions(float(B), P), float(B))),
                             float(B))
            assert roofs[i] == one
        a, b, pmax = block[0]                 # the line itself, against the step model at its probes
        P = np.array([0.25, 0.5, 1.0]) * pmax
        assert np.allclose(a + b * P, [sm.time(float(lo), float(lo), decode_seqs=float(lo), decode_ctx=x)
                                       for x in P], rtol=1e-9, atol=0.0)
    get = line_memo(f_time)
    assert get(70) == decode_line(sm, 70) and get(3) == decode_line(sm, 3)


def test_probe_lines_says_none_off_the_line():
    # a function with a kink inside the probes is not a line: None, as probe_line says
    f = lambda B, P: np.maximum(P, 1000.0 * B)  # noqa: E731
    got = probe_lines(f, 1, 4)
    assert got == [probe_line(lambda P, B=B: np.maximum(P, 1000.0 * B), float(B)) for B in range(1, 5)]
    assert got == [None] * 4
    assert probe_lines(lambda B, P: 2.0 + 0.5 * P, 5, 2) == [(2.0, 0.5, float(B * _PROBE_CTX[-1])) for B in (5, 6)]


def test_itl_histogram_is_the_weighted_bincount():
    n = 4
    st = State(RequestStream(arrival_s=np.zeros(n), prompt=np.full(n, 8), output=np.full(n, 8),
                             priority=np.zeros(n, np.int8)))
    rng = np.random.default_rng(11)
    vals, wts = [], []
    for i in range(300):
        v = rng.lognormal(-4.0, 1.5, int(rng.integers(1, 40)))
        if i % 17 == 0:
            v[0] = 0.0                      # a zero gap is left out
        w = 1.0 if i % 3 else float(rng.integers(2, 64))
        st.add_itl(v.copy(), w)
        vals.append(v)
        wts.append(np.full(len(v), w))
    st.flush_itl()
    v, w = np.concatenate(vals), np.concatenate(wts)
    keep = v > 0
    idx = np.clip(((np.log10(v[keep]) - ITL_LO) * ITL_BINS_PER_DECADE).astype(np.int64), 0,
                  len(st.itl_hist) - 1)
    want = np.bincount(idx, weights=w[keep], minlength=len(st.itl_hist))
    assert np.array_equal(st.itl_hist, want)


def test_prefilling_count_follows_the_slots(base_specs, specs_with, monkeypatch):
    # small chunks (prompts prefilled over several iterations) and a small KV pool (preemption):
    # before every plan the count equals the sequences whose pf > 0
    seen = []
    plan = Replica.plan

    def checked(rep, t):
        seen.append((rep.n_prefill, int(np.count_nonzero(rep.pf[:rep.n]))))
        return plan(rep, t)

    monkeypatch.setattr(Replica, "plan", checked)
    specs = specs_with(prompt_len=700, output_len=200, num_requests=120, arrival="poisson", rate_rps=20.0,
                       prompt_dist={"kind": "lognormal", "sigma": 0.6, "high": 4000})
    s = simulate(specs, DesSpec(scheduling=dict(scheduler="sarathi", chunk_size=256,
                                                max_num_batched_tokens=256),
                                kv=dict(num_kv_blocks=400))).result.summary
    assert s["preemptions_total"] > 0       # slots left mid-run, some of them mid-prefill
    assert seen and all(a == b for a, b in seen)
    assert any(a > 0 for a, _ in seen)
