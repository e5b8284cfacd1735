"""Pydantic models of a topology: nodes, links with per-direction parameters, routing.

The models are the single source of truth: the loader validates YAML against
them and the JSON Schema in ``schema/`` is generated from them. Every model
forbids unknown keys, so a misspelt option (``dealy: 5ms``) is an error and is
never silently dropped.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from mcclab.model.units import (
    Duration,
    Packets,
    Probability,
    Rate,
    format_packets,
    format_probability,
    format_rate,
    in_range,
    show_duration,
)

# The link emulator's limits (linkemu/config.c): a rate up to 1e12 bit/s, a
# delay (and so a jitter) up to 60 s, a queue of at most a million packets.
MAX_LINK_RATE = 1e12
MAX_LINK_DELAY = 60.0
MAX_QUEUE = 1_000_000
LinkRate = Annotated[Rate, in_range(format_rate, 0, MAX_LINK_RATE, low_open=True,
                                    why="the link emulator's range")]
LinkDelay = Annotated[Duration, in_range(show_duration, 0, MAX_LINK_DELAY,
                                         why="the link emulator's range")]
QueueLimit = Annotated[Packets, in_range(format_packets, 1, MAX_QUEUE,
                                         why="a queue holds at least one packet")]
# RED with max_p 0 never drops early (the emulator refuses it): use droptail.
RedMaxP = Annotated[Probability, in_range(format_probability, 0, 1, low_open=True,
                                          why="0% never drops early; use droptail")]
# FRR takes the query interval in whole seconds and the other IGMP times in
# whole deciseconds (mcclab.routing.common.IgmpTimers); refuse what it would round.
MAX_IGMP_DECISECONDS = 65535
# Node names become interface prefixes ("r12-eth3"), and Linux caps interface
# names at 15 characters, hence the short limit.
NodeName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9]{0,7}$")]
# frr: Debian 12's FRR 8.4; frr10: FRR 10.7 built by the playbook (docs/routing.md).
RoutingBackend = Literal["frr", "frr10", "pimd", "smcroute"]


class StrictModel(BaseModel):
    """Base for every spec model: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RedParams(StrictModel):
    """RED with ns-2 semantics: thresholds in packets, EWMA weight, optional gentle mode."""

    min_th: Packets = Field(description="average queue at which early drops start")
    max_th: Packets = Field(description="average queue at which the drop probability is max_p")
    max_p: RedMaxP = Field(description="drop probability at max_th")
    weight: float = Field(0.002, gt=0, le=1, description="EWMA weight w_q (ns-2 default 0.002)")
    gentle: bool = Field(True, description="ramp from max_p to 1 between max_th and 2*max_th")

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> RedParams:
        if self.min_th >= self.max_th:
            raise ValueError(f"min_th ({self.min_th}pkt) must be below max_th ({self.max_th}pkt)")
        return self


class Queue(StrictModel):
    """A link's output queue: its limit in packets and its discipline."""

    limit: QueueLimit = Field(description="queue capacity in packets")
    discipline: Literal["droptail", "red"] = "droptail"
    red: RedParams | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Queue:
        if self.discipline == "red" and self.red is None:
            raise ValueError("discipline 'red' needs a 'red' block (min_th, max_th, max_p)")
        if self.discipline == "droptail" and self.red is not None:
            raise ValueError("a 'red' block is only allowed with discipline 'red'")
        if self.red is not None and self.red.min_th >= self.limit:
            raise ValueError(
                f"red.min_th ({self.red.min_th}pkt) must be below the limit ({self.limit}pkt)"
            )
        return self


class GilbertElliott(StrictModel):
    """Two-state burst loss: p = P(good->bad), r = P(bad->good) per packet."""

    p: Probability
    r: Probability
    loss_good: Probability = 0.0
    loss_bad: Probability = 1.0


class LinkParams(StrictModel):
    """The emulated properties of one direction of a link."""

    rate: LinkRate | None = Field(None, description="bit rate; omitted means unshaped")
    delay: LinkDelay = Field(0.0, description="one-way propagation delay")
    jitter: LinkDelay = Field(0.0, description="delay variation (never reorders)")
    loss: Probability = Field(0.0, description="Bernoulli loss probability")
    gilbert_elliott: GilbertElliott | None = None
    queue: Queue | None = None

    @model_validator(mode="after")
    def _coherent(self) -> LinkParams:
        _check_params(self)
        return self


def _check_params(p: LinkParams) -> None:
    """Checks that span fields; shared by the model and by per-direction merging."""
    if p.jitter > p.delay:
        raise ValueError(f"jitter ({p.jitter}s) must not exceed delay ({p.delay}s)")
    if p.loss and p.gilbert_elliott is not None:
        raise ValueError("give either 'loss' or 'gilbert_elliott', not both")


class LinkOverride(StrictModel):
    """Per-direction overrides of a link's shared parameters."""

    rate: LinkRate | None = None
    delay: LinkDelay | None = None
    jitter: LinkDelay | None = None
    loss: Probability | None = None
    gilbert_elliott: GilbertElliott | None = None
    queue: Queue | None = None


class Link(LinkParams):
    """A link between two nodes; shared parameters, optionally overridden per direction.

    ``forward`` is the direction from ``endpoints[0]`` to ``endpoints[1]``.
    """

    endpoints: tuple[NodeName, NodeName]
    forward: LinkOverride | None = None
    reverse: LinkOverride | None = None

    @model_validator(mode="after")
    def _distinct_endpoints(self) -> Link:
        if self.endpoints[0] == self.endpoints[1]:
            raise ValueError(f"a link cannot connect {self.endpoints[0]!r} to itself")
        for label in ("forward", "reverse"):
            self.direction(label == "forward")  # validates the merged parameters
        return self

    def direction(self, forward: bool) -> LinkParams:
        """Resolved parameters for one direction (forward: endpoints[0] -> endpoints[1])."""
        values = {k: getattr(self, k) for k in LinkParams.model_fields}
        override = self.forward if forward else self.reverse
        if override is not None:
            values.update({k: v for k, v in override if v is not None})
        # Values are already parsed (floats), so construct rather than re-parse.
        params = LinkParams.model_construct(**values)
        _check_params(params)
        return params


class Node(StrictModel):
    """A host (end system), a router (runs the multicast routing daemon) or a LAN (bridge)."""

    kind: Literal["host", "router", "lan"]


class IgmpSettings(StrictModel):
    """IGMP settings; querier defaults follow RFC 3376 (and FRR's own defaults).

    ``unsolicited_report_interval`` departs from Linux's 1 s on purpose: a host
    repeats its leave (state-change) report after a random delay up to this
    interval, and FRR 8.4 restarts its last-member-query timer when the repeat
    arrives, so with 1 s a leave takes LMQT plus up to 1 s (measured: 2.1 to
    3.0 s for a 2 s LMQT); with 0.1 s it takes LMQT plus at most 0.1 s.
    """

    version: Literal[2, 3] = 3
    query_interval: Duration = Field(125.0, description="whole seconds, 1s to 65535s")
    query_response_interval: Duration = Field(
        10.0, description="whole tenths of a second, 100ms to 6553.5s; shorter than "
        "query_interval")
    last_member_query_interval: Duration = Field(
        1.0, description="whole tenths of a second, 100ms to 6553.5s")
    last_member_query_count: int = Field(2, ge=1, le=7)
    unsolicited_report_interval: Duration = Field(
        0.1, gt=0, le=25,
        description="hosts' spacing of repeated state-change reports (Linux default 1s)",
    )
    immediate_leave: bool = Field(
        False, description="routers drop a group (or an IGMPv3 source) at the last leave, "
        "without last-member queries; needs routing backend frr10 (FRR >= 10.4)",
    )

    @field_validator("query_interval")
    @classmethod
    def _whole_seconds(cls, value: float) -> float:
        if not value.is_integer() or not 1 <= value <= 65535:
            raise ValueError(f"{show_duration(value)} is not a whole number of seconds in the "
                             "allowed range [1s, 65535s] (FRR sets it in seconds)")
        return value

    @field_validator("query_response_interval", "last_member_query_interval")
    @classmethod
    def _whole_deciseconds(cls, value: float) -> float:
        tenths = round(value * 10)
        if abs(value * 10 - tenths) > 1e-6 or not 1 <= tenths <= MAX_IGMP_DECISECONDS:
            raise ValueError(f"{show_duration(value)} is not a whole number of tenths of a "
                             "second in the allowed range [100ms, 6553.5s] (FRR sets it in "
                             "deciseconds)")
        return value


class StaticGroup(StrictModel):
    """A group forwarded statically (smcroute backend): from ``source`` to every host."""

    group: ipaddress.IPv4Address
    source: NodeName

    @model_validator(mode="after")
    def _is_multicast(self) -> StaticGroup:
        if not self.group.is_multicast:
            raise ValueError(f"group {self.group} is not a multicast address (224.0.0.0/4)")
        return self


class Routing(StrictModel):
    """Multicast routing: which daemon, the RP for ASM, the SSM range, IGMP timers."""

    backend: RoutingBackend = "frr"
    rp: NodeName | None = Field(None, description="router acting as static RP (default: first)")
    ssm_range: ipaddress.IPv4Network = ipaddress.IPv4Network("232.0.0.0/8")
    igmp: IgmpSettings = IgmpSettings()
    static_groups: list[StaticGroup] = Field(
        default_factory=list, description="groups routed statically by smcroute"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Routing:
        """The SSM range is multicast; immediate leave only where the daemon has it."""
        if not self.ssm_range.subnet_of(ipaddress.IPv4Network("224.0.0.0/4")):
            raise ValueError(f"ssm_range {self.ssm_range} is not inside 224.0.0.0/4")
        if self.igmp.query_response_interval >= self.igmp.query_interval:
            # RFC 3376 sec. 8.3; FRR refuses it.
            raise ValueError(
                f"igmp.query_response_interval: "
                f"{show_duration(self.igmp.query_response_interval)} must be shorter than "
                f"igmp.query_interval ({show_duration(self.igmp.query_interval)})")
        if self.igmp.immediate_leave and self.backend != "frr10":
            raise ValueError(f"igmp.immediate_leave: backend {self.backend!r} has no immediate "
                             "leave; only frr10 (FRR >= 10.4) does")
        return self


class Addressing(StrictModel):
    """Address pools: one subnet per link or LAN, and the separate control network."""

    experiment: ipaddress.IPv4Network = ipaddress.IPv4Network("10.0.0.0/8")
    link_prefix: int = Field(24, ge=8, le=30)
    control: ipaddress.IPv4Network = ipaddress.IPv4Network("172.30.0.0/16")

    @model_validator(mode="after")
    def _disjoint(self) -> Addressing:
        if self.experiment.overlaps(self.control):
            raise ValueError("the experiment and control pools overlap")
        if self.link_prefix < self.experiment.prefixlen:
            raise ValueError("link_prefix is wider than the experiment pool")
        return self


class Topology(StrictModel):
    """A resolved topology: explicit nodes and links, routing and addressing."""

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    reference: str = Field("", description="the paper and figure this topology reproduces")
    nodes: dict[NodeName, Node]
    links: list[Link]
    routing: Routing = Routing()
    addressing: Addressing = Addressing()
    link_backend: Literal["auto", "kernel", "userspace"] = "auto"

    @model_validator(mode="after")
    def _graph_is_sound(self) -> Topology:
        """Cross-field checks: endpoints exist, no duplicates, connected, RP is a router."""
        seen: set[frozenset[str]] = set()
        for i, link in enumerate(self.links):
            for end in link.endpoints:
                if end not in self.nodes:
                    raise ValueError(f"links[{i}].endpoints: unknown node {end!r}")
            kinds = {self.nodes[e].kind for e in link.endpoints}
            if kinds == {"lan"}:
                raise ValueError(f"links[{i}]: two LANs cannot be linked directly")
            pair = frozenset(link.endpoints)
            if pair in seen:
                raise ValueError(f"links[{i}]: duplicate link between {sorted(pair)}")
            seen.add(pair)
        degree = {name: 0 for name in self.nodes}
        for link in self.links:
            for end in link.endpoints:
                degree[end] += 1
        lonely = [n for n, d in degree.items() if d == 0]
        if lonely:
            raise ValueError(f"nodes: {lonely} have no links")
        if not _connected(self.nodes, self.links):
            raise ValueError("links: the topology is not connected")
        routers = [n for n, node in self.nodes.items() if node.kind == "router"]
        if self.routing.rp is not None and self.routing.rp not in routers:
            raise ValueError(f"routing.rp: {self.routing.rp!r} is not a router")
        if self.routing.backend != "smcroute" and self.routing.static_groups:
            raise ValueError("routing.static_groups: only the smcroute backend uses static groups")
        for g in self.routing.static_groups:
            if g.source not in self.nodes or self.nodes[g.source].kind != "host":
                raise ValueError(f"routing.static_groups: source {g.source!r} is not a host")
        return self

    def kind_of(self, name: str) -> str:
        """The kind of node ``name``."""
        return self.nodes[name].kind

    def names(self, kind: str) -> list[str]:
        """Node names of one kind, in declaration order."""
        return [n for n, node in self.nodes.items() if node.kind == kind]

    @property
    def rp(self) -> str | None:
        """The RP router: the configured one, else the first router declared."""
        routers = self.names("router")
        return self.routing.rp or (routers[0] if routers else None)


def _connected(nodes: dict[str, Node], links: list[Link]) -> bool:
    """True when every node is reachable from the first one."""
    adj: dict[str, set[str]] = {n: set() for n in nodes}
    for link in links:
        a, b = link.endpoints
        adj[a].add(b)
        adj[b].add(a)
    start = next(iter(nodes))
    stack, seen = [start], {start}
    while stack:
        for nxt in adj[stack.pop()] - seen:
            seen.add(nxt)
            stack.append(nxt)
    return len(seen) == len(nodes)
