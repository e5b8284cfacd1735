"""``rlc``: receiver-driven layered congestion control (Vicisano, Rizzo, Crowcroft, INFOCOM 1998).

The sender transmits ``layers`` cumulative, exponentially spaced layers
(``B_i = 2**i * B_0``, ``B_0 = packet_size / tau0``) with periodic probes and
synchronisation points (:mod:`agents.rlc.schedule`). It keeps no receiver state.

A receiver (paper sec. 3.4), at level ``i`` (layers ``0..i`` joined):

* *increase* at an SP of its level when no packet of the burst that ends at
  that SP was lost on any joined layer;
* *decrease* (leave layer ``i``) on a loss of a normal-phase packet, except for
  ``deaf_period`` (t_D) after a previous decrease;
* otherwise stays (losses in a burst or in the deaf period change nothing).

Losses are detected per layer from sequence gaps; the extension names each
packet's cycle and index, so the phase of every lost packet is known. Burst
losses are counted as in the paper: losses within t_D of the first loss of a
loss event count once.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agents.cbr import check_packet_size
from agents.rlc.contract import CONTRACT_CASE, RECEIVER_GAUGES, SENDER_GAUGES
from agents.rlc.schedule import (
    grid_step,
    is_burst_index,
    per_cycle,
    per_slot,
    transmissions,
)
from agents.runtime.actions import Action, Join, Leave, Log, Reject, Send, SetTimer
from agents.runtime.core import ReceiverCore, SenderCore
from agents.runtime.header import Header, StructExtension
from agents.runtime.registry import ProtocolSpec, register
from agents.runtime.session import Session
from mcclab.model.units import Duration, Size

SEND = "send"
SP_FLAG = 0x10
NO_SP = 255  # the ext's sp field of a packet that is not a synchronisation point
MAX_LAYERS = 12
MAX_LAG = 0.25  # seconds behind schedule after which the sender skips ahead
_U32 = (1 << 32) - 1
_GAP_WALK = 1 << 14  # lost packets classified one by one; a longer outage counts as normal


@dataclass(frozen=True)
class RlcExt:
    """Header extension: layer, cycle number, index in the cycle on the layer, SP level."""

    layer: int
    cycle: int
    index: int
    sp: int = NO_SP


def check_ext(ext: RlcExt) -> None:
    """Reject out-of-range extension fields (ValueError)."""
    if not 0 <= ext.layer < MAX_LAYERS:
        raise ValueError(f"layer {ext.layer} outside 0..{MAX_LAYERS - 1}")
    if ext.sp != NO_SP and not 0 <= ext.sp < MAX_LAYERS:
        raise ValueError(f"sp level {ext.sp} invalid")


RLC_EXT = StructExtension(RlcExt, "!BIHB", check=check_ext, example=RlcExt(0, 0, 1, 0))


class RlcParams(BaseModel):
    """Sender and receiver parameters; the paper's defaults (s = 256 B, P = 1, W = 8)."""

    model_config = ConfigDict(extra="forbid")

    packet_size: Size = Field(default=256, description="s: UDP payload per packet")
    tau0: Duration = Field(default=0.125, gt=0, description="slot length; B_0 = s / tau0")
    layers: int = Field(default=7, ge=1, le=MAX_LAYERS, description="l")
    P: int = Field(default=1, ge=1, le=64, description="bursts between level-0 SPs")
    W: int = Field(default=8, ge=2, le=64, description="slots between bursts")
    deaf_period: Duration = Field(default=3.0, ge=0, description="t_D")

    @field_validator("packet_size")
    @classmethod
    def _size(cls, size: int) -> int:
        return check_packet_size(size)

    @property
    def base_rate(self) -> float:
        """B_0 in bit/s (UDP payload)."""
        return self.packet_size * 8.0 / self.tau0

    def level_rate(self, level: int) -> float:
        """B_level in bit/s (cumulative, UDP payload)."""
        return self.base_rate * (1 << level)


class RlcSender(SenderCore):
    """Sends every layer on the ``tau0 / 2**(l-1)`` grid with bursts, silences and SPs."""

    def __init__(self, params: RlcParams, session: Session | None = None):
        self.params = params
        self.step = grid_step(params.layers, params.tau0)
        self.t0 = 0.0
        self.g = 0  # next transmission index on the grid
        self.skipped = 0
        self.cycle = 0

    def start(self, now: float) -> list[Action]:
        self.t0 = now
        self.g = 0
        return [Log("rlc_sender", {"layers": self.params.layers,
                                   "base_rate_bps": self.params.base_rate,
                                   "tau0": self.params.tau0, "P": self.params.P,
                                   "W": self.params.W}),
                *self.on_timer(now, SEND)]

    def _due(self, g: int) -> float:
        return self.t0 + g * self.step

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        p = self.params
        m = 1 << (p.layers - 1)
        if now - self._due(self.g) > MAX_LAG:
            # Far behind (a stalled process): restart the grid at now rather than
            # sending a backlog as one uncontrolled burst.
            target = int((now - self.t0) / self.step)
            self.skipped += target - self.g
            self.g = target
        actions: list[Action] = []
        while self._due(self.g) <= now + 1e-9:
            for tx in transmissions(self.g, p.layers, p.W, p.P, p.tau0):
                sp = NO_SP if tx.sp is None else tx.sp
                actions.append(Send(tx.layer, p.packet_size, SP_FLAG if tx.sp is not None else 0,
                                    RlcExt(tx.layer, tx.cycle, tx.index, sp)))
                self.cycle = tx.cycle
            self.g += 1
            if (self.g // m) % p.W == 1:  # the silent slot: nothing to wake up for
                self.g += m
        actions.append(SetTimer(SEND, self._due(self.g)))
        return actions

    def metrics(self) -> dict[str, float]:
        p = self.params
        return {"layers": p.layers, "cycle": self.cycle,
                "sp_interval_seconds": p.P * p.W * p.tau0,
                "target_rate_bps": self.params.level_rate(self.params.layers - 1),
                "skipped_transmissions": self.skipped}


@dataclass
class _LayerRx:
    """Where a joined layer's packet stream stands."""

    seq: int
    cycle: int
    index: int


@dataclass
class RlcCounters:
    """Receiver counters (exported as gauges)."""

    joins: int = 0
    leaves: int = 0
    received: int = 0
    lost: int = 0
    lost_burst: int = 0  # lost packets that belonged to a burst
    lost_normal: int = 0
    loss_events: int = 0  # losses closer than t_D to the event's first count once
    ignored_deaf: int = 0  # normal-phase losses ignored in the deaf period
    sp_seen: int = 0
    sp_blocked: int = 0  # SPs of the level where the burst had a loss


class RlcReceiver(ReceiverCore):
    """The join/leave rules of sec. 3.4 as a state machine (level = paper's i)."""

    def __init__(self, params: RlcParams, session: Session | None = None):
        self.params = params
        self.level = 0
        self.rx: dict[int, _LayerRx] = {}
        self.deaf_until = float("-inf")
        self.event_start: float | None = None
        self.burst_loss_cycles: set[int] = set()
        self.c = RlcCounters()
        self.now = float("-inf")  # time of the latest event, for the deaf gauge

    # rules
    def start(self, now: float) -> list[Action]:
        return [Join(0), *self._level_log(now, "start")]

    def _level_log(self, now: float, reason: str, cycle: int | None = None) -> list[Action]:
        return [Log("rlc_level", {"level": self.level, "layers": self.level + 1,
                                  "reason": reason, "cycle": cycle,
                                  "rate_bps": self.params.level_rate(self.level)})]

    def on_packet(self, now: float, header: Header, payload_len: int, group: str) -> list[Action]:
        self.now = now
        ext: RlcExt = header.ext
        layer = header.channel
        if ext is None or ext.layer != layer:
            return [Reject()]  # the extension names another layer than its channel
        if layer > self.level:
            return []  # a straggler of a layer already left
        lost = self._account(layer, header.seq, ext)
        if lost is None:
            return []  # duplicate or reordered
        actions: list[Action] = []
        if lost[0] + lost[1]:
            self._loss_event(now)
        if lost[1]:
            actions += self._on_normal_loss(now)
        if header.flags & SP_FLAG and ext.sp != NO_SP and layer == 0:
            actions += self._on_sp(now, ext)
        return actions

    def _account(self, layer: int, seq: int, ext: RlcExt) -> tuple[int, int] | None:
        """Update the layer's stream; (burst, normal) packets lost before this one."""
        st = self.rx.get(layer)
        self.c.received += 1
        if st is None:
            self.rx[layer] = _LayerRx(seq, ext.cycle, ext.index)
            return 0, 0
        gap = (seq - st.seq) & _U32
        if gap == 0 or gap > _U32 // 2:
            self.c.received -= 1
            return None
        burst = normal = 0
        k = per_cycle(layer, self.params.W)
        cycle, index = st.cycle, st.index
        for _ in range(min(gap - 1, _GAP_WALK)):
            index += 1
            if index >= k:
                index, cycle = 0, cycle + 1
            if is_burst_index(layer, index):
                burst += 1
                self.burst_loss_cycles.add(cycle)
            else:
                normal += 1
        normal += max(0, gap - 1 - _GAP_WALK)
        st.seq, st.cycle, st.index = seq, ext.cycle, ext.index
        self.c.lost += burst + normal
        self.c.lost_burst += burst
        self.c.lost_normal += normal
        return burst, normal

    def _loss_event(self, now: float) -> None:
        """Count losses the paper's way: those within t_D of an event's first loss are one."""
        if self.event_start is None or now - self.event_start >= self.params.deaf_period:
            self.event_start = now
            self.c.loss_events += 1

    def _on_normal_loss(self, now: float) -> list[Action]:
        if now < self.deaf_until:
            self.c.ignored_deaf += 1
            return []
        if self.level == 0:
            return []  # nothing to leave: B_0 is the floor
        top = self.level
        self.level -= 1
        self.rx.pop(top, None)
        self.deaf_until = now + self.params.deaf_period
        self.c.leaves += 1
        return [Leave(top), *self._level_log(now, "loss")]

    def _on_sp(self, now: float, ext: RlcExt) -> list[Action]:
        if ext.sp < self.level:
            return []  # an SP of lower levels only
        self.c.sp_seen += 1
        cycle = ext.cycle
        clean = cycle not in self.burst_loss_cycles and all(
            self._burst_complete(layer, cycle) for layer in range(1, self.level + 1))
        # History is deleted across SPs: older burst losses never matter again.
        self.burst_loss_cycles = {c for c in self.burst_loss_cycles if c > cycle}
        if not clean:
            self.c.sp_blocked += 1
            return []
        if self.level + 1 >= self.params.layers:
            return []
        self.level += 1
        self.c.joins += 1
        return [Join(self.level), *self._level_log(now, "sp", cycle)]

    def _burst_complete(self, layer: int, cycle: int) -> bool:
        """Whether the layer's last burst packet of ``cycle`` (or a later one) has arrived."""
        st = self.rx.get(layer)
        if st is None:
            return False
        last = 2 * per_slot(layer) - 1
        return (st.cycle, st.index) >= (cycle, last)

    def metrics(self) -> dict[str, float]:
        c = self.c
        expected = c.received + c.lost
        return {
            "subscription_level": self.level + 1,
            "level": self.level,
            "level_rate_bps": self.params.level_rate(self.level),
            "sp_joins": c.joins, "deaf_periods": c.leaves,
            "deaf": 1.0 if self.now < self.deaf_until else 0.0,
            "rx_packets": c.received, "lost_packets": c.lost,
            "lost_burst_phase": c.lost_burst, "lost_normal_phase": c.lost_normal,
            "loss_events": c.loss_events, "ignored_deaf": c.ignored_deaf,
            "sp_seen": c.sp_seen, "sp_blocked": c.sp_blocked,
            "perceived_loss_rate": c.lost / expected if expected else 0.0,
            "burst_loss_rate": c.loss_events / expected if expected else 0.0,
        }


SPEC = register(ProtocolSpec(
    name="rlc", protocol_id=4, params=RlcParams, sender=RlcSender, receiver=RlcReceiver,
    extension=RLC_EXT, flags=SP_FLAG, channels=lambda params: params.layers,
    example_params={"layers": 4, "tau0": "125ms", "packet_size": "256B"},
    sender_gauges=SENDER_GAUGES, receiver_gauges=RECEIVER_GAUGES,
    contract_case=CONTRACT_CASE,
))
