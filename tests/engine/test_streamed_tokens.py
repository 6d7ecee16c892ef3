"""Host work per streamed token (framework.per_streamed_token_overhead, workload.streaming):
added to the per-sequence host time of every pass when the workload's requests stream."""

import numpy as np
import pytest

from engine.analytical.step import StepModel
from engine.errors import SpecError
from engine.spec import WorkloadSpec
from tests.conftest import compose_specs


def test_auto_streams_every_arrival_process_but_an_offline_batch():
    assert not WorkloadSpec(prompt_len=8, output_len=4, arrival="batch").streams()
    assert WorkloadSpec(prompt_len=8, output_len=4, arrival="closed_loop", concurrency=2).streams()
    assert WorkloadSpec(prompt_len=8, output_len=4, arrival="poisson", rate_rps=1.0).streams()
    assert WorkloadSpec(prompt_len=8, output_len=4, arrival="batch", streaming="always").streams()
    assert not WorkloadSpec(prompt_len=8, output_len=4, arrival="poisson", rate_rps=1.0,
                            streaming="never").streams()


def test_a_bad_streaming_value_names_the_field():
    with pytest.raises(SpecError, match="workload.streaming"):
        WorkloadSpec(prompt_len=8, output_len=4, streaming="sometimes")


def _specs(stream: str, us: float):
    # the neutral generic profile: a synchronous loop (host_overlap 0), no host terms of its own,
    # so a pass is device + host and the streamed term is the only difference
    return compose_specs("tracking=none", "framework=generic", f"workload.streaming={stream}",
                         f"framework.per_streamed_token_overhead={us:g}us")


def test_a_decode_pass_of_b_streaming_sequences_pays_b_times_the_term():
    # 32 sequences decoding at 1000 cached tokens each: streamed, the pass takes exactly
    # 32 x 150 us = 4.8 ms more host time than the same pass unstreamed (device + host with
    # host_overlap 0); with the term at 0 streaming changes nothing.
    B, ctx = 32.0, 1000.0
    times = {}
    for stream in ("always", "never"):
        for us in (0.0, 150.0):
            sm = StepModel.from_specs(_specs(stream, us))
            times[stream, us] = float(sm.time(B, B, decode_seqs=B, decode_ctx=B * ctx))
    assert times["always", 150.0] - times["never", 150.0] == pytest.approx(B * 150e-6, rel=1e-9)
    assert times["always", 0.0] == times["never", 0.0] == times["never", 150.0]


def test_the_des_tpot_of_a_streamed_batch_grows_by_the_term_per_sequence():
    # 8 equal requests sent together decode in one batch of 8 from their first token to their
    # last: each decode pass (the decode TPOT's gaps) has 8 streaming sequences, so with the
    # requests streaming (workload.streaming=always) the TPOT grows by 8 x 200 us = 1.6 ms
    # against the same batch unstreamed (streaming=never).
    from dataclasses import replace

    from engine.des import DesSpec, simulate

    tpot = {}
    for stream in ("always", "never"):
        s = _specs(stream, 200.0)
        s = replace(s, workload=replace(s.workload, arrival="batch", num_requests=8, batch_size=8,
                                        prompt_len=64, output_len=16))
        st = simulate(s, DesSpec(scheduling=dict(scheduler="vllm"))).state
        tpot[stream] = (st.completion - st.first_token) / (st.output - 1)
    np.testing.assert_allclose(tpot["always"] - tpot["never"], 8 * 200e-6, rtol=1e-6)
