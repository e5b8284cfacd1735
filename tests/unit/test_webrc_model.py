"""WEBRC's equations (Eqs. 1, 3, 4, 6, 7, 8) and the fluid wave model's constraints (sec. 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.webrc.model import (
    WaveModel,
    active_waves,
    gamma,
    geometric_sum,
    loss_event_rate,
    loss_for_rate,
    peak_to_mean,
    tcp_rate,
)

P = 0.75
U_GRID = [0.0, 0.01, 0.1, 0.25, 0.5, 0.77, 0.99, 0.999999]
MODELS = [WaveModel(sr) for sr in (20.0, 50.0, 122.0703125, 500.0, 1000.0)]


def test_eq7_factor_is_0_869_at_p_0_75():
    assert peak_to_mean(0.75) == pytest.approx(0.869, abs=5e-4)


def test_eq8_gives_0_0089_at_one_percent():
    assert round(loss_event_rate(0.01), 4) == 0.0089
    assert loss_event_rate(1e-6) == pytest.approx(1e-6, rel=2e-3)  # ratio -> 1 as p -> 0


def test_eq1_gives_60_1_packets_per_second_and_the_papers_kbit_figures():
    rate = tcp_rate(0.0089, 0.2)
    assert rate == pytest.approx(60.1, abs=0.05)
    assert rate * 1024 * 8 / 1e3 == pytest.approx(492, abs=1)  # "492 kbps"
    assert rate * 1024 * 8 * peak_to_mean(P) / 1e3 == pytest.approx(428, abs=1)  # "428 kbps"


def test_eq6_solved_for_lossp_inverts_eq1():
    for rate, rtt in [(2.0, 0.3), (60.1, 0.2), (900.0, 0.05)]:
        assert tcp_rate(loss_for_rate(rate, rtt), rtt) == pytest.approx(rate, rel=1e-9)
    assert loss_for_rate(60.1, 0.2) == pytest.approx(0.0089, rel=2e-3)


@pytest.mark.parametrize(("sr_over_bcr", "n"), [(10, 5), (50, 10), (100, 13), (500, 18),
                                                  (1000, 21), (5000, 26)])
def test_eq3_active_waves(sr_over_bcr, n):
    assert active_waves(sr_over_bcr, 1.0, P) == n
    assert active_waves(sr_over_bcr * 2.5, 2.5, P) == n  # only the ratio matters
    # N is the least n whose natural curves with the base still carry SR at a slot's end.
    assert P * geometric_sum(P, n + 1) >= sr_over_bcr > P * geometric_sum(P, n)


def test_eq4_gamma_and_its_limit():
    assert gamma(0, P) == pytest.approx(1 + 1 / P)
    assert gamma(40, P) == pytest.approx(1 / P, rel=1e-5)
    assert all(gamma(k, P) > gamma(k + 1, P) for k in range(20))


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"sr{m.sr:g}")
def test_total_rate_is_sr_at_every_instant(model):
    for u in U_GRID:
        total = model.base_rate(u) + sum(model.wave_rates(u))
        assert total == pytest.approx(model.sr, rel=1e-12)
    for cn_time in np.linspace(0, 3 * model.tsd, 37):
        total = sum(model.channel_rate(cn, float(cn_time)) for cn in range(model.t + 1))
        assert total == pytest.approx(model.sr, rel=1e-12)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"sr{m.sr:g}")
def test_active_waves_never_below_bcr_and_exactly_n_active(model):
    for t in np.linspace(0, 2 * model.tsd, 41):
        rates = [model.channel_rate(cn, float(t)) for cn in range(model.t)]
        active = [r for r in rates if r > 0]
        assert len(active) == model.n
        assert min(active) >= model.bcr * (1 - 1e-12)


def test_base_channel_decays_from_bcr_to_p_bcr_each_slot():
    model = WaveModel(100.0, bcr=2.0)
    assert model.base_rate(0.0) == pytest.approx(2.0)
    assert model.channel_rate(model.base_channel, 10 * model.tsd - 1e-9) == pytest.approx(1.5)
    assert model.channel_rate(model.base_channel, 10 * model.tsd) == pytest.approx(2.0)
    assert model.base_per_slot() == pytest.approx(2.0 * 10 * peak_to_mean(P))


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"sr{m.sr:g}")
def test_each_wave_decays_by_p_per_tsd_to_bcr_then_is_quiescent_q_slots(model):
    ages, cum = model.wave_cumulative()
    rate = np.diff(cum) / np.diff(ages)
    mid = (ages[1:] + ages[:-1]) / 2
    peak = mid[int(np.argmax(rate))]
    assert peak < 2 * model.tsd  # the rise is confined to the wave's first two slots
    after = mid > peak + 1e-6
    later = np.interp(mid[after] + model.tsd, mid, rate)
    ok = mid[after] + model.tsd < mid[-1]
    assert np.allclose(later[ok] / rate[after][ok], P, rtol=2e-3)
    # BCR at the end of its last slot (slot number = its channel number mod T) ...
    cn = 5
    end = (cn + 1) * model.tsd
    assert model.channel_rate(cn, end - 1e-9) == pytest.approx(model.bcr, rel=1e-6)
    # ... then quiet for Q slots, active again after them; T = N + Q.
    assert model.t == model.n + model.q
    for k in range(model.q):
        assert model.channel_rate(cn, end + (k + 0.5) * model.tsd) == 0.0
    assert model.channel_rate(cn, end + (model.q + 0.5) * model.tsd) > 0.0
    assert model.q == math.ceil(300 / 10)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"sr{m.sr:g}")
def test_gamma_is_the_ratio_of_the_models_aggregate_rates(model):
    for u in U_GRID:
        rates = model.wave_rates(u)
        natural = [j for j in range(model.n) if rates[j] == pytest.approx(model.natural(j, u))]
        lowest_natural = next(j for j in range(model.n) if j not in natural) \
            if len(natural) < model.n else model.n
        assert lowest_natural >= model.n - 2  # only the two youngest waves are ever cut
        t = (7 + u) * model.tsd
        for nwc in range(lowest_natural - 1):
            ratio = model.aggregate(nwc + 1, t) / model.aggregate(nwc, t)
            assert ratio == pytest.approx(gamma(nwc, P), rel=1e-9)


def test_session_rate_too_small_for_the_waves_is_refused():
    with pytest.raises(ValueError, match="below BCR"):
        WaveModel(2.5)
