"""Cluster-scale DES features, continued: request classes with their own lengths/priorities/SLOs, end-to-end
deadlines that abort running requests, preemption decisions and head-of-line blocked time, the
gateway prefix index that forgets evicted blocks, the ServeGen importer. Expected numbers are
derived by hand in each test (counts, event order, block arithmetic)."""

from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from engine.des import simulate
from engine.des.workload.sessions import apply_classes
from engine.des.workload import RequestStream
from engine.errors import SpecError
from engine.spec import DesSpec


def _stream(arrival, prompt, output, block_tokens=16, hashes=None):
    n = len(prompt)
    return RequestStream(arrival_s=np.asarray(arrival, float), prompt=np.asarray(prompt, np.int64),
                         output=np.asarray(output, np.int64), priority=np.ones(n, np.int8),
                         block_tokens=block_tokens, hashes=hashes)


# ------------------------------------------------------------------ 1. request classes
def test_classes_split_by_share_draw_their_own_lengths_and_keep_the_poisson_rate():
    n, R = 20_000, 10.0
    arr = np.cumsum(np.random.default_rng(5).exponential(1 / R, n))
    st = _stream(arr, np.full(n, 512), np.full(n, 128))
    des = DesSpec(clients=dict(classes=({"name": "chat", "share": 0.3, "prompt_len": 300, "priority": 0},
                           {"name": "batch", "share": 0.7, "output_len": 1000, "priority": 2,
                            "output_dist": {"kind": "uniform", "low": 500}})))
    out = apply_classes(st, des)
    chat, bat = out.klass == 0, out.klass == 1
    # binomial count: mean 0.3 n = 6000, sd sqrt(n 0.3 0.7) = 64.8; 5 sd
    assert abs(chat.sum() - 6000) < 5 * 64.8
    assert (out.prompt[chat] == 300).all() and (out.output[chat] == 128).all()     # fixed at 300
    assert (out.prompt[bat] == 512).all()                                           # stream's own
    # uniform on [500, 2 x 1000 - 500 = 1500]: mean 1000, inside the bounds
    assert out.output[bat].min() >= 500 and out.output[bat].max() <= 1500
    assert out.output[bat].mean() == pytest.approx(1000, rel=0.01)
    assert set(out.priority[chat]) == {0} and set(out.priority[bat]) == {2}
    # thinning a Poisson stream of rate R by independent marks: the chat class is Poisson at 0.3 R
    g = np.diff(out.arrival_s[chat])
    assert g.mean() == pytest.approx(1 / (0.3 * R), rel=0.03)
    assert g.std() / g.mean() == pytest.approx(1.0, rel=0.05)
    assert apply_classes(st, DesSpec()) is st           # no classes: the stream as it was


def test_class_filters_take_trace_rows_first_then_shares_take_the_rest():
    st = _stream(np.arange(6.0), [100, 3000, 500, 5000, 2048, 90], [10, 10, 900, 10, 10, 10])
    des = DesSpec(clients=dict(classes=({"name": "long", "filter": "prompt_len >= 2048"},
                           {"name": "gen", "filter": "output_len > 500 & prompt_len < 2048"},
                           {"name": "rest", "share": 1.0})))
    out = apply_classes(st, des)
    assert out.klass.tolist() == [2, 0, 1, 0, 0, 2]
    assert out.prompt.tolist() == st.prompt.tolist()    # a filter class keeps the row's lengths
    with pytest.raises(SpecError, match="match none"):
        apply_classes(st, des.with_(clients=dict(classes=des.clients.classes[:2])))
    # a trace's other columns: "client == 7 & prompt_len < 1000" picks rows 0 and 5 only
    st = replace(st, columns={"client": np.array([7.0, 7, 3, 7, 3, 7])})
    out = apply_classes(st, DesSpec(clients=dict(classes=({"name": "c7", "filter": "client == 7 & prompt_len < 1000"},
                                             {"name": "rest", "share": 1.0}))))
    assert out.klass.tolist() == [0, 1, 1, 1, 1, 0]
    with pytest.raises(SpecError, match="no 'tenant'"):
        apply_classes(st, DesSpec(clients=dict(classes=({"filter": "tenant == 1"}, {"share": 1.0}))))


def test_per_class_results_use_the_class_slos_and_names(specs_with):
    specs = specs_with(arrival="poisson", rate_rps=5.0, num_requests=300)
    des = DesSpec(clients=dict(classes=({"name": "tight", "share": 0.5, "slo_ttft_ms": 1e-6},
                           {"name": "loose", "share": 0.5, "slo_ttft_ms": 1e9, "slo_tpot_ms": 1e9})))
    s = simulate(specs, des).result.summary
    # a TTFT of at least one prefill never meets 1 ns; every completed request meets 1e9 ms
    assert s["class_tight_slo_attainment"] == 0.0 and s["class_loose_slo_attainment"] == 1.0
    assert s["class_tight_requests"] + s["class_loose_requests"] == 300
    assert s["fairness_jain"] == pytest.approx(0.5)      # (0 + 1)^2 / (2 (0 + 1))
    assert s["slo_attainment_classes"] == pytest.approx(s["class_loose_requests"] / 300)


@pytest.mark.parametrize("cls, field", [({"share": 0.5}, "classes"), ({"share": 1.0, "bogus": 1}, "classes"),
                                        ({"filter": "prompt >> 3"}, "filter"),
                                        ({"share": 1.0, "name": "a-b"}, "name")])
def test_bad_classes_name_the_field(cls, field):
    with pytest.raises(SpecError, match=field):
        DesSpec(clients=dict(classes=(cls,)))


def test_classes_refuse_a_workload_priority_fraction(specs_with):
    specs = specs_with(arrival="poisson", rate_rps=5.0, num_requests=50, priority_fraction=0.3)
    with pytest.raises(SpecError, match="priority_fraction"):
        simulate(specs, DesSpec(clients=dict(classes=({"share": 1.0},))))


# -------------------------------------------------------- 2. deadlines abort running requests
def test_a_deadline_aborts_running_requests_and_frees_their_slot(base_specs):
    # max_num_seqs = 2: two 5000-token generations hold both slots; the third request (t = 0.1 s)
    # waits for a slot. Their class deadline (5 s) aborts both after the decode step in progress
    # at t = 5 s, so the third is admitted then; without the deadline it waits for thousands of
    # decode steps (> 5000 x the step time)
    st = _stream([0.0, 0.0, 0.1], [16, 16, 16], [5000, 5000, 10])
    cl = ({"name": "long", "filter": "output_len > 1000", "deadline_s": 5.0}, {"name": "short", "share": 1.0})
    des = DesSpec(scheduling=dict(max_num_seqs=2), clients=dict(classes=cl), outputs=dict(record_decisions=True))
    r = simulate(base_specs, des, stream=st)
    s, t = r.result.summary, r.result.table
    assert s["cancelled"] == 2 and s["cancelled_running"] == 2 and s["cancelled_queued"] == 0
    assert s["class_long_cancelled"] == 2 and s["class_short_cancelled"] == 0
    assert np.isnan(t["completion_s"][0]) and np.isnan(t["completion_s"][1])
    sched2 = t["scheduled_s"][2]
    step = (t["first_token_s"][2] - sched2)        # about one iteration
    assert 5.0 <= sched2 <= 5.0 + 0.1 and step < 0.1
    emitted = r.state.emitted[:2]
    assert (emitted > 0).all() and (emitted < 5000).all()
    dec = r.result.frames["decisions"].filter(pl.col("decision") == "abort_running")
    assert sorted(dec["request_id"].to_list()) == [0, 1] and (dec["t_s"] >= 5.0).all()
    plain = simulate(base_specs, des.with_(clients=dict(classes=(cl[0] | {"deadline_s": 0.0}, cl[1]))), stream=st)
    assert plain.result.summary["cancelled"] == 0
    assert plain.result.table["scheduled_s"][2] > sched2 + 10.0


def test_a_deadline_in_the_queue_counts_as_queued(base_specs):
    # one slot: request 1 (arrives at 0) waits behind a 5000-token generation; deadline 1 s
    st = _stream([0.0, 0.0], [16, 16], [5000, 10])
    r = simulate(base_specs, DesSpec(scheduling=dict(max_num_seqs=1), cluster=dict(deadline_s=1.0)), stream=st).result.summary
    # request 0 is aborted while running (at >= 1 s), request 1 leaves the queue at 1 s
    assert r["cancelled"] == 2 and r["cancelled_running"] == 1 and r["cancelled_queued"] == 1


# ------------------------------------------- 3. preemption decisions, head-of-line blocked time
def test_preemptions_are_in_the_decision_trace_with_their_signals(specs_with):
    specs = specs_with(arrival="poisson", rate_rps=30.0, num_requests=400, prompt_len=512, output_len=512)
    r = simulate(specs, DesSpec(kv=dict(num_kv_blocks=1500), outputs=dict(record_decisions=True))).result
    s, t = r.summary, r.table
    pre = r.frames["decisions"].filter(pl.col("decision") == "preempt")
    assert s["preemptions_total"] > 0 and pre.height == s["preemptions_total"]
    # every victim is a request the table counts as preempted, once per row
    counts = pre.group_by("request_id").len()
    pre_t = dict(zip(t["request_id"].to_list(), t["preemptions"].to_list()))
    assert all(pre_t[rid] == k for rid, k in zip(counts["request_id"].to_list(), counts["len"].to_list()))
    # the victim was running (>= 1 running) and had a context of at least its prompt
    assert (pre["seen_running"] >= 1).all() and (pre["victim_context_tokens"] >= 1).all()
    assert (pre["seen_kv_use"] > 0.5).all()          # preempted because the blocks ran out


def test_head_of_line_blocked_time_from_first_block_to_admission(base_specs):
    # 100 KV blocks of 16 tokens. Request 0 (800 prompt, 100 output) holds 51..57 blocks while
    # it runs; request 1 (1000 prompt: 63 blocks) cannot fit until 0 completes; request 2 (16
    # tokens) fits but waits behind 1 (FCFS head-of-line). The first failed check is the plan at
    # the end of request 0's prefill (both 1 and 2 queued by then), so blocked time =
    # scheduled[1] - first_token[0], and 1 is admitted when 0 completes.
    st = _stream([0.0, 0.001, 0.001], [800, 1000, 16], [100, 10, 10])
    r = simulate(base_specs, DesSpec(kv=dict(num_kv_blocks=100, watermark=0.0), outputs=dict(record_decisions=True)), stream=st).result
    s, t = r.summary, r.table
    assert s["hol_blocked_heads"] == 1
    assert t["scheduled_s"][1] == pytest.approx(t["completion_s"][0])
    assert s["hol_blocked_s"] == pytest.approx(t["scheduled_s"][1] - t["first_token_s"][0])
    assert s["hol_blocked_max_s"] == pytest.approx(s["hol_blocked_s"])
    assert t["scheduled_s"][2] >= t["scheduled_s"][1]


# ------------------------------------------------------------------ 4. ServeGen import
def _servegen_dir(tmp_path):
    import json
    d = tmp_path / "m-test"
    d.mkdir()
    # client 0: 2 req/s gamma gaps (shape 1) in [0, 600), silent in [600, 1200), 4 req/s in
    # [1200, ...); client 1: 1 req/s Weibull gaps (shape 25) in [0, 600), then silent
    (d / "chunk-0-trace.csv").write_text("0,2.0,0.001,Gamma,1.0,1.0\n600,0,0,,0,0\n1200,4.0,0.001,Gamma,1.0,1.0\n")
    (d / "chunk-1-trace.csv").write_text("0,1.0,0.05,Weibull,25.0,1.0\n600,0,0,,0,0\n1200,0,0,,0,0\n")
    (d / "chunk-0-dataset.json").write_text(json.dumps({
        "0": {"input_tokens": "{100: 1.0}", "output_tokens": "{10: 0.5, 20: 0.5}"},
        "1200": {"input_tokens": "{300: 1.0}", "output_tokens": "{50: 1.0}"}}))
    (d / "chunk-1-dataset.json").write_text(json.dumps({
        "0": {"input_tokens": "{700: 0.25, 900: 0.75}", "output_tokens": "{5: 1.0}", "reason_ratio": "{0.5: 1.0}"}}))
    return d


def test_servegen_pool_maps_to_a_trace(tmp_path):
    from engine.des.workload.importers import servegen_requests
    from engine.des.workload.trace import load_trace
    from engine.spec.workload import TraceSpec

    d = _servegen_dir(tmp_path)
    df = servegen_requests(d, duration_s=1800.0, seed=1)
    c0, c1 = df.filter(pl.col("client") == 0), df.filter(pl.col("client") == 1)
    w0 = c0.filter(pl.col("arrived_at") < 600)
    w2 = c0.filter(pl.col("arrived_at") >= 1200)
    # as ServeGen: ceil(2 x 600) = 1200 gaps rescaled to sum to 600 s, the last arrival on the
    # window's end dropped: 1199 (1200 if rounding puts it a hair before); 4 x 600 -> 2399
    assert w0.height in (1199, 1200) and w2.height in (2399, 2400)
    assert c0.filter((pl.col("arrived_at") >= 600) & (pl.col("arrived_at") < 1200)).height == 0
    assert (w0["num_prefill_tokens"] == 100).all() and (w2["num_prefill_tokens"] == 300).all()
    assert set(w0["num_decode_tokens"].to_list()) == {10, 20} and (w2["num_decode_tokens"] == 50).all()
    # client 1: 600 Weibull gaps over 600 s
    assert c1.height in (599, 600) and c1["arrived_at"].max() < 600
    # burstiness from the fitted shape: Weibull k = 25 -> gap cv sqrt(G(1.08) / G(1.04)^2 - 1) = 0.0499
    g = np.diff(np.sort(c1["arrived_at"].to_numpy()))
    assert g.std() / g.mean() == pytest.approx(0.0499, rel=0.15)
    assert (c1["num_prefill_tokens"] == 900).mean() == pytest.approx(0.75, abs=0.06)
    # --rate 6: at t = 0 the clients' 2 + 1 req/s become 4 + 2; at 1200 client 0 alone 6
    sc = servegen_requests(d, duration_s=1800.0, rate=6.0, seed=1)
    assert abs(sc.filter(pl.col("arrived_at") < 600).height - 6 * 600) <= 2
    assert abs(sc.filter(pl.col("arrived_at") >= 1200).height - 6 * 600) <= 1
    # a span re-based to 0: [1200, 1500) of the day is 300 s of client 0 at 4 req/s
    sp = servegen_requests(d, start_s=1200.0, duration_s=300.0)
    assert sp.height in (1199, 1200) and sp["arrived_at"].max() < 300
    # the CSV it writes is a trace the DES reads (Vidur layout detected)
    path = tmp_path / "sg.csv"
    df.write_csv(path)
    tr = load_trace(TraceSpec(path=str(path)))
    assert len(tr) == df.height and tr.prompt.tolist() == df["num_prefill_tokens"].to_list()
    with pytest.raises(SpecError, match="chunk-<id>-trace.csv"):
        servegen_requests(tmp_path)


def test_servegen_cli_writes_the_trace(tmp_path, capsys):
    from runner.tools import import_cli

    d = _servegen_dir(tmp_path)
    out = tmp_path / "sg.csv"
    assert import_cli.main(["servegen", str(d), "--duration", "600", "--out", str(out)]) == 0
    assert pl.read_csv(out).height > 1700 and "req/s" in capsys.readouterr().out
    assert import_cli.main(["servegen", str(d), "--duration", "600", "--out", str(out)]) == 2   # exists
    (d / "chunk-0-trace.csv").write_text("0,2.0,0.5,Pareto,1,1\n")
    assert import_cli.main(["servegen", str(d), "--out", str(tmp_path / "x.csv")]) == 2
    assert "Pareto" in capsys.readouterr().err


# --------------------------------------- 5. the gateway prefix index forgets evicted blocks
def _fleet(index, caches, total=8):
    from types import SimpleNamespace

    from engine.des.cluster import Fleet

    reps = [SimpleNamespace(idx=i, kv=SimpleNamespace(prefix=c, load=0.0), total=total, n=0, waiting=[],
                            busy_s=0.0, on_preempt=None) for i, c in enumerate(caches)]
    st = SimpleNamespace(hashes=[np.array([1, 2, 3]), np.array([1, 2, 3, 4]), np.array([10, 11])],
                         prompt=np.full(3, 100), output=np.full(3, 10))
    des = DesSpec(cluster=dict(router="weighted", prefix_index=index), kv=dict(prefix_caching=True))
    return Fleet(des, reps, len(reps), st, devices_per_replica=1, price_per_hour=0.0), reps


@pytest.mark.parametrize("index, expect", [("routed", {0: 3}), ("events", {})])
def test_events_index_forgets_what_the_replica_evicted(index, expect):
    from engine.des.cluster import HeardCache
    from engine.des.kv import PrefixCache

    cls = HeardCache if index == "events" else PrefixCache
    f, (r0, r1) = _fleet(index, [cls(1), cls(1)])
    f.gateway.router.routed(0, r0)           # request 0's blocks 1, 2, 3 routed to replica 0
    assert f.gateway.router.match(1) == ({0: 3}, 4)     # request 1 = 1, 2, 3, 4: three leading blocks there
    pc = r0.kv.prefix
    pc.insert_pinned([1, 2, 3])
    pc.release([1, 2, 3])                    # LRU order 1, 2, 3
    assert pc.evict(2) == 2                  # two one-page entries: 1 and 2 leave replica 0
    # events: the index heard it and block 1 (the first) is gone, so no leading match; routed
    # still sends request 1 to replica 0 for three blocks it no longer has
    assert f.gateway.router.match(1)[0] == expect


def test_lru_index_keeps_at_most_the_replica_cache_size():
    from engine.des.kv import PrefixCache

    # replica 0 holds 4 one-page entries (4 KV blocks / 1 page per entry): after routing blocks
    # 1, 2, 3 then 10, 11 there, the least recently routed (1) is forgotten
    f, (r0, r1) = _fleet("lru", [PrefixCache(1), PrefixCache(1)], total=4)
    f.gateway.router.routed(0, r0)
    f.gateway.router.routed(2, r0)
    assert list(f.gateway.router._routed[0]) == [2, 3, 10, 11]
    assert f.gateway.router.match(1)[0] == {}
    assert f.gateway.router.match(2)[0] == {0: 2}


def test_prefix_index_runs_end_to_end(specs_with):
    specs = specs_with(arrival="poisson", rate_rps=12.0, num_requests=600)
    base = DesSpec(cluster=dict(replicas=3, router="weighted"), kv=dict(prefix_caching=True, num_kv_blocks=1500),
                   clients=dict(session_turns=4, session_think_s=5, session_system_tokens=512))
    for idx in ("events", "lru"):
        s = simulate(specs, base.with_(cluster=dict(prefix_index=idx))).result.summary
        assert s["num_completed"] == 600 and 0 < s["prefix_hit_rate"] < 1
    with pytest.raises(SpecError, match="prefix_index"):
        DesSpec(cluster=dict(prefix_index="psychic"))


def test_tiered_cache_reports_only_what_leaves_the_last_tier():
    from engine.des.kv import TieredPrefixCache

    pc = TieredPrefixCache(1, 1, 0, 0.0, 0.0)     # HBM, then a one-entry host tier, no disk
    gone = []
    pc.on_drop = gone.append
    pc.insert_pinned([1, 2])
    pc.release([1, 2])
    pc.evict(1)                  # 1 -> host (still served from there): nothing dropped
    assert gone == [] and pc.match([1], 1) == 1
    pc.evict(1)                  # 2 -> host, host full: its oldest (1) dropped
    assert gone == [1]


def test_classes_deadline_and_index_compose_from_hydra():
    from tests.conftest import compose_specs     # the job's config -> spec path (runner.convert)

    s = compose_specs("engine=des", "engine.des.cluster.deadline_s=5", "engine.des.cluster.prefix_index=lru",
                      "engine.des.clients.classes=[{name:a,share:0.4,prompt_len:100,prompt_dist:{kind:uniform,low:50}},"
                      "{name:b,share:0.6,priority:1,slo_ttft_ms:300}]")
    a, b = s.des.clients.classes
    assert (a.name, a.share, a.prompt_len, a.prompt_dist.kind, a.prompt_dist.low) == ("a", 0.4, 100, "uniform", 50)
    assert (b.priority, b.slo_ttft_ms) == (1, 300.0) and s.des.cluster.deadline_s == 5.0 and s.des.cluster.prefix_index == "lru"
    with pytest.raises(SpecError, match="classes"):
        compose_specs("engine=des", "engine.des.clients.classes=[{name:a,share:1.0,colour:red}]")


def test_inference_perf_random_data_loads_as_a_trace(tmp_path):
    from engine.des.workload.importers import inference_perf_requests
    from engine.des.workload.trace import load_trace
    from engine.spec.workload import TraceSpec

    cfg = {"load": {"type": "constant", "stages": [{"rate": 4, "duration": 5}]},
           "data": {"type": "random", "input_distribution": {"min": 10, "max": 900, "mean": 500, "std_dev": 200},
                    "output_distribution": {"min": 5, "max": 50, "mean": 20, "std_dev": 0}}}
    df = inference_perf_requests(cfg)
    path = tmp_path / "ip.jsonl"
    df.write_ndjson(path)
    tr = load_trace(TraceSpec(path=str(path)))     # Mooncake layout: hash_ids present (empty)
    # 4 req/s x 5 s = 20 requests every 0.25 s; outputs fixed at the mean (std 0)
    assert len(tr) == 20 and tr.arrival_s[1] == pytest.approx(0.25)
    assert (tr.output == 20).all() and tr.prompt.min() >= 10 and tr.prompt.max() <= 900
    assert all(len(h) == 0 for h in tr.hashes)


@pytest.mark.slow  # console scripts + MLflow store
def test_cli_servegen_trace_with_classes_and_deadline_reaches_mlflow(mlflow_uri, tmp_path):
    from mlflow.tracking import MlflowClient

    from tests.conftest import run_cli

    d = _servegen_dir(tmp_path)
    p = run_cli(["servegen", str(d), "--duration", "300", "--out", str(tmp_path / "sg.csv")], cwd=tmp_path,
                script="simllm-import")
    assert p.returncode == 0, p.stderr
    # client 0 sends prompts of 100 tokens, client 1 of 700 or 900: a filter on the trace's
    # client column splits them
    p = run_cli(["engine=des", "workload.arrival=trace", f"workload.trace.path={tmp_path / 'sg.csv'}",
                 "engine.des.clients.classes=[{name:long,filter:'client == 1',priority:1,deadline_s:0.01},"
                 "{name:short,share:1.0}]", "engine.des.outputs.record_decisions=true",
                 f"tracking.uri={mlflow_uri}", "print_table=false", f"hydra.run.dir={tmp_path}/run"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    c = MlflowClient(tracking_uri=mlflow_uri)
    (run,) = c.search_runs([c.get_experiment_by_name("simllm").experiment_id])
    m = run.data.metrics
    t = pl.read_parquet(tmp_path / "run" / "table.parquet")
    n_long = int((t["prompt_len"] >= 500).sum())
    assert m["class_long_requests"] == n_long > 250 and m["class_short_requests"] == t.height - n_long
    # a long request emits 5 tokens: 4 decode steps after its prefill, each at least one read of
    # the 16 GB of Llama-3.1-8B weights at 3.35 TB/s (4.8 ms): >= 19 ms > its 10 ms deadline,
    # so every long request is aborted and no short one is
    assert m["class_long_cancelled"] == n_long and m["class_short_cancelled"] == 0
    assert m["cancelled"] == n_long and t.filter(pl.col("prompt_len") >= 500)["completion_s"].is_nan().all()
