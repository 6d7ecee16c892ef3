"""Request streams: seeded synthetic draws, closed loop, and every shared trace by name."""

import json
from pathlib import Path

import numpy as np
import pytest

from engine.des.workload import build_stream
from engine.errors import SpecError
from engine.spec import WorkloadSpec
from runner.convert import TRACE_DIRS, _resolve_trace
from tests.conftest import SHARED_DATA

TRACES = SHARED_DATA / "traces"
NO_TRACES = f"external data {TRACES} not present (../shared/data or $SIMLLM_SHARED_DATA)"


def _wl(**kw):
    kw.setdefault("prompt_len", 512)
    kw.setdefault("output_len", 128)
    return WorkloadSpec(**kw)


def test_seeded_and_reproducible():
    a = build_stream(_wl(num_requests=500, arrival="poisson", rate_rps=4.0,
                         prompt_dist={"kind": "lognormal", "sigma": 0.8}, seed=7))
    b = build_stream(_wl(num_requests=500, arrival="poisson", rate_rps=4.0,
                         prompt_dist={"kind": "lognormal", "sigma": 0.8}, seed=7))
    c = build_stream(_wl(num_requests=500, arrival="poisson", rate_rps=4.0,
                         prompt_dist={"kind": "lognormal", "sigma": 0.8}, seed=8))
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.prompt, b.prompt)
    assert not np.array_equal(a.prompt, c.prompt)
    # lengths come from their own sub-stream: changing the arrival process keeps them
    d = build_stream(_wl(num_requests=500, arrival="gamma", rate_rps=4.0, arrival_cv=3.0,
                         prompt_dist={"kind": "lognormal", "sigma": 0.8}, seed=7))
    assert np.array_equal(a.prompt, d.prompt)


def test_arrival_processes_have_their_rate_and_burstiness():
    # Poisson: mean gap 1/rate, CV 1; gamma cv=3: CV 3. 20k gaps: sampling error of the mean ~0.7 %,
    # of the CV a few %.
    p = build_stream(_wl(num_requests=20000, arrival="poisson", rate_rps=5.0))
    g = build_stream(_wl(num_requests=20000, arrival="gamma", rate_rps=5.0, arrival_cv=3.0))
    gp, gg = np.diff(p.arrival_s), np.diff(g.arrival_s)
    assert gp.mean() == pytest.approx(0.2, rel=0.03) and gp.std() / gp.mean() == pytest.approx(1, rel=0.05)
    assert gg.mean() == pytest.approx(0.2, rel=0.08) and gg.std() / gg.mean() == pytest.approx(3, rel=0.15)
    assert p.arrival_s[0] == 0.0


def test_length_distributions():
    n = 20000
    ln = build_stream(_wl(num_requests=n, prompt_len=1000, prompt_dist={"kind": "lognormal", "sigma": 0.5}))
    assert ln.prompt.mean() == pytest.approx(1000, rel=0.02)       # E[lognormal] = exp(mu + s^2/2)
    un = build_stream(_wl(num_requests=n, prompt_dist={"kind": "uniform", "low": 100, "high": 300}))
    assert un.prompt.min() >= 100 and un.prompt.max() <= 300 and un.prompt.mean() == pytest.approx(200, rel=0.02)
    zf = build_stream(_wl(num_requests=n, prompt_dist={"kind": "zipf", "low": 10, "high": 100, "zipf_a": 1.5}))
    assert zf.prompt.min() == 10 and zf.prompt.max() <= 100 and (zf.prompt == 10).mean() > 0.3
    em = build_stream(_wl(num_requests=n, output_dist={"kind": "empirical", "values": [3, 5]}))
    assert set(np.unique(em.output)) == {3, 5}
    fx = build_stream(_wl(num_requests=10))
    assert (fx.prompt == 512).all() and (fx.output == 128).all()


def test_closed_loop_stream():
    s = build_stream(_wl(arrival="closed_loop", concurrency=4, num_requests=10))
    assert s.users == 4 and (s.arrival_s[:4] == 0).all() and np.isnan(s.arrival_s[4:]).all()


def test_bad_workload_names_field():
    with pytest.raises(SpecError, match="workload.rate_rps"):
        _wl(arrival="poisson")
    with pytest.raises(SpecError, match="workload.prompt_dist.kind"):
        _wl(prompt_dist={"kind": "bimodal"})


def _stats():
    return json.loads((TRACES / "STATS.json").read_text())


@pytest.mark.skipif(not TRACES.is_dir(), reason=NO_TRACES)
@pytest.mark.parametrize("name,rows,timed,hashes", [
    ("azure2023_code.csv", 8819, True, False),
    ("azure2023_conv.csv", 19366, True, False),
    ("vidur_splitwise_code.csv", 8819, True, False),
    ("vidur_splitwise_conv.csv", 19366, True, False),
    ("mooncake_fast25_conversation_trace.jsonl", 12031, True, True),
    ("mooncake_fast25_synthetic_trace.jsonl", 3993, True, True),
    ("vidur_arxiv_summarization_llama2tok_filtered_v2.csv", 28257, False, False),
    ("etalon_bwb_llama2tok_filtered_v2.csv", 33768, False, False),
    ("sarathi_sharegpt_8k_filtered_llama2tok.csv", 30731, False, False),
])
def test_shared_traces_load_by_name(name, rows, timed, hashes):
    # Row counts and spans from ../shared/data/traces/README.md.
    wl = _resolve_trace({"prompt_len": 512, "output_len": 128, "trace": {"path": name},
                         "arrival": "trace" if timed else "poisson", "rate_rps": 0.0 if timed else 1.0})
    s = build_stream(WorkloadSpec(**wl))
    assert len(s) == rows
    assert (s.prompt > 0).all() and (s.output > 0).all()
    if timed:
        assert s.arrival_s[0] == 0 and np.all(np.diff(s.arrival_s) >= 0)
        span = {"azure2023_code.csv": 3436, "azure2023_conv.csv": 3502}.get(name)
        if span:
            assert s.arrival_s[-1] == pytest.approx(span, abs=1.0)
    assert (s.hashes is not None) == hashes
    if hashes:   # len(hash_ids) == ceil(input / 512) for every row (README)
        assert all(len(h) == -(-p // 512) for h, p in zip(s.hashes, s.prompt))


def test_shipped_traces_and_tiling():
    shipped = TRACE_DIRS[1]
    assert (shipped / "azure_conv_2k.csv").is_file() and (shipped / "README.md").is_file()
    wl = _resolve_trace({"prompt_len": 512, "output_len": 128, "arrival": "trace",
                         "trace": {"path": "azure_conv_2k.csv"}, "num_requests": 5000})
    s = build_stream(WorkloadSpec(**wl))
    # 2,000 rows tiled 2.5 times; each repeat starts one mean gap after the previous ends
    assert len(s) == 5000 and np.array_equal(s.prompt[:2000], s.prompt[2000:4000])
    span = s.arrival_s[1999]
    assert s.arrival_s[2000] == pytest.approx(span + span / 1999)
    assert np.all(np.diff(s.arrival_s) >= 0)
    # rate rescaling: mean rate (n-1)/span becomes rate_rps
    wl2 = dict(wl, num_requests=0, rate_rps=10.0)
    s2 = build_stream(WorkloadSpec(**wl2))
    assert (len(s2) - 1) / s2.arrival_s[-1] == pytest.approx(10.0)
    assert Path(s2.source).name == "azure_conv_2k.csv"


def test_parquet_and_json_with_a_column_mapping(tmp_path):
    # Custom column names and units: t in ms, lengths "in"/"out"; the same rows as Parquet,
    # a JSON array and JSON Lines give the same stream (arrivals in s since the first row).
    import polars as pl

    df = pl.DataFrame({"t": [1000, 1500, 4000], "in": [10, 20, 30], "out": [5, 6, 7]})
    df.write_parquet(tmp_path / "tr.parquet")
    df.write_json(tmp_path / "tr.json")
    df.write_ndjson(tmp_path / "tr.jsonl")
    for name in ("tr.parquet", "tr.json", "tr.jsonl"):
        s = build_stream(_wl(arrival="trace", trace={
            "path": str(tmp_path / name), "arrival_column": "t", "prompt_column": "in",
            "output_column": "out", "time_unit": "ms"}))
        assert s.arrival_s.tolist() == [0.0, 0.5, 3.0], name
        assert s.prompt.tolist() == [10, 20, 30] and s.output.tolist() == [5, 6, 7]
    with pytest.raises(SpecError, match="workload.trace.prompt_column"):
        build_stream(_wl(trace={"path": str(tmp_path / "tr.parquet"), "prompt_column": "nope",
                                "output_column": "out"}))
    with pytest.raises(SpecError, match="workload.trace.path"):
        build_stream(_wl(trace={"path": str(tmp_path / "missing.csv")}))


@pytest.mark.skipif(not TRACES.is_dir(), reason=NO_TRACES)
def test_lengths_only_trace_needs_a_synthetic_arrival():
    wl = _resolve_trace({"prompt_len": 512, "output_len": 128, "arrival": "trace",
                         "trace": {"path": "sarathi_sharegpt_8k_filtered_llama2tok.csv"}})
    with pytest.raises(SpecError, match="workload.arrival"):
        build_stream(WorkloadSpec(**wl))


def test_one_arrivals_generator():
    """``arrivals`` is the draw every caller shares: Poisson with integer seed s is exactly
    numpy's exponential gaps from default_rng(s) with the first gap dropped (the draw
    simllm-validate always made), gamma gaps have mean 1/rate and cv as asked (sample moments of
    20 000 gaps, standard error ~1 %), closed loop starts ``users`` requests at 0."""
    from engine.des.workload import arrivals

    g = np.random.default_rng(1).exponential(1 / 5.0, size=50)
    g[0] = 0.0
    assert np.array_equal(arrivals("poisson", 50, 5.0, rng=1), np.cumsum(g))
    gaps = np.diff(arrivals("gamma", 20_001, 4.0, cv=2.0, rng=3))
    assert gaps.mean() == pytest.approx(0.25, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.05)
    cl = arrivals("closed_loop", 10, users=4)
    assert np.array_equal(cl[:4], np.zeros(4)) and np.isnan(cl[4:]).all()
    assert np.array_equal(arrivals("batch", 3), np.zeros(3))
    with pytest.raises(SpecError):
        arrivals("poisson", 3, 0.0)
