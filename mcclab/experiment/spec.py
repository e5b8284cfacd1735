"""Experiment specs: a topology, a timeline of flows, measurements and the paper's values.

Specs are YAML validated by these models, like topologies. Two profiles are
built in: ``paper`` (the spec as written: the paper's scale and duration) and
``quick`` (the overrides under ``profiles.quick``, whose scaling rule is
written in ``profiles.quick.scaling`` and shown in the report).
"""

from __future__ import annotations

import ipaddress
import itertools
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from mcclab.model.quantities import FigureRef, Reference, ip_bits_problem, plugin_arg_flows
from mcclab.model.tcp_models import CongestionControl, TcpModel, Window, model
from mcclab.model.topology import (
    IgmpSettings,
    LinkOverride,
    NodeName,
    RoutingBackend,
    StrictModel,
)
from mcclab.model.units import (
    NonNegDuration,
    PositiveDuration,
    PositiveRate,
    Size,
    format_size,
    in_range,
    show_duration,
)

FlowName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")]

# Linux takes a TCP_MAXSEG from 88 bytes (TCP_MIN_MSS); above 1460 bytes a
# segment no longer fits the lab's 1500-byte MTU and the kernel silently uses less.
Mss = Annotated[Size, in_range(format_size, 88, 1460,
                               why="Linux's smallest MSS; the largest a 1500-byte MTU carries")]
# iperf3 (-l) sends UDP payloads of 16 bytes (its sequence header) to 65507 bytes.
IperfUdpSize = Annotated[Size, in_range(format_size, 16, 65507,
                                        why="iperf3's UDP payload sizes")]
# mcclab.traffic.udp_onoff opens every payload with an 8-byte sequence number.
OnOffUdpSize = Annotated[Size, in_range(format_size, 8, 65507,
                                        why="an 8-byte sequence number up to a UDP payload's "
                                        "largest")]
# iperf3 refuses tests longer than a day (its MAX_TIME).
IPERF_MAX_SECONDS = 86400.0
# The agents refuse link-local groups (agents.runtime.session): never routed.
_LINK_LOCAL = ipaddress.IPv4Network("224.0.0.0/24")
_MULTICAST = ipaddress.IPv4Network("224.0.0.0/4")


class _Flow(StrictModel):
    """Common flow fields: a name and the interval it is active in."""

    name: FlowName
    start: NonNegDuration = 0.0
    stop: NonNegDuration | None = Field(None, description="default: the end of the run")

    @model_validator(mode="after")
    def _ordered(self) -> _Flow:
        if self.stop is not None and self.stop <= self.start:
            raise ValueError(f"stop: {show_duration(self.stop)} is not after start "
                             f"({show_duration(self.start)}); a flow stops after it starts")
        return self


class MulticastFlow(_Flow):
    """A multicast session run by a protocol agent (cbr, layered-cbr, webrc, ...)."""

    type: Literal["multicast"]
    protocol: str
    sender: NodeName
    receivers: list[NodeName] = Field(min_length=1)
    groups: list[ipaddress.IPv4Address] = Field(
        default_factory=list, description="one per channel; default: allocated by the runner")
    ssm: bool = False
    params: dict[str, Any] = Field(default_factory=dict)
    receiver_params: dict[NodeName, dict[str, Any]] = Field(default_factory=dict)
    receiver_start: dict[NodeName, NonNegDuration] = Field(
        default_factory=dict, description="per-receiver start times (default: the flow's); "
        "before the flow's stop and the run's end")

    @model_validator(mode="after")
    def _distinct(self) -> MulticastFlow:
        """A receiver listed twice would start two agents on one host; groups must route."""
        seen: set[str] = set()
        for j, node in enumerate(self.receivers):
            if node in seen:
                raise ValueError(f"receivers[{j}]: {node!r} is listed twice")
            seen.add(node)
        for j, group in enumerate(self.groups):
            if group not in _MULTICAST or group in _LINK_LOCAL:
                raise ValueError(f"groups[{j}]: {group} is outside the routable multicast "
                                 "range 224.0.1.0 to 239.255.255.255")
        return self


SACK_DOC = ("false: the sender's namespace runs TCP without selective acknowledgements "
            "(net.ipv4.tcp_sack=0), closer to ns-2's Reno, which has none; a per-host "
            "setting, so every TCP flow from one sender must agree; only without the "
            "experiment's tcp model")
WINDOW_DOC = ("ceiling on the sender's congestion window, e.g. 20pkt: ns-2's Agent/TCP "
              "window_, which is 20 packets unless a script changes it; set as a locked "
              "cwnd metric on the sender's route to the receiver, so every TCP flow from "
              "one sender to one receiver must agree; default: no ceiling; only without the "
              "experiment's tcp model")


class TcpFlow(_Flow):
    """A bulk TCP transfer (iperf3) with a chosen congestion control, set per socket."""

    type: Literal["tcp"]
    sender: NodeName
    receiver: NodeName
    cc: CongestionControl = "reno"
    mss: Mss | None = Field(None, description="TCP maximum segment size, e.g. 1000B "
                            "(88B to 1460B)")
    sack: bool = Field(True, description=SACK_DOC)
    max_window: Window | None = Field(None, description=WINDOW_DOC)


class UdpFlow(_Flow):
    """Constant-bit-rate unicast UDP (iperf3)."""

    type: Literal["udp"]
    sender: NodeName
    receiver: NodeName
    rate: PositiveRate
    packet_size: IperfUdpSize = 1000


class Period(StrictModel):
    """A random period length: exponential, or Pareto with a shape."""

    distribution: Literal["exponential", "pareto"]
    mean: PositiveDuration
    shape: float = Field(1.5, gt=1, description="Pareto shape (ignored for exponential)")


class OnOffFlow(_Flow):
    """A TCP or UDP flow switched on and off with random periods (ORMCC Table II)."""

    type: Literal["onoff"]
    sender: NodeName
    receiver: NodeName
    carrier: Literal["tcp", "udp"] = "udp"
    rate: PositiveRate | None = Field(None, description="UDP rate (required for carrier udp)")
    packet_size: OnOffUdpSize = 1000
    cc: CongestionControl = "reno"
    sack: bool = Field(True, description=SACK_DOC)
    max_window: Window | None = Field(None, description=WINDOW_DOC)
    # Not "on"/"off": YAML 1.1 reads those words as booleans.
    on_period: Period
    off_period: Period

    @model_validator(mode="after")
    def _rate_for_udp(self) -> OnOffFlow:
        if self.carrier == "udp" and self.rate is None:
            raise ValueError("rate: an on/off UDP flow needs a rate")
        return self


Flow = Annotated[MulticastFlow | TcpFlow | UdpFlow | OnOffFlow, Field(discriminator="type")]


class LinkChange(LinkOverride):
    """Overrides of one link's parameters, found by its endpoints.

    The shared fields apply to both directions; ``forward`` is the direction
    from ``endpoints[0]`` to ``endpoints[1]`` as written here, whatever the
    order in the topology file.
    """

    endpoints: tuple[NodeName, NodeName]
    forward: LinkOverride | None = None
    reverse: LinkOverride | None = None


class TopologyOverrides(StrictModel):
    """What an experiment changes in its topology."""

    links: list[LinkChange] = Field(default_factory=list)
    routing_backend: RoutingBackend | None = None
    link_backend: Literal["auto", "kernel", "userspace"] | None = None
    igmp: IgmpSettings | None = Field(
        None, description="IGMP timers to change (only the keys given; e.g. the "
        "last-member query, which sets how long a router forwards a group after the "
        "last receiver's leave)")


class Profile(StrictModel):
    """A named variant: how it scales the paper's setup, and the keys it overrides."""

    scaling: str = Field("", description="the scaling rule, in words, shown in the report")
    set: dict[str, Any] = Field(default_factory=dict,
                                description="dotted keys to override, e.g. duration: 30s")


class AgentSettings(StrictModel):
    """How the run starts its protocol agents: one process each, or agent hosts."""

    mode: Literal["process", "host"] = Field(
        "process", description="process: one process per agent (agents.run); host: agent "
        "hosts, each running many agents on one event loop (agents.host)")
    hosts: Annotated[int, Field(ge=1)] | Literal["per-core"] = Field(
        "per-core", description="how many agent hosts in host mode: a number, or one per "
        "CPU core; never more than there are agents")


class SweepSpec(StrictModel):
    """A parameter sweep: the product of the values of dotted keys, each point one run."""

    description: str = ""
    over: dict[str, list[Any]] = Field(
        min_length=1, description="dotted key (as for --set) to the values it takes")
    figures: list[FigureRef] = Field(default_factory=list,
                                     description="sweep figures (@sweep_figure plugins)")

    @model_validator(mode="after")
    def _values(self) -> SweepSpec:
        for key, values in self.over.items():
            if not values:
                raise ValueError(f"over.{key}: give at least one value")
        for i, fig in enumerate(self.figures):
            problem = fig.check(sweep=True)
            if problem:
                raise ValueError(f"figures[{i}].{problem}")
        return self

    def points(self) -> list[dict[str, Any]]:
        """Every combination of the values, the first key varying slowest."""
        keys = list(self.over)
        return [dict(zip(keys, combo, strict=True))
                for combo in itertools.product(*self.over.values())]


class TcpChoice(StrictModel):
    """The TCP model every TCP flow of the experiment runs (experiments/tcp/models.yaml)."""

    model: str = Field(description="a model of experiments/tcp/models.yaml: the paper's "
                       "TCP (e.g. webrc, ormcc, stair) or linux-reno, Linux's default; sets "
                       "every TCP flow's cc, window ceiling, SACK, RACK, TLP and F-RTO")

    @model_validator(mode="after")
    def _known(self) -> TcpChoice:
        try:
            model(self.model)
        except KeyError as exc:
            raise ValueError(f"model: {exc.args[0]}") from None
        return self


# A flow under a TCP model may not choose these: the model is set per paper.
MODEL_FIELDS = ("cc", "sack", "max_window")


class CaptureSpec(StrictModel):
    """A packet capture the run takes (mcclab.experiment.captures): pcap in captures/."""

    on: Annotated[str, Field(pattern=r"^[a-z][a-z0-9]{0,7}([-:][a-z][a-z0-9]{0,7})?$",
                             description="a link (r1-r2: on r1's interface) or a node "
                             "(all its interfaces)")]
    filter: str = Field("routing", min_length=1, description="igmp, pim, routing (both), "
                        "multicast, udp, tcp, all, or a BPF expression")

    @model_validator(mode="before")
    @classmethod
    def _on_key(cls, data: Any) -> Any:
        """YAML 1.1 (PyYAML) reads the key ``on`` as the boolean true: take it back."""
        if isinstance(data, dict) and True in data and "on" not in data:
            data = {("on" if k is True else k): v for k, v in data.items()}
        return data


class Experiment(StrictModel):
    """A complete experiment."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    reference: str = Field("", description="the paper and figure reproduced")
    topology: str = Field(description="topology file, relative to the repository")
    overrides: TopologyOverrides = TopologyOverrides()
    duration: PositiveDuration
    warmup: NonNegDuration = Field(0.0, description="the measurement window is [warmup, "
                                   "duration]: shorter than the duration")
    # The link emulator takes seeds in [0, 2^53] (linkemu/config.c).
    seed: int = Field(1, ge=0, le=2**53)
    flows: list[Flow] = Field(min_length=1)
    tcp: TcpChoice | None = Field(
        None, description="the TCP model of the paper (experiments/tcp/models.yaml); "
        "without it each TCP flow's own cc, sack and max_window apply")
    references: list[Reference] = Field(default_factory=list)
    figures: list[FigureRef] = Field(
        default_factory=list, description="plugin figures drawn for each run, with the built-ins")
    profiles: dict[Literal["quick", "paper"], Profile] = Field(default_factory=dict)
    agents: AgentSettings = Field(default_factory=AgentSettings,
                                  description="how the protocol agents are started")
    sweeps: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")], SweepSpec] = Field(
        default_factory=dict, description="named sweeps, run with 'mcclab sweep'")
    captures: list[CaptureSpec] = Field(
        default_factory=list, description="packet captures of the run; the report shows "
        "their IGMP and PIM messages as a timeline")

    @model_validator(mode="after")
    def _timeline(self) -> Experiment:
        end = show_duration(self.duration)
        if self.warmup >= self.duration:
            raise ValueError(f"warmup: {show_duration(self.warmup)} is outside the allowed range "
                             f"[0s, {end}) (the measurement window [warmup, duration] must "
                             "not be empty)")
        names = [f.name for f in self.flows]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"flows: duplicate flow names {dupes}")
        for i, flow in enumerate(self.flows):
            _flow_in_run(i, flow, self.duration)
        tcp = [(i, f) for i, f in enumerate(self.flows) if carries_tcp(f)]
        if self.tcp is not None:
            for i, flow in tcp:
                for name in MODEL_FIELDS:
                    if name in flow.model_fields_set:
                        raise ValueError(
                            f"flows[{i}].{name}: set by the TCP model ({self.tcp.model}, "
                            "experiments/tcp/models.yaml), one per paper; a flow does not "
                            "choose its own")
        _agree(tcp, "sack", lambda f: f.sender, "SACK is set per host and both send from")
        _agree(tcp, "max_window", lambda f: (f.sender, f.receiver),
               "the ceiling is set per route and both go from")
        types = {f.name: f.type for f in self.flows}
        for i, ref in enumerate(self.references):
            for flow in _flows_of(ref):
                if flow not in types:
                    raise ValueError(f"references[{i}]: unknown flow {flow!r}")
            problem = ip_bits_problem(ref, types)
            if problem:
                raise ValueError(f"references[{i}].{problem}")
        for i, fig in enumerate(self.figures):
            problem = fig.check()
            if problem:
                raise ValueError(f"figures[{i}].{problem}")
        return self


def _flow_in_run(i: int, flow: Any, duration: float) -> None:
    """Refuse a flow's times outside the run [0, duration] (with the values being run)."""
    end = show_duration(duration)
    if flow.start >= duration:
        raise ValueError(f"flows[{i}].start: {show_duration(flow.start)} is outside the allowed "
                         f"range [0s, {end}) (a flow starts before the run ends)")
    if flow.stop is not None and flow.stop > duration:
        raise ValueError(f"flows[{i}].stop: {show_duration(flow.stop)} is outside the allowed "
                         f"range ({show_duration(flow.start)}, {end}] (after the flow's start, "
                         "by the run's end)")
    stop = duration if flow.stop is None else flow.stop
    for node, at in getattr(flow, "receiver_start", {}).items():
        if at >= stop:
            what = "the run's end" if flow.stop is None else "the flow's stop"
            raise ValueError(f"flows[{i}].receiver_start.{node}: {show_duration(at)} is outside "
                             f"the allowed range [0s, {show_duration(stop)}) (before {what})")
    if isinstance(flow, TcpFlow | UdpFlow) or (isinstance(flow, OnOffFlow)
                                              and flow.carrier == "tcp"):
        length = stop - flow.start
        if length > IPERF_MAX_SECONDS:
            field = "duration" if flow.stop is None else f"flows[{i}].stop"
            raise ValueError(f"{field}: flow {flow.name!r} would run {show_duration(length)}; "
                             "iperf3 runs at most 86400s (one day)")


def _agree(flows: list[tuple[int, Any]], field: str, key: Any, why: str) -> None:
    """Refuse two flows with the same ``key(flow)`` but different values of ``field``."""
    first: dict[Any, tuple[int, Any]] = {}
    for i, flow in flows:
        value = getattr(flow, field)
        j, seen = first.setdefault(key(flow), (i, value))
        if seen != value:
            where = key(flow)
            place = repr(where) if isinstance(where, str) else f"{where[0]!r} to {where[1]!r}"
            raise ValueError(f"flows[{i}].{field}: {value} differs from flows[{j}].{field} "
                             f"({seen}), but {why} {place}")


def tcp_model(exp: Experiment, flow: Any) -> TcpModel:
    """The TCP a flow runs: the experiment's model, or the flow's own settings without one."""
    if exp.tcp is not None:
        return model(exp.tcp.model)
    # Built from already-validated fields: no second parse of the window's units.
    return TcpModel.model_construct(
        paper="none: the flow's own settings", testbed="this lab's kernel", verdict=False,
        cc=flow.cc, max_window=flow.max_window, sack=flow.sack, rack=True, tlp=True, frto=True,
        why=dict.fromkeys(("cc", "max_window", "sack", "rack", "tlp", "frto"), "the flow's own"))


def carries_tcp(flow: Any) -> bool:
    """True for flows that run TCP: bulk TCP and on/off flows with a TCP carrier."""
    return isinstance(flow, TcpFlow) or (isinstance(flow, OnOffFlow) and flow.carrier == "tcp")


def _flows_of(ref: Any) -> list[str]:
    """The flow names a reference quantity mentions."""
    out = []
    for attr in ("flow", "numerator", "denominator"):
        if getattr(ref, attr, None):
            out.append(getattr(ref, attr))
    out += list(getattr(ref, "flows", []) or []) + list(getattr(ref, "of_flows", []) or [])
    return out + [name for _, name in plugin_arg_flows(ref)]


def flow_nodes(flow: Any) -> list[str]:
    """Every node a flow uses."""
    if isinstance(flow, MulticastFlow):
        return [flow.sender, *flow.receivers]
    return [flow.sender, flow.receiver]
