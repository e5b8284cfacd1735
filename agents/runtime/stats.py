"""Per-agent statistics: packets, bytes, loss from sequence gaps, per-second throughput.

Loss is counted per channel and per membership period, as RTP does: a period
starts at the first packet after a join; the packets expected are the span from
that first sequence number to the highest seen (with 32-bit wrap-around), and
the loss is expected minus received (never below zero, so duplicates cannot make
it negative). Leaving a channel closes its period; the gap across a leave is not
loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.runtime.header import Drop, DropCounter

_WRAP = 1 << 32
_HALF = 1 << 31


@dataclass
class ChannelStats:
    """One channel's counters (all periods) and the open period's sequence state."""

    packets: int = 0
    bytes: int = 0
    closed_lost: int = 0  # loss of the periods already closed by a leave
    base: int | None = None  # extended sequence number of the period's first packet
    highest: int = 0  # highest extended sequence number in the period
    period_packets: int = 0
    reordered: int = 0  # packets older than the highest seen

    def on_packet(self, seq: int, size: int) -> None:
        self.packets += 1
        self.bytes += size
        self.period_packets += 1
        if self.base is None:
            self.base = self.highest = seq
            return
        delta = (seq - self.highest) % _WRAP
        if 0 < delta < _HALF:
            self.highest += delta
        elif delta != 0:
            self.reordered += 1

    @property
    def lost(self) -> int:
        return self.closed_lost + self._open_lost()

    def _open_lost(self) -> int:
        if self.base is None:
            return 0
        return max(0, self.highest - self.base + 1 - self.period_packets)

    def close_period(self) -> None:
        self.closed_lost += self._open_lost()
        self.base = None
        self.highest = 0
        self.period_packets = 0


@dataclass
class Totals:
    packets: int = 0
    bytes: int = 0
    lost: int = 0


@dataclass
class AgentStats:
    """Counters for one agent; :meth:`roll` closes a one-second (or any) interval."""

    channels: dict[int, ChannelStats] = field(default_factory=dict)
    sent: dict[int, Totals] = field(default_factory=dict)
    drops: DropCounter = field(default_factory=DropCounter)
    send_errors: int = 0
    feedback_tx: int = 0
    feedback_rx: int = 0
    # The worst lateness of the agent's timers this interval (None: no timer fired):
    # a stalled agent process, which reads its sockets late too.
    timer_late_max: float | None = None
    _last: Totals = field(default_factory=Totals)
    _last_sent: Totals = field(default_factory=Totals)
    _last_time: float | None = None
    last_throughput: float = 0.0  # received bit/s (UDP payload) over the last interval
    last_send_rate: float = 0.0  # sent bit/s over the last interval

    def start(self, now: float) -> None:
        self._last_time = now

    # receiving
    def on_packet(self, channel: int, seq: int, size: int) -> None:
        self.channels.setdefault(channel, ChannelStats()).on_packet(seq, size)

    def on_leave(self, channel: int) -> None:
        if channel in self.channels:
            self.channels[channel].close_period()

    def on_drop(self, reason: Drop) -> None:
        self.drops.add(reason)

    def on_timer_late(self, late: float) -> None:
        """A timer fired ``late`` seconds after it was due."""
        if self.timer_late_max is None or late > self.timer_late_max:
            self.timer_late_max = late

    # sending
    def on_send(self, channel: int, size: int) -> None:
        t = self.sent.setdefault(channel, Totals())
        t.packets += 1
        t.bytes += size

    def received(self) -> Totals:
        """Totals over all channels since the start."""
        return Totals(sum(c.packets for c in self.channels.values()),
                      sum(c.bytes for c in self.channels.values()),
                      sum(c.lost for c in self.channels.values()))

    def sent_totals(self) -> Totals:
        return Totals(sum(t.packets for t in self.sent.values()),
                      sum(t.bytes for t in self.sent.values()))

    def roll(self, now: float, role: str = "receiver") -> dict[str, Any]:
        """Close the interval ending ``now``; the record the event log writes each second.

        Receive fields appear for receivers (and for any agent that received something),
        send fields for senders (and for any agent that sent something).
        """
        start = self._last_time if self._last_time is not None else now
        span = max(now - start, 1e-9)
        rx, tx = self.received(), self.sent_totals()
        record: dict[str, Any] = {"interval": round(span, 6)}
        if role == "receiver" or rx.packets:
            d_packets, d_lost = rx.packets - self._last.packets, rx.lost - self._last.lost
            self.last_throughput = (rx.bytes - self._last.bytes) * 8.0 / span
            record.update({
                "rx_packets": d_packets, "rx_bytes": rx.bytes - self._last.bytes,
                "rx_lost": d_lost, "throughput_bps": round(self.last_throughput, 3),
                "loss_fraction": round(d_lost / (d_lost + d_packets), 6) if d_lost > 0 else 0.0,
                "total_rx_packets": rx.packets, "total_rx_bytes": rx.bytes,
                "total_lost": rx.lost,
                "channels": {str(ch): {"packets": c.packets, "bytes": c.bytes, "lost": c.lost}
                             for ch, c in sorted(self.channels.items())},
            })
        if role == "sender" or tx.packets:
            self.last_send_rate = (tx.bytes - self._last_sent.bytes) * 8.0 / span
            record.update({
                "tx_packets": tx.packets - self._last_sent.packets,
                "tx_bytes": tx.bytes - self._last_sent.bytes,
                "send_rate_bps": round(self.last_send_rate, 3),
                "total_tx_packets": tx.packets, "total_tx_bytes": tx.bytes,
                "send_errors": self.send_errors,
                "sent_channels": {str(ch): {"packets": t.packets, "bytes": t.bytes}
                                  for ch, t in sorted(self.sent.items())},
            })
        if self.feedback_tx or self.feedback_rx:
            record.update({"feedback_tx": self.feedback_tx, "feedback_rx": self.feedback_rx})
        if self.timer_late_max is not None:
            record["timer_late_max_ms"] = round(self.timer_late_max * 1e3, 3)
            self.timer_late_max = None
        record["dropped"] = {str(r): n for r, n in self.drops.counts.items() if n}
        self._last, self._last_sent, self._last_time = rx, tx, now
        return record
