"""The STAIR sender: every CL and NCL at its constant rate, every stair layer on its
schedule, each on its own channel; it also echoes the receivers' RTT probes."""

from __future__ import annotations

import heapq

from agents.runtime.actions import Action, Reject, Send, SetTimer
from agents.runtime.core import SenderCore
from agents.runtime.pacing import Pacer
from agents.runtime.session import Session
from agents.stair.config import CL, NCL, SL, Layout, StairExt, StairParams
from agents.stair.probe import echo
from agents.stair.stairs import StairClock

SEND = "send"


class StairSender(SenderCore):
    """Sends every layer; one timer for the earliest packet due (a heap over channels)."""

    def __init__(self, params: StairParams, session: Session | None = None):
        self.params = params
        self.layout = Layout(params)
        self.pacers: dict[int, Pacer] = {}
        self.stairs: dict[int, StairClock] = {}
        self.exts: dict[int, StairExt] = {}
        self.heap: list[tuple[float, int]] = []
        self.probes_echoed = 0

    def start(self, now: float) -> list[Action]:
        lay = self.layout
        for kind, count in ((CL, lay.n_cl), (NCL, lay.n_ncl)):
            for i in range(count):
                ch = lay.channel(kind, i)
                self.pacers[ch] = Pacer(lay.static_rate(kind, i), now)
                self.exts[ch] = StairExt(kind, i)
        for s in range(lay.n_sl):
            self.stairs[lay.channel(SL, s)] = StairClock(lay.rtts[s], lay.window(s), now)
        self.heap = [(now, ch) for ch in [*self.pacers, *self.stairs]]
        heapq.heapify(self.heap)
        return self.on_timer(now, SEND)

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        size = self.params.packet_size
        actions: list[Action] = []
        heap = self.heap
        while heap[0][0] <= now:
            _, ch = heapq.heappop(heap)
            pacer = self.pacers.get(ch)
            if pacer is not None:
                if pacer.due(now):
                    actions.append(Send(ch, size, ext=self.exts[ch]))
                    pacer.sent(size)
                heapq.heappush(heap, (pacer.next_due, ch))
                continue
            stair = self.stairs[ch]
            if now - stair.next_due > 0.25:  # a stall: skip rather than burst
                stair.skip_to(now)
            else:
                actions.append(Send(ch, size, ext=StairExt(SL, ch - self.layout.channel(SL, 0),
                                                           stair.cycle, stair.step)))
                stair.advance()
            heapq.heappush(heap, (stair.next_due, ch))
        actions.append(SetTimer(SEND, heap[0][0]))
        return actions

    def on_feedback(self, now: float, data: bytes, peer: str) -> list[Action]:
        """Echo an RTT probe to the receiver that sent it (the "ping" of sec. VI)."""
        return self.on_feedback_at(now, now, data, peer)

    def on_feedback_at(self, now: float, arrival: float, data: bytes, peer: str
                       ) -> list[Action]:
        """Echo a probe with the time it waited here since it ``arrival`` (the kernel's
        receive timestamp), so the receiver can leave this host's delay out. Anything but a
        probe is rejected (a counted drop)."""
        reply = echo(data, peer, hold=now - arrival)
        if reply is None:
            return [Reject()]
        self.probes_echoed += 1
        return [reply]

    def metrics(self) -> dict[str, float]:
        lay = self.layout
        return {"layers": lay.channels, "cumulative_layers": lay.n_cl,
                "noncumulative_layers": lay.n_ncl, "stair_layers": lay.n_sl,
                "target_rate_bps": lay.total_rate(), "probes_echoed": self.probes_echoed}
