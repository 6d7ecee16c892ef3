"""Cluster-scale DES features: traffic shapes, sessions, KV tiers, routing on delayed
signals, cost, per-class metrics and detectors, counterfactual regret. Expected numbers are
derived by hand in each test (integrals, block arithmetic, bandwidth division)."""

import numpy as np
import pytest

from engine.des import simulate
from engine.des.kv import PrefixCache
from engine.des.metrics import jain_index, priority_inversions
from engine.des.workload.sessions import sessionize, shape_arrivals
from engine.des.kv import TieredPrefixCache, tier_setup
from engine.des.workload import RequestStream
from engine.errors import SpecError
from engine.spec import DesSpec


def _uniform_stream(n, prompt=100, output=10, block_tokens=64):
    return RequestStream(arrival_s=np.arange(n, dtype=float), prompt=np.full(n, prompt, np.int64),
                         output=np.full(n, output, np.int64), priority=np.zeros(n, np.int8),
                         block_tokens=block_tokens)


def test_defaults_switch_every_cluster_feature_off():
    assert not DesSpec().cluster_features
    assert DesSpec(outputs=dict(timeseries_s=10)).cluster_features


def test_diurnal_warp_puts_the_integral_of_the_profile_in_each_half():
    # f(t) = 1 - A cos(2 pi t / P), A = (r - 1)/(r + 1) = 0.6 for r = 4. Over one period of a
    # stationary stream, arrivals in the peak half [P/4, 3P/4] are P/2 + A P / pi of P, the
    # trough half P/2 - A P / pi: ratio (0.5 + 0.6/pi) / (0.5 - 0.6/pi) = 2.2357
    P = 10_000.0
    a = np.linspace(0.0, P, 100_001)
    t = shape_arrivals(a, DesSpec(cluster=dict(traffic_shape="diurnal", traffic_peak_ratio=4, traffic_period_s=P)))
    peak = ((t >= P / 4) & (t < 3 * P / 4)).sum()
    trough = len(t) - peak
    assert peak / trough == pytest.approx((0.5 + 0.6 / np.pi) / (0.5 - 0.6 / np.pi), rel=2e-3)
    assert t[-1] == pytest.approx(P, rel=1e-4)      # mean of f over a period is 1


def test_drain_drops_what_the_shaped_process_never_reaches():
    # drain from t0 = 0 over L = 100 s: f = 1 - t/100, total integral 50 -> arrivals a <= 50 kept
    t = shape_arrivals(np.arange(200.0), DesSpec(cluster=dict(traffic_shape="drain", traffic_len_s=100.0)))
    assert np.isfinite(t).sum() == 51
    # a = 50 lands at the end of the drain: cum(t) = t - t^2/200 = 50 at t = 100
    assert t[50] == pytest.approx(100.0, abs=0.05)


def test_sessions_grow_the_prompt_and_share_the_prefix_blocks():
    st = _uniform_stream(400)
    des = DesSpec(clients=dict(session_turns=3, session_system_tokens=128))
    out = sessionize(st, des, np.random.default_rng(1))
    sess, nxt = out.session, out.next_turn
    assert 1 < len(np.unique(sess)) < 400
    for s in np.unique(sess)[:30]:
        ids = np.flatnonzero(sess == s)      # contiguous in arrival order
        for j, rid in enumerate(ids):
            # S + j (u + o) + u = 128 + 110 j + 100 tokens; floor(./64) hash blocks
            assert out.prompt[rid] == 128 + 110 * j + 100
            assert len(out.hashes[rid]) == (128 + 110 * j + 100) // 64
            assert out.hashes[rid][:2].tolist() == [0, 1]       # 128-token system prompt: shared
            if j:
                prev = out.hashes[ids[j - 1]]
                assert out.hashes[rid][:len(prev)].tolist() == prev.tolist()
                assert np.isnan(out.arrival_s[rid])
            assert nxt[rid] == (ids[j + 1] if j + 1 < len(ids) else -1)


def test_tiers_evict_down_lru_and_promote_on_a_hit():
    pc = TieredPrefixCache(1, host_entries=2, disk_entries=1, host_s_per_entry=0.5, disk_s_per_entry=2.0)
    for h in (1, 2, 3, 4):
        pc.insert_pinned([h])
        pc.release([h])
    assert pc.evict(4) == 4
    # oldest first: 1 -> host, 2 -> host, 3 -> host pushes 1 to disk, 4 -> host pushes 2 to disk
    # which pushes 1 out of the disk
    assert list(pc.host) == [3, 4] and list(pc.disk) == [2] and pc.dropped == 1
    assert pc.match([2, 3, 4, 1], 4) == 3
    assert pc.lower([2, 3]) == (2, 2.0 + 0.5, 1, 1)
    pc.acquire([2, 3])
    assert pc.pins == {2: 1, 3: 1} and list(pc.host) == [4] and not pc.disk
    assert not PrefixCache(1).tiered


def test_host_tier_transfer_time_from_the_hardware_host_link(base_specs):
    # Llama-3.1-8B KV per token: 2 x 32 layers x 8 heads x 128 x 2 bytes = 131,072 B; a 512-token
    # entry 67.1 MB; the H100's host link 64 GB/s per direction (datasheet: PCIe Gen5 128 GB/s)
    h, d, hs, ds = tier_setup(base_specs, DesSpec(kv=dict(prefix_caching=True, kv_host_gb=100, kv_disk_gb=10,
                                                          kv_disk_bandwidth_gb_s=5)), 512)
    entry = 512 * 131072
    assert h == int(100e9 // entry) and d == int(10e9 // entry)
    assert hs == pytest.approx(entry / 64e9) and ds == pytest.approx(entry / 5e9)


def test_tiered_run_serves_evicted_prefixes_from_host(specs_with):
    # 2000 KV blocks of 16 tokens (32,000 tokens) cannot hold the sessions' prefixes: with a
    # host tier the evicted blocks come back from host memory instead of being prefilled again
    specs = specs_with(arrival="poisson", rate_rps=8.0, num_requests=600, prompt_len=800, output_len=64)
    base = DesSpec(kv=dict(num_kv_blocks=2000, prefix_caching=True), clients=dict(session_turns=4, session_think_s=2.0))
    hbm = simulate(specs, base).result.summary
    tier = simulate(specs, base.with_(kv=dict(kv_host_gb=50.0))).result.summary
    assert tier["prefix_hit_rate_host"] > 0.05
    assert tier["prefix_hit_rate"] > hbm["prefix_hit_rate"]
    assert tier["prefix_hit_rate"] == pytest.approx(
        tier["prefix_hit_rate_hbm"] + tier["prefix_hit_rate_host"] + tier["prefix_hit_rate_disk"])
    assert tier["prefill_tokens"] < hbm["prefill_tokens"]


def test_stale_signals_herd_requests_onto_one_replica(specs_with):
    # least_outstanding with signals older than the whole run sees the initial all-zero record
    # for every request: ties go to the lowest index, so replica 0 gets everything
    specs = specs_with(arrival="poisson", rate_rps=20.0, num_requests=200)
    fresh = simulate(specs, DesSpec(cluster=dict(replicas=3, router="least_outstanding"), outputs=dict(timeseries_s=10))).result
    stale = simulate(specs, DesSpec(cluster=dict(replicas=3, router="least_outstanding", signal_delay_s=1e6))).result
    assert set(stale.table["replica"].to_list()) == {0}
    assert len(set(fresh.table["replica"].to_list())) == 3
    # fleet routing with fresh signals chooses what the plain router does
    plain = simulate(specs, DesSpec(cluster=dict(replicas=3, router="least_outstanding"))).result
    assert fresh.table["replica"].to_list() == plain.table["replica"].to_list()


def test_cost_is_replica_hours_times_devices_times_price(specs_with):
    specs = specs_with(arrival="poisson", rate_rps=10.0, num_requests=300)
    r = simulate(specs, DesSpec(cluster=dict(replicas=2, price_per_hour=2.5), outputs=dict(timeseries_s=10))).result
    s = r.summary
    # two replicas billed from t = 0 to the end of the run (the last completion)
    t_end = float(np.nanmax(r.table["completion_s"].to_numpy()))
    assert s["replica_hours"] == pytest.approx(2 * t_end / 3600, rel=1e-9)
    assert s["cost_usd"] == pytest.approx(s["replica_hours"] * 1 * 2.5)
    ts = r.frames["timeseries"]
    assert ts["arrivals_per_s"].sum() * 10 == pytest.approx(300, abs=1)


def test_autoscaler_adds_replicas_under_a_spike_and_bills_provisioning(specs_with):
    specs = specs_with(arrival="poisson", rate_rps=6.0, num_requests=2400, prompt_len=1024, output_len=256)
    des = DesSpec(cluster=dict(replicas=1, autoscale="queue", autoscale_target=8, autoscale_max=4,
                               autoscale_interval_s=10, provision_delay_s=30, traffic_shape="spike",
                               traffic_peak_ratio=5, traffic_start_s=60, traffic_len_s=60, price_per_hour=1.0),
                  outputs=dict(timeseries_s=10))
    s = simulate(specs, des).result.summary
    assert s["replicas_peak"] > 1
    assert s["scale_events"] >= 2
    assert s["cost_usd"] == pytest.approx(s["replica_hours"])


def test_jain_index_and_priority_inversions_by_hand():
    assert jain_index([1.0, 1.0]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0]) == pytest.approx(0.5)

    class S:   # one replica; H (class 0) waits 0..10; L1 (class 1) admitted at 5: one inversion
        priority = np.array([0, 1, 1])
        replica = np.array([0, 0, 0])
        arrival = np.array([0.0, 1.0, 2.0])
        scheduled = np.array([10.0, 5.0, 11.0])
    assert priority_inversions(S) == 1


def test_counterfactual_priority_helps_class_0_and_names_who_paid(specs_with):
    specs = specs_with(arrival="poisson", rate_rps=40.0, num_requests=600, prompt_len=1024,
                       priority_fraction=0.3)
    same = simulate(specs, DesSpec(counterfactual="scheduling.queue_policy=fcfs")).result
    assert same.summary["cf_regressed"] == 0 and same.summary["cf_regret_e2e_ms_max"] == 0.0
    r = simulate(specs, DesSpec(counterfactual="scheduling.queue_policy=priority")).result
    s = r.summary
    assert s["cf_class0_regret_e2e_ms_mean"] < 0 < s["cf_class1_regret_e2e_ms_mean"]
    reg = r.frames["regret"].filter("regressed")
    assert reg.height == s["cf_regressed"] > 0
    assert set(reg["priority"].to_list()) == {1}


@pytest.mark.parametrize("sub, field, value", [("cluster", "traffic_shape", "weekly"), ("cluster", "autoscale", "magic"),
                                               ("cluster", "traffic_peak_ratio", 0.5),
                                               ("clients", "session_turns", 0.5)])
def test_bad_settings_name_the_field(sub, field, value):
    with pytest.raises(SpecError, match=f"engine.des.{sub}.{field}"):
        DesSpec(**{sub: {field: value}})


def test_tiers_need_prefix_caching(specs_with):
    with pytest.raises(SpecError, match="kv_host_gb"):
        simulate(specs_with(num_requests=4, arrival="poisson", rate_rps=1.0),
                 DesSpec(kv=dict(kv_host_gb=10.0), clients=dict(session_turns=2)))
    with pytest.raises(SpecError, match="counterfactual"):
        simulate(specs_with(num_requests=4, arrival="poisson", rate_rps=1.0),
                 DesSpec(counterfactual="bogus=1"))


@pytest.mark.parametrize("kind, cv", [("weibull", 2.0), ("weibull", 0.5), ("gamma", 3.0)])
def test_redrawn_gaps_keep_the_mean_rate_and_have_the_asked_cv(kind, cv):
    from engine.des.workload.sessions import redraw_gaps
    from engine.des.workload import weibull_shape

    # Weibull cv 1 is the exponential (k = 1); at k = 0.5, G(5)/G(3)^2 - 1 = 24/4 - 1 = 5 (cv 2.236)
    assert weibull_shape(1.0) == pytest.approx(1.0, abs=1e-9)
    assert weibull_shape(5 ** 0.5) == pytest.approx(0.5, abs=1e-9)
    a = np.arange(200_001, dtype=float) * 0.1          # mean gap 0.1 s
    t = redraw_gaps(a, DesSpec(clients=dict(arrival_dist=kind, arrival_cv=cv)), np.random.default_rng(3))
    g = np.diff(np.sort(t))
    assert g.mean() == pytest.approx(0.1, rel=0.02)
    assert g.std() / g.mean() == pytest.approx(cv, rel=0.05)


def test_inference_perf_config_maps_to_a_trace():
    from engine.des.workload.importers import inference_perf_requests

    cfg = {"load": {"type": "constant", "stages": [{"rate": 2, "duration": 10}, {"rate": 5, "duration": 4}]},
           "data": {"type": "shared_prefix", "shared_prefix": {
               "num_groups": 3, "system_prompt_len": 1024, "question_len": 100, "output_len": 50}}}
    t = inference_perf_requests(cfg, block_tokens=512)
    # 2 x 10 + 5 x 4 = 40 requests; constant gaps 0.5 s then 0.2 s from t = 10 s
    assert t.height == 40
    assert t["timestamp"][1] == pytest.approx(500.0) and t["timestamp"][20] == pytest.approx(10_000.0)
    assert (t["input_length"] == 1124).all() and (t["output_length"] == 50).all()
    # 1124 // 512 = 2 full blocks, both inside the 1024-token system prompt of the request's group:
    # 3 groups of 2 blocks -> ids {0, 1}, {2, 3}, {4, 5}; the pool (3 x 10 prompts, the tool's
    # default per group) repeats every 30 requests
    h = [tuple(x) for x in t["hash_ids"].to_list()]
    assert set(h) == {(0, 1), (2, 3), (4, 5)}
    assert h[:10] == h[30:40]
    with pytest.raises(SpecError, match="load.type"):
        inference_perf_requests({"load": {"type": "concurrent", "stages": [{"rate": 1, "duration": 1}]}})


@pytest.mark.slow  # console script + MLflow store
def test_cli_run_logs_the_time_series_and_the_report_plots_it(mlflow_uri, tmp_path):
    import polars as pl
    from mlflow.tracking import MlflowClient

    from runner.tools import report
    from tests.conftest import run_cli

    p = run_cli(["engine=des", "workload=azure_conv_2k", "workload.num_requests=300",
                 "engine.des.cluster.replicas=2", "engine.des.outputs.timeseries_s=10", "engine.des.outputs.record_decisions=true",
                 "hardware.price_per_hour=2.0", f"tracking.uri={mlflow_uri}", "print_table=false",
                 f"hydra.run.dir={tmp_path}/run"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    ts = pl.read_parquet(tmp_path / "run" / "timeseries.parquet")
    dec = pl.read_parquet(tmp_path / "run" / "decisions.parquet")
    assert dec.filter(pl.col("decision") == "route").height == 300
    # the cost column is replica-hours x 1 device x 2 USD
    assert ts["cost_usd"][-1] == pytest.approx(ts["replica_hours"][-1] * 2.0)
    c = MlflowClient(tracking_uri=mlflow_uri)
    (run,) = c.search_runs([c.get_experiment_by_name("simllm").experiment_id])
    assert {"timeseries.parquet", "decisions.parquet"} <= {f.path for f in c.list_artifacts(run.info.run_id)}
    assert run.data.metrics["cost_usd"] == pytest.approx(run.data.metrics["replica_hours"] * 2.0)
    out = tmp_path / "rep"
    assert report.main([run.info.run_id, "--uri", mlflow_uri, "-o", str(out)]) == 0
    assert (out / "cluster_timeseries.png").stat().st_size > 10_000
    assert "Cluster over time" in (out / "report.md").read_text()
