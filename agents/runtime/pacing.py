"""A pacing clock: when the next packet of a rate-paced stream is due.

Due times are computed from the previous due time, not from when the packet was
actually sent, so timer lateness does not accumulate into a lower rate: a late
wake-up sends every packet already due. If the caller falls further behind than
``max_lag`` (a stalled process), the schedule restarts at ``now`` instead of
sending the whole backlog as one burst; :attr:`Pacer.skipped` counts the time
given up that way.
"""

from __future__ import annotations


class Pacer:
    """Paces packets of varying size at ``rate`` bit/s, starting at ``start``."""

    __slots__ = ("rate", "next_due", "max_lag", "skipped")

    def __init__(self, rate: float, start: float, max_lag: float = 0.25):
        if rate <= 0:
            raise ValueError(f"pacing rate must be positive, got {rate}")
        self.rate = rate
        self.next_due = start
        self.max_lag = max_lag
        self.skipped = 0.0

    def due(self, now: float) -> bool:
        """Whether a packet may be sent at ``now`` (rebasing first if far behind)."""
        lag = now - self.next_due
        if lag > self.max_lag:
            self.skipped += lag
            self.next_due = now
        return self.next_due <= now

    def sent(self, size: int) -> None:
        """Account for one packet of ``size`` bytes sent at the current due time."""
        self.next_due += size * 8.0 / self.rate

    def set_rate(self, rate: float, now: float) -> None:
        """Change the rate from ``now`` on (the next packet is due no later than before)."""
        if rate <= 0:
            raise ValueError(f"pacing rate must be positive, got {rate}")
        if self.next_due > now:
            self.next_due = now + (self.next_due - now) * self.rate / rate
        self.rate = rate
