"""RLC's transmission schedule as pure arithmetic (Vicisano, Rizzo, Crowcroft, INFOCOM 1998).

Layer ``j`` carries ``n_j`` packets per slot of length ``tau0``: ``n_0 = 1`` and
``n_j = 2**(j-1)`` for ``j >= 1``, so the cumulative level ``i`` (layers ``0..i``)
carries ``B_i = 2**i * B_0`` with ``B_0 = s / tau0``.

Inside a slot, the ``M = 2**(l-1)`` transmission positions are spread evenly in
time (one every ``tau0 / M``) and given to layers so that *every* cumulative
level is evenly spaced and layer 0 transmits last: the transmission at time
index ``q`` belongs to position ``p = (q + 1) mod M``; layer 0 owns ``p = 0`` and
layer ``j >= 1`` the odd multiples of ``M / 2**j``.

A cycle is ``W`` slots: slot 0 is the burst (each transmission sends two
back-to-back packets), slot 1 is silent, slots ``2..W-1`` are normal. The
second burst packet of layer 0 is the last packet of the burst at every level;
when ``cycle % P == 0`` it is a synchronisation point (SP), and it is an SP for
level ``i`` when ``cycle % (P * 2**i) == 0``, so the SPs of level ``i + 1`` are a
subset of those of level ``i`` and are ``(B_i / B_0) * P * W * tau0`` apart.

On the wire, a packet names its layer, its cycle and its index within that
cycle on its layer (``0 .. W * n_j - 1``; the first ``2 * n_j`` are the burst), so
a receiver can tell the phase of every packet it lost from the sequence gap.
"""

from __future__ import annotations

from dataclasses import dataclass


def per_slot(layer: int) -> int:
    """Packets layer ``layer`` sends in one normal slot (``L_j / B_0``)."""
    return 1 if layer == 0 else 1 << (layer - 1)


def per_cycle(layer: int, w: int) -> int:
    """Packets layer ``layer`` sends in one cycle of ``w`` slots (burst twice, silence none)."""
    return w * per_slot(layer)


def cumulative_packets(level: int) -> int:
    """Packets per normal slot at cumulative level ``level`` (``B_i / B_0 = 2**i``)."""
    return 1 << level


def _trailing_zeros(x: int) -> int:
    return (x & -x).bit_length() - 1


def layer_of(q: int, layers: int) -> int:
    """The layer of the transmission at time index ``q`` (``0 <= q < 2**(layers-1)``) of a slot."""
    m = 1 << (layers - 1)
    p = (q + 1) % m
    if p == 0:
        return 0
    return (layers - 1) - _trailing_zeros(p)


def rank_in_slot(q: int, layers: int) -> int:
    """Which of its layer's transmissions in the slot ``q`` is (0 .. per_slot - 1)."""
    m = 1 << (layers - 1)
    p = (q + 1) % m
    if p == 0:
        return 0
    layer = layer_of(q, layers)
    step = m >> layer  # M / 2**j
    return (p // step - 1) // 2


def index_in_cycle(layer: int, slot: int, rank: int, second: bool = False) -> int:
    """A packet's index within its cycle on its layer (burst packets come in pairs)."""
    n = per_slot(layer)
    if slot == 0:
        return 2 * rank + (1 if second else 0)
    if slot == 1:
        raise ValueError("nothing is sent in the silent slot")
    return 2 * n + (slot - 2) * n + rank


def is_burst_index(layer: int, index: int) -> bool:
    """Whether the packet at ``index`` of a cycle on ``layer`` belongs to the burst."""
    return index < 2 * per_slot(layer)


def sp_level(cycle: int, p: int, layers: int) -> int | None:
    """The highest level whose SP falls at the end of ``cycle``'s burst (None: not an SP)."""
    if cycle % p:
        return None
    top = 0
    while top + 1 < layers and cycle % (p << (top + 1)) == 0:
        top += 1
    return top


def sp_spacing(level: int, p: int, w: int, tau0: float) -> float:
    """Seconds between SPs at ``level``: ``(B_i / B_0) * P * W * tau0``."""
    return cumulative_packets(level) * p * w * tau0


@dataclass(frozen=True, slots=True)
class Transmission:
    """One scheduled send: when (seconds from the start), which layer, its ext fields."""

    t: float
    layer: int
    cycle: int
    index: int
    burst: bool
    sp: int | None  # SP level if this packet is a synchronisation point


def transmissions(g: int, layers: int, w: int, p: int, tau0: float) -> list[Transmission]:
    """The packets of transmission ``g`` (global index on the ``tau0 / M`` grid): 0, 1 or 2."""
    m = 1 << (layers - 1)
    q = g % m
    slot_global = g // m
    cycle, slot = divmod(slot_global, w)
    if slot == 1:
        return []
    t = g * tau0 / m
    layer = layer_of(q, layers)
    rank = rank_in_slot(q, layers)
    if slot == 0:
        last = layer == 0  # the second packet of layer 0 closes the burst
        return [Transmission(t, layer, cycle, index_in_cycle(layer, 0, rank, second=k == 1),
                             True, sp_level(cycle, p, layers) if last and k == 1 else None)
                for k in (0, 1)]
    return [Transmission(t, layer, cycle, index_in_cycle(layer, slot, rank), False, None)]


def grid_step(layers: int, tau0: float) -> float:
    """Seconds between transmission times (``tau0 / 2**(layers-1)``)."""
    return tau0 / (1 << (layers - 1))
