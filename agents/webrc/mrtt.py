"""Where a WEBRC MRTT sample's time goes: join latency, wait for the wave's packet, way down.

A sample (paper sec. 4.2) is ``t_first - t_join``: join sent until the first packet
of the wave arrives. The sender's schedule is deterministic (the fluid model's
discrete send times from the sender's start, ``agents.webrc.sender``), and the
receiver logs the CN and PSN of that first packet, so for every sample we know
when that packet, and the one before it on the wave, were due at the sender:

* ``down = t_first - send(psn)``: the data's one-way time (links, the emulator, the
  sender's own timer lateness);
* ``up_to_packet = send(psn) - t_join``: join sent until the packet that was
  forwarded left; the forwarding state (sec. 4.4's ``A_i``, join latency ``J``
  here) was set up after packet ``psn - 1`` passed the first router and no later
  than packet ``psn``, so ``send(psn-1) - t_join < J <= send(psn) - t_join``
  (sender and first router coincide: footnote 6; the access link has no delay);
* ``wait = send(psn) - (t_join + J)``, in ``[0, spacing)`` with ``spacing =
  send(psn) - send(psn-1)``: the sec. 4.4 slack a discrete wave adds even to a
  taut cycle ("a certain MRTT increase may be due to the interpacket spacing",
  sec. 3.2). Joins are made at epoch boundaries, unrelated to the wave's packet
  phase, so its expectation is half the spacing.

The sample is exactly ``down + up_to_packet``. With ``J`` about constant, the
per-sample bounds intersect to an interval for ``J`` and its middle is the estimate
(exact to a few ms in simulated time, where joins at epoch boundaries and packets are
both on fixed grids, so the phase is not uniform); when the interval is empty (``J``
varies: router and emulator jitter) the estimate is ``mean(up_to_packet) -
mean(spacing)/2``. ``wait`` is then ``mean(up_to_packet) - join``, so that ``mrtt =
down + join + wait`` holds exactly.

**Why the wait does not average away.** A join is made when ``Gamma * ARR`` reaches
the target (Table 2), so the joined wave carries ``(Gamma - 1) * ARR``, about ``(1 - P)``
of the peak rate REQN (Eq. 4 with ``Gamma ~ 1/P``): half its spacing is
``1 / (2 (1 - P) REQN)``. REQN is ``K / ARTT`` (Eq. 6, ``K`` from LOSSP), so with
``ARTT = R0 + wait`` (``R0`` the join and data halves) the samples settle at the fixed
point ``R0 / (1 - 1 / (2 (1 - P) K))`` (:func:`expected_mrtt`): at 1% loss (LOSSP
0.0089, ``K`` = 12.0) and P = 0.75 that is 1.20 * R0, 0.240 s on the 0.2 s path of
sec. 5.1.1, however fast the network.

With several receivers the first router is not always where the join takes effect
(sec. 4.4's ``N_i`` may be a router further down, already fed by another receiver's
join): then the first packet can leave the sender before the join is sent, ``join``
comes out negative and only ``sample``, ``down`` and ``wait`` keep their meaning.

The receiver subtracts half the spacing from each wave sample before averaging
(``mrtt_spacing_correction``, agents/webrc/receiver.py): its log keeps the raw
``sample`` (split here as above) and adds ``used``, the value fed into ARTT, whose mean
is then ``down + join`` plus the phase noise, with no fixed-point feedback.

Everything here is pure: records in, numbers out (unit-tested without a lab).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from agents.webrc.model import PSN_MOD, WaveModel, tcp_rate


@dataclass(frozen=True)
class Sample:
    """One wave MRTT sample, its first packet's schedule and the split."""

    t_first: float  # agent clock (s)
    sample: float  # MRTT (s): join sent -> first packet
    cn: int
    psn: int
    artt: float  # ARTT after this sample
    sent: float  # scheduled send time of the first packet (agent clock)
    spacing: float  # since the wave's previous packet was due (inf for a wave's first)
    used: float = math.nan  # the value the receiver fed into ARTT (the sample, or the
    # sample minus half the spacing with ``mrtt_spacing_correction``)

    @property
    def t_join(self) -> float:
        """When the join was sent."""
        return self.t_first - self.sample

    @property
    def down(self) -> float:
        """The first packet's one-way time, sender to receiver."""
        return self.t_first - self.sent

    @property
    def up_to_packet(self) -> float:
        """Join sent until the forwarded packet left the sender: join latency + wait."""
        return self.sent - self.t_join


class Schedule:
    """The sender's send times, rebuilt from its start time and the model."""

    def __init__(self, model: WaveModel, start: float):
        self.model = model
        self.start = start
        self.offsets = model.wave_offsets()
        self.k = len(self.offsets)
        self.first_psn = (PSN_MOD - self.k) % PSN_MOD
        self.cycle = model.t * model.tsd

    def wave_send(self, cn: int, psn: int, before: float) -> tuple[float, float]:
        """(scheduled send time, time since the previous packet of the wave) of the wave
        packet ``psn`` on ``cn`` in the latest wave that sent it at or before ``before``."""
        idx = (psn - self.first_psn) % PSN_MOD
        if idx >= self.k:
            raise ValueError(f"PSN {psn} is not a wave packet ({self.k} per wave)")
        offset = float(self.offsets[idx])
        first_wave = self.start + self.model.wave_start(cn, 0) * self.model.tsd
        cycles = math.floor((before - first_wave - offset) / self.cycle)
        sent = first_wave + cycles * self.cycle + offset
        spacing = offset - float(self.offsets[idx - 1]) if idx > 0 else math.inf
        return sent, spacing


def samples(records: list[dict], schedule: Schedule) -> list[Sample]:
    """The wave MRTT samples of a receiver's event log, each placed on the schedule
    (records without CN/PSN, from runs before they were logged, are skipped)."""
    out = []
    for rec in records:
        if rec.get("event") != "mrtt" or not rec.get("wave") or "psn" not in rec:
            continue
        t, cn, psn = float(rec["t"]), int(rec["cn"]), int(rec["psn"])
        sent, spacing = schedule.wave_send(cn, psn, t)
        raw = float(rec["sample"])
        out.append(Sample(t, raw, cn, psn, float(rec["artt"]), sent, spacing,
                          float(rec.get("used", raw))))
    return out


@dataclass(frozen=True)
class Decomposition:
    """Means over a set of samples (seconds)."""

    n: int
    mrtt: float  # mean sample
    used: float  # mean of the values fed into ARTT
    down: float  # mean one-way data time of the first packets
    up_to_packet: float  # mean join sent -> forwarded packet sent
    wait: float  # wait for the wave's packet: up_to_packet - join
    join: float  # join latency estimate (see the module docstring)
    join_low: float  # the interval every sample allows for a constant join latency
    join_high: float
    artt: float  # mean ARTT after these samples
    spacing: float  # mean spacing of the joined waves at the first packet

    @property
    def artt_lag(self) -> float:
        """ARTT above the mean of the values it averages: the estimator not (yet)
        converged."""
        return self.artt - self.used


def decompose(items: list[Sample]) -> Decomposition:
    """Split the mean MRTT of ``items`` into way down, join latency and wait."""
    finite = [s for s in items if math.isfinite(s.spacing)]
    if not finite:
        nan = math.nan
        return Decomposition(0, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan)
    up = np.array([s.up_to_packet for s in finite])
    spacing = np.array([s.spacing for s in finite])
    low, high = float((up - spacing).max()), float(up.min())
    join = (low + high) / 2 if low <= high else float(up.mean() - spacing.mean() / 2)
    return Decomposition(
        n=len(finite),
        mrtt=float(np.mean([s.sample for s in finite])),
        used=float(np.mean([s.used for s in finite])),
        down=float(np.mean([s.down for s in finite])),
        up_to_packet=float(up.mean()),
        wait=float(up.mean()) - join,
        join=join,
        join_low=low,
        join_high=high,
        artt=float(np.mean([s.artt for s in finite])),
        spacing=float(spacing.mean()),
    )


def expected_mrtt(r0: float, lossp: float, p: float = 0.75) -> float:
    """The mean MRTT sample at which the wait for the joined wave's next packet (half the
    spacing of a wave carrying ``(1 - p)`` of REQN) is consistent with REQN at that
    MRTT (Eq. 6): ``r0 / (1 - 1 / (2 (1 - p) K))`` with ``K = REQN * ARTT``; ``r0`` is the
    sample without the wait (join latency plus the way down). Infinite when no finite
    MRTT is consistent (``K <= 1 / (2 (1 - p))``)."""
    k = tcp_rate(lossp, 1.0)
    denominator = 1 - 1 / (2 * (1 - p) * k)
    return r0 / denominator if denominator > 0 else math.inf


@dataclass(frozen=True)
class WavePair:
    """Two receivers' MRTT samples of one wave (sec. 4.4's cycle structure for a pair)."""

    first: Sample
    second: Sample

    @property
    def gap(self) -> float:
        """The second receiver's join minus the first's (s): negative when it came first."""
        return self.second.t_join - self.first.t_join

    @property
    def total(self) -> float:
        """The two values fed into ARTT, summed: the tree's delays when both cycles are
        taut (sec. 4.4), more when the later join waited at the shared router."""
        return self.first.used + self.second.used

    @property
    def slack(self) -> bool:
        """Both first packets were one packet: the later join reached the shared router
        before the wave and waited for it (a slack cycle, sec. 4.4); a taut later join
        finds the wave flowing and gets a later packet."""
        return self.first.psn == self.second.psn


def wave_pairs(first: list[Sample], second: list[Sample], within: float) -> list[WavePair]:
    """The waves both receivers sampled, in the first's order: a sample of each on the
    same channel with joins less than ``within`` apart (a channel's next wave comes T
    slots later, so a slot's duration tells them apart)."""
    pairs = []
    for a in first:
        near = [b for b in second if b.cn == a.cn and abs(b.t_join - a.t_join) < within]
        if near:
            pairs.append(WavePair(a, min(near, key=lambda b: abs(b.t_join - a.t_join))))
    return pairs
