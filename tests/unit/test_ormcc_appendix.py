"""ORMCC Appendix II: tracking the slowest receiver (II-A), the beta condition (II-B), the
feedback volume (II-D)."""

from __future__ import annotations

import itertools

import pytest
from ormcc_fluid import FluidRun, Path

from agents.ormcc.appendix import (
    aimd_ratio_series,
    congestion_degree,
    eq10_difference,
    feedback_volume,
    friendly_beta,
    rates_after_cut,
    trac_at_congestion,
)

# -- II-A -------------------------------------------------------------------------


def test_eq8_lower_average_trac_iff_more_congested():
    """(6)-(8): with the same sending rate, TRAC orders paths as W/sqrt(1+gamma) does."""
    rate, q, delta = 1e6, 400e3, 4e4
    paths = [(w, g) for w in (0.5e6, 1e6, 2e6, 5e6) for g in (0.0, 1.0, 3.0, 7.0, 20.0)]
    for (w1, g1), (w2, g2) in itertools.combinations(paths, 2):
        if congestion_degree(w1, g1) == congestion_degree(w2, g2):
            continue
        lower_trac = trac_at_congestion(rate, w1, q, delta, g1) < trac_at_congestion(
            rate, w2, q, delta, g2)
        assert lower_trac == (congestion_degree(w1, g1) < congestion_degree(w2, g2))


def test_eq6_value():
    # lambda / (1 + sqrt(2 * 4e4 * 4e5 * 2) / 1e6) = 1e6 / 1.253
    assert trac_at_congestion(1e6, 1e6, 4e5, 4e4, 1.0) == pytest.approx(1e6 / 1.2529822, rel=1e-6)


def table1_run(scale: float) -> tuple[FluidRun, list[float]]:
    """Table I's dynamics on four 2 Mbit/s paths, times multiplied by ``scale``."""
    paths = [Path(2e6, 50_000, 0.02, tcp=1)] + [Path(2e6, 50_000, 0.02) for _ in range(3)]
    run = FluidRun(paths)
    bounds = [t * scale for t in (0, 200, 400, 600, 800, 1000)]
    run.schedule = [(bounds[1], 1, 3), (bounds[2], 2, 7), (bounds[3], 2, 0), (bounds[4], 1, 0)]
    run.run(bounds[-1])
    return run, bounds


def test_tracks_the_slowest_receiver_in_a_fluid_model():
    """Table I in miniature (times x 0.2): the CR follows the most congested path.

    Receiver i is behind path i: 1 AIMD flow on path 1 throughout, 3 on path 2 in
    the middle three fifths, 7 on path 3 in the middle fifth, none on path 4.
    After the first quarter of each period (the switch), the expected receiver
    must be the valid CR in most samples and more often than any other.
    """
    run, bounds = table1_run(0.2)
    for period, expected in enumerate([1, 2, 3, 2, 1]):
        start = bounds[period] + 0.25 * (bounds[period + 1] - bounds[period])
        shares = {rid: run.cr_share(rid, start, bounds[period + 1]) for rid in (1, 2, 3, 4)}
        assert shares[expected] >= 0.7, (period, shares)
        assert shares[4] == 0.0
    # Receiver 4 never sees loss, so it never reports; most CIs elsewhere are suppressed
    # once a CR is chosen.
    assert run.receivers[3].counts["ci_sent"] == 0
    assert run.sender.counts["cr_switches"] >= 4


def test_rate_follows_the_representative_path_share():
    """On the CR's path ORMCC's rate stays near the fair share W/(n+1) (II-B in the fluid)."""
    run, bounds = table1_run(0.2)
    for period, flows in enumerate([1, 3, 7, 3, 1]):
        start = bounds[period] + 0.25 * (bounds[period + 1] - bounds[period])
        share = run.mean_rate(start, bounds[period + 1]) / (2e6 / (flows + 1))
        assert 0.5 <= share <= 1.3, (period, share)


# -- II-B -------------------------------------------------------------------------


def test_eq10_is_the_difference_of_ratios():
    for x, delta, beta in itertools.product((0.1, 0.3, 0.5, 0.7, 0.9), (0.0, 0.05, 0.2),
                                            (0.5, 0.65, 0.75)):
        mcc, tcp = rates_after_cut(x, 1.0, delta, beta)
        assert eq10_difference(x, 1.0, delta, beta) == pytest.approx(x / (1 - x) - mcc / tcp)


def test_eq9_holds_with_the_friendly_beta():
    w = 1.0
    for delta in (0.02, 0.1, 0.3):
        beta = friendly_beta(w, delta)
        assert beta >= 0.5
        for x in (0.05, 0.2, 0.4, 0.45, 0.55, 0.6, 0.8, 0.95):
            mcc, tcp = rates_after_cut(x, w, delta, beta)
            if x < w - x:
                assert x / (w - x) < mcc / tcp
            else:
                assert x / (w - x) > mcc / tcp


@pytest.mark.parametrize("x0", [0.1, 0.5, 0.9])
def test_friendly_beta_drives_the_ratio_to_one_and_others_do_not(x0):
    w, delta = 1.0, 0.1
    assert aimd_ratio_series(x0, w, delta, friendly_beta(w, delta), 60)[-1] == pytest.approx(
        1.0, abs=0.01)
    assert aimd_ratio_series(x0, w, delta, 0.5, 60)[-1] < 0.9  # too timid: TCP wins
    assert aimd_ratio_series(x0, w, delta, 0.75, 60)[-1] > 1.1  # too aggressive


# -- II-D -------------------------------------------------------------------------


def test_feedback_volume_tends_to_one_receivers_volume():
    v, p, duration, rtt = 1e6 / 8000, 0.01, 1000.0, 0.1
    assert feedback_volume(v, p, duration, 1e-9, 64, rtt) == pytest.approx(v * p * duration,
                                                                          rel=1e-6)
    # More receivers behind the new MCB cost (N-1) RTT_min of CIs per switch.
    extra = feedback_volume(v, p, duration, 0.01, 16, rtt) - feedback_volume(
        v, p, duration, 0.01, 1, rtt)
    assert extra == pytest.approx(0.01 * duration * v * p * 15 * rtt)
