"""STAIR's additive increase on the simulated clock, one stair layer and two (the complex
subscription option of sec. V-C), and its decrease rule under steady loss.

Sec. V-A: "at exactly those instants when the stair layer recycles, the subscription rate
on the NCLs increases by N_0, to compensate for the identical decrease on the stair
layer", after a stair period without loss. Every stair layer tops out at N_0 (sec.
IV-D), so each recycle of either of two subscribed layers is such a drop: compensating
both, the reception rate grows by one packet per RTT every RTT of each layer, i.e. at
``S (1/t_1^2 + 1/t_2^2)`` bit/s per second ("the superposition of two stair layers").
"""

from __future__ import annotations

import statistics

import pytest

from agents.sim import Link, simulate
from agents.stair.config import StairParams
from agents.stair.stairs import stair_period
from tests.unit.test_stair_agent import session

BASE = {"base_rate": "256kbit", "packet_size": "512B", "max_rate": "16Mbit",
        "rtt_source": "fixed"}
BITS = 512 * 8
DURATION = 12.0


def lossless(rtt: str, subscription: str):
    p = {**BASE, "rtt": rtt, "subscription": subscription}
    res = simulate(session(p), "s", ["r"], duration=DURATION, links={"r": Link(delay=0.001)})
    return res.receivers["r"]


def slope(node, start: float) -> float:
    """Least-squares slope (bit/s per second) of the per-second reception rate."""
    pts = [(r["t"], r["throughput_bps"]) for r in node.records("stats")
           if start <= r["t"] <= DURATION - 0.5]
    return statistics.linear_regression([t for t, _ in pts], [v for _, v in pts]).slope


def test_one_stair_layer_increases_one_packet_per_rtt_every_rtt():
    node = lossless("64ms", "simple")
    core = node.agent.core
    assert core.stairs == (2,)  # SL_64
    assert slope(node, 3.0) == pytest.approx(BITS / 0.064 ** 2, rel=0.1)
    assert core.counts["decreases"] == 0


def test_two_stair_layers_add_their_increases():
    # E = 45 ms is near sqrt(32 x 64) ms: the complex option takes SL_64 and SL_128 (the
    # paper's "i + 1 and i + 2").
    node = lossless("45ms", "complex")
    core = node.agent.core
    assert core.stairs == (2, 3)
    params = StairParams(**{**BASE, "rtt": "45ms"})
    periods = [stair_period(params.base_rate, t, params.packet_size) for t in (0.064, 0.128)]
    assert periods == pytest.approx([0.256, 1.024])
    # every whole loss-free period of either layer ended in an increase (the first
    # period of each was joined mid-way)
    whole = [int(DURATION / p) - 1 for p in periods]
    assert core.counts["increases"] == pytest.approx(sum(whole), abs=2)
    assert core.counts["increases"] > whole[0] + whole[1] / 2
    # the reception rate rises by both staircases: one packet per 64 ms every 64 ms
    # plus one per 128 ms every 128 ms
    assert slope(node, 3.0) == pytest.approx(BITS * (1 / 0.064 ** 2 + 1 / 0.128 ** 2), rel=0.1)
    assert core.counts["decreases"] == 0


def test_decreases_at_most_once_per_stair_period_under_steady_loss():
    # 10 % random loss: nearly every 256 ms period of SL_64 sees several losses, more than one
    # RTT estimate (64 ms) apart; each period is one loss event and one decrease.
    p = {**BASE, "rtt": "64ms", "max_rate": "4Mbit"}
    res = simulate(session(p), "s", ["r"], duration=DURATION,
                   links={"r": Link(delay=0.001, loss=0.1)}, seed=3)
    node = res.receivers["r"]
    core = node.agent.core
    periods = core.counts["periods"]
    assert periods == pytest.approx(DURATION / 0.256, abs=2)
    assert core.counts["lost_packets"] > 2 * periods
    # one loss event per period that had a loss (the first, partial one included)
    assert 0.8 * periods <= core.counts["loss_events"] <= periods + 1
    # the receiver's periods start when a cycle's first packet arrives (the sender starts
    # the staircase at 0, the link adds 1 ms): one decrease per period at most
    times = [r["t"] for r in node.records("decrease")]
    assert len(times) >= 2  # the rate sits at one unit most of the time
    cycles = [int((t - 0.001) // 0.256) for t in times]
    assert len(cycles) == len(set(cycles))
