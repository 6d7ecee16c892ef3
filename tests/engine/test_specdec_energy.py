"""Speculative decoding (draft model vs MTP head) and prefill/decode energy of the analytical
engine, checked against hand arithmetic on the stated shapes (H100-like chip of test_features,
calibration ideal: efficiencies 1, no overheads)."""

import dataclasses

import numpy as np
import pytest

from engine.analytical import specdec
from engine.analytical import run
from engine.errors import SpecError
from engine.spec import AnalyticalSpec, SpecDecodeSpec
from tests.engine.test_features import IDEAL, L8B, mk
from tests.fixtures import MODEL

L70B = dict(name="l70b", num_layers=80, hidden_size=8192, num_heads=64, num_kv_heads=8, head_dim=128,
            ffn_size=28672, vocab_size=128256)
BW = 3.35e12     # bytes/s of the test chip
ALLREDUCE_MS = 2 * 3 * 2e-6 * 1e3     # ring all-reduce over 4 devices of a tiny message: 2 (p-1) alpha


#: the draft the runner resolves from engine.analytical.spec_decode.draft_model=llama_3_1_8b
#: (conf/model/llama_3_1_8b.yaml's ModelSpec; tests/runner/test_draft_model.py checks the runner)
DRAFT_8B = dict(draft_model="llama_3_1_8b", draft=MODEL["llama_3_1_8b"])


def _spec(method, acc=0.8, **kw):
    return AnalyticalSpec(spec_decode=SpecDecodeSpec(method=method, gamma=3, acceptance=acc, **kw))


def test_mtp_head_priced_as_one_layer_plus_lm_head():
    """Batch 1, 512-token prompt, tp 4: a decode pass is weight-streaming bound. One MTP head pass
    streams one Llama-70B layer + the LM head: attention 8192 x (8192 + 2 x 1024) + 8192^2 =
    151.0 M, MLP 3 x 8192 x 28672 = 704.6 M, head 8192 x 128256 = 1050.7 M params, bf16, / tp 4
    over 3.35 TB/s = 0.2845 ms (KV and activations add < 1 %), plus the layer's two TP
    all-reduces of a 16 kB row: ring over 4, 2 x 3 hops of 2 us = 12 us each (bytes negligible)."""
    r = run(mk(model=L70B, tp=4, batch=1, prompt=512, output=256, opts=_spec("mtp"))).summary
    params = 8192 * (8192 + 2 * 1024) + 8192 * 8192 + 3 * 8192 * 28672 + 8192 * 128256
    head_ms = params * 2 / 4 / BW * 1e3 + 2 * ALLREDUCE_MS
    assert r["spec_draft_ms"] == pytest.approx(3 * head_ms, rel=0.01)
    # TPOT = (draft + verify) / E[A], E[A] = (1 - 0.8^4) / 0.2 = 2.952
    assert r["tpot_ms_p50"] == pytest.approx((r["spec_draft_ms"] + r["spec_verify_ms"]) / 2.952, rel=1e-9)
    assert r["spec_speedup"] == pytest.approx(r["tpot_no_spec_ms"] / r["tpot_ms_p50"])
    # the head's pass over the prompt lands in TTFT
    plain = run(mk(model=L70B, tp=4, batch=1, prompt=512, output=256)).summary
    assert r["ttft_ms_p50"] == pytest.approx(plain["ttft_ms_p50"] + r["spec_ttft_add_ms"])
    assert r["ttft_ms_p50"] > plain["ttft_ms_p50"]


def test_draft_model_priced_by_its_own_passes():
    """Draft Llama-3.1-8B (conf/model) beside a 70B target, tp 4, batch 1: one draft pass streams
    the 8B's non-embedding weights (8.03 B - 0.525 B embedding = 7.50 B params, bf16) / 4 over
    3.35 TB/s = 1.12 ms, plus 32 layers x 2 all-reduces x 12 us = 0.768 ms; three passes per step.
    Draft and MTP must differ."""
    d = run(mk(model=L70B, tp=4, batch=1, prompt=512, output=256,
               opts=_spec("draft", **DRAFT_8B))).summary
    m = run(mk(model=L70B, tp=4, batch=1, prompt=512, output=256, opts=_spec("mtp"))).summary
    streamed = 8.03e9 - 4096 * 128256
    assert d["spec_draft_ms"] == pytest.approx(3 * (streamed * 2 / 4 / BW * 1e3 + 64 * ALLREDUCE_MS), rel=0.02)
    assert d["spec_draft_ms"] > 3 * m["spec_draft_ms"]
    assert d["tpot_ms_p50"] > m["tpot_ms_p50"]
    # a fixed fraction keeps the v1 rule
    f = run(mk(model=L70B, tp=4, batch=1, prompt=512, output=256,
               opts=_spec("draft", draft_cost_fraction=0.05))).summary
    assert f["spec_draft_ms"] == pytest.approx(3 * 0.05 * f["tpot_no_spec_ms"], rel=1e-9)


def test_draft_model_errors_name_the_field():
    with pytest.raises(SpecError, match="draft_model"):
        run(mk(model=L70B, tp=4, opts=_spec("draft")))
    with pytest.raises(SpecError, match="draft_model"):      # a name the runner did not resolve
        run(mk(model=L70B, tp=4, opts=_spec("draft", draft_model="llama_3_1_8b")))


def test_acceptance_draws_have_the_closed_form_mean():
    rng = np.random.default_rng(1)
    a = specdec.draw_tokens(rng, 0.6, 3, (200000,))
    assert a.min() == 1 and a.max() == 4
    assert a.mean() == pytest.approx(float(specdec.expected_tokens(0.6, 3)), rel=0.01)
    # P(A = 4) = 0.6^3
    assert (a == 4).mean() == pytest.approx(0.216, abs=0.005)


def test_prefill_and_decode_energy_hand():
    """tp 1, ideal, Llama-8B shapes, batch 1: every pass is all roofline (u = 1), so P = TDP =
    700 W. Prefill: J per prompt token = 700 x TTFT / S; decode: 700 x TPOT per token; per
    request = prefill + (N - 1) decode."""
    r = run(mk(model=L8B, batch=1, prompt=1024, output=64)).summary
    ttft, tpot = r["ttft_ms_p50"] / 1e3, r["tpot_ms_p50"] / 1e3
    assert r["energy_prefill_j_per_token"] == pytest.approx(700 * ttft / 1024, rel=1e-9)
    assert r["energy_decode_j_per_token"] == pytest.approx(700 * tpot, rel=1e-9)
    assert r["energy_j_per_token"] == r["energy_decode_j_per_token"]
    assert r["energy_j_per_request"] == pytest.approx(700 * ttft + 63 * 700 * tpot, rel=1e-9)
    # without a TDP no number
    s = mk(model=L8B, batch=1, prompt=1024, output=64)
    s = dataclasses.replace(s, hardware=dataclasses.replace(s.hardware, tdp_w=None))
    assert np.isnan(run(s).summary["energy_prefill_j_per_token"])


def test_spec_decode_energy_counts_tokens_per_cycle():
    """With speculation a decode cycle emits E[A] tokens per sequence: J/token = P x cycle / E[A]
    = P x TPOT (TPOT already divides by E[A]); at u = 1, 700 W x TPOT."""
    r = run(mk(model=L8B, batch=1, prompt=512, output=128, opts=_spec("mtp"), calib=IDEAL)).summary
    assert r["energy_decode_j_per_token"] == pytest.approx(700 * r["tpot_ms_p50"] / 1e3, rel=1e-9)


def test_draft_memory_shares_the_hbm():
    """Draft Llama-3.1-8B beside a 70B at tp 4: + 8.03 B x 2 B / 4 = 4.015 GB of weights per
    device; the KV room shrinks by that x the usable fraction and each token also holds the
    draft's KV (32 layers x 8 KV heads x 128 x 2 x 2 B / 4 = 32 kB per device beside the 70B's
    80 layers -> 80 kB). MTP: one 70B layer's weights (855.6 M x 2 B / 4 = 0.428 GB) and KV
    (1 layer: 1 kB per token per device)."""
    from engine.analytical.pipeline import evaluate
    plain = evaluate(mk(model=L70B, tp=4, batch=8, prompt=2048, output=256))
    d = evaluate(mk(model=L70B, tp=4, batch=8, prompt=2048, output=256,
                    opts=_spec("draft", **DRAFT_8B)))
    u = IDEAL.kv_usable_fraction
    assert float(d["weights_gb"] - plain["weights_gb"]) == pytest.approx(8.03 * 2 / 4, rel=2e-3)
    assert float(plain["kv_capacity_gb"] - d["kv_capacity_gb"]) == pytest.approx(8.03 * 2 / 4 * u, rel=2e-3)
    ctx = 2048 + 256                          # paged in 16-token blocks: 2304 exactly
    assert float(d["kv_cache_gb"] - plain["kv_cache_gb"]) == pytest.approx(8 * ctx * 32768 / 1e9, rel=1e-9)
    per_seq_t = float(plain["kv_cache_gb"]) / 8
    assert float(d["max_concurrent_seqs"]) == np.floor(float(d["kv_capacity_gb"]) / (per_seq_t + ctx * 32768 / 1e9))
    m = evaluate(mk(model=L70B, tp=4, batch=8, prompt=2048, output=256, opts=_spec("mtp")))
    layer = 8192 * (8192 + 2 * 1024) + 8192 * 8192 + 3 * 8192 * 28672
    assert float(m["weights_gb"] - plain["weights_gb"]) == pytest.approx(layer * 2 / 4 / 1e9, rel=0.01)
    assert float(m["kv_cache_gb"] - plain["kv_cache_gb"]) == pytest.approx(8 * ctx * 1024 / 1e9, rel=1e-9)
