"""The lab's unequal-RTT reading of sec. III-A.6 against a synchronised AIMD simulation."""

from __future__ import annotations

import pytest

from agents.ormcc.appendix import unequal_rtt_friendly_beta, unequal_rtt_ratio


def simulate(beta: float, rtt_tcp: float, rtt_cr: float, w: float = 125.0,
             cycles: int = 400, dt: float = 0.005) -> float:
    """Time-averaged ORMCC/TCP rate ratio: both grow linearly, both cut when the sum hits w."""
    tcp, mcc = w / 2, w / 4
    sum_tcp = sum_mcc = 0.0
    cuts = 0
    while cuts < cycles:
        tcp += dt / rtt_tcp ** 2
        mcc += dt / rtt_cr ** 2
        if tcp + mcc >= w:
            tcp, mcc, cuts = tcp / 2, mcc * beta, cuts + 1
        if cuts > cycles // 4:  # after the transient
            sum_tcp += tcp
            sum_mcc += mcc
    return sum_mcc / sum_tcp


@pytest.mark.parametrize("beta", [0.5, 0.65, 0.75])
@pytest.mark.parametrize(("rtt_tcp", "rtt_cr"), [(0.36, 0.51), (0.3, 0.3), (0.2, 0.5)])
def test_ratio_matches_synchronised_aimd(beta, rtt_tcp, rtt_cr):
    assert simulate(beta, rtt_tcp, rtt_cr) == pytest.approx(
        unequal_rtt_ratio(beta, rtt_tcp, rtt_cr), rel=0.03)


def test_equal_rtts_need_beta_one_half_and_a_full_queue_rtt_needs_more():
    assert unequal_rtt_friendly_beta(0.3, 0.3) == pytest.approx(0.5)
    # Fig. 11 lab numbers: TCP sees the mean queue (0.36 s), ORMCC's CIs the full one.
    beta = unequal_rtt_friendly_beta(0.36, 0.51)
    assert 0.7 < beta < 0.8
    assert simulate(beta, 0.36, 0.51) == pytest.approx(1.0, rel=0.03)
