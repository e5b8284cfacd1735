"""The appendix's estimators: the self-adjusting EWMA (ARTT) and the two-stage LOSSP filter."""

from __future__ import annotations

import random

import pytest

from agents.webrc.estimators import LossFilter, SelfAdjustingMean, inverse_loss_step


def test_self_adjusting_mean_follows_the_appendix_update():
    est = SelfAdjustingMean(alpha=0.2)
    assert est.update(0.4) == 0.4  # starts at the first sample (a = m, v = m^2)
    a, v = 0.4, 0.16
    for m in (0.2, 0.3, 0.25):
        c = 0.2 * a * a / v
        a, v = (1 - c) * a + c * m, (1 - c) * v + c * m * m
        assert est.update(m) == pytest.approx(a, rel=1e-12)
    assert est.v == pytest.approx(v, rel=1e-12)


def test_self_adjusting_mean_converges_and_is_scale_free():
    rng = random.Random(3)
    samples = [0.2 + rng.uniform(-0.05, 0.05) for _ in range(400)]
    est, scaled = SelfAdjustingMean(0.1), SelfAdjustingMean(0.1)
    for m in [1.0] + samples:  # a biased first sample, as the base channel's
        est.update(m)
        scaled.update(10 * m)
    assert est.value == pytest.approx(0.2, abs=0.01)
    assert scaled.value == pytest.approx(10 * est.value, rel=1e-9)


def test_inverse_loss_step_is_the_appendix_rule_repeated():
    f, delta = 5.0, 0.1
    g = f
    for m in (0, 0, 1, 0, 1, 1, 0):
        g = g + delta if m == 0 else (1 - delta) * (g + delta)
        f = inverse_loss_step(f, float(m), 1, delta)
        assert f == pytest.approx(g, rel=1e-12)
    # n repetitions of a fractional measurement, closed form against the loop
    h = 7.0
    for _ in range(13):
        h = (1 - delta * 0.3) * (h + delta)
    assert inverse_loss_step(7.0, 0.3, 13, delta) == pytest.approx(h, rel=1e-12)
    assert inverse_loss_step(7.0, 0.0, 13, delta) == pytest.approx(7.0 + 1.3)


def test_f_estimator_expectation_is_one_minus_delta_p_over_p():
    rng, delta, p = random.Random(11), 0.05, 0.02
    f, total, count = 0.0, 0.0, 0
    for i in range(400_000):
        f = inverse_loss_step(f, 1.0 if rng.random() < p else 0.0, 1, delta)
        if i > 50_000:
            total += f
            count += 1
    assert total / count == pytest.approx((1 - delta * p) / p, rel=0.05)


def test_loss_filter_tracks_the_loss_event_rate_per_epoch():
    rng = random.Random(5)
    filt = LossFilter(beta=0.025, delta=0.1)
    assert filt.lossp != filt.lossp  # nan before it starts
    filt.reset(0.2, packets_per_epoch=30)
    assert filt.lossp == pytest.approx(0.2)
    for _ in range(4000):  # 30 packets per epoch, one loss event per 100 packets
        events = sum(rng.random() < 0.01 for _ in range(30))
        filt.update(30, events)
    assert filt.lossp == pytest.approx(0.01, rel=0.25)


def test_loss_filter_grows_f_by_delta_per_packet_without_losses():
    filt = LossFilter(beta=0.05, delta=0.1)
    filt.reset(0.01, 30)
    for _ in range(200):  # until stage 1 has forgotten the initial loss rate
        filt.update(30, 0)
    f1 = filt.f
    filt.update(30, 0)
    assert filt.f - f1 == pytest.approx(0.1 * 30, rel=0.02)
