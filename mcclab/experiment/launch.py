"""Turn flows into process launches, as data: what to start, where, when, logging where.

A ``Launch`` is one process (an agent, an iperf3 server or client, an on/off
UDP sink or source) with the experiment times at which it starts and stops.
The runner only executes the list; tests assert on it.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcclab.commands import Cmd, sysctl
from mcclab.experiment.spec import (
    Experiment,
    MulticastFlow,
    OnOffFlow,
    Period,
    TcpFlow,
    UdpFlow,
    carries_tcp,
)
from mcclab.model.addressing import AddressPlan
from mcclab.net.node_config import netns_name
from mcclab.net.tcp_window import clamp_cmds

IPERF_BASE_PORT = 5201
METRICS_BASE_PORT = 9464
AGENT_PORT = 5500
FEEDBACK_BASE_PORT = 5600  # + the flow's index: one feedback port per session


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


@dataclass
class LaunchPlan:
    """Every process and every file (sessions) an experiment needs."""

    launches: list[Launch] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> content
    setup: list[Cmd] = field(default_factory=list)  # run once the lab is up, before any flow
    onoff: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


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


def _iperf_client(flow: Any, address: str, port: int, seconds: float, carrier: str) -> tuple:
    """iperf3 client argv; congestion control is set per socket (-C), not host-wide."""
    argv = ["iperf3", "-c", address, "-p", str(port), "-t", f"{max(seconds, 1):.0f}",
            "-i", "1", "-f", "k", "--forceflush"]
    if carrier == "tcp":
        argv += ["-C", flow.cc]
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
    tool = (python, "-m", "mcclab.traffic.udp_onoff")
    sink_log = str(run_dir / "logs" / f"{flow.name}-sink-{flow.receiver}.jsonl")
    out.launches.append(Launch(flow.name, "sink", flow.receiver,
                               (*tool, "recv", "--bind", address, "--port", str(port),
                                "--log", sink_log), 0.0, None, sink_log))
    if not periods:
        return
    assert flow.rate is not None  # the spec requires it for carrier udp
    source_log = str(run_dir / "logs" / f"{flow.name}-source-{flow.sender}.jsonl")
    out.launches.append(Launch(flow.name, "source", flow.sender,
                               (*tool, "send", "--dest", address, "--port", str(port),
                                "--rate", f"{flow.rate:.0f}", "--size",
                                str(flow.packet_size), "--schedule", schedule,
                                "--log", source_log), origin, None, source_log,
                               peer=flow.receiver))


def host_setup(exp: Experiment) -> list[Cmd]:
    """Per-host settings the flows ask for: SACK off where a TCP sender says ``sack: false``.

    SACK is negotiated in the handshake, so turning it off at the sender is enough.
    """
    hosts = sorted({f.sender for f in exp.flows if carries_tcp(f) and not f.sack})
    return [sysctl(netns_name(h), "net.ipv4.tcp_sack", 0) for h in hosts]


def window_setup(exp: Experiment, plan: AddressPlan, python: str = sys.executable) -> list[Cmd]:
    """The window ceilings the TCP flows ask for (``max_window``), per sender and receiver."""
    pairs = sorted({(f.sender, f.receiver, f.max_window) for f in exp.flows
                    if carries_tcp(f) and f.max_window is not None})
    out: list[Cmd] = []
    for sender, receiver, segments in pairs:
        dest = plan.address_of(receiver)
        gateway, dev = plan.next_hop(sender, dest)
        out += clamp_cmds(netns_name(sender), netns_name(receiver), dest, gateway, dev,
                          segments, python)
    return out


def plan_launches(exp: Experiment, plan: AddressPlan, run_dir: Path,
                  python: str = sys.executable) -> LaunchPlan:
    """Every process the experiment starts, with its times, node and log file."""
    from agents.runtime.registry import get

    out = LaunchPlan(setup=host_setup(exp) + window_setup(exp, plan, python))
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
                argv = (python, "-m", "agents.run", role, "--session", session_file,
                        "--node", node, "--log", log, "--metrics", metrics_addr(node))
                out.launches.append(Launch(flow.name, role, node, argv, start, flow.stop, log))
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
            argv = _iperf_client(flow, address, port, seconds, carrier)
            out.launches.append(Launch(flow.name, "client", flow.sender, argv, a, None, log,
                                       peer=flow.receiver))
    return out
