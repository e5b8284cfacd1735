"""What a TFMCC receiver computes: the TCP throughput equation (RFC 4654 sec. 2.1) and the
loss-event rate from weighted loss intervals (sec. 4.1, TFRC's method, RFC 5348 sec. 5)."""

from __future__ import annotations

import math

WEIGHTS = (1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2)  # n = 8 loss intervals
N_INTERVALS = len(WEIGHTS)


def tcp_rate(s: float, rtt: float, p: float) -> float:
    """The equation in bit/s for ``s``-byte packets, round-trip time ``rtt`` (s) and loss-event
    rate ``p``, with t_RTO = 4 R and b = 1 (sec. 2.1)::

        X = 8s / (R sqrt(2p/3) + 4R * 3 sqrt(3p/8) * p * (1 + 32 p^2))
    """
    if p <= 0:
        return math.inf
    denom = rtt * math.sqrt(2 * p / 3) + 4 * rtt * 3 * math.sqrt(3 * p / 8) * p * (1 + 32 * p * p)
    return 8 * s / denom


def invert_rate(s: float, rtt: float, rate: float) -> float:
    """The loss-event rate p with ``tcp_rate(s, rtt, p) == rate`` (bisection on log p); used
    to seed the first loss interval from the receive rate (RFC 5348 sec. 6.3.1)."""
    lo, hi = 1e-9, 1.0
    if tcp_rate(s, rtt, lo) <= rate:
        return lo
    if tcp_rate(s, rtt, hi) >= rate:
        return hi
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if tcp_rate(s, rtt, mid) > rate:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


class LossHistory:
    """Loss intervals in packets; a loss starts a new loss event only when the lost packet was
    sent more than one RTT after the packet that started the previous event.

    Sequence numbers given here are unwrapped (monotonic). ``intervals[0]`` is the most
    recent closed interval; the open interval runs from the last event's start to the
    highest sequence number seen.
    """

    __slots__ = ("intervals", "event_seq", "event_time", "highest", "events")

    def __init__(self) -> None:
        self.intervals: list[float] = []
        self.event_seq: int | None = None
        self.event_time = -math.inf
        self.highest: int | None = None
        self.events = 0

    def received(self, seq: int) -> None:
        """A packet with unwrapped sequence number ``seq`` arrived."""
        if self.highest is None or seq > self.highest:
            self.highest = seq

    def lost(self, seq: int, sent: float, rtt: float, first_interval: float | None = None
             ) -> bool:
        """Packet ``seq``, sent at ``sent`` (sender clock, s), is lost. True if it starts a
        new loss event. ``first_interval`` seeds the history at the first event."""
        if self.event_seq is not None and sent <= self.event_time + rtt:
            return False
        if self.event_seq is not None:
            self.intervals.insert(0, float(seq - self.event_seq))
            del self.intervals[N_INTERVALS:]
        elif first_interval is not None:
            self.intervals = [max(first_interval, 1.0)]
        self.event_seq, self.event_time = seq, sent
        self.events += 1
        return True

    def open_interval(self) -> float:
        """Packets since the start of the last loss event (0 before any)."""
        if self.event_seq is None or self.highest is None:
            return 0.0
        return float(max(self.highest - self.event_seq + 1, 0))

    def loss_rate(self) -> float:
        """p = 1 / I_mean, with I_mean the larger of the weighted means with and without the
        open interval (0 before the first loss event)."""
        if not self.intervals:
            return 0.0
        closed = self.intervals[:N_INTERVALS]
        with_open = [self.open_interval(), *closed][:N_INTERVALS]
        i_tot1 = sum(i * w for i, w in zip(closed, WEIGHTS, strict=False))
        w_tot1 = sum(WEIGHTS[:len(closed)])
        i_tot0 = sum(i * w for i, w in zip(with_open, WEIGHTS, strict=False))
        w_tot0 = sum(WEIGHTS[:len(with_open)])
        mean = max(i_tot0 / w_tot0, i_tot1 / w_tot1)
        return 1.0 / mean if mean > 0 else 1.0
