"""The averages ORMCC keeps: EWMA with a mean deviation (sec. III-A.2)."""

from __future__ import annotations


class Ewma:
    """E <- (1-a)E + aU, then sigma <- (1-a)sigma + a|E - U| (the paper's order).

    The first sample sets E to the sample and sigma to ``first_dev`` times it
    (0 for TRAC so the first CR does not block everyone's CIs; 1/2 for T^cr,
    as RFC 6298 starts RTTVAR).
    """

    __slots__ = ("alpha", "first_dev", "mean", "dev", "samples")

    def __init__(self, alpha: float, first_dev: float = 0.0):
        self.alpha = alpha
        self.first_dev = first_dev
        self.mean: float | None = None
        self.dev = 0.0
        self.samples = 0

    def update(self, sample: float) -> None:
        """Fold one sample in."""
        self.samples += 1
        if self.mean is None:
            self.mean = sample
            self.dev = self.first_dev * abs(sample)
            return
        a = self.alpha
        self.mean = (1 - a) * self.mean + a * sample
        self.dev = (1 - a) * self.dev + a * abs(self.mean - sample)

    def reset(self, sample: float) -> None:
        """Start over from ``sample``, keeping the deviation (a new CR: sec. III-A.3)."""
        self.mean = sample
        self.samples += 1
