"""Stair layers (ToN 2006 sec. IV-D, V-B, V-C): the dynamic layers that do additive increase.

A stair layer ``SL_t`` emulates round-trip time ``t``. Over one stair cycle it
sends 1 packet in its first emulated RTT, 2 in the second, ... ``W`` in the
``W``-th, then starts again at 1: a cyclic step function from one packet per RTT
up to ``W`` packets per RTT, one step per RTT. ``W`` is calibrated so that the
top step carries exactly the base rate ``N_0`` (``W = N_0 t / 8S``), so when the
stair recycles (drops by ``W - 1`` packets per RTT) and the receiver adds ``N_0``
on the non-cumulative layers, its total rate goes on rising by one packet per
RTT (Fig. 7). The stair period is ``p = W t = N_0 t^2 / 8S`` (Def. 8).

Cycles are counted from the sender's start (``origin``), so every receiver of a
layer sees the same cycle numbers; the header carries cycle and step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ROOT4_2 = 2 ** 0.25


def stair_window(base_rate: float, rtt: float, packet_size: int) -> float:
    """Packets per emulated RTT at the top of a stair calibrated to ``base_rate`` bit/s."""
    return base_rate * rtt / (8 * packet_size)


def stair_period(base_rate: float, rtt: float, packet_size: int) -> float:
    """Def. 8: ``p = (N_0 t / 8S) t`` seconds."""
    return stair_window(base_rate, rtt, packet_size) * rtt


def stair_rtts(base: float, count: int) -> list[float]:
    """Exponentially spaced emulated RTTs (sec. V-B): ``base * 2**i``."""
    return [base * 2 ** i for i in range(count)]


def select_simple(estimate: float, rtts: list[float]) -> tuple[int, ...]:
    """Simple option (sec. V-C): the layer ``i`` with ``2/3 RTT_i < E <= 4/3 RTT_i``.

    Estimates below the fastest layer's interval take the fastest layer, above the
    slowest layer's the slowest.
    """
    for i, rtt in enumerate(rtts):
        if estimate <= 4 / 3 * rtt:
            return (i,)
    return (len(rtts) - 1,)


def select_complex(estimate: float, rtts: list[float]) -> tuple[int, ...]:
    """Complex option (sec. V-C): layer ``i`` if ``RTT_i / 2^(1/4) < E <= 2^(1/4) RTT_i``;
    if ``E`` is within ``2^(1/4)`` of the geometric mean of ``RTT_i`` and ``RTT_{i+1}``,
    layers ``i + 1`` and ``i + 2`` (as the paper words it; capped at the slowest layer)."""
    last = len(rtts) - 1
    for i, rtt in enumerate(rtts):
        if estimate <= ROOT4_2 * rtt:
            if estimate > rtt / ROOT4_2 or i == 0:
                return (i,)
            break
    else:
        return (last,)
    # between RTT_{i-1} and RTT_i: near their geometric mean
    return tuple(sorted({min(i, last), min(i + 1, last)}))


@dataclass
class StairClock:
    """The send schedule of one stair layer: step ``k`` (1..W) sends ``k`` packets evenly
    over its emulated RTT. ``next_due`` is the time of the next packet; ``cycle`` and
    ``step`` say where it falls."""

    rtt: float
    window: int
    origin: float
    cycle: int = 0
    step: int = 1
    index: int = 0  # packet within the step

    def __post_init__(self) -> None:
        if self.window < 1 or self.rtt <= 0:
            raise ValueError(f"stair layer needs window >= 1 and rtt > 0, got {self.window}, "
                             f"{self.rtt}")

    @property
    def period(self) -> float:
        """Seconds per cycle."""
        return self.window * self.rtt

    @property
    def next_due(self) -> float:
        """When the next packet is due."""
        return (self.origin + self.cycle * self.period + (self.step - 1) * self.rtt
                + self.index * self.rtt / self.step)

    def advance(self) -> None:
        """The packet at ``next_due`` was sent."""
        self.index += 1
        if self.index == self.step:
            self.index = 0
            self.step += 1
            if self.step > self.window:
                self.step = 1
                self.cycle += 1

    def skip_to(self, now: float) -> None:
        """Jump to the first packet at or after ``now`` (after a stall; no backlog burst)."""
        if self.next_due >= now:
            return
        cycles = math.floor((now - self.origin) / self.period)
        self.cycle, self.step, self.index = cycles, 1, 0
        while self.next_due < now:
            self.advance()

    def rate(self, now: float, packet_size: int) -> float:
        """The layer's rate (bit/s) during the step that contains ``now``."""
        into = (now - self.origin) % self.period
        step = min(int(into // self.rtt) + 1, self.window)
        return step * packet_size * 8 / self.rtt
