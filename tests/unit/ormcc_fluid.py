"""A small synthetic fluid model that drives the real ORMCC cores (Appendix II-A's setting).

Every path from the source has one drop-tail bottleneck of ``w`` bit/s and
``q`` bytes shared by the ORMCC packets and a number of fluid AIMD (TCP-like)
flows: each grows by s/RTT per RTT and all halve together at most once per RTT
when the queue overflows. As in the appendix, their RTT is the path's RTT with a
full queue (what ORMCC measures from CIs), so gamma_i is the number of flows.
ORMCC packets are discrete: a packet that does not fit in the queue is lost,
otherwise it leaves after the queue drains and the
propagation delay. CIs return after the path's delay. Timers, packets and CIs
run on one event heap, so the cores see exactly the events they see in a lab.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from agents.ormcc.params import OrmccParams
from agents.ormcc.receiver import OrmccReceiver
from agents.ormcc.sender import OrmccSender
from agents.runtime.actions import CancelTimer, Feedback, SetTimer
from agents.runtime.header import Header

S_BITS = 8000.0


@dataclass
class Path:
    """One source-receiver path: bottleneck ``w`` bit/s, buffer ``q`` bytes, one-way ``delay``."""

    w: float
    q: float
    delay: float
    tcp: int = 0
    tcp_rates: list[float] = field(default_factory=list)
    level: float = 0.0  # queue in bits
    t: float = 0.0
    last_tcp_cut: float = -1e9

    def set_tcp(self, n: int) -> None:
        """Start or stop fluid AIMD flows (new ones start at one packet per RTT)."""
        rtt = 2 * self.delay
        self.tcp_rates = self.tcp_rates[:n] + [S_BITS / rtt] * max(0, n - len(self.tcp_rates))

    def rtt(self) -> float:
        """The RTT with a full queue (the appendix's constant RTT)."""
        return 2 * self.delay + self.q * 8 / self.w

    def advance(self, t: float) -> None:
        dt = t - self.t
        if dt <= 0:
            return
        self.t = t
        rtt = self.rtt()
        self.tcp_rates = [r + S_BITS / rtt**2 * dt for r in self.tcp_rates]
        self.level = max(0.0, self.level + (sum(self.tcp_rates) - self.w) * dt)
        if self.level > self.q * 8:
            self.level = self.q * 8
            self._tcp_loss(t)

    def _tcp_loss(self, t: float) -> None:
        if t - self.last_tcp_cut >= self.rtt():
            self.tcp_rates = [r / 2 for r in self.tcp_rates]
            self.last_tcp_cut = t

    def offer(self, t: float, bits: float) -> float | None:
        """Arrival time at the receiver of a packet sent at ``t``, or None if dropped."""
        self.advance(t)
        if self.level + bits > self.q * 8:
            self._tcp_loss(t)
            return None
        self.level += bits
        return t + self.level / self.w + self.delay


class FluidRun:
    """Source, receivers ``0..n-1`` (rids 1..n) and their paths on one event heap."""

    def __init__(self, paths: list[Path], params: OrmccParams | None = None):
        self.params = params or OrmccParams()
        self.paths = paths
        for p in paths:
            p.set_tcp(p.tcp)
        self.sender = OrmccSender(self.params)
        self.receivers = [OrmccReceiver(self.params, rid=i + 1) for i in range(len(paths))]
        self.heap: list = []
        self.order = itertools.count()
        self.timer_at: dict[str, float] = {}
        self.seq = 0
        self.now = 0.0
        self.cr_trace: list[tuple[float, int | None]] = []
        self.rate_trace: list[tuple[float, float]] = []
        self.schedule: list[tuple[float, int, int]] = []  # (time, path, tcp flows)

    def push(self, at: float, kind: str, *data: object) -> None:
        heapq.heappush(self.heap, (at, next(self.order), kind, data))

    def sender_actions(self, actions: list) -> None:
        for a in actions:
            if isinstance(a, SetTimer):
                self.timer_at[a.timer_id] = a.at
                self.push(a.at, "timer", a.timer_id, a.at)
            elif isinstance(a, CancelTimer):
                self.timer_at.pop(a.timer_id, None)
            elif hasattr(a, "channel") and hasattr(a, "ext") and hasattr(a, "size"):
                seq, self.seq = self.seq, self.seq + 1
                for i, path in enumerate(self.paths):
                    at = path.offer(self.now, a.size * 8)
                    if at is not None:
                        self.push(at, "packet", i, Header(5, 1, 0, seq, int(self.now * 1e9), 0,
                                                          a.ext), a.size)

    def run(self, until: float, sample: float = 0.5) -> None:
        """Run to ``until`` seconds, sampling the CR and rate every ``sample`` seconds."""
        for at, path, n in self.schedule:
            self.push(at, "tcp", path, n)
        self.push(0.0, "sample")
        self.sender_actions(self.sender.start(0.0))
        for r in self.receivers:
            r.start(0.0)
        while self.heap and self.heap[0][0] <= until:
            self.now, _, kind, data = heapq.heappop(self.heap)
            if kind == "timer":
                timer_id, at = data
                if self.timer_at.get(timer_id) == at:
                    del self.timer_at[timer_id]
                    self.sender_actions(self.sender.on_timer(self.now, timer_id))
            elif kind == "packet":
                i, header, size = data
                for a in self.receivers[i].on_packet(self.now, header, size, "239.1.1.1"):
                    if isinstance(a, Feedback):
                        self.push(self.now + self.paths[i].delay, "ci", i, a.data)
            elif kind == "ci":
                i, payload = data
                self.sender_actions(self.sender.on_feedback(self.now, payload, f"r{i}"))
            elif kind == "tcp":
                path, n = data
                self.paths[path].advance(self.now)
                self.paths[path].set_tcp(n)
            elif kind == "sample":
                for p in self.paths:
                    p.advance(self.now)
                cr = self.sender.cr if self.sender.cr_valid else None
                self.cr_trace.append((self.now, cr))
                self.rate_trace.append((self.now, self.sender.rate))
                self.push(self.now + sample, "sample")

    def cr_share(self, rid: int, start: float, end: float) -> float:
        """Fraction of samples in [start, end) whose valid CR is ``rid``."""
        window = [cr for t, cr in self.cr_trace if start <= t < end]
        return sum(cr == rid for cr in window) / len(window)

    def mean_rate(self, start: float, end: float) -> float:
        window = [r for t, r in self.rate_trace if start <= t < end]
        return sum(window) / len(window)
