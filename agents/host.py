"""Run many agents (senders, receivers or both) in one process, on one event loop.

    python -m agents.host --plan host.json [--metrics ADDR:PORT] [--t0 T] [--duration S]

A separate process per agent costs a wake-up, a context switch and a Prometheus
scrape for every agent; on two cores that, not the protocols' work, limits a lab to a
few dozen agents. A host runs every agent of its plan on one
:class:`~agents.runtime.loop.EventLoop`, each with its own core, statistics, event log
and metrics labels, exactly as ``agents.run`` would run it alone. Each agent's sockets
are created inside its own node's network namespace (:mod:`agents.runtime.host_transport`).

The plan (JSON, every key checked)::

    {"name": "agent-host-1", "metrics": "172.30.0.11:9400", "netns": null,
     "agents": [{"role": "receiver", "node": "h1", "netns": "/run/netns/mcl-h1",
                 "session": "sessions/f.json", "log": "logs/f-receiver-h1.jsonl",
                 "start": 0.0, "stop": null}, ...]}

``metrics`` is the host's one ``/metrics`` endpoint (``--metrics`` overrides it; one of
them is required), made in ``netns`` (null: the namespace the host was started in). It
serves every running agent's series with their own ``node``/``flow``/``protocol``/``role``
labels. ``start`` and ``stop`` are seconds
after ``--t0`` (a CLOCK_MONOTONIC time; default: when the host starts); an agent whose
start has passed starts at once, one without ``stop`` runs until the host stops.

The host prints one JSON line ``{"event": "ready", ...}`` once its endpoint is up and
the agents due at once have started. It stops on SIGTERM/SIGINT, after ``--duration``,
or when every agent has stopped; each running agent then writes its last stats record,
leaves its groups and flushes its log. An agent that fails (a refused join, a core bug)
logs an ``error`` record and stops; the others go on. Exit status: 0 when every agent
stopped cleanly, 1 when one failed, 2 for a bad command line, plan or session.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import resource
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agents.runtime.agent import Agent
from agents.runtime.eventlog import EventLog
from agents.runtime.host_transport import HostTransport, Namespaces
from agents.runtime.loop import EventLoop, TimerHandle
from agents.runtime.metrics import AgentMetrics, parse_endpoint, render_text
from agents.runtime.session import Session

NODE_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"


class HostedAgentPlan(BaseModel):
    """One agent of a host: what ``agents.run`` would be given, plus its node's namespace."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["sender", "receiver"]
    node: str = Field(pattern=NODE_PATTERN)
    netns: str | None = Field(None, description="the node's namespace file (null: the host's)")
    session: Path
    log: Path
    start: float = Field(0.0, ge=0, description="seconds after the host's time 0")
    stop: float | None = Field(None, gt=0, description="seconds after time 0 (null: never)")

    @model_validator(mode="after")
    def _times(self) -> HostedAgentPlan:
        if self.stop is not None and self.stop <= self.start:
            raise ValueError(f"stop {self.stop:g} must come after start {self.start:g}")
        return self


class HostPlan(BaseModel):
    """Every agent one host runs, and its metrics endpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NODE_PATTERN)
    metrics: str | None = Field(None, description="ADDR:PORT of the host's /metrics on the "
                                "control net (or --metrics)")
    netns: str | None = Field(None, description="where the endpoint's socket is made "
                              "(null: the namespace the host runs in)")
    agents: list[HostedAgentPlan] = Field(min_length=1)

    @field_validator("metrics")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None:
            parse_endpoint(value)
        return value

    @model_validator(mode="after")
    def _distinct(self) -> HostPlan:
        logs: dict[Path, int] = {}
        seen: dict[tuple[Path, str, str], int] = {}
        for i, agent in enumerate(self.agents):
            j = logs.setdefault(agent.log, i)
            if j != i:
                raise ValueError(f"agents[{i}].log: {agent.log} is agents[{j}]'s log too")
            key = (agent.session, agent.node, agent.role)
            j = seen.setdefault(key, i)
            if j != i:
                raise ValueError(f"agents[{i}]: the same {agent.role} of node {agent.node} "
                                 f"and session {agent.session} as agents[{j}]")
        return self


def load_plan(path: Path) -> HostPlan:
    """The plan at ``path``; ValueError naming the file and the field otherwise."""
    try:
        return HostPlan.model_validate_json(path.read_text())
    except ValidationError as exc:
        raise ValueError(f"{path}: {exc}") from None


class AgentClock:
    """One agent's view of the shared loop: its callbacks cannot break the others.

    An exception from a callback (a timer, a readable socket) goes to ``on_error``
    instead of out of the loop, so only the agent that raised it fails.
    """

    def __init__(self, loop: Any, on_error: Callable[[BaseException], None]):
        self._loop = loop
        self._on_error = on_error

    def now(self) -> float:
        return self._loop.now()

    def call_at(self, when: float, fn: Callable[[], Any]) -> TimerHandle:
        return self._loop.call_at(when, self._guard(fn))

    def add_reader(self, fileobj: Any, fn: Callable[[], Any]) -> None:
        self._loop.add_reader(fileobj, self._guard(fn))

    def remove_reader(self, fileobj: Any) -> None:
        self._loop.remove_reader(fileobj)

    def stop(self) -> None:
        """Agents never stop the shared loop; the host does."""

    def _guard(self, fn: Callable[[], Any]) -> Callable[[], None]:
        def guarded() -> None:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - this agent fails, the others go on
                self._on_error(exc)
        return guarded


class MergedMetrics:
    """Every running agent's series behind the host's one endpoint: one family per
    metric, each agent's samples with their own labels."""

    def __init__(self) -> None:
        self.agents: list[AgentMetrics] = []

    def render(self) -> bytes:
        """The text a scrape gets (:func:`~agents.runtime.metrics.render_text`)."""
        return render_text(list(self.agents))  # the HTTP thread: the list may change

    def collect(self) -> Iterator[Metric]:
        """The same series as prometheus_client families (for readers that want samples)."""
        families: dict[str, Metric] = {}
        for metrics in list(self.agents):
            for family in metrics.registry.collect():
                merged = families.get(family.name)
                if merged is None:
                    merged = Metric(family.name, family.documentation, family.type,
                                    family.unit)
                    families[family.name] = merged
                merged.samples.extend(family.samples)
        yield from families.values()


class HostedAgent:
    """One agent of a host and where it is in its life."""

    def __init__(self, plan: HostedAgentPlan, session: Session):
        self.plan = plan
        self.session = session
        self.state: Literal["pending", "running", "stopped", "failed"] = "pending"
        self.agent: Agent | None = None
        self.transport: HostTransport | Any = None
        self.log: EventLog | None = None
        self.metrics: AgentMetrics | None = None
        self.error: str | None = None

    @property
    def label(self) -> str:
        return f"{self.session.flow} {self.plan.role} {self.plan.node}"


TransportFactory = Callable[[HostedAgent, AgentClock, Agent], Any]


class Host:
    """The agents of a plan on one loop: starts and stops them on schedule.

    ``loop`` is an :class:`EventLoop` (or :class:`agents.sim.SimLoop` in tests);
    ``transport`` builds an agent's transport (default: a :class:`HostTransport` in the
    agent's node namespace).
    """

    def __init__(self, plan: HostPlan, sessions: dict[Path, Session], loop: Any,
                 namespaces: Namespaces | None = None,
                 transport: TransportFactory | None = None,
                 err: Callable[[str], None] = lambda text: print(text, file=sys.stderr)):
        self.plan = plan
        self.loop = loop
        self.namespaces = namespaces
        self.merged = MergedMetrics()
        self.agents = [HostedAgent(a, sessions[a.session]) for a in plan.agents]
        self._transport = transport or self._udp_transport
        self._err = err
        self._timers: list[TimerHandle] = []

    def _udp_transport(self, hosted: HostedAgent, clock: AgentClock, agent: Agent) -> Any:
        assert self.namespaces is not None
        node = hosted.session.node(hosted.plan.node)
        session = hosted.session
        return HostTransport(clock, session, None if node.address is None else str(node.address),
                             agent.deliver, agent.deliver_feedback,
                             listen_feedback=hosted.plan.role == "sender"
                             and session.feedback_port is not None,
                             namespaces=self.namespaces, netns=hosted.plan.netns)

    def schedule(self, origin: float) -> None:
        """Start and stop every agent at ``origin`` plus its times; start the due ones now."""
        now = self.loop.now()
        for hosted in self.agents:
            at = origin + hosted.plan.start
            if at <= now:
                self.start_agent(hosted)
            else:
                self._timers.append(self.loop.call_at(at, lambda h=hosted: self.start_agent(h)))
            if hosted.plan.stop is not None:
                self._timers.append(self.loop.call_at(origin + hosted.plan.stop,
                                                      lambda h=hosted: self.stop_agent(h)))

    def start_agent(self, hosted: HostedAgent) -> None:
        """Build the agent (its own log, metrics, transport) and start it."""
        if hosted.state != "pending":
            return
        plan, session = hosted.plan, hosted.session
        spec = session.spec
        factory = spec.sender if plan.role == "sender" else spec.receiver
        plan.log.parent.mkdir(parents=True, exist_ok=True)
        hosted.log = EventLog(plan.log.open("a", buffering=1 << 16), plan.node, plan.role)
        hosted.metrics = AgentMetrics(plan.node, session.flow, spec.name, plan.role)
        clock = AgentClock(self.loop, lambda exc: self.fail(hosted, exc))
        hosted.state = "running"
        try:
            core = factory(session.params_for(plan.node), session)
            hosted.agent = Agent(core, plan.role, session, plan.node, clock, hosted.log,
                                 hosted.metrics)
            hosted.transport = self._transport(hosted, clock, hosted.agent)
            hosted.agent.transport = hosted.transport
            if plan.role == "sender":
                hosted.transport.open()
            self.merged.agents.append(hosted.metrics)
            hosted.agent.start()
        except Exception as exc:  # noqa: BLE001 - this agent fails, the others go on
            self.fail(hosted, exc)
        # What an agent builds at its start lives as long as the agent. A full
        # collection walks every object the collector tracks, and with 97 agents'
        # start-up objects one took 84-117 ms in a lab, every timer of the loop
        # waiting; frozen objects are never walked (their cycles are never freed).
        gc.freeze()

    def stop_agent(self, hosted: HostedAgent) -> None:
        """Stop a running agent as ``agents.run`` does on SIGTERM; stop the host after the
        last one."""
        if hosted.state != "running":
            if hosted.state == "pending":
                hosted.state = "stopped"
            self._maybe_done()
            return
        hosted.state = "stopped"
        try:
            self._close(hosted)
        except Exception as exc:  # noqa: BLE001 - recorded as this agent's failure
            hosted.state = "failed"
            hosted.error = repr(exc)
            self._err(f"agents.host: {hosted.label}: {exc!r}")
        self._maybe_done()

    def fail(self, hosted: HostedAgent, exc: BaseException) -> None:
        """An agent raised: log it in its own log, stop it, keep the others running."""
        if hosted.state == "failed":
            return
        hosted.state = "failed"
        hosted.error = repr(exc)
        if not isinstance(exc, OSError):  # a bug, not the network: keep the traceback
            self._err("".join(traceback.format_exception(exc)))
        self._err(f"agents.host: {hosted.label} failed: {exc}")
        if hosted.log is not None:
            hosted.log.write(self.loop.now(), "error", what="run", error=repr(exc))
        try:
            self._close(hosted)
        except Exception as again:  # noqa: BLE001 - it has failed already
            self._err(f"agents.host: {hosted.label}: stopping after the failure: {again!r}")
        self._maybe_done()

    def _close(self, hosted: HostedAgent) -> None:
        """Stop the agent, close its sockets and log, withdraw its series."""
        try:
            if hosted.agent is not None:
                hosted.agent.stop()
        finally:
            if hosted.metrics is not None and hosted.metrics in self.merged.agents:
                self.merged.agents.remove(hosted.metrics)
            if hosted.transport is not None:
                hosted.transport.close()
            if hosted.log is not None:
                hosted.log.close()

    def _maybe_done(self) -> None:
        if all(h.state in ("stopped", "failed") for h in self.agents):
            self.loop.stop()

    def stop_all(self) -> None:
        """Stop every agent still running (the host's end)."""
        for handle in self._timers:
            handle.cancel()
        for hosted in self.agents:
            if hosted.state == "running":
                self.stop_agent(hosted)
            elif hosted.state == "pending":
                hosted.state = "stopped"

    @property
    def failed(self) -> list[HostedAgent]:
        return [h for h in self.agents if h.state == "failed"]

    def running(self) -> int:
        return sum(h.state == "running" for h in self.agents)


def load_sessions(plan: HostPlan) -> dict[Path, Session]:
    """Every session the plan names, loaded once and checked against its agents' nodes."""
    sessions: dict[Path, Session] = {}
    for i, agent in enumerate(plan.agents):
        if agent.session not in sessions:
            try:
                sessions[agent.session] = Session.model_validate_json(agent.session.read_text())
            except ValidationError as exc:
                raise ValueError(f"{agent.session}: {exc}") from None
        session = sessions[agent.session]
        try:
            session.node(agent.node)
            session.params_for(agent.node)
        except (KeyError, ValueError, ValidationError) as exc:
            raise ValueError(f"agents[{i}] ({agent.node}): {exc}") from None
    return sessions


def raise_fd_limit() -> None:
    """Let the host hold every agent's sockets and logs (several hundred descriptors)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def scheduler_nice(agents: int) -> int:
    """The nice value that gives a host of ``agents`` agents the CPU weight of as many
    processes (each nice step is a factor 1.25 of CFS weight), within Linux's -20."""
    return max(-20, -round(math.log(max(agents, 1)) / math.log(1.25)))


def take_agents_share(agents: int) -> int:
    """Ask the scheduler for the share ``agents`` agent processes would get together.

    On a loaded machine the kernel shares the CPU out per task: one process per agent
    gets a share per agent, a host one share for all of them. In a 129-node lab
    (load average near 100) a host at nice 0 got too little to keep its timers within
    seconds. Called before any thread starts (threads inherit it); a refusal (no
    CAP_SYS_NICE) leaves the value as it was. Returns the nice value in effect.
    """
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, min(os.getpriority(os.PRIO_PROCESS, 0),
                                               scheduler_nice(agents)))
    return os.getpriority(os.PRIO_PROCESS, 0)


class _QuietHandler(WSGIRequestHandler):
    """No log line per scrape (the default writes one to stderr every second)."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Say nothing."""


def exposition_app(merged: MergedMetrics) -> Callable[..., Any]:
    """A WSGI app answering every request with ``merged``'s series in the classic text
    format, uncompressed, whatever the scraper asks for.

    A host's /metrics holds every agent's series (about 5,700 for 97 agents), and
    producing it holds the interpreter lock that the agents' event loop needs:
    with prometheus_client's families, OpenMetrics and gzip (what Prometheus asks
    for), a scrape held the loop up for 60-130 ms once a second in a 193-agent
    lab. The text comes from :func:`~agents.runtime.metrics.render_text`, which
    only formats numbers (``make bench-metrics`` compares the two); the scrape
    stays on the machine's control network, so the bytes cost nothing.
    """
    def answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        body = merged.render()
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4),
                                  ("Content-Length", str(len(body)))])
        return [body]
    return answer


def serve(merged: MergedMetrics, addr: str, port: int, namespaces: Namespaces,
          netns: str | None) -> Any:
    """The host's ``/metrics`` (its own thread), its socket made inside ``netns``.

    One request at a time (a plain ``WSGIServer``, not a thread per request): a
    scrape that outlasts Prometheus's timeout is not joined by the next one, so
    at most one thread ever competes with the event loop for the lock.
    """
    with namespaces.inside(netns):
        server = make_server(addr, port, exposition_app(merged), handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agents.host",
                                     description="Run many protocol agents on one loop.")
    parser.add_argument("--plan", required=True, type=Path, help="the host plan (JSON)")
    parser.add_argument("--metrics", default=None,
                        help="ADDR:PORT on the control net (default: the plan's)")
    parser.add_argument("--t0", type=float, default=None,
                        help="CLOCK_MONOTONIC time of the plan's time 0 (default: now)")
    parser.add_argument("--duration", type=float, default=None,
                        help="seconds after time 0 to stop (default: SIGTERM/SIGINT, or "
                        "when every agent has stopped)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        plan = load_plan(args.plan)
        sessions = load_sessions(plan)
        endpoint = args.metrics or plan.metrics
        if endpoint is None:
            raise ValueError(f"no --metrics and no metrics in {args.plan}")
        addr, port = parse_endpoint(endpoint)
        if args.duration is not None and args.duration <= 0:
            raise ValueError("--duration must be positive")
    except (OSError, ValueError) as exc:
        print(f"agents.host: {exc}", file=sys.stderr)
        return 2
    raise_fd_limit()
    nice = take_agents_share(len(plan.agents))
    loop = EventLoop()
    namespaces = Namespaces()
    host = Host(plan, sessions, loop, namespaces)
    origin = loop.now() if args.t0 is None else args.t0
    server = None
    try:
        server = serve(host.merged, addr, port, namespaces, plan.netns)
        loop.stop_on_signals(signal.SIGTERM, signal.SIGINT)
        host.schedule(origin)
        print(json.dumps({"event": "ready", "host": plan.name, "metrics": endpoint,
                          "agents": len(host.agents), "running": host.running(),
                          "nice": nice,
                          "t": loop.now()}), flush=True)
        until = None if args.duration is None else origin + args.duration
        if host.running() or any(h.state == "pending" for h in host.agents):
            loop.run(until)
    except OSError as exc:  # the endpoint's address is not there, its port is taken
        print(f"agents.host: {exc}", file=sys.stderr)
        return 1
    finally:
        host.stop_all()
        if server is not None:
            server.shutdown()
            server.server_close()
        loop.close()
        namespaces.close()
    return 1 if host.failed else 0


if __name__ == "__main__":
    sys.exit(main())
