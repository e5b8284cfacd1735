"""The ORMCC source's RTT sample ends at the CI's kernel arrival time, not when the event
loop got to it: the same path as STAIR's probe echoes (``Core.on_feedback_at``)."""

from __future__ import annotations

import pytest

from agents.ormcc.wire import Ci, encode_ci
from agents.runtime.feedback import encode_feedback
from agents.sim import Simulation
from tests.unit.test_ormcc_sim import session


def sender_node():
    sim = Simulation(session())
    node = sim.add("s", "sender")
    sim.loop.run(1.0)  # started, sending
    return sim, node


def deliver_ci(sim, node, sent_at: float, arrival: float, handled: float, rid: int = 7):
    """A CI echoing a packet sent at ``sent_at``, stamped by the kernel at ``arrival`` and
    read by the agent at ``handled`` (its loop was busy in between)."""
    data = encode_feedback(node.agent.spec.protocol_id, sim.session.session_id,
                           encode_ci(Ci(rid, 1, int(sent_at * 1e9), 1e6)))
    sim.loop.call_at(handled, lambda: node.agent.deliver_feedback(data, "10.0.0.2:6000",
                                                                  arrival))
    sim.loop.run(handled + 1e-3)


def test_rtt_sample_uses_the_arrival_stamp_not_the_handling_time():
    sim, node = sender_node()
    core = node.agent.core
    # sent at 2.0, in the kernel at 2.1 (RTT 0.1 s), handled 0.25 s later
    deliver_ci(sim, node, sent_at=2.0, arrival=2.1, handled=2.35)
    assert core.cr == 7 and core.rtt_cr == pytest.approx(0.1, abs=1e-6)
    log = node.records("ormcc_cr")[-1]
    assert log["rtt_s"] == pytest.approx(0.1, abs=1e-6) and log["t"] == pytest.approx(2.35)


def test_without_a_stamp_the_handling_time_is_the_arrival():
    sim, node = sender_node()
    deliver_ci(sim, node, sent_at=2.0, arrival=None, handled=2.35)
    assert node.agent.core.rtt_cr == pytest.approx(0.35, abs=1e-6)


def test_cr_rtt_average_follows_arrival_stamps():
    sim, node = sender_node()
    core = node.agent.core
    deliver_ci(sim, node, sent_at=2.0, arrival=2.1, handled=2.1)
    # the CR again: network RTT 0.1 s, but each CI waited 0.3 s for the loop
    for k in range(20):
        t = 3.0 + k
        deliver_ci(sim, node, sent_at=t, arrival=t + 0.1, handled=t + 0.4)
    assert core.rtt_cr == pytest.approx(0.1, abs=1e-6)
    assert core.counts["ci_rx_cr"] == 20
