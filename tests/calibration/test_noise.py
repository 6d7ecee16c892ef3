"""The jump-diffusion step-time noise (engine.des.noise) and its DES hook.

Expected values are closed forms of the model, not outputs of the code under test: a log-normal
multiplier exp(sigma Z) has mean exp(sigma^2/2), median 1 and log-std sigma; Poisson jumps at rate
lambda per second of busy time give lambda*T jumps over a busy time T (sd sqrt(lambda T)); a stall
size distribution with mean J adds J per jump on average.
"""

from dataclasses import replace

import numpy as np
import pytest

from engine.des.noise import JumpDiffusion, make_noise
from engine.des import DesSpec, simulate
from engine.spec import NoiseSpec


def test_off_is_none_and_results_unchanged(specs_with):
    assert make_noise(NoiseSpec(), seed=3) is None
    assert make_noise(NoiseSpec(jump_rate_per_s=5.0), seed=3) is None     # no size: no jumps
    assert make_noise(NoiseSpec(throttle_after_s=10.0), seed=3) is None   # factor 1: no throttle
    specs = specs_with(num_requests=40, arrival="poisson", rate_rps=8.0)
    plain = simulate(specs, DesSpec()).result
    ident = simulate(specs, DesSpec(), noise=lambda x: np.asarray(x, dtype=float)).result
    assert plain.table.equals(ident.table)
    assert plain.summary == ident.summary
    assert any(a.name == "noise" and a.value == "off" for a in plain.assumptions)


def test_jitter_closed_forms():
    sigma = 0.2
    f = JumpDiffusion(NoiseSpec(jitter_sigma=sigma), seed=1)
    y = f(np.ones(400_000))
    # mean exp(sigma^2/2) = 1.0202; standard error sqrt(exp(s^2)(exp(s^2)-1)/n) ~ 3.2e-4
    assert y.mean() == pytest.approx(np.exp(sigma ** 2 / 2), abs=4 * 3.2e-4)
    assert np.median(y) == pytest.approx(1.0, abs=2e-3)
    assert np.log(y).std() == pytest.approx(sigma, rel=0.01)


@pytest.mark.parametrize("dist", ["fixed", "exponential", "lognormal"])
def test_jump_count_and_size_closed_forms(dist):
    lam, J, x, n = 5.0, 0.02, 0.01, 100_000           # busy time T = n x = 1000 s
    f = JumpDiffusion(NoiseSpec(jump_rate_per_s=lam, jump_mean_s=J, jump_dist=dist, jump_sigma=0.8), seed=2)
    y = f(np.full(n, x))
    expected = lam * n * x                           # lambda T = 5000 jumps, sd ~ 71
    assert f.jumps == pytest.approx(expected, abs=4 * np.sqrt(expected))
    assert f.busy_s == pytest.approx(n * x)
    # added stall: jumps x mean size (relative sd of the mean size <= 1/sqrt(5000) x cv)
    assert f.stall_s / f.jumps == pytest.approx(J, rel=0.05 if dist != "fixed" else 1e-12)
    assert y.sum() == pytest.approx(n * x + f.stall_s)
    # per-step mean multiplier 1 + lambda J = 1.1
    assert y.mean() / x == pytest.approx(1 + lam * J, rel=0.03)


def test_throttle_after_busy_time():
    f = JumpDiffusion(NoiseSpec(throttle_after_s=1.0, throttle_factor=0.8), seed=0)
    y = np.concatenate([f(np.full(50, 0.01)), f(np.full(100, 0.01))])   # 1.5 s of nominal work
    # the first 100 steps (1.0 s) run at full clock, every later one 1/0.8 = 1.25x longer
    assert y[:100] == pytest.approx(0.01)
    assert y[100:] == pytest.approx(0.0125)


def test_deterministic_per_seed():
    spec = NoiseSpec(jitter_sigma=0.1, jump_rate_per_s=3.0, jump_mean_s=0.01, jump_dist="exponential")
    a = JumpDiffusion(spec, 7)(np.full(1000, 0.01))
    b = JumpDiffusion(spec, 7)(np.full(1000, 0.01))
    c = JumpDiffusion(spec, 8)(np.full(1000, 0.01))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_des_uses_calibration_noise(specs_with):
    # Requests alone (gaps of 2 s, E2E ~0.8 s): TPOT is the mean of its decode steps, so the mean
    # TPOT over requests moves by the per-step mean multiplier exp(sigma^2/2) (1 + lambda J).
    sigma, lam, J = 0.1, 20.0, 0.005
    specs = specs_with(num_requests=20, arrival="gamma", rate_rps=0.5, arrival_cv=0.01)
    base = simulate(specs, DesSpec()).result
    noisy_cal = replace(specs.calibration, noise=NoiseSpec(jitter_sigma=sigma, jump_rate_per_s=lam,
                                                           jump_mean_s=J))
    noisy = replace(specs, calibration=noisy_cal)
    r1 = simulate(noisy, DesSpec(seed=4)).result
    r2 = simulate(noisy, DesSpec(seed=4)).result
    assert r1.table.equals(r2.table)                                    # same seed, same run
    ratio = r1.table["tpot_ms"].mean() / base.table["tpot_ms"].mean()
    assert ratio == pytest.approx(np.exp(sigma ** 2 / 2) * (1 + lam * J), rel=0.03)
    assert any(a.name == "noise" and "jitter sigma 0.1" in a.value for a in r1.assumptions)
    r3 = simulate(noisy, DesSpec(seed=5)).result
    assert not r1.table["tpot_ms"].equals(r3.table["tpot_ms"])


def test_config_none_and_override(cfg_of):
    from runner.convert import specs_from_config

    s = specs_from_config(cfg_of("engine=des")).calibration.noise
    assert not s.enabled
    s = specs_from_config(cfg_of("calibration/noise=jump_diffusion", "calibration.noise.jump_size=20ms")).calibration.noise
    assert s.jump_mean_s == pytest.approx(0.02) and s.jump_dist == "exponential" and s.enabled
