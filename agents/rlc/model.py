"""RLC's analytic model and loss accounting (Vicisano, Rizzo, Crowcroft, INFOCOM 1998).

* Eq. 2: ``T = (s / tau0) * c' / (sqrt(p) * sqrt(P * W))`` with ``p`` the burst
  loss rate and ``1 <= c' <= 2`` (the paper's band).
* Appendix A: the two-level steady-state model behind Eq. 2, as a function of
  the fraction ``alpha`` of the level-(i+1) SP interval spent at level i+1.
* Burst losses: losses closer than ``t_D`` to the first loss of an event count once.
* Jain's fairness index (footnote 3) lives in :mod:`mcclab.analysis.metrics`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def eq2_throughput(p: float, packet_size: float, tau0: float, P: int = 1, W: int = 8,  # noqa: N803
                   c: float = 1.0) -> float:
    """Eq. 2 in bytes/s: ``(s / tau0) * c / (sqrt(p) * sqrt(P * W))``; inf for p = 0."""
    if p < 0:
        raise ValueError("loss rate must be >= 0")
    if p == 0:
        return math.inf
    return packet_size / tau0 * c / (math.sqrt(p) * math.sqrt(P * W))


def eq2_band(p: float, packet_size: float, tau0: float, P: int = 1, W: int = 8,  # noqa: N803
             c_low: float = 1.0, c_high: float = 2.0) -> tuple[float, float]:
    """Eq. 2's throughput band (bytes/s) for ``c'`` in ``[c_low, c_high]``."""
    return (eq2_throughput(p, packet_size, tau0, P, W, c_low),
            eq2_throughput(p, packet_size, tau0, P, W, c_high))


def eq2_c(throughput: float, p: float, packet_size: float, tau0: float, P: int = 1,  # noqa: N803
          W: int = 8) -> float:
    """The ``c'`` a measured (throughput bytes/s, burst loss rate) point implies."""
    if p <= 0:
        return math.inf
    return throughput * tau0 * math.sqrt(p) * math.sqrt(P * W) / packet_size


def appendix_cycle(alpha: float, level: int, packet_size: float, tau0: float, P: int = 1,  # noqa: N803
                   W: int = 8) -> tuple[float, float]:
    """Appendix A: (throughput bytes/s, loss rate) of a receiver oscillating between levels
    ``level`` and ``level + 1`` that loses once, ``alpha`` into the level-(i+1) SP interval.

    ``t_H = alpha 2^(i+1) P W tau0``, ``N_H = 4 alpha P W 4^i``; back at level i until the
    next level-i SP: ``t_L = (1 - 2 alpha) 2^i P W tau0`` for ``alpha < 1/2``, else
    ``(2 - 2 alpha) 2^i P W tau0``; ``N_L`` likewise at ``2^i`` packets per tau0 (Eqs. 3, 4).
    """
    if not 0 <= alpha < 1:
        raise ValueError("alpha must be in [0, 1)")
    two_i = 2 ** level
    pw = P * W
    t_h = alpha * 2 * two_i * pw * tau0
    n_h = 4 * alpha * pw * two_i ** 2
    low = (1 - 2 * alpha) if alpha < 0.5 else (2 - 2 * alpha)
    t_l = low * two_i * pw * tau0
    n_l = low * pw * two_i ** 2
    return packet_size * (n_h + n_l) / (t_h + t_l), 1.0 / (n_h + n_l)


def loss_events(times: Iterable[float], deaf_period: float) -> int:
    """Losses counted the paper's way: a loss within ``deaf_period`` of the first loss of
    the current event belongs to it; the first loss after that starts a new event."""
    count = 0
    start: float | None = None
    for t in sorted(times):
        if start is None or t - start >= deaf_period:
            start = t
            count += 1
    return count
