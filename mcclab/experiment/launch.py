"""Turn flows into process launches, as data: what to start, where, when, logging where.

A ``Launch`` is one process (an agent, an iperf3 server or client, an on/off
UDP sink or source) with the experiment times at which it starts and stops.
The runner only executes the list; tests assert on it.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mcclab.commands import Cmd, sysctls
from mcclab.experiment.spec import (
    Experiment,
    MulticastFlow,
    OnOffFlow,
    Period,
    TcpFlow,
    UdpFlow,
    carries_tcp,
    tcp_model,
)
from mcclab.model.addressing import AddressPlan
from mcclab.model.tcp_models import host_sysctls
from mcclab.net.node_config import netns_name
from mcclab.net.tcp_window import (
    HostTarget,
    Prime,
    clamp_route,
    listen_argv,
    listen_limit,
    prime_cmd,
    prime_host_argv,
)

IPERF_BASE_PORT = 5201
METRICS_BASE_PORT = 9464
HOST_METRICS_BASE_PORT = 9400  # + the host's number: agent hosts' endpoints
AGENT_PORT = 5500
FEEDBACK_BASE_PORT = 5600  # + the flow's index: one feedback port per session
WINDOW_PORT = 5199  # window primers' listeners on receivers' hosts, done before any flow
WINDOWS_LOG = "tcp-windows.log"  # in logs/: what each sender's host's cache held


@dataclass(frozen=True)
class AgentEntry:
    """What an agent's command line says beyond its role, node and log: the session file
    and, for an agent in a process of its own, its metrics endpoint."""

    session: str
    metrics: str | None = None  # ADDR:PORT; None: served by its agent host

    def argv(self, python: str, role: str, node: str, log: str) -> tuple[str, ...]:
        """The ``agents.run`` command line of this agent."""
        argv = (python, "-m", "agents.run", role, "--session", self.session, "--node", node,
                "--log", log)
        return argv if self.metrics is None else (*argv, "--metrics", self.metrics)


@dataclass(frozen=True)
class SinkEntry:
    """An on/off UDP sink: where it listens."""

    bind: str
    port: int

    def argv(self, python: str, log: str) -> tuple[str, ...]:
        """The ``udp_onoff recv`` command line of this sink."""
        return (python, "-m", "mcclab.traffic.udp_onoff", "recv", "--bind", self.bind,
                "--port", str(self.port), "--log", log)


@dataclass(frozen=True)
class SourceEntry:
    """An on/off UDP source: where it sends, how fast, how large, on which schedule."""

    dest: str
    port: int
    rate_bps: float  # whole bits per second, as the command line carries it
    size: int
    schedule: str  # the schedule file (``sessions/<flow>.onoff.json``)

    def argv(self, python: str, log: str) -> tuple[str, ...]:
        """The ``udp_onoff send`` command line of this source."""
        return (python, "-m", "mcclab.traffic.udp_onoff", "send", "--dest", self.dest,
                "--port", str(self.port), "--rate", f"{self.rate_bps:.0f}", "--size",
                str(self.size), "--schedule", self.schedule, "--log", log)


@dataclass(frozen=True)
class Launch:
    """One process of the experiment timeline."""

    flow: str
    role: str  # sender | receiver (agents), server | client (iperf3), sink | source
    node: str
    argv: tuple[str, ...]
    start: float
    stop: float | None  # None: stopped at the end of the run
    log: str  # absolute path of the process's output
    peer: str | None = None  # the receiving node, for client logs measured at the server
    host: str | None = None  # the agent host that runs this agent (None: its own process)
    # What the argv says, as data, for a host that runs the launch in its own process
    # (agent hosts, the on/off host); None for iperf3 and hosts.
    entry: AgentEntry | SinkEntry | SourceEntry | None = None


@dataclass
class LaunchPlan:
    """Every process and every file (sessions) an experiment needs."""

    launches: list[Launch] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> content
    setup: list[Cmd] = field(default_factory=list)  # run once the lab is up, before any flow
    onoff: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    # How agents run, for run.json: {"mode": "process"} or {"mode": "host", "hosts":
    # {host: [{"flow", "role", "node"}, ...]}}.
    agents: dict[str, Any] = field(default_factory=lambda: {"mode": "process"})


def groups_for(index: int, channels: int, ssm: bool) -> list[str]:
    """Default groups of the index-th flow: 239.10.<i>.<c> (ASM) or 232.10.<i>.<c> (SSM)."""
    first = "232" if ssm else "239"
    return [f"{first}.10.{index}.{c + 1}" for c in range(channels)]


def on_off_periods(flow: OnOffFlow, seed: int, end: float) -> list[tuple[float, float]]:
    """The flow's on-intervals, drawn from its distributions with a fixed seed."""
    rng = random.Random(f"{seed}:{flow.name}")

    def draw(period: Period) -> float:
        if period.distribution == "exponential":
            return rng.expovariate(1.0 / period.mean)
        # Pareto with the given mean: scale = mean * (shape - 1) / shape.
        scale = period.mean * (period.shape - 1) / period.shape
        return scale * rng.paretovariate(period.shape)

    stop = min(end, flow.stop) if flow.stop is not None else end
    t, out = flow.start, []
    # Start in the stationary state: on with probability mean_on / (mean_on + mean_off).
    on = rng.random() < flow.on_period.mean / (flow.on_period.mean + flow.off_period.mean)
    while t < stop:
        length = draw(flow.on_period if on else flow.off_period)
        if on:
            out.append((t, min(t + length, stop)))
        t += length
        on = not on
    if flow.carrier == "udp":
        return out  # mcclab.traffic.udp_onoff keeps every period, however short
    return [(a, b) for a, b in out if b - a >= 0.5]  # iperf3 needs a whole-ish second


def _iperf_client(flow: Any, address: str, port: int, seconds: float, carrier: str,
                  cc: str | None = None) -> tuple:
    """iperf3 client argv; a TCP client's congestion control (its TCP model's ``cc``, which
    it must be given) is set per socket (-C); a UDP client has none."""
    argv = ["iperf3", "-c", address, "-p", str(port), "-t", f"{max(seconds, 1):.0f}",
            "-i", "1", "-f", "k", "--forceflush"]
    if carrier == "tcp":
        if cc is None:
            raise ValueError(f"flow {flow.name!r}: a TCP client needs its congestion control")
        argv += ["-C", cc]
        if getattr(flow, "mss", None):
            argv += ["-M", str(flow.mss)]
    else:
        argv += ["-u", "-b", f"{flow.rate:.0f}", "-l", str(flow.packet_size)]
    return tuple(argv)


def _udp_onoff(out: LaunchPlan, flow: OnOffFlow, periods: list[tuple[float, float]],
               address: str, port: int, run_dir: Path, python: str) -> None:
    """An on/off UDP flow: one sink and one source for the whole run (mcclab.traffic)."""
    origin = periods[0][0] if periods else flow.start
    schedule = str(run_dir / "sessions" / f"{flow.name}.onoff.json")
    out.files[schedule] = json.dumps(
        {"origin_s": origin, "periods": [[round(a - origin, 6), round(b - origin, 6)]
                                         for a, b in periods]})
    sink_log = str(run_dir / "logs" / f"{flow.name}-sink-{flow.receiver}.jsonl")
    sink = SinkEntry(address, port)
    out.launches.append(Launch(flow.name, "sink", flow.receiver, sink.argv(python, sink_log),
                               0.0, None, sink_log, entry=sink))
    if not periods:
        return
    assert flow.rate is not None  # the spec requires it for carrier udp
    source_log = str(run_dir / "logs" / f"{flow.name}-source-{flow.sender}.jsonl")
    source = SourceEntry(address, port, float(round(flow.rate)), flow.packet_size, schedule)
    out.launches.append(Launch(flow.name, "source", flow.sender,
                               source.argv(python, source_log), origin, None, source_log,
                               peer=flow.receiver, entry=source))


ONOFF_HOST = "onoff-host"


def onoff_host(out: LaunchPlan, run_dir: Path, python: str) -> None:
    """Move every on/off UDP sink and source into one ``mcclab.traffic.onoff_host``.

    Each keeps its launch (times, log, command line) marked with the host, as agents in
    agent hosts do, so the tables, the exporter and the live rates read the same logs.
    The host starts at time 0 in the first sink's node; its plan,
    ``sessions/onoff-host.json``, names each one's node namespace. One host for all:
    a datagram costs it tens of microseconds, far from a core at Table II's 168 flows.
    """
    from mcclab.net.setns import NETNS_DIR

    index = [i for i, launch in enumerate(out.launches) if launch.role in ("sink", "source")]
    if not index:
        return
    entries: dict[str, list[dict[str, Any]]] = {"sink": [], "source": []}
    for i in index:
        launch = out.launches[i]
        made = launch.entry
        assert isinstance(made, SinkEntry | SourceEntry)  # every sink and source has one
        entry: dict[str, Any] = {"flow": launch.flow, "node": launch.node,
                                 "netns": str(NETNS_DIR / netns_name(launch.node)),
                                 "port": made.port, "log": launch.log}
        if isinstance(made, SinkEntry):
            entry["bind"] = made.bind
        else:
            entry.update(dest=made.dest, rate_bps=made.rate_bps, size=made.size,
                         schedule=made.schedule)
        entries[launch.role].append(entry)
        out.launches[i] = replace(launch, host=ONOFF_HOST)
    plan_file = str(run_dir / "sessions" / f"{ONOFF_HOST}.json")
    out.files[plan_file] = json.dumps({"name": ONOFF_HOST, "sinks": entries["sink"],
                                       "sources": entries["source"]}, indent=1)
    home = out.launches[index[0]].node
    out.launches.append(Launch(ONOFF_HOST, "host", home,
                               (python, "-m", "mcclab.traffic.onoff_host", "--plan", plan_file),
                               0.0, None, str(run_dir / "logs" / f"{ONOFF_HOST}.out")))
    out.agents = {**out.agents, "onoff": {"host": ONOFF_HOST, "sinks": len(entries["sink"]),
                                          "sources": len(entries["source"])}}


def host_setup(exp: Experiment) -> list[Cmd]:
    """Per-host settings of the TCP senders' model: SACK, RACK, TLP and F-RTO off where it says.

    Each is a sysctl of the sender's namespace. SACK is negotiated in the
    handshake, and RACK, TLP and F-RTO are the sender's loss recovery, so the
    sender is enough. The spec makes every TCP flow of one sender agree.
    """
    keys = sorted({(f.sender, key, value) for f in exp.flows if carries_tcp(f)
                   for key, value in host_sysctls(tcp_model(exp, f))})
    per_host: dict[str, list[tuple[str, str | int]]] = {}
    for host, key, value in keys:
        per_host.setdefault(host, []).append((key, value))
    return [sysctls(netns_name(h), settings) for h, settings in per_host.items()]


def window_setup(exp: Experiment, plan: AddressPlan, python: str = sys.executable,
                 remote: Collection[str] = frozenset(), log: Path | None = None) -> list[Cmd]:
    """The window ceilings of the TCP flows' model (``max_window``), per sender and receiver.

    Each pair's route with the locked ``cwnd`` first, in the sender's namespace, then the
    priming of the caches. Namespaces in ``remote`` are machines of their own (those the
    lab's runner routes elsewhere, ``mcclab.execute.RemoteRoutes``): their pairs are
    primed by :func:`host_windows`, which appends what each sender's cache held to
    ``log``; the other pairs by one primer entering both namespaces
    (``tcp_window.prime_cmd``). ValueError for a pair with one end in each.
    """
    pairs = sorted({(f.sender, f.receiver, tcp_model(exp, f).max_window) for f in exp.flows
                    if carries_tcp(f) and tcp_model(exp, f).max_window is not None})
    routes: list[Cmd] = []
    primes: list[Prime] = []
    hosts: list[tuple[str, str, str, int]] = []
    for sender, receiver, segments in pairs:
        dest = plan.address_of(receiver)
        gateway, dev = plan.next_hop(sender, dest)
        routes.append(clamp_route(netns_name(sender), dest, gateway, dev, segments))
        away = {node for node in (sender, receiver) if netns_name(node) in remote}
        if len(away) == 1:
            raise ValueError(f"window ceiling {sender} -> {receiver}: {away.pop()} is another "
                             "machine and its peer a namespace here; no primer reaches both")
        if away:
            hosts.append((sender, receiver, str(dest), segments))
        else:
            primes.append(Prime(netns_name(sender), netns_name(receiver), str(dest), segments))
    # Every route first, then one primer for all the lab's pairs, then the hosts' own.
    return (routes + ([prime_cmd(primes, python)] if primes else [])
            + host_windows(hosts, python, log))


def host_windows(pairs: Sequence[tuple[str, str, str, int]], python: str = sys.executable,
                 log: Path | None = None, port: int = WINDOW_PORT) -> list[Cmd]:
    """Window ceilings between machines of their own, each pair ``(sender, receiver,
    receiver's address, segments)``: a listener on each receiver's host, then one primer
    on each sender's host for all that sender's pairs, each command named by its node's
    namespace so that the lab's runner sends it to that machine.

    The runner runs them one after another: a listener's command returns once its
    addresses are bound, leaving a child that ends when it has served every connection
    the primers will make to it (``tcp_window.serve``); a primer's fails when a cache
    lacks its ceiling, before any flow starts, and appends what each cache held to
    ``log`` (``s2: 10.0.4.2 cwnd 20``).
    """
    addresses: dict[str, list[str]] = {}  # receiver -> its addresses to listen on
    expect: dict[str, int] = {}  # receiver -> connections the primers will make to it
    targets: dict[str, list[HostTarget]] = {}  # sender -> its primer's targets
    for sender, receiver, address, segments in pairs:
        if address not in addresses.setdefault(receiver, []):
            addresses[receiver].append(address)
        expect[receiver] = expect.get(receiver, 0) + 1
        targets.setdefault(sender, []).append(HostTarget(address, port, segments))
    limit = listen_limit(len(targets))
    listeners = [Cmd(tuple(listen_argv(found, port, expect[node], python, limit)),
                     netns_name(node)) for node, found in addresses.items()]
    primers = [Cmd(tuple(prime_host_argv(found, python, None if log is None else str(log),
                                         node)), netns_name(node))
               for node, found in targets.items()]
    return listeners + primers


def plan_launches(exp: Experiment, plan: AddressPlan, run_dir: Path,
                  python: str = sys.executable, cores: int | None = None,
                  remote: Collection[str] = frozenset()) -> LaunchPlan:
    """Every process the experiment starts, with its times, node and log file; ``remote``
    names the namespaces that are machines of their own (:func:`window_setup`)."""
    from agents.runtime.registry import get

    out = LaunchPlan(setup=host_setup(exp) + window_setup(
        exp, plan, python, remote, run_dir / "logs" / WINDOWS_LOG))
    metrics_port: dict[str, int] = {}

    def metrics_addr(node: str) -> str:
        port = metrics_port.get(node, METRICS_BASE_PORT)
        metrics_port[node] = port + 1
        return f"{plan.control[node].ip}:{port}"

    for index, flow in enumerate(exp.flows, start=1):
        if isinstance(flow, MulticastFlow):
            spec = get(flow.protocol)
            params = spec.params.model_validate(flow.params)
            channels = spec.channels(params) if spec.channels else 1
            groups = [str(g) for g in flow.groups] or groups_for(index, channels, flow.ssm)
            source = str(plan.address_of(flow.sender))
            nodes: dict[str, Any] = {flow.sender: {"address": source}}
            for r in flow.receivers:
                nodes[r] = {"address": str(plan.address_of(r)),
                            "params": flow.receiver_params.get(r, {})}
            session = {
                "protocol": flow.protocol, "flow": flow.name, "session_id": index,
                "source": source, "ssm": flow.ssm, "ttl": 32,
                "channels": [{"group": g, "port": AGENT_PORT} for g in groups],
                "params": flow.params, "nodes": nodes,
            }
            if spec.feedback:
                session["feedback_port"] = FEEDBACK_BASE_PORT + index
            session_file = str(run_dir / "sessions" / f"{flow.name}.json")
            out.files[session_file] = json.dumps(session, indent=1, default=str)
            for role, node, start in [
                ("sender", flow.sender, flow.start),
                *[("receiver", r, flow.receiver_start.get(r, flow.start))
                  for r in flow.receivers],
            ]:
                log = str(run_dir / "logs" / f"{flow.name}-{role}-{node}.jsonl")
                agent = AgentEntry(session_file, metrics_addr(node))
                out.launches.append(Launch(flow.name, role, node,
                                           agent.argv(python, role, node, log), start,
                                           flow.stop, log, entry=agent))
            continue
        assert isinstance(flow, TcpFlow | UdpFlow | OnOffFlow)
        port = IPERF_BASE_PORT + index
        address = str(plan.address_of(flow.receiver))
        if isinstance(flow, OnOffFlow):
            periods = on_off_periods(flow, exp.seed, exp.duration)
            out.onoff[flow.name] = periods
            if flow.carrier == "udp":
                _udp_onoff(out, flow, periods, address, port, run_dir, python)
                continue
        else:
            periods = [(flow.start, flow.stop if flow.stop is not None else exp.duration)]
        server_log = str(run_dir / "logs" / f"{flow.name}-server-{flow.receiver}.txt")
        server = ("iperf3", "-s", "-p", str(port), "-i", "1", "-f", "k", "--forceflush")
        out.launches.append(Launch(flow.name, "server", flow.receiver, server, 0.0, None,
                                   server_log))
        carrier = flow.carrier if isinstance(flow, OnOffFlow) else flow.type
        for k, (a, b) in enumerate(periods):
            log = str(run_dir / "logs" / f"{flow.name}-client-{flow.sender}-{k}.txt")
            # A client that runs to the end of the experiment outlasts it and is
            # stopped by the runner, so its last whole second is still reported.
            seconds = b - a if b < exp.duration else b - a + 3
            # Only a TCP flow has a TCP model: a UDP flow has no cc (and, in a spec
            # without `tcp:`, no model to fall back on).
            cc = tcp_model(exp, flow).cc if carries_tcp(flow) else None
            argv = _iperf_client(flow, address, port, seconds, carrier, cc)
            out.launches.append(Launch(flow.name, "client", flow.sender, argv, a, None, log,
                                       peer=flow.receiver))
    if exp.agents.mode == "host":
        host_agents(out, plan, run_dir, python, host_count(exp, out, cores))
        onoff_host(out, run_dir, python)
    return out


# --- agent hosts (agents.host) ---------------------------------------------------------------

def host_count(exp: Experiment, out: LaunchPlan, cores: int | None = None) -> int:
    """How many agent hosts the run starts: the spec's number, or one per core (``cores``,
    default this machine's), never more than there are agents."""
    agents = sum(launch.role in ("sender", "receiver") for launch in out.launches)
    wanted = exp.agents.hosts
    if wanted == "per-core":
        wanted = cores if cores is not None else (os.cpu_count() or 1)
    return max(1, min(int(wanted), agents))


def assign_hosts(agents: list[Launch], count: int) -> list[list[int]]:
    """Indexes into ``agents`` per host: senders first, then receivers, dealt out in turn.

    Each host then gets its share of the senders (which pace and so wake most often)
    and of the receivers, and with one host per core each loop has a core's worth.
    """
    order = sorted(range(len(agents)),
                   key=lambda i: (agents[i].role != "sender", agents[i].flow, agents[i].node))
    hosts: list[list[int]] = [[] for _ in range(count)]
    for k, i in enumerate(order):
        hosts[k % count].append(i)
    return [sorted(h) for h in hosts]


def host_agents(out: LaunchPlan, plan: AddressPlan, run_dir: Path, python: str,
                count: int) -> None:
    """Move the plan's agents into ``count`` agent hosts.

    Each agent keeps its launch (its times and log, for the tables), marked with its host
    and without a ``--metrics`` endpoint: the host's one endpoint serves its agents'
    series with their own labels. A host launch starts at time 0 and starts and stops its
    agents on their schedule; its plan file is ``sessions/<host>.json``.
    """
    from mcclab.net.setns import NETNS_DIR

    index = [i for i, launch in enumerate(out.launches) if launch.role in ("sender", "receiver")]
    if not index:
        out.agents = {"mode": "host", "hosts": {}}  # the mode asked for, with nothing to host
        return
    agents = [out.launches[i] for i in index]
    hosts: dict[str, list[dict[str, str]]] = {}
    for number, members in enumerate(assign_hosts(agents, count), start=1):
        name = f"agent-host-{number}"
        home = agents[members[0]].node
        entries = []
        for m in members:
            launch = agents[m]
            assert isinstance(launch.entry, AgentEntry)  # every agent launch has one
            entries.append({
                "role": launch.role, "node": launch.node,
                "netns": str(NETNS_DIR / netns_name(launch.node)),
                "session": launch.entry.session, "log": launch.log,
                "start": launch.start, "stop": launch.stop})
            hosted = replace(launch.entry, metrics=None)  # the host's endpoint serves it
            out.launches[index[m]] = replace(
                launch, argv=hosted.argv(python, launch.role, launch.node, launch.log),
                host=name, entry=hosted)
        plan_file = str(run_dir / "sessions" / f"{name}.json")
        metrics = f"{plan.control[home].ip}:{HOST_METRICS_BASE_PORT + number}"
        out.files[plan_file] = json.dumps({"name": name, "agents": entries}, indent=1)
        out.launches.append(Launch(name, "host", home,
                                   (python, "-m", "agents.host", "--plan", plan_file,
                                    "--metrics", metrics),
                                   0.0, None, str(run_dir / "logs" / f"{name}.out")))
        hosts[name] = [{"flow": agents[m].flow, "role": agents[m].role, "node": agents[m].node}
                       for m in members]
    out.agents = {"mode": "host", "hosts": hosts}
