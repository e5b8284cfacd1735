"""Run a sender core and receiver cores together in simulated time, over an in-memory network.

The same :class:`~agents.runtime.agent.Agent` glue as in a lab runs here, so
datagrams are really encoded and parsed, statistics, event logs and metrics are
the real ones; only the clock (:class:`SimLoop`) and the network
(:class:`SimPort`) are simulated. Each receiver hangs off the sender by its own
:class:`Link` (delay, random loss, optional rate and drop-tail queue, join and
leave latency)::

    result = simulate(session, sender="s", receivers=["r1", "r2"], duration=10.0,
                      links={"r2": Link(delay=0.02, loss=0.01)})
    result.receivers["r1"].agent.stats.received().packets

or through a :class:`Router` that several links share (``Link(via="r2")``): its
delay and loss count once for all of them, and only the first join to reach it
travels on towards the sender (a tree of depth two, WEBRC's Fig. 3).
"""

from __future__ import annotations

import io
import json
import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agents.runtime.agent import Agent
from agents.runtime.eventlog import EventLog
from agents.runtime.loop import TimerHeap
from agents.runtime.metrics import AgentMetrics
from agents.runtime.session import Session


class SimLoop:
    """A simulated clock: timers run in time order and ``now()`` jumps to each."""

    def __init__(self, start: float = 0.0):
        self._now = start
        self._timers = TimerHeap()
        self._stopping = False

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, fn: Callable[[], Any]) -> Any:
        return self._timers.push(max(when, self._now), fn)

    def stop(self) -> None:
        self._stopping = True

    def run(self, until: float) -> None:
        """Run every timer due before ``until``, then set the clock to ``until``."""
        self._stopping = False
        while not self._stopping:
            when = self._timers.next_time()
            if when is None or when >= until:
                break
            handle = self._timers.pop_due(when)
            assert handle is not None
            self._now = when
            handle.fn()
        if not self._stopping:
            self._now = max(self._now, until)


@dataclass
class Link:
    """The path from the sender to one receiver (and back, for unicast feedback).

    ``rate`` (bit/s, None: unlimited) with a drop-tail ``queue`` of that many
    packets models a last-mile bottleneck; ``join_delay`` and ``leave_delay`` model
    how long the routers take to start and stop forwarding a group.
    """

    delay: float = 0.0
    loss: float = 0.0
    rate: float | None = None
    queue: int = 100
    join_delay: float = 0.0
    leave_delay: float = 0.0
    feedback_loss: float = 0.0  # random loss of unicast feedback, each way
    via: str | None = None  # a shared Router between the sender and this link
    # Drop episodes: every packet offered to the link in [start, end) of one is lost,
    # whatever its channel (a congested queue overflowing for a while).
    outages: tuple[tuple[float, float], ...] = ()


@dataclass
class Router:
    """A router shared by the links that name it (``Link.via``), on their way from the
    sender: ``delay`` and random ``loss`` from the sender to it, once for all of them.

    It forwards a group down a link once that link's join reached it (the link's
    ``join_delay``), and it starts receiving the group ``join_delay`` after the first
    such join, which it passes up; a later join finds the group flowing or on its way
    (WEBRC sec. 4.4: only the first join to reach a router travels further). It stops
    ``leave_delay`` after no link wants the group any more.
    """

    delay: float = 0.0
    loss: float = 0.0
    join_delay: float = 0.0
    leave_delay: float = 0.0


class SimRouter:
    """A :class:`Router` in a simulation: which groups it receives, and its links."""

    def __init__(self, net: SimNetwork, name: str, router: Router):
        self.net = net
        self.name = name
        self.router = router
        self.ports: list[SimPort] = []
        self.wanted: set[int] = set()  # a join passed up, no leave since
        self.receiving: set[int] = set()  # the sender's side forwards these here
        self.counters = LinkCounters()

    def request(self, channel: int) -> None:
        """A link's join reached the router: pass it up unless it already did."""
        if channel in self.wanted:
            return
        self.wanted.add(channel)
        self.net.loop.call_at(self.net.loop.now() + self.router.join_delay,
                              lambda: self.receiving.add(channel) if channel in self.wanted
                              else None)

    def release(self, channel: int) -> None:
        """A link's leave reached the router: pass it up when no link wants the group."""
        if any(channel in port.forwarded for port in self.ports):
            return
        self.wanted.discard(channel)
        self.net.loop.call_at(self.net.loop.now() + self.router.leave_delay,
                              lambda: self.receiving.discard(channel)
                              if channel not in self.wanted else None)

    def offer(self, channel: int, data: bytes) -> None:
        """A packet leaves the sender: it reaches the router's links after ``delay``."""
        if channel not in self.receiving:
            return
        self.counters.offered += 1
        if self.router.loss and self.net.rng.random() < self.router.loss:
            self.counters.lost += 1
            return
        self.counters.delivered += 1
        self.net.loop.call_at(self.net.loop.now() + self.router.delay,
                              lambda: [port.offer(channel, data) for port in self.ports])


@dataclass
class LinkCounters:
    offered: int = 0
    lost: int = 0  # random loss
    queue_drops: int = 0
    outage_drops: int = 0  # Link.outages
    delivered: int = 0


class SimPort:
    """One node's attachment: the agent's transport in simulated time."""

    def __init__(self, net: SimNetwork, name: str, link: Link):
        self.net = net
        self.name = name
        self.link = link
        self.agent: Agent | None = None
        self.sockets: set[int] = set()  # channels the node's sockets have joined
        self.forwarded: set[int] = set()  # channels the routers forward to this node
        self.counters = LinkCounters()
        self._departures: deque[float] = deque()
        self._busy_until = 0.0
        self.router: SimRouter | None = None
        if link.via is not None:
            if link.via not in net.routers:
                raise ValueError(f"link of {name!r}: no router {link.via!r}")
            self.router = net.routers[link.via]
            self.router.ports.append(self)

    # the Transport interface
    def send(self, channel: int, data: bytes) -> bool:
        self.net.transmit(self, channel, data)
        return True

    def join(self, channel: int) -> None:
        self.sockets.add(channel)
        self.net.loop.call_at(self.net.loop.now() + self.link.join_delay,
                              lambda: self._forward(channel, True))

    def leave(self, channel: int) -> None:
        self.sockets.discard(channel)
        self.net.loop.call_at(self.net.loop.now() + self.link.leave_delay,
                              lambda: self._forward(channel, False))

    def send_feedback(self, to: str | None, data: bytes) -> bool:
        self.net.feedback(self, to, data)
        return True

    def close(self) -> None:
        self.sockets.clear()

    def _forward(self, channel: int, on: bool) -> None:
        # A leave followed by a quick re-join must not undo the re-join.
        if on:
            self.forwarded.add(channel)
            if self.router is not None:
                self.router.request(channel)
        elif channel not in self.sockets:
            self.forwarded.discard(channel)
            if self.router is not None:
                self.router.release(channel)

    # the link
    def offer(self, channel: int, data: bytes) -> None:
        """A packet reaches this node's link at the sender's time ``now``."""
        if channel not in self.forwarded:
            return
        loop, link = self.net.loop, self.link
        now = loop.now()
        self.counters.offered += 1
        if link.loss and self.net.rng.random() < link.loss:
            self.counters.lost += 1
            return
        if any(start <= now < end for start, end in link.outages):
            self.counters.outage_drops += 1
            return
        leave = now
        if link.rate is not None:
            while self._departures and self._departures[0] <= now:
                self._departures.popleft()
            if len(self._departures) >= link.queue:
                self.counters.queue_drops += 1
                return
            leave = max(now, self._busy_until) + len(data) * 8.0 / link.rate
            self._busy_until = leave
            self._departures.append(leave)
        loop.call_at(leave + link.delay, lambda: self._arrive(channel, data))

    def _arrive(self, channel: int, data: bytes) -> None:
        if channel in self.sockets and self.agent is not None:
            self.counters.delivered += 1
            self.agent.deliver(data, channel)


class SimNetwork:
    """Every packet a port sends is offered to every other port's link."""

    def __init__(self, loop: SimLoop, seed: int = 0, routers: dict[str, Router] | None = None):
        self.loop = loop
        self.rng = random.Random(seed)
        self.ports: dict[str, SimPort] = {}
        self.routers = {name: SimRouter(self, name, r) for name, r in (routers or {}).items()}

    def port(self, name: str, link: Link) -> SimPort:
        self.ports[name] = SimPort(self, name, link)
        return self.ports[name]

    def feedback(self, source: SimPort, to: str | None, data: bytes) -> None:
        """Unicast from ``source`` to node ``to`` (None: the sender), after the receiver
        side's link delay; ``peer`` as the destination sees it is the source's name."""
        if to is None:
            dest = next((p for p in self.ports.values()
                         if p.agent is not None and p.agent.role == "sender"), None)
        else:
            dest = self.ports.get(to)
        if dest is None or dest is source:
            return
        far = source if dest.agent is not None and dest.agent.role == "sender" else dest
        if far.link.feedback_loss and self.rng.random() < far.link.feedback_loss:
            return
        self.loop.call_at(self.loop.now() + far.link.delay,
                          lambda: dest.agent.deliver_feedback(data, source.name)
                          if dest.agent is not None else None)

    def transmit(self, sender: SimPort, channel: int, data: bytes) -> None:
        for port in self.ports.values():
            if port is not sender and port.router is None:
                port.offer(channel, data)
        for router in self.routers.values():
            router.offer(channel, data)


@dataclass
class SimNode:
    """One simulated agent with its port, in-memory event log and metrics."""

    name: str
    role: str
    agent: Agent
    port: SimPort
    log_stream: io.StringIO = field(repr=False)

    def records(self, event: str | None = None) -> list[dict[str, Any]]:
        """The event log's records (only those of ``event`` if given)."""
        lines = self.log_stream.getvalue().splitlines()
        records = [json.loads(line) for line in lines]
        return records if event is None else [r for r in records if r["event"] == event]


class Simulation:
    """Build nodes, then :meth:`run`."""

    def __init__(self, session: Session, seed: int = 0, routers: dict[str, Router] | None = None):
        self.session = session
        self.loop = SimLoop()
        self.net = SimNetwork(self.loop, seed, routers)
        self.nodes: dict[str, SimNode] = {}

    def add(self, name: str, role: str, link: Link | None = None, start: float = 0.0) -> SimNode:
        """Add a ``sender`` or ``receiver`` node that starts at simulated time ``start``."""
        if role not in ("sender", "receiver"):
            raise ValueError(f"role must be sender or receiver, not {role!r}")
        spec = self.session.spec
        params = self.session.params_for(name)
        factory = spec.sender if role == "sender" else spec.receiver
        stream = io.StringIO()
        log = EventLog(stream, name, role, wall_clock=False)
        metrics = AgentMetrics(name, self.session.flow, spec.name, role)
        port = self.net.port(name, link or Link())
        agent = Agent(factory(params, self.session), role, self.session, name, self.loop,
                      log, metrics, port)
        port.agent = agent
        self.loop.call_at(start, agent.start)
        self.nodes[name] = SimNode(name, role, agent, port, stream)
        return self.nodes[name]

    def inject(self, name: str, at: float, data: bytes, channel: int) -> None:
        """Deliver raw bytes to node ``name`` at time ``at`` (e.g. a malformed datagram)."""
        agent = self.nodes[name].agent
        self.loop.call_at(at, lambda: agent.deliver(data, channel))

    def run(self, duration: float) -> None:
        """Run until ``duration``, then stop every agent (last stats, leaves, flush)."""
        self.loop.run(duration)
        for node in self.nodes.values():
            node.agent.stop()


@dataclass
class SimResult:
    sender: SimNode
    receivers: dict[str, SimNode]


def simulate(session: Session, sender: str = "s", receivers: Iterable[str] = ("r",),
             duration: float = 10.0, links: Link | dict[str, Link] | None = None,
             starts: dict[str, float] | None = None, seed: int = 0,
             routers: dict[str, Router] | None = None) -> SimResult:
    """One sender and some receivers for ``duration`` simulated seconds; ``routers`` are
    the shared routers the links may name (``Link.via``)."""
    sim = Simulation(session, seed, routers)
    starts = starts or {}
    send_node = sim.add(sender, "sender", start=starts.get(sender, 0.0))
    nodes = {}
    for name in receivers:
        link = links.get(name) if isinstance(links, dict) else links
        nodes[name] = sim.add(name, "receiver", link, start=starts.get(name, 0.0))
    sim.run(duration)
    return SimResult(send_node, nodes)
