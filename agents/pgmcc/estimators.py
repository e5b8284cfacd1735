"""What PGMCC measures: the receivers' loss-rate EWMA (draft sec. 2.6), the throughput
formula used to compare receivers (sec. 2.4), and the acker's timeout estimator (sec. 2.7,
TCP's SRTT/RTTVAR after RFC 6298)."""

from __future__ import annotations

import math


def inverse_throughput(rtt: float, p: float) -> float:
    """M = 1/T = RTT sqrt(p) (1 + 9p (1 + 32 p^2)) (sec. 2.4: the TCP equation with RTO = 4 RTT
    and its constant factors left out). Only ratios of M are used: a larger M is a slower
    receiver; M = 0 (no loss) is the fastest possible."""
    if p <= 0:
        return 0.0
    return rtt * math.sqrt(p) * (1 + 9 * p * (1 + 32 * p * p))


def should_switch(m_candidate: float, m_acker: float, c: float) -> bool:
    """Sec. 2.3: receiver i replaces the acker when T_i < C T_acker, i.e. in terms of
    M = 1/T, when M_acker < C M_i."""
    return m_acker < c * m_candidate


class LossEwma:
    """The loss rate as a single-pole low-pass filter over x_i (1 lost, 0 received), updated
    at each reception or detected loss; ``gain`` is the weight of the newest x_i."""

    __slots__ = ("gain", "p")

    def __init__(self, gain: float):
        self.gain = gain
        self.p = 0.0

    def received(self) -> None:
        """A packet arrived (x = 0)."""
        self.p *= 1.0 - self.gain

    def lost(self) -> None:
        """A packet was found missing (x = 1)."""
        self.p = self.gain + (1.0 - self.gain) * self.p


class RtoEstimator:
    """SRTT and RTTVAR of the current acker (RFC 6298 sec. 2), restarted at each acker
    change as the draft asks (sec. 2.7)."""

    __slots__ = ("srtt", "rttvar")

    def __init__(self) -> None:
        self.srtt: float | None = None
        self.rttvar = 0.0

    def reset(self) -> None:
        """Forget every sample (a new acker)."""
        self.srtt = None
        self.rttvar = 0.0

    def sample(self, r: float) -> None:
        """One RTT measurement in seconds."""
        if self.srtt is None:
            self.srtt, self.rttvar = r, r / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - r)
            self.srtt = 0.875 * self.srtt + 0.125 * r

    def rto(self, initial: float, low: float, high: float) -> float:
        """SRTT + 4 RTTVAR within [low, high]; ``initial`` before any sample."""
        if self.srtt is None:
            return initial
        return min(max(self.srtt + 4 * self.rttvar, low), high)
