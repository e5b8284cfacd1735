"""The glue between a protocol core and its environment, shared by the real runtime and the
simulator.

:class:`Agent` parses incoming datagrams, keeps the statistics, carries out the
core's actions (framing packets with per-channel sequence numbers, joining,
leaving, timers, log records, gauges), writes a stats record and refreshes the
gauges every second, and flushes the event log with it. The clock and the
network are injected: :class:`~agents.runtime.loop.EventLoop` with
:class:`~agents.runtime.transport.UdpTransport` in a lab, :class:`agents.sim.SimLoop`
with :class:`agents.sim.SimPort` in simulated time.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from agents.runtime.actions import (
    CancelTimer,
    Feedback,
    Join,
    Leave,
    Log,
    Metric,
    Reject,
    Send,
    SetTimer,
)
from agents.runtime.core import Core
from agents.runtime.eventlog import EventLog
from agents.runtime.feedback import encode_feedback, parse_feedback
from agents.runtime.header import Drop, Header, encode
from agents.runtime.loop import Clock, TimerHandle
from agents.runtime.metrics import AgentMetrics
from agents.runtime.session import Session
from agents.runtime.stats import AgentStats
from agents.runtime.transport import Transport

STATS_INTERVAL = 1.0
RUNTIME_EVENTS = frozenset({"start", "stop", "join", "leave", "first_packet", "stats", "error"})
_U32 = (1 << 32) - 1


class Agent:
    """One sender or receiver: a core, a clock, a transport, statistics, log and metrics."""

    def __init__(self, core: Core, role: str, session: Session, node: str, clock: Clock,
                 log: EventLog, metrics: AgentMetrics, transport: Transport | None = None):
        self.core = core
        self.role = role
        self.session = session
        self.node = node
        self.clock = clock
        self.log = log
        self.metrics = metrics
        self.transport = transport
        self.spec = session.spec
        self.parser = self.spec.parser(session.session_id, len(session.channels))
        self.groups = [str(c.group) for c in session.channels]
        self.stats = AgentStats()
        self.joined: dict[int, float] = {}  # channel -> join time
        self._seq: dict[int, int] = {}
        self._timers: dict[str, TimerHandle] = {}
        self._tick: TimerHandle | None = None
        self._next_tick = 0.0
        self._seen = -math.inf  # the latest time the core has been given
        self.running = False

    # lifecycle
    def start(self) -> None:
        if self.transport is None:
            raise RuntimeError("attach a transport before starting the agent")
        now = self.clock.now()
        self.running = True
        self.stats.start(now)
        self.log.write(now, "start", session=self.session.model_dump(mode="json"),
                       protocol=self.spec.name, flow=self.session.flow)
        self._next_tick = now + STATS_INTERVAL
        self._tick = self.clock.call_at(self._next_tick, self._on_tick)
        self._seen = now
        self._apply(self.core.start(now), now)
        self.log.flush()

    def stop(self) -> None:
        """End the session: last stats record, leave everything, flush."""
        if not self.running:
            return
        self.running = False
        now = self.clock.now()
        for action in self.core.stop(now):
            if isinstance(action, Log | Metric):
                self._apply([action], now)
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        if self._tick is not None:
            self._tick.cancel()
        self._write_stats(now)
        for channel in list(self.joined):
            self._leave(channel, now, reason="stop")
        rx, tx = self.stats.received(), self.stats.sent_totals()
        self.log.write(now, "stop", rx_packets=rx.packets, rx_bytes=rx.bytes, lost=rx.lost,
                       tx_packets=tx.packets, tx_bytes=tx.bytes,
                       send_errors=self.stats.send_errors,
                       dropped={str(r): n for r, n in self.stats.drops.counts.items() if n})
        self.log.flush()

    # events from the environment
    def deliver(self, data: bytes, channel: int, arrival: float | None = None) -> None:
        """A datagram arrived on ``channel``'s group and port, at ``arrival`` on this clock
        when the transport knows (the kernel's timestamp).

        The core sees the arrival time, so a stalled agent neither stretches a round trip
        measured to a packet (WEBRC's MRTT) nor moves a packet into a later interval; never
        a time before an event it has already seen, so its clock does not run back.
        """
        if not self.running:
            return
        now = self.clock.now()
        at = now if arrival is None else min(max(arrival, self._seen), now)
        header = self.parser.parse(data, channel)
        if isinstance(header, Drop):
            self._drop(header)
            return
        self._received(at, now, header, len(data))

    def deliver_feedback(self, data: bytes, peer: str | None, arrival: float | None = None
                         ) -> None:
        """A unicast feedback datagram arrived from ``peer`` (``ADDR:PORT`` or a node name;
        None for a source no reply can reach), at ``arrival`` on this clock when the
        transport knows (the kernel's timestamp)."""
        if not self.running:
            return
        now = self.clock.now()
        arrival = now if arrival is None else min(arrival, now)
        body = parse_feedback(data, self.spec.protocol_id, self.session.session_id)
        if isinstance(body, Drop):
            self._drop(body)
            return
        if peer is None:  # cores may answer any peer they are given: never an unreachable one
            self._drop(Drop.PEER)
            return
        self._seen = now
        actions = self.core.on_feedback_at(now, arrival, body, peer)
        if _rejected(actions):
            self._drop(Drop.FEEDBACK)
        else:
            self.stats.feedback_rx += 1
            self.metrics.feedback_received += 1
        self._apply(actions, now)

    def _drop(self, reason: Drop) -> None:
        """Count a dropped datagram: stats (the log's ``dropped``) and the metric."""
        self.stats.on_drop(reason)
        self.metrics.malformed[reason] += 1

    def _received(self, at: float, now: float, header: Header, size: int) -> None:
        """A parsed datagram that arrived at ``at`` and is handled at ``now``."""
        self._seen = at
        actions = self.core.on_packet(at, header, size, self.groups[header.channel])
        if _rejected(actions):  # the core found the extension inconsistent: not traffic
            self._drop(Drop.EXTENSION)
            self._apply(actions, now)
            return
        chan = self.stats.channels.get(header.channel)
        if chan is None or chan.base is None:
            joined = self.joined.get(header.channel)
            self.log.write(now, "first_packet", channel=header.channel, seq=header.seq,
                           after_join=None if joined is None else round(at - joined, 6))
        self.stats.on_packet(header.channel, header.seq, size)
        m = self.metrics
        m.packets_received += 1
        m.bytes_received += size
        self._apply(actions, now)

    def _on_timer(self, timer_id: str) -> None:
        handle = self._timers.pop(timer_id, None)
        if self.running:
            now = self.clock.now()
            if handle is not None:
                self.stats.on_timer_late(max(0.0, now - handle.when))
            self._seen = now
            self._apply(self.core.on_timer(now, timer_id), now)

    def _on_tick(self) -> None:
        now = self.clock.now()
        if self._tick is not None:
            self.stats.on_timer_late(max(0.0, now - self._tick.when))
        self._write_stats(now)
        self.log.flush()
        # Ticks stay on the start + k seconds grid, skipping any missed while stalled.
        while self._next_tick <= now:
            self._next_tick += STATS_INTERVAL
        self._tick = self.clock.call_at(self._next_tick, self._on_tick)

    def _write_stats(self, now: float) -> None:
        record = self.stats.roll(now, self.role)
        core = self.core.metrics()
        if core:
            record["core"] = {name: _plain(value) for name, value in core.items()}
        self.log.write(now, "stats", **record)
        m = self.metrics
        m.packets_lost = record.get("total_lost", 0)
        m.loss_fraction = record.get("loss_fraction", 0.0)
        m.throughput = self.stats.last_throughput
        m.send_rate = self.stats.last_send_rate
        for name, value in core.items():
            self._gauge(now, name, value)

    # actions from the core
    def _apply(self, actions: list[Any], now: float) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._send(action, now)
            elif isinstance(action, SetTimer):
                old = self._timers.get(action.timer_id)
                if old is not None:
                    old.cancel()
                self._timers[action.timer_id] = self.clock.call_at(
                    action.at, partial(self._on_timer, action.timer_id))
            elif isinstance(action, CancelTimer):
                old = self._timers.pop(action.timer_id, None)
                if old is not None:
                    old.cancel()
            elif isinstance(action, Join):
                self._join(self._channel(action.channel), now)
            elif isinstance(action, Leave):
                self._leave(self._channel(action.channel), now, reason="core")
            elif isinstance(action, Log):
                event = action.event if action.event not in RUNTIME_EVENTS \
                    else f"core_{action.event}"
                self.log.write(now, event, **action.fields)
            elif isinstance(action, Metric):
                self._gauge(now, action.name, action.value)
            elif isinstance(action, Feedback):
                self._feedback(action)
            elif isinstance(action, Reject):
                pass  # counted by the datagram handler that received it (see _rejected)
            else:
                raise TypeError(f"core returned {action!r}, which is not an action")

    def _channel(self, channel: int) -> int:
        if not 0 <= channel < len(self.groups):
            raise ValueError(f"core used channel {channel}; the session has {len(self.groups)}")
        return channel

    def _send(self, action: Send, now: float) -> None:
        channel = self._channel(action.channel)
        if action.flags & ~self.spec.flags:
            raise ValueError(f"core set flags {action.flags:#04x}; {self.spec.name} declares "
                             f"{self.spec.flags:#04x}")
        seq = self._seq.get(channel, 0)
        header = Header(self.spec.protocol_id, self.session.session_id, channel, seq,
                        max(0, int(now * 1e9)), action.flags, action.ext)
        data = encode(header, self.spec.extension, action.size)
        self._seq[channel] = (seq + 1) & _U32
        assert self.transport is not None
        if self.transport.send(channel, data):
            self.stats.on_send(channel, len(data))
            m = self.metrics
            m.packets_sent += 1
            m.bytes_sent += len(data)
        else:
            self.stats.send_errors += 1
            self.metrics.send_errors += 1

    def _feedback(self, action: Feedback) -> None:
        if not self.spec.feedback:
            raise ValueError(f"core sent feedback; {self.spec.name} is not registered with "
                             "feedback=True")
        data = encode_feedback(self.spec.protocol_id, self.session.session_id, action.data)
        assert self.transport is not None
        if self.transport.send_feedback(action.to, data):
            self.stats.feedback_tx += 1
            self.metrics.feedback_sent += 1
        else:
            self.stats.send_errors += 1
            self.metrics.send_errors += 1

    def _join(self, channel: int, now: float) -> None:
        if channel in self.joined:
            return
        assert self.transport is not None
        chan = self.session.channels[channel]
        source = str(self.session.source) if self.session.ssm else None
        try:
            self.transport.join(channel)
        except OSError as exc:
            self.log.write(now, "error", what="join", channel=channel, error=str(exc))
            self.log.flush()
            raise
        self.joined[channel] = now
        self.metrics.joins += 1
        self.metrics.joined = len(self.joined)
        self.log.write(now, "join", channel=channel, group=str(chan.group), port=chan.port,
                       source=source)

    def _leave(self, channel: int, now: float, reason: str) -> None:
        if channel not in self.joined:
            return
        assert self.transport is not None
        self.transport.leave(channel)
        del self.joined[channel]
        self.stats.on_leave(channel)
        self.metrics.leaves += 1
        self.metrics.joined = len(self.joined)
        self.log.write(now, "leave", channel=channel,
                       group=str(self.session.channels[channel].group), reason=reason)

    def _gauge(self, now: float, name: str, value: float) -> None:
        error = self.metrics.core_gauge(name, value)
        if error is not None:
            self.log.write(now, "error", what="metric", error=error)


def _rejected(actions: list[Any]) -> bool:
    """Whether a core's answer to a datagram rejects it."""
    return any(isinstance(action, Reject) for action in actions)


def _plain(value: Any) -> Any:
    """A gauge value as JSON can hold it (numbers rounded to 9 significant digits)."""
    try:
        return float(f"{float(value):.9g}")
    except (TypeError, ValueError):
        return None
