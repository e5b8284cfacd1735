"""WEBRC's equations and its fluid wave model (Luby, Goyal, Skaria, Horn; SIGCOMM 2002).

Rates here are in packets per second (the paper's ``_P`` suffix) unless a name
says otherwise; ``r = 1/P`` throughout.

The equations
-------------
* Eq. 1 / Eq. 6 (:func:`tcp_rate`): the TCP throughput equation, with ARTT and
  LOSSP in Eq. 6.
* Eq. 3 (:func:`active_waves`): the number ``N`` of active waves.
* Eq. 4 (:func:`gamma`): the rate factor of one more joined wave.
* Eq. 7 (:func:`peak_to_mean`): average over peak throughput, ``(1-P)/ln(1/P)``.
* Eq. 8 (:func:`loss_event_rate`): the loss event rate for a packet loss rate.

Derivation of the fluid model (the paper's constraints, RFC 3738 not used)
-------------------------------------------------------------------------
Time is cut into slots of TSD seconds; inside a slot ``u`` in [0, 1) is the
fraction elapsed. The constraints of sec. 3:

(C1) the base channel falls from BCR to P*BCR over each slot:
     ``base(u) = BCR * P**u``;
(C2) a wave, after its start, falls by the factor P every TSD and reaches BCR at
     the end of its last active slot. A wave ``j`` slots from its last slot
     (``j = 0`` in the last slot, ``j = N-1`` in its first) therefore follows its
     *natural* curve ``nat_j(u) = BCR * r**(j + 1 - u)``;
(C3) the total over the base channel and the active waves is SR at every instant;
(C4) an active wave never sends below BCR;
(C5) each wave is active N slots and quiescent Q slots; T = N + Q.

Eq. 4 follows from (C1)-(C2) alone: a receiver on the base channel and the
``n`` lowest-rate waves (j = 0 .. n-1, all on their natural curves) receives
``BCR * P**u * (1 + r + ... + r**n) = BCR * P**u * S(n+1)`` with
``S(k) = (r**k - 1)/(r - 1)``, so joining one more multiplies the rate by
``S(n+2)/S(n+1) = Gamma_n`` whatever ``u`` is.

Eq. 3 says N is the smallest ``n`` with ``P * S(n+1) >= SR/BCR``: the base
channel and N waves on their natural curves carry at least SR even at the end
of a slot, where that sum ``BCR * P**u * S(N+1)`` is smallest. So the natural
curves *over*-supply SR; (C3) forces the youngest waves below their curves:
this is the wave's "quick rise" at its beginning. The excess at the start of a
slot can exceed what the newest wave alone can give up while staying at or
above BCR (C4), so the cut reaches into the second-youngest wave for a short
while after each slot boundary.

Our choice for the rise (the paper defers it to [10, 11]): fill the waves
from the youngest up, the youngest taking the least it can: wave ``j`` gets
``clamp(W(u) - given_to_younger - sum(nat_k for older k), BCR, nat_j)``
with ``W(u) = SR - base(u)``. Every older wave then sits exactly on its natural
curve, the total is exactly SR, no active wave is below BCR, and the cut waves
are always the youngest ones, so a receiver holding the lowest-rate waves sees
Eq. 4 exactly. Consequences: a new wave starts at (or just above) BCR and rises
over its first slot to meet its natural curve early in its second slot; at
each slot boundary the base channel jumps up by (1-P)*BCR, the wave leaving
drops BCR, the new one starts at BCR, so the second-youngest wave steps down by
(1-P)*BCR there. The model needs ``SR >= BCR * (N + 1)``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

PSN_MOD = 1 << 16
LAST_PSN = PSN_MOD - 1  # the last packet of every wave carries this PSN


def tcp_rate(loss: float, rtt: float) -> float:
    """Eq. 1 (and Eq. 6 with LOSSP, ARTT): TCP throughput in packets/s."""
    if loss <= 0 or rtt <= 0:
        return math.inf
    return math.sqrt(1.5) / (rtt * math.sqrt(loss) * (1 + 9 * loss * (1 + 32 * loss ** 2)))


def loss_for_rate(rate: float, rtt: float) -> float:
    """Eq. 6 solved for LOSSP: the loss rate at which ``tcp_rate`` equals ``rate``."""
    if rate <= 0 or rtt <= 0 or not math.isfinite(rate):
        raise ValueError(f"cannot solve Eq. 6 for rate={rate}, rtt={rtt}")
    lo, hi = 1e-12, 1.0
    if tcp_rate(hi, rtt) >= rate:
        return hi
    for _ in range(200):  # tcp_rate is decreasing in loss: bisect on a log scale
        mid = math.sqrt(lo * hi)
        if tcp_rate(mid, rtt) > rate:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-12:
            break
    return math.sqrt(lo * hi)


def loss_event_rate(p: float) -> float:
    """Eq. 8: the loss event rate a receiver estimates for packet loss probability ``p``."""
    return p / (1 + math.sqrt(1.5 * p))


def peak_to_mean(p: float) -> float:
    """Eq. 7's factor (1-P)/ln(1/P): average over peak throughput when joining every TSD."""
    return (1 - p) / math.log(1 / p)


def geometric_sum(p: float, k: int) -> float:
    """S(k) = 1 + r + ... + r**(k-1) with r = 1/P."""
    r = 1 / p
    return (r ** k - 1) / (r - 1)


def gamma(nwc: int, p: float) -> float:
    """Eq. 4: factor by which joining wave NWC+1 raises the rate of base + NWC waves."""
    r = 1 / p
    return (r ** (nwc + 2) - 1) / (r ** (nwc + 1) - 1)


def active_waves(sr: float, bcr: float, p: float) -> int:
    """Eq. 3: the number N of waves active at any time (and a wave's length in slots)."""
    r = 1 / p
    x = math.log(1 + r * (r - 1) * sr / bcr) / math.log(r)
    # A value a rounding error above an integer must not add a channel.
    return max(1, math.ceil(x - 1e-9) - 1)


@dataclass
class WaveModel:
    """The fluid model: rates per channel at any time, and per-wave packet schedules.

    ``sr`` and ``bcr`` are in packets/s, ``tsd`` in seconds. Channels ``0..T-1``
    are the waves, ``T`` is the base channel (CN = T). Wave ``c`` is active in
    the slots ``s`` with ``(c - s) mod T < N``; it is in its last slot when
    ``s mod T == c``.
    """

    sr: float
    bcr: float = 1.0
    p: float = 0.75
    tsd: float = 10.0
    q: int | None = None
    grid: int = 2000  # points per slot for the cumulative schedules
    n: int = field(init=False)
    t: int = field(init=False)

    def __post_init__(self) -> None:
        if not 0 < self.p < 1:
            raise ValueError(f"P must be in (0, 1), got {self.p}")
        if self.bcr <= 0 or self.tsd <= 0:
            raise ValueError("BCR and TSD must be positive")
        if self.q is None:
            self.q = math.ceil(300 / self.tsd)
        self.n = active_waves(self.sr, self.bcr, self.p)
        self.t = self.n + self.q
        if self.sr < self.bcr * (self.n + 1):
            raise ValueError(f"session rate {self.sr:g} pkt/s is below BCR*(N+1) = "
                             f"{self.bcr * (self.n + 1):g}: no room for N waves at BCR")
        self._wave_cum: np.ndarray | None = None

    # -- rates --------------------------------------------------------------------
    @property
    def base_channel(self) -> int:
        """CN of the base channel."""
        return self.t

    def base_rate(self, u: float) -> float:
        """(C1) the base channel's rate at fraction ``u`` of a slot."""
        return self.bcr * self.p ** u

    def natural(self, j: int, u: float) -> float:
        """(C2) the natural curve of a wave ``j`` slots before its last."""
        return self.bcr * (1 / self.p) ** (j + 1 - u)

    def wave_rates(self, u: float) -> list[float]:
        """Rates of the N active waves at ``u``, indexed by ``j`` (0: lowest, in its last slot)."""
        nat = [self.natural(j, u) for j in range(self.n)]
        budget = self.sr - self.base_rate(u)
        rates = [0.0] * self.n
        given = 0.0
        older = sum(nat)
        for j in range(self.n - 1, -1, -1):  # youngest first
            older -= nat[j]
            rates[j] = min(nat[j], max(self.bcr, budget - given - older))
            given += rates[j]
        return rates

    def slot_of(self, elapsed: float) -> tuple[int, float]:
        """(slot number, fraction ``u``) at ``elapsed`` seconds since the session started."""
        s = math.floor(elapsed / self.tsd)
        return s, elapsed / self.tsd - s

    def age_index(self, cn: int, slot: int) -> int | None:
        """``j`` of wave ``cn`` in slot number ``slot``, or None if it is quiescent."""
        k = (cn - slot) % self.t
        return k if k < self.n else None

    def channel_rate(self, cn: int, elapsed: float) -> float:
        """The fluid rate of channel ``cn`` at ``elapsed`` seconds."""
        s, u = self.slot_of(elapsed)
        if cn == self.base_channel:
            return self.base_rate(u)
        j = self.age_index(cn, s)
        return 0.0 if j is None else self.wave_rates(u)[j]

    def aggregate(self, nwc: int, elapsed: float) -> float:
        """Rate of the base channel plus the ``nwc`` lowest-rate active waves."""
        s, u = self.slot_of(elapsed)
        return self.base_rate(u) + sum(self.wave_rates(u)[:nwc])

    # -- packet schedules -----------------------------------------------------------
    def wave_cumulative(self) -> tuple[np.ndarray, np.ndarray]:
        """(age in s, packets sent by then) over one wave's whole life, on the grid."""
        if self._wave_cum is None:
            g = self.grid
            us = np.linspace(0.0, 1.0, g + 1)
            rates = np.array([self.wave_rates(float(u)) for u in us])  # (g+1, N)
            ages, cums, total = [np.zeros(1)], [np.zeros(1)], 0.0
            for k in range(self.n):  # age slot k is index j = N-1-k
                j = self.n - 1 - k
                r = rates[:, j]
                inc = np.cumsum((r[1:] + r[:-1]) / 2) * self.tsd / g
                ages.append((k + us[1:]) * self.tsd)
                cums.append(total + inc)
                total += float(inc[-1])
            self._wave_cum = np.vstack([np.concatenate(ages), np.concatenate(cums)])
        return self._wave_cum[0], self._wave_cum[1]

    def wave_packets(self) -> int:
        """Packets per wave: the fluid total, rounded."""
        return int(math.floor(self.wave_cumulative()[1][-1] + 0.5))

    def wave_offsets(self) -> np.ndarray:
        """Send times (s after the wave starts) of its packets: packet m at fluid count m+1/2."""
        ages, cum = self.wave_cumulative()
        k = self.wave_packets()
        if k > PSN_MOD:
            raise ValueError(f"{k} packets per wave do not fit the 16-bit PSN; lower SR or TSD")
        return np.interp(np.arange(k) + 0.5, cum, ages)

    def base_per_slot(self) -> float:
        """Base-channel packets per slot: BCR*TSD*(1-P)/ln(1/P)."""
        return self.bcr * self.tsd * peak_to_mean(self.p)

    def base_offset(self, m: int) -> float:
        """Send time (s after the session start) of base packet ``m`` (fluid count m+1/2)."""
        per = self.base_per_slot()
        x = m + 0.5
        slot = math.floor(x / per)
        within = x - slot * per
        ln_r = math.log(1 / self.p)
        u = math.log(1 - within * ln_r / (self.bcr * self.tsd)) / math.log(self.p)
        return (slot + min(u, 1.0)) * self.tsd

    def wave_start(self, cn: int, slot: int) -> int:
        """Slot number in which the wave of ``cn`` that is active or next active in ``slot``
        began."""
        k = (cn - slot) % self.t  # slots until its last slot
        return slot + k - (self.n - 1)


@functools.lru_cache(maxsize=16)
def wave_spacings(sr: float, bcr: float, p: float, tsd: float, q: int) -> tuple[float, ...]:
    """Per packet index of a wave: the time since the wave's previous packet was due
    (``inf`` for its first), from :meth:`WaveModel.wave_offsets`. Cached: the receiver
    needs it once per session, and every receiver of a session shares it."""
    offsets = WaveModel(sr, bcr, p, tsd, q).wave_offsets()
    return (math.inf, *(float(b - a) for a, b in zip(offsets[:-1], offsets[1:], strict=True)))
