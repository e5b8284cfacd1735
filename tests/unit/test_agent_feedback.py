"""Unicast feedback: framing, the runtime glue in the simulator, and real UDP sockets on
loopback (a receiver reports, the sender echoes back to the peer it heard)."""

from __future__ import annotations

import io
import struct

import pytest
from pydantic import BaseModel, ConfigDict

from agents.runtime.actions import Feedback, Join, Send, SetTimer
from agents.runtime.agent import Agent
from agents.runtime.core import ReceiverCore, SenderCore
from agents.runtime.eventlog import EventLog
from agents.runtime.feedback import (
    FRAME_LEN,
    MAX_FEEDBACK_DATA,
    encode_feedback,
    parse_feedback,
    parse_peer,
)
from agents.runtime.header import Drop
from agents.runtime.loop import EventLoop
from agents.runtime.metrics import AgentMetrics
from agents.runtime.registry import ProtocolSpec, register, unregister
from agents.runtime.session import Session
from agents.runtime.transport import UdpTransport
from agents.sim import Link, Simulation

REPORT = struct.Struct("!Id")  # (packet seq, receiver time)


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EchoSender(SenderCore):
    """Sends a packet every 100 ms and echoes each report to the peer that sent it."""

    def __init__(self, params, session):
        self.reports: list[tuple[float, int, str]] = []

    def start(self, now):
        return [SetTimer("tick", now)]

    def on_timer(self, now, timer_id):
        return [Send(0, 100), SetTimer("tick", now + 0.1)]

    def on_feedback(self, now, data, peer):
        seq, _ = REPORT.unpack(data)
        self.reports.append((now, seq, peer))
        return [Feedback(data, to=peer)]


class ReportingReceiver(ReceiverCore):
    """Reports every packet to the sender; measures the round trip of the echo."""

    def __init__(self, params, session):
        self.rtts: list[float] = []

    def start(self, now):
        return [Join(0)]

    def on_packet(self, now, header, payload_len, group):
        return [Feedback(REPORT.pack(header.seq, now))]

    def on_feedback(self, now, data, peer):
        _, sent = REPORT.unpack(data)
        self.rtts.append(now - sent)
        return []


def _session(feedback_port: int | None, source: str = "10.0.0.1") -> Session:
    data = {"protocol": "echo", "flow": "e", "session_id": 9, "source": source, "ttl": 1,
            "channels": [{"group": "239.9.0.1", "port": 5000}]}
    if feedback_port is not None:
        data["feedback_port"] = feedback_port
    return Session.model_validate(data)


@pytest.fixture
def echo():
    register(ProtocolSpec("echo", 249, Params, EchoSender, ReportingReceiver, feedback=True))
    yield
    unregister("echo")


def test_frames_round_trip_and_foreign_datagrams_are_named():
    raw = encode_feedback(7, 42, b"hello")
    assert len(raw) == FRAME_LEN + 5
    assert parse_feedback(raw, 7, 42) == b"hello"
    assert parse_feedback(raw[:FRAME_LEN - 1], 7, 42) is Drop.SHORT
    assert parse_feedback(b"XXXX" + raw[4:], 7, 42) is Drop.MAGIC
    assert parse_feedback(raw, 8, 42) is Drop.PROTOCOL
    assert parse_feedback(raw, 7, 43) is Drop.SESSION
    assert parse_feedback(raw[:4] + b"\x02" + raw[5:], 7, 42) is Drop.VERSION
    assert parse_feedback(raw + bytes(MAX_FEEDBACK_DATA), 7, 42) is Drop.EXT_LENGTH
    with pytest.raises(ValueError, match="exceeds"):
        encode_feedback(7, 42, bytes(MAX_FEEDBACK_DATA + 1))
    assert parse_peer("10.0.0.2:4000") == ("10.0.0.2", 4000)
    for bad in ("10.0.0.2", "10.0.0.2:0", ":80", "a:b"):
        with pytest.raises(ValueError):
            parse_peer(bad)


def test_a_feedback_protocol_needs_a_feedback_port(echo):
    with pytest.raises(ValueError, match="feedback_port"):
        _session(None)


def test_feedback_round_trips_in_simulated_time(echo):
    sim = Simulation(_session(5600), seed=1)
    sender = sim.add("s", "sender")
    near = sim.add("r1", "receiver", Link(delay=0.01))
    far = sim.add("r2", "receiver", Link(delay=0.05))
    sim.inject("s", 0.35, b"MCFB junk", 0)  # wrong channel path: a data datagram, dropped
    sim.run(2.0)
    rtt = {n.name: n.agent.core.rtts for n in (near, far)}
    # One-way data delay + one-way feedback delay, each way the receiver's link delay.
    assert rtt["r1"] and all(abs(r - 0.02) < 1e-9 for r in rtt["r1"])
    assert rtt["r2"] and all(abs(r - 0.10) < 1e-9 for r in rtt["r2"])
    peers = {peer for _, _, peer in sender.agent.core.reports}
    assert peers == {"r1", "r2"}
    assert sender.agent.stats.feedback_rx == len(sender.agent.core.reports)
    assert sender.agent.stats.feedback_tx == sender.agent.stats.feedback_rx
    assert near.agent.stats.feedback_tx == near.agent.stats.received().packets
    assert near.agent.metrics.value("mcc_agent_feedback_sent_total") == \
        near.agent.stats.feedback_tx
    assert near.agent.metrics.value("mcc_agent_joins_total") == 1
    stats = [r for r in near.records("stats") if "feedback_tx" in r]
    assert stats and stats[-1]["feedback_tx"] == near.agent.stats.feedback_tx


def test_feedback_loss_and_foreign_feedback_are_counted(echo):
    sim = Simulation(_session(5600), seed=3)
    sender = sim.add("s", "sender")
    lossy = sim.add("r", "receiver", Link(delay=0.01, feedback_loss=0.5))
    sim.loop.call_at(0.5, lambda: sender.agent.deliver_feedback(
        encode_feedback(249, 10, b"\x00" * 12), "x"))  # another session's report
    sim.run(3.0)
    sent, heard = lossy.agent.stats.feedback_tx, sender.agent.stats.feedback_rx
    assert sent >= 25 and 0.25 * sent < heard < 0.75 * sent
    assert sender.agent.stats.drops.counts[Drop.SESSION] == 1


def test_a_core_without_feedback_cannot_send_it():
    class Bad(SenderCore):
        def __init__(self, params, session):
            pass

        def start(self, now):
            return [Feedback(b"x")]

    register(ProtocolSpec("nofeedback", 248, Params, Bad, ReportingReceiver))
    try:
        session = Session.model_validate({
            "protocol": "nofeedback", "flow": "e", "session_id": 1, "source": "10.0.0.1",
            "channels": [{"group": "239.9.0.1", "port": 5000}]})
        sim = Simulation(session)
        sim.add("s", "sender")
        with pytest.raises(ValueError, match="feedback=True"):
            sim.run(0.1)
    finally:
        unregister("nofeedback")


def test_feedback_over_real_udp_sockets_on_loopback(echo):
    """Both agents on one real event loop: the receiver's feedback socket gets an ephemeral
    port on 127.0.0.1, the sender listens on its feedback port and replies to that peer."""
    import socket

    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    session = _session(port, source="127.0.0.1")
    loop = EventLoop()
    agents = {}
    transports = {}
    class Unjoined(ReportingReceiver):
        def start(self, now):  # only the feedback path is under test: no multicast
            return []

    for role, core in (("sender", EchoSender(None, session)),
                       ("receiver", Unjoined(None, session))):
        log = EventLog(io.StringIO(), role, role, wall_clock=False)
        agent = Agent(core, role, session, role, loop, log, AgentMetrics(role, "e", "echo", role))
        transport = UdpTransport(loop, session, "127.0.0.1", agent.deliver,
                                 agent.deliver_feedback, listen_feedback=role == "sender")
        agent.transport = transport
        agents[role], transports[role] = agent, transport
    transports["sender"].open()
    try:
        for agent in agents.values():
            agent.start()
        now = loop.now()
        for seq in range(5):  # reports without multicast: the receiver core sends directly
            loop.call_at(now + 0.01 * seq, lambda seq=seq: agents["receiver"]._apply(
                [Feedback(REPORT.pack(seq, loop.now()))], loop.now()))
        loop.call_at(now + 0.5, loop.stop)
        loop.run(until=now + 2.0)
    finally:
        for role in agents:
            agents[role].stop()
            transports[role].close()
        loop.close()
    reports = agents["sender"].core.reports
    assert [seq for _, seq, _ in reports] == [0, 1, 2, 3, 4]
    peer = reports[0][2]
    assert peer.startswith("127.0.0.1:") and int(peer.rsplit(":", 1)[1]) != port
    assert len(agents["receiver"].core.rtts) == 5
    assert all(0 <= r < 0.2 for r in agents["receiver"].core.rtts)
