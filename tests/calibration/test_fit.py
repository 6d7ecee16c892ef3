"""Must-show of the two-stage calibration: a round trip.

A DES run with hidden parameters (efficiencies, overhead, jitter sigma, jump rate and size) is
the 'measurement'; calibrating from a different start must recover every hidden parameter within
10 % and match the measured p50 and p99 of TTFT and TPOT within 5 %; fitting the tail (stage 2)
must leave the p50s within 5 %. The expected values are the hidden numbers chosen here and the
measured percentiles, not outputs of the fitting code. The measurement is a concurrency-1 run
over prompts of 128-4096 tokens (TTFT vs prompt length separates compute efficiency from the
per-step overhead; a step overhead and the weight read are otherwise the same constant per
decode step); the calibration simulates with a different noise seed than the measurement, so
sampling error is part of what the 10 % covers. ~30 s on two cores (about 400 small simulations).
"""

from dataclasses import replace

import pytest

from engine.calibration.fit import calibrate
from engine.calibration.measurements import from_simulation
from engine.des import DesSpec, simulate
from engine.spec import NoiseSpec, WorkloadSpec
from engine.spec.workload import LengthDist

HIDDEN = dict(compute_efficiency=0.6, memory_bandwidth_efficiency=0.7, step_overhead_s=0.003,
              jitter_sigma=0.08, jump_rate_per_s=2.0, jump_mean_s=0.03)
START = dict(compute_efficiency=0.85, memory_bandwidth_efficiency=0.9, step_overhead_s=0.0005,
             jitter_sigma=0.03, jump_rate_per_s=0.5, jump_mean_s=0.01)


@pytest.fixture(scope="module")
def round_trip(base_specs):
    wl = WorkloadSpec(prompt_len=1024, output_len=128, num_requests=400, arrival="closed_loop",
                      concurrency=1, prompt_dist=LengthDist(kind="lognormal", sigma=0.7, low=128, high=4096),
                      output_dist=LengthDist(kind="uniform", low=64, high=192), seed=1)
    noise = NoiseSpec(jitter_sigma=HIDDEN["jitter_sigma"], jump_rate_per_s=HIDDEN["jump_rate_per_s"],
                      jump_mean_s=HIDDEN["jump_mean_s"], jump_dist="exponential")
    hidden = replace(base_specs.calibration, compute_efficiency=HIDDEN["compute_efficiency"],
                     memory_bandwidth_efficiency=HIDDEN["memory_bandwidth_efficiency"],
                     step_overhead_s=HIDDEN["step_overhead_s"], noise=noise)
    measured = simulate(replace(base_specs, workload=wl, calibration=hidden), DesSpec(seed=11))
    m = from_simulation(measured, {"arrival": "closed_loop", "concurrency": 1})
    deployment = replace(base_specs, calibration=replace(hidden, noise=NoiseSpec(jump_dist="exponential")))
    return calibrate(deployment, DesSpec(seed=3), m, start=START, rounds=2)


@pytest.mark.parametrize("name", list(HIDDEN))
def test_recovers_every_parameter_within_10pct(round_trip, name):
    assert round_trip.params[name] == pytest.approx(HIDDEN[name], rel=0.10)
    assert round_trip.start[name] == START[name]          # it did start elsewhere


def test_p50_and_p99_within_5pct(round_trip):
    e = round_trip.errors_after
    for key in [("ttft_ms", 50.0), ("tpot_ms", 50.0), ("ttft_ms", 99.0), ("tpot_ms", 99.0)]:
        assert abs(e[key]) < 0.05, (key, e[key])
    # from the start they were far off (so the match is the fit's doing)
    assert max(abs(round_trip.errors_before[k]) for k in [("ttft_ms", 50.0), ("tpot_ms", 50.0)]) > 0.2


def test_tail_fit_leaves_p50(round_trip):
    # after each stage 2 the p50s stay within 5 % of the measurement, and the final ones too
    for h in round_trip.history:
        if h["stage"] == 2:
            for key in [("ttft_ms", 50.0), ("tpot_ms", 50.0)]:
                assert abs(h["p50_after_stage1"][key]) < 0.05 or h["round"] == 0
    assert abs(round_trip.errors_after[("ttft_ms", 50.0)]) < 0.05
    assert abs(round_trip.errors_after[("tpot_ms", 50.0)]) < 0.05
    # the tail moved p99 ITL from far below (no jumps) to the measurement
    assert round_trip.errors_after_stage1[("itl_ms", 99.0)] < -0.3
    assert abs(round_trip.errors_after[("itl_ms", 99.0)]) < 0.1


def test_diagnosis_filled_from_fit(round_trip):
    rows = {r["parameter"]: r for r in round_trip.diagnosis}
    assert set(HIDDEN) <= set(rows)
    assert "compute efficiency" in rows["compute_efficiency"]["symptom"]
    assert rows["jump_rate_per_s"]["fitted"] == round_trip.params["jump_rate_per_s"]
    assert any("queueing" in r["explains"] for r in round_trip.diagnosis)
