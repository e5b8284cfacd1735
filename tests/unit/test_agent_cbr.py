"""The cbr and layered-cbr cores, alone and as whole sessions in simulated time."""

from __future__ import annotations

import pytest

from agents.cbr import CbrParams, CbrReceiver, CbrSender
from agents.layered_cbr import LayeredCbrParams, LayeredCbrReceiver, LayeredCbrSender
from agents.runtime.actions import Join, Log, Send, SetTimer
from agents.runtime.session import Session
from agents.sim import Link, simulate


def drive(core, duration):
    """Run a sender core on a bare simulated clock: fire its one timer until ``duration``."""
    now = 0.0
    sends = []
    actions = core.start(now)
    while True:
        sends += [(a, now) for a in actions if isinstance(a, Send)]
        (timer,) = [a for a in actions if isinstance(a, SetTimer)]
        assert timer.at > now  # the pacer never asks to be woken in the past
        if timer.at >= duration:
            return sends
        now = timer.at
        actions = core.on_timer(now, timer.timer_id)


def test_cbr_sender_core_rate_on_a_simulated_clock():
    params = CbrParams(rate="1.5Mbit", packet_size="1200B")
    sends = drive(CbrSender(params), 10.0)
    bits = sum(a.size for a, _ in sends) * 8
    assert bits / 10.0 == pytest.approx(1.5e6, rel=0.01)
    assert {a.channel for a, _ in sends} == {0}
    assert {a.size for a, _ in sends} == {1200}


def test_cbr_receiver_joins_its_one_channel():
    assert CbrReceiver(CbrParams(rate="1Mbit")).start(0.0) == [Join(0)]


def test_layered_sender_core_rates_per_layer():
    params = LayeredCbrParams(rates=["100kbit", "200kbit", "400kbit"], packet_size="250B")
    sends = drive(LayeredCbrSender(params), 10.0)
    for layer, rate in enumerate(params.rates):
        bits = sum(a.size for a, _ in sends if a.channel == layer) * 8
        assert bits / 10.0 == pytest.approx(rate, rel=0.01)


def test_layered_receiver_joins_up_to_its_level():
    params = LayeredCbrParams(rates=["1Mbit", "1Mbit", "2Mbit"], level=2)
    core = LayeredCbrReceiver(params)
    actions = core.start(0.0)
    assert [a for a in actions if isinstance(a, Join)] == [Join(0), Join(1)]
    assert isinstance(actions[0], Log) and actions[0].fields["level"] == 2
    assert core.metrics() == {"subscription_level": 2, "subscribed_rate_bps": 2e6}
    assert LayeredCbrReceiver(LayeredCbrParams(rates=["1Mbit"] * 3)).level == 3
    assert LayeredCbrReceiver(LayeredCbrParams(rates=["1Mbit"], level=0)).start(0.0)[1:] == []


def cbr_session(rate="2Mbit", size="1000B"):
    return Session.model_validate({
        "protocol": "cbr", "flow": "c1", "session_id": 11, "source": "10.0.0.1",
        "channels": [{"group": "232.1.1.1", "port": 5000}], "ssm": True,
        "params": {"rate": rate, "packet_size": size}})


def layered_session(levels):
    return Session.model_validate({
        "protocol": "layered-cbr", "flow": "l1", "session_id": 12, "source": "10.0.0.1",
        "channels": [{"group": f"239.2.0.{i}", "port": 5000} for i in range(1, 5)],
        "params": {"rates": ["128kbit", "256kbit", "512kbit", "1Mbit"], "packet_size": "500B"},
        "nodes": {name: {"params": {"level": level}} for name, level in levels.items()}})


def test_cbr_session_rate_within_one_percent_over_ten_simulated_seconds():
    result = simulate(cbr_session(), receivers=["r1", "r2"], duration=10.0,
                      starts={"s": 0.0, "r1": 0.0, "r2": 0.0},
                      links={"r2": Link(delay=0.05)})
    for name, node in result.receivers.items():
        rx = node.agent.stats.received()
        assert rx.bytes * 8 / 10.0 == pytest.approx(2e6, rel=0.01), name
        assert rx.lost == 0
        stats = node.records("stats")
        assert len(stats) == 10  # nine per-second records and the final one at stop
        assert all(r["throughput_bps"] == pytest.approx(2e6, rel=0.01) for r in stats[1:-1])
        assert node.agent.metrics.value("mcc_agent_packets_received_total") == rx.packets
    sender = result.sender
    assert sender.agent.stats.sent_totals().bytes * 8 / 10.0 == pytest.approx(2e6, rel=0.01)
    assert sender.agent.metrics.value("mcc_agent_target_rate_bps") == 2e6


def test_cbr_loss_is_measured_from_sequence_gaps():
    result = simulate(cbr_session(), receivers=["r"], duration=10.0,
                      links=Link(loss=0.1), seed=3)
    node = result.receivers["r"]
    dropped_by_link = node.port.counters.lost
    rx = node.agent.stats.received()
    # Every link loss between the first and last packet received is a sequence gap.
    assert abs(rx.lost - dropped_by_link) <= 2
    assert rx.lost / (rx.lost + rx.packets) == pytest.approx(0.1, abs=0.03)
    assert node.agent.metrics.value("mcc_agent_packets_lost") == rx.lost


def test_layered_session_delivers_exactly_the_subscribed_layers():
    levels = {"r0": 0, "r1": 1, "r2": 2, "r4": 4}
    result = simulate(layered_session(levels), receivers=list(levels), duration=10.0)
    rates = [128e3, 256e3, 512e3, 1e6]
    for name, level in levels.items():
        node = result.receivers[name]
        per_channel = node.agent.stats.channels
        assert sorted(per_channel) == list(range(level)), name
        for layer in range(level):
            assert per_channel[layer].bytes * 8 / 10.0 == pytest.approx(rates[layer], rel=0.01)
        total = node.agent.stats.received().bytes * 8 / 10.0
        assert total == pytest.approx(sum(rates[:level]), rel=0.01, abs=1)
        assert node.agent.metrics.value("mcc_agent_subscription_level") == level
        assert node.agent.metrics.value("mcc_agent_joined_channels") == 0  # left at stop
        assert [r["channel"] for r in node.records("join")] == list(range(level))
        assert [r["channel"] for r in node.records("leave")] == list(range(level))
    sent = result.sender.agent.stats.sent
    for layer, rate in enumerate(rates):
        assert sent[layer].bytes * 8 / 10.0 == pytest.approx(rate, rel=0.01)
