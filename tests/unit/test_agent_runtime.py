"""The runtime glue (agents.runtime.agent) with a throw-away protocol in the simulator:
extensions and flags end to end, timers, leave and re-join, logs, core gauges."""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass

import pytest
from pydantic import BaseModel, ConfigDict

from agents.runtime.actions import CancelTimer, Join, Leave, Log, Metric, Send, SetTimer
from agents.runtime.agent import Agent
from agents.runtime.core import ReceiverCore, SenderCore
from agents.runtime.eventlog import EventLog
from agents.runtime.header import Header, StructExtension, encode
from agents.runtime.loop import EventLoop
from agents.runtime.metrics import AgentMetrics
from agents.runtime.registry import ProtocolSpec, register, unregister
from agents.runtime.session import Session
from agents.sim import Link, Router, Simulation


@dataclass(frozen=True)
class ToyExt:
    layer: int
    cycle: int


class ToyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    interval: float = 0.1


class ToySender(SenderCore):
    def __init__(self, params, session):
        self.params = params
        self.n = 0

    def start(self, now):
        return [SetTimer("tick", now), SetTimer("never", now + 0.5),
                Log("stats", {"event": "shadowed"}), Metric("bad name!", 1)]

    def on_timer(self, now, timer_id):
        assert timer_id == "tick"
        self.n += 1
        actions = [Send(self.n % 2, 300, flags=0x10 if self.n % 2 else 0,
                        ext=ToyExt(self.n % 2, self.n)),
                   SetTimer("tick", now + self.params.interval), Metric("sent", self.n)]
        if self.n == 2:
            actions.append(CancelTimer("never"))
        return actions


class ToyReceiver(ReceiverCore):
    def __init__(self, params, session):
        self.seen = []

    def start(self, now):
        return [Join(0), Join(1), SetTimer("leave", now + 1.0), SetTimer("rejoin", now + 2.0)]

    def on_timer(self, now, timer_id):
        return [Leave(1)] if timer_id == "leave" else [Join(1)]

    def on_packet(self, now, header, payload_len, group):
        self.seen.append((now, header, payload_len, group))
        return [Log("got", {"seq": header.seq})] if header.seq == 0 else []

    def metrics(self):
        return {"seen": len(self.seen)}


@pytest.fixture
def toy():
    register(ProtocolSpec("toy", 250, ToyParams, ToySender, ToyReceiver,
                          extension=StructExtension(ToyExt, "!BI"), flags=0x10,
                          channels=lambda p: 2))
    yield Session.model_validate({
        "protocol": "toy", "flow": "t", "session_id": 3, "source": "10.0.0.1",
        "channels": [{"group": "239.3.0.1", "port": 1}, {"group": "239.3.0.2", "port": 1}]})
    unregister("toy")


def test_extension_flags_and_payload_reach_the_receiver_core(toy):
    sim = Simulation(toy)
    sim.add("s", "sender")
    r = sim.add("r", "receiver", Link(delay=0.01), start=0.05)
    sim.run(4.0)
    seen = r.agent.core.seen
    assert seen, "nothing received"
    for now, header, payload_len, group in seen:
        assert payload_len == 300
        assert header.ext == ToyExt(header.channel, header.ext.cycle)
        assert header.ext.cycle % 2 == header.channel
        assert header.flags == (0x10 if header.channel == 1 else 0)
        assert group == str(toy.channels[header.channel].group)
        assert now * 1e9 - header.send_ns == pytest.approx(0.01e9)  # one-way delay
    assert {h.channel for _, h, _, _ in seen} == {0, 1}


def test_timers_leave_rejoin_logs_and_gauges(toy):
    sim = Simulation(toy)
    s = sim.add("s", "sender")
    r = sim.add("r", "receiver")
    sim.run(4.0)
    # Channel 1 was left for one second: its 5 packets are not loss, and not received.
    chan = r.agent.stats.channels[1]
    assert chan.lost == 0
    assert chan.packets == 20 - 5
    assert r.agent.stats.channels[0].packets == 20
    assert [(x["event"], x["channel"]) for x in r.records() if x["event"] in ("join", "leave")] \
        == [("join", 0), ("join", 1), ("leave", 1), ("join", 1), ("leave", 0), ("leave", 1)]
    assert r.records("got")[0]["seq"] == 0
    assert r.agent.metrics.value("mcc_agent_seen") == 35
    # A core's event named like a runtime event is renamed; its reserved field too.
    assert s.records("core_stats")[0]["event_"] == "shadowed"
    assert "bad name!" in s.records("error")[0]["error"]
    assert s.agent.metrics.value("mcc_agent_sent") == 40
    assert s.agent._timers.keys() == set()  # everything cancelled at stop
    assert s.records()[-1]["event"] == "stop"


def test_rejoin_before_prune_keeps_forwarding_and_join_delay_is_logged(toy):
    sim = Simulation(toy)
    sim.add("s", "sender")
    r = sim.add("r", "receiver", Link(join_delay=0.35, leave_delay=2.5))
    sim.run(4.0)
    firsts = [(x["channel"], x["after_join"]) for x in r.records("first_packet")]
    first = dict(reversed(firsts))  # the first record per channel
    # The first packet of each channel sent after the 350 ms join latency (ticks every 100 ms,
    # channels alternate: channel 1 at 0.4 s, channel 0 at 0.5 s).
    assert first == {0: pytest.approx(0.5), 1: pytest.approx(0.4)}
    # Re-joined at 2 s while the routers still forwarded (leave latency 2.5 s): no join wait.
    assert firsts[-1] == (1, pytest.approx(0.0, abs=0.11))
    assert r.agent.stats.channels[1].lost == 0


def test_a_shared_router_passes_the_first_join_up_and_loses_a_packet_for_all(toy):
    sim = Simulation(toy, seed=3, routers={
        "r": Router(delay=0.1, loss=0.25, join_delay=0.3, leave_delay=0.3)})
    sim.add("s", "sender")
    a = sim.add("a", "receiver", Link(delay=0.01, join_delay=0.01, via="r"))
    b = sim.add("b", "receiver", Link(delay=0.02, join_delay=0.02, via="r"), start=1.05)
    sim.run(4.0)

    def first(node, channel):
        return next(x["after_join"] for x in node.records("first_packet")
                    if x["channel"] == channel)

    # a's join reaches r at 0.01 s and r passes it up (0.3 s): channel 1's packets leave
    # every 0.2 s from 0 s, so the first one sent after 0.31 s (0.4 s, or one 0.2 s
    # later for each that r lost) arrives 0.11 s after it left.
    late = (first(a, 1) - 0.51) / 0.2
    assert late == pytest.approx(round(late)) and 0 <= round(late) <= 3
    # b's join finds both groups flowing at r (a left channel 1 at 1 s, but b's join
    # came before r's leave took effect): no router join delay, only b's own hop.
    assert first(b, 0) < 0.3 and first(b, 1) < 0.3
    # One loss at r for both: the channel-0 packets both received while joined match.
    def seqs(node):
        return {h.seq for _, h, _, _ in node.agent.core.seen
                if h.channel == 0 and 1.5 <= h.send_ns / 1e9 <= 3.5}
    assert seqs(a) == seqs(b) and 5 <= len(seqs(a)) < 11
    assert sim.net.routers["r"].counters.lost > 0


def test_a_link_via_an_unknown_router_is_refused(toy):
    with pytest.raises(ValueError, match="no router 'r9'"):
        Simulation(toy).add("a", "receiver", Link(via="r9"))


def test_bottleneck_link_drops_become_loss(toy):
    sim = Simulation(toy)
    sim.add("s", "sender")
    # 300-byte packets every 100 ms = 24 kbit/s offered into a 16 kbit/s link, 2-packet queue.
    r = sim.add("r", "receiver", Link(rate=16e3, queue=2))
    sim.run(4.0)
    counters = r.port.counters
    assert counters.queue_drops > 5
    rx = r.agent.stats.received()
    assert counters.delivered + counters.queue_drops + 2 >= counters.offered  # 2 in flight
    assert rx.lost >= counters.queue_drops - 2  # drops show up as sequence gaps
    assert rx.bytes * 8 / 4.0 <= 16e3


def test_core_errors_surface(toy):
    class BadChannel(ToySender):
        def on_timer(self, now, timer_id):
            return [Send(7, 100)]

    class NotAnAction(ToySender):
        def on_timer(self, now, timer_id):
            return ["send"]

    class UndeclaredFlag(ToySender):
        def on_timer(self, now, timer_id):
            return [Send(0, 100, flags=0x20, ext=ToyExt(0, 0))]

    for core, error in ((BadChannel, ValueError), (NotAnAction, TypeError),
                        (UndeclaredFlag, ValueError)):
        sim = Simulation(toy)
        node = sim.add("s", "sender")
        node.agent.core = core(None, toy)
        with pytest.raises(error):
            sim.run(1.0)


class NullTransport:
    """A network that takes every packet and delivers none."""

    def send(self, channel, data):
        return True

    def join(self, channel):
        pass

    def leave(self, channel):
        pass

    def send_feedback(self, to, data):
        return True

    def close(self):
        pass


def test_stats_record_how_late_the_agents_timers_fired(toy):
    # A core whose handler stalls 50 ms makes the next timer fire ~40 ms late: the
    # stats record of that second says so (a stalled agent reads its sockets late too).
    class Stalling(ToySender):
        def start(self, now):
            return [SetTimer("stall", now + 0.01), SetTimer("next", now + 0.02)]

        def on_timer(self, now, timer_id):
            if timer_id == "stall":
                time.sleep(0.05)
            return []

    loop = EventLoop()
    stream = io.StringIO()
    agent = Agent(Stalling(None, toy), "sender", toy, "s", loop,
                  EventLog(stream, "s", "sender", wall_clock=False),
                  AgentMetrics("s", "t", "toy", "sender"), NullTransport())
    agent.start()
    loop.run(until=loop.now() + 1.1)
    agent.stop()
    loop.close()
    stats = [json.loads(line) for line in stream.getvalue().splitlines()
             if '"stats"' in line]
    assert 40.0 <= stats[0]["timer_late_max_ms"] < 500.0, stats[0]
    assert "timer_late_max_ms" not in stats[1]  # the record at stop: no timer since the tick


def test_a_datagram_read_late_reaches_the_core_at_its_arrival_time(toy):
    # In a lab the transport passes the kernel's receive time of each datagram: the core
    # sees that time, never one before an event it has already seen (the "leave" timer at
    # 1.0 s here), and the first-packet log measures from the join to the arrival.
    sim = Simulation(toy)
    agent = sim.add("r", "receiver").agent

    def packet(seq):
        return encode(Header(250, 3, 0, seq, 0, 0, ToyExt(0, seq)), toy.spec.extension, 300)

    reads = [(1.040, 0.980), (1.050, 1.045), (1.060, None)]  # (read at, arrived at)
    for seq, (read, arrival) in enumerate(reads):
        sim.loop.call_at(read, lambda s=seq, a=arrival: agent.deliver(packet(s), 0, a))
    sim.run(2.5)
    assert [round(now, 6) for now, *_ in agent.core.seen] == [1.0, 1.045, 1.06]
    (first,) = [r for r in sim.nodes["r"].records("first_packet")]
    assert first["after_join"] == pytest.approx(1.0)  # joined at 0, arrival clamped to 1.0


def test_simulated_timers_are_never_late(toy):
    sim = Simulation(toy)
    sim.add("s", "sender")
    sim.run(3.0)
    stats = sim.nodes["s"].records("stats")
    assert [r.get("timer_late_max_ms") for r in stats] == [0.0, 0.0, 0.0]  # 1 s, 2 s, stop
