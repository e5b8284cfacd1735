"""The testbed-neutral export plan and the refusal rules both testbeds share.

A plan lists the hosts and routers, the point-to-point links and the LANs of a
resolved topology, each link direction with its parameters and the field of the
topology it came from, and every interface with its address from the address
plan. Refusals are (field, reason) pairs raised together as one
:class:`ExportRefused` naming the source file, so a user sees every problem at
once and nothing is written.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import SpecError
from mcclab.model.topology import Link, LinkParams, Queue, Topology
from mcclab.model.units import format_duration, format_rate

# What a rate-limited direction without a queue block gets in mcclab
# (docs/links.md): ns-2's default, 50 packets drop-tail.
DEFAULT_QUEUE = Queue(limit="50pkt", discipline="droptail")
# A value within this of a whole number of kbit/s or ms is that number (unit
# conversions leave 0.052 s as 0.052000000000000005 s).
_TOLERANCE = 1e-6


class ExportRefused(SpecError):
    """The topology uses something the testbed's format cannot express; nothing was written."""


@dataclass(frozen=True)
class Direction:
    """One direction of a link: from ``src`` to ``dst``, with its resolved parameters.

    ``fields`` maps a parameter name (``rate``, ``queue``, ...) to the field of
    the topology that set it, for messages.
    """

    src: str
    dst: str
    params: LinkParams
    fields: dict[str, str]

    @property
    def label(self) -> str:
        """'r1 -> r2', for messages."""
        return f"{self.src} -> {self.dst}"

    @property
    def shaped(self) -> bool:
        """True when mcclab emulates this direction (rate, delay, jitter or loss)."""
        p = self.params
        return bool(p.rate or p.delay or p.jitter or p.loss or p.gilbert_elliott)

    @property
    def queue(self) -> Queue | None:
        """The queue mcclab runs: none without a rate, the ns-2 default without a block."""
        if not self.params.rate:
            return None
        return self.params.queue or DEFAULT_QUEUE

    def field(self, key: str) -> str:
        """The topology field behind parameter ``key`` ('queue.red.max_p' -> its source)."""
        head, _, rest = key.partition(".")
        base = self.fields[head]
        return f"{base}.{rest}" if rest else base

    def rate_kbps(self) -> int | None:
        """The rate in whole kbit/s (None: unshaped); check with :func:`check_units` first."""
        return None if not self.params.rate else round(self.params.rate / 1e3)

    def delay_ms(self) -> int:
        """The delay in whole milliseconds; check with :func:`check_units` first."""
        return round(self.params.delay * 1e3)


@dataclass(frozen=True)
class Attachment:
    """A node's interface on a link or LAN: mcclab's interface name and its address."""

    node: str
    iface: str
    address: ipaddress.IPv4Interface

    @property
    def port(self) -> str:
        """The interface's short name without the node ('eth1')."""
        return self.iface.split("-", 1)[1]


@dataclass(frozen=True)
class PointLink:
    """A link between two hosts or routers (``index`` in the resolved topology)."""

    index: int
    a: Attachment
    b: Attachment
    forward: Direction  # a -> b
    reverse: Direction  # b -> a

    @property
    def name(self) -> str:
        """The link's name in exported files."""
        return f"link{self.index}"


@dataclass(frozen=True)
class LanPort:
    """A node's attachment to a LAN, with both directions."""

    index: int
    member: Attachment
    to_lan: Direction
    from_lan: Direction


@dataclass(frozen=True)
class Lan:
    """A LAN (bridge) and its ports."""

    name: str
    ports: list[LanPort]

    @property
    def prefixlen(self) -> int:
        """The LAN subnet's prefix length."""
        return self.ports[0].member.address.network.prefixlen


@dataclass(frozen=True)
class ExportPlan:
    """Everything an exporter needs, testbed-neutral."""

    source: str  # the file(s) the topology came from, for messages
    experiment: str
    profile: str
    topology: Topology
    nodes: dict[str, str]  # host and router names -> kind, in declaration order
    links: list[PointLink] = field(default_factory=list)
    lans: list[Lan] = field(default_factory=list)

    def directions(self) -> list[Direction]:
        """Every link direction, point-to-point links first, then LAN ports."""
        out = [d for link in self.links for d in (link.forward, link.reverse)]
        return out + [d for lan in self.lans for port in lan.ports
                      for d in (port.to_lan, port.from_lan)]


def _fields(link: Link, index: int, forward: bool,
            changes: Sequence[tuple[int, Any]] = ()) -> dict[str, str]:
    """For each parameter, the field that sets it.

    The experiment's ``overrides.links[k]`` entries for this link come first
    (``changes``: (k, LinkChange) in order, the last one that sets a key wins),
    then the topology's per-direction override, then its shared value.
    """
    label = "forward" if forward else "reverse"
    override = link.forward if forward else link.reverse
    out = {}
    for key in LinkParams.model_fields:
        given = override is not None and getattr(override, key) is not None
        out[key] = f"links[{index}].{label}.{key}" if given else f"links[{index}].{key}"
        for k, change in changes:
            # An override's forward is its own endpoints[0] -> endpoints[1].
            own = label if tuple(change.endpoints) == link.endpoints else (
                "reverse" if forward else "forward")
            side = getattr(change, own)
            if side is not None and getattr(side, key) is not None:
                out[key] = f"overrides.links[{k}].{own}.{key}"
            elif getattr(change, key) is not None and not given:
                out[key] = f"overrides.links[{k}].{key}"
    return out


def _direction(link: Link, index: int, forward: bool,
               changes: Sequence[tuple[int, Any]] = ()) -> Direction:
    """The resolved direction of a link with its field map."""
    a, b = link.endpoints
    src, dst = (a, b) if forward else (b, a)
    return Direction(src, dst, link.direction(forward), _fields(link, index, forward, changes))


def build_plan(topo: Topology, source: str, experiment: str = "", profile: str = "",
               changes: Sequence[Any] = ()) -> ExportPlan:
    """The export plan of a resolved topology, with addresses from mcclab's address plan.

    ``changes`` are the experiment's ``overrides.links`` (LinkChange entries),
    so that refusals name the experiment's field when it set the value.
    """
    addresses = plan_addresses(topo)
    by_link: dict[tuple[str, int], Attachment] = {}
    for node, ifaces in addresses.interfaces.items():
        for iface in ifaces:
            by_link[(node, iface.link_index)] = Attachment(node, iface.name, iface.address)
    nodes = {n: topo.kind_of(n) for n in topo.nodes if topo.kind_of(n) != "lan"}
    plan = ExportPlan(source, experiment, profile, topo, nodes)
    lans: dict[str, list[LanPort]] = {n: [] for n in topo.names("lan")}
    for i, link in enumerate(topo.links):
        a, b = link.endpoints
        mine = [(k, c) for k, c in enumerate(changes) if set(c.endpoints) == set(link.endpoints)]
        fwd, rev = _direction(link, i, True, mine), _direction(link, i, False, mine)
        if topo.kind_of(a) == "lan":
            lans[a].append(LanPort(i, by_link[(b, i)], to_lan=rev, from_lan=fwd))
        elif topo.kind_of(b) == "lan":
            lans[b].append(LanPort(i, by_link[(a, i)], to_lan=fwd, from_lan=rev))
        else:
            plan.links.append(PointLink(i, by_link[(a, i)], by_link[(b, i)], fwd, rev))
    plan.lans.extend(Lan(name, ports) for name, ports in lans.items())
    return plan


def _whole(value: float) -> bool:
    """True when ``value`` is a whole number (within rounding of unit conversions)."""
    return abs(value - round(value)) <= _TOLERANCE


def check_units(plan: ExportPlan, testbed: str) -> list[tuple[str, str]]:
    """Refusals both testbeds share: no jitter, no burst loss, whole kbit/s and whole ms.

    Both take a link's bandwidth in kbit/s and its delay in milliseconds as
    integers (Emulab's parser truncates, the RSpec's attributes are whole
    numbers), so a value between two of them would be silently changed.
    """
    problems = []
    for d in plan.directions():
        p = d.params
        if p.jitter:
            problems.append((d.field("jitter"), f"{d.label}: {format_duration(p.jitter)} of "
                             f"jitter; {testbed} links have a fixed delay, no jitter"))
        if p.gilbert_elliott is not None:
            problems.append((d.field("gilbert_elliott"), f"{d.label}: Gilbert-Elliott (burst) "
                             f"loss; {testbed} links have only a fixed loss rate"))
        if p.rate and not _whole(p.rate / 1e3):
            problems.append((d.field("rate"), f"{d.label}: {format_rate(p.rate)} is not a whole "
                             f"number of kbit/s; {testbed} takes bandwidths in whole kbit/s"))
        if not _whole(p.delay * 1e3):
            problems.append((d.field("delay"), f"{d.label}: {format_duration(p.delay)} is not a "
                             f"whole number of ms; {testbed} takes delays in whole milliseconds"))
    return problems


def raise_refusals(plan: ExportPlan, problems: list[tuple[str, str]], testbed: str) -> None:
    """Raise one ExportRefused listing every problem (no-op when there are none)."""
    if problems:
        raise ExportRefused(plan.source, problems,
                            note=f"not exported: the {testbed} format cannot express the fields "
                            "above; nothing was written")


def start_command(script: str, plan: ExportPlan, node: str) -> str:
    """The command a node runs at boot: ``SCRIPT KIND NODE EXPERIMENT PROFILE``.

    mcclab ships no such script (it has no per-node command yet); the path is a
    placeholder the user provides, documented in docs/testbeds.md.
    """
    return " ".join([script, plan.nodes[node], node, plan.experiment or plan.topology.name,
                     plan.profile or "paper"])


def plan_for_experiment(name: str, profile: str = "paper") -> ExportPlan:
    """Resolve an experiment (profile and link overrides applied) into an export plan."""
    from mcclab.experiment.loader import REPO, resolve

    resolved = resolve(name, profile)
    path = resolved.path.resolve()
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    source = f"{shown} (topology {resolved.experiment.topology})"
    return build_plan(resolved.topology, source, resolved.experiment.name, profile,
                      resolved.experiment.overrides.links)
