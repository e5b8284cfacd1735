"""WEBRC sender: the base channel (CN = T) and T wave channels (CN 0..T-1) per the fluid model.

Discrete scheduling: a channel's ``m``-th packet (from 0) is sent when the fluid
model's cumulative packet count on it reaches ``m + 1/2`` (per wave for the
waves, from the session start for the base channel), so the count sent by any
time is the fluid count rounded: off by at most one packet. Each wave's last
packet carries PSN 2**16-1 and its first ``2**16 - K`` (K packets per wave); the
base channel's PSN runs on modulo 2**16.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from agents.runtime.actions import Action, Log, Send, SetTimer
from agents.runtime.core import SenderCore
from agents.runtime.session import Session
from agents.webrc.model import PSN_MOD
from agents.webrc.params import WebrcParams

SEND = "send"
MAX_LAG = 0.25  # s; a sender further behind skips (never bursts) the packets due


@dataclass(frozen=True, slots=True)
class WebrcExt:
    """The congestion-control header: channel number, time slot index, packet sequence."""

    cn: int
    tsi: int
    psn: int


class WebrcSender(SenderCore):
    """Schedules every channel's packets on one timer (a heap of next due times)."""

    def __init__(self, params: WebrcParams, session: Session | None = None):
        self.params = params
        self.model = params.model()
        self.offsets = self.model.wave_offsets()
        self.k = len(self.offsets)
        self.first_psn = (PSN_MOD - self.k) % PSN_MOD
        self.start_time = 0.0
        self.last_now = 0.0
        self.heap: list[tuple[float, int]] = []
        self.wave_start: dict[int, float] = {}  # cn -> start time of its current wave
        self.index: dict[int, int] = {}  # cn -> next packet of its wave / of the base
        self.sent = 0
        self.skipped = 0
        self.tsi = 0

    def start(self, now: float) -> list[Action]:
        m = self.model
        self.start_time = now
        for cn in range(m.t):
            begin = now + m.wave_start(cn, 0) * m.tsd
            self.wave_start[cn] = begin
            # Waves already under way at the start join the pattern mid-wave.
            idx = int((self.offsets + begin < now).sum())
            self.index[cn] = idx
            self._push(cn)
        self.index[m.base_channel] = 0
        self._push(m.base_channel)
        return [Log("webrc_sender", {"n": m.n, "t": m.t, "q": m.q, "sr_pps": m.sr,
                                     "wave_packets": self.k}), *self.on_timer(now, SEND)]

    def _due(self, cn: int) -> float:
        m = self.model
        if cn == m.base_channel:
            return self.start_time + m.base_offset(self.index[cn])
        if self.index[cn] >= self.k:  # the wave is over: the next one, T slots later
            self.wave_start[cn] += m.t * m.tsd
            self.index[cn] = 0
        return self.wave_start[cn] + float(self.offsets[self.index[cn]])

    def _push(self, cn: int) -> None:
        heapq.heappush(self.heap, (self._due(cn), cn))

    def _ext(self, cn: int, due: float) -> WebrcExt:
        m = self.model
        slot = int((due - self.start_time) // m.tsd)
        idx = self.index[cn]
        psn = idx % PSN_MOD if cn == m.base_channel else (self.first_psn + idx) % PSN_MOD
        return WebrcExt(cn, slot % m.t, psn)

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        size = self.params.packet_size
        self.last_now = now
        actions: list[Action] = []
        while self.heap and self.heap[0][0] <= now:
            due, cn = heapq.heappop(self.heap)
            if now - due > MAX_LAG:
                self.skipped += 1
            else:
                ext = self._ext(cn, due)
                self.tsi = ext.tsi
                actions.append(Send(cn, size, ext=ext))
                self.sent += 1
            self.index[cn] += 1
            self._push(cn)
        actions.append(SetTimer(SEND, self.heap[0][0]))
        return actions

    def metrics(self) -> dict[str, float]:
        m = self.model
        base = m.base_rate(m.slot_of(self.last_now - self.start_time)[1])
        return {"waves": m.t, "base_rate_bps": base * 8 * self.params.packet_size,
                "waves_active": m.n, "tsi": self.tsi, "skipped_packets": self.skipped}

