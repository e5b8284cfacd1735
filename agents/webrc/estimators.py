"""The receiver's moving averages (paper, Appendix).

* :class:`SelfAdjustingMean`: the EWMA whose averaging fraction adjusts itself,
  ``c = alpha * a**2 / v``; used for ARTT over the MRTT samples.
* :class:`LossFilter`: LOSSP by two filters in a row: an EWMA per epoch over the
  loss events and packets of that epoch (smoothing WEBRC's bursty losses, which
  follow joins), then the ``F_i`` estimator of the inverse loss event rate.
"""

from __future__ import annotations

import math


class SelfAdjustingMean:
    """``a_i = (1-c) a_{i-1} + c m_i``, ``v_i = (1-c) v_{i-1} + c m_i**2``, ``c = alpha a**2/v``.

    The paper starts from ``a_0 = v_0 = 1`` for values in [0, 1]. The update is
    scale-free (``a**2/v`` does not change when every sample is scaled), so we
    start from the first sample instead (``a = m_1``, ``v = m_1**2``) and need no
    bound on MRTT: our choice, since seconds are not in [0, 1] by nature.
    """

    def __init__(self, alpha: float):
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.alpha = alpha
        self.a: float | None = None
        self.v: float | None = None
        self.count = 0

    def update(self, m: float) -> float:
        """Add one sample; the new average."""
        self.count += 1
        if self.a is None or self.v is None or self.v <= 0:
            self.a, self.v = m, m * m
            return m
        c = self.alpha * self.a ** 2 / self.v
        self.a = (1 - c) * self.a + c * m
        self.v = (1 - c) * self.v + c * m * m
        return self.a

    @property
    def value(self) -> float | None:
        """The current average (None before the first sample)."""
        return self.a


def inverse_loss_step(f: float, x: float, packets: float, delta: float) -> float:
    """Apply the ``F_i`` estimator to ``packets`` measurements of value ``x`` in [0, 1].

    For 0/1 values the appendix's rule is ``F + delta`` (received) and
    ``(1-delta)(F + delta)`` (loss); both are ``(1 - delta*x)(F + delta)``, which we
    use for the smoothed, fractional ``x``. ``packets`` repetitions of that affine
    map have the closed form below; its fixed point is ``(1 - delta*x)/x``.
    """
    if packets <= 0:
        return f
    a = 1 - delta * x
    if a >= 1:
        return f + packets * delta
    an = a ** packets
    return an * f + delta * a * (1 - an) / (1 - a)


class LossFilter:
    """LOSSP = 1/F from the two-stage filter; ``reset`` sets it (start-up, sec. 3.3)."""

    def __init__(self, beta: float, delta: float):
        if not 0 < beta <= 1 or not 0 < delta < 1:
            raise ValueError("beta must be in (0, 1] and delta in (0, 1)")
        self.beta = beta
        self.delta = delta
        self.events = 0.0  # stage 1: smoothed loss events per epoch
        self.packets = 0.0  # stage 1: smoothed packets per epoch
        self.f = 0.0  # stage 2: estimate of 1/LOSSP (packets between loss events)
        self.ready = False

    def reset(self, lossp: float, packets_per_epoch: float) -> None:
        """Start (or restart) from LOSSP = ``lossp`` with the given epoch size.

        Stage 1 starts at ``lossp`` with the weight of a single epoch's update
        (``beta`` times an epoch), so measurements take over within a few epochs
        instead of the EWMA's whole memory (our choice).
        """
        lossp = min(max(lossp, 1e-9), 1.0)
        self.packets = self.beta * max(packets_per_epoch, 1.0)
        self.events = lossp * self.packets
        self.f = 1 / lossp
        self.ready = True

    def update(self, packets: int, events: int) -> None:
        """One epoch: ``packets`` received or lost, ``events`` loss events begun."""
        if not self.ready or packets <= 0:
            return
        b = self.beta
        self.events = (1 - b) * self.events + b * events
        self.packets = (1 - b) * self.packets + b * packets
        x = min(1.0, self.events / self.packets) if self.packets > 0 else 0.0
        self.f = inverse_loss_step(self.f, x, packets, self.delta)

    @property
    def lossp(self) -> float:
        """The loss event rate estimate (nan before the filter starts)."""
        return 1 / self.f if self.ready and self.f > 0 else math.nan
