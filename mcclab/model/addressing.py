"""Address plan and static unicast routes, derived deterministically from a Topology.

Every link between two layer-3 nodes gets its own subnet; a LAN gets one
subnet shared by every node attached to it. Routes follow shortest paths by
hop count (ties broken by node name, so the plan never depends on dict order).
Hosts never forward, so a path never transits a host.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from dataclasses import dataclass, field

from mcclab.model.topology import Topology


@dataclass(frozen=True)
class Interface:
    """One experiment interface of a node."""

    node: str
    name: str
    address: ipaddress.IPv4Interface
    link_index: int
    peer: str  # the node (or LAN) at the other end of the link
    lan: str | None = None

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        """The interface's subnet."""
        return self.address.network


@dataclass(frozen=True)
class Route:
    """A static unicast route on ``node``: ``dest`` via ``gateway`` out of ``dev``."""

    node: str
    dest: ipaddress.IPv4Network
    gateway: ipaddress.IPv4Address
    dev: str


@dataclass
class AddressPlan:
    """Interfaces per node, control addresses, and static routes."""

    interfaces: dict[str, list[Interface]] = field(default_factory=dict)
    control: dict[str, ipaddress.IPv4Interface] = field(default_factory=dict)
    control_gateway: ipaddress.IPv4Interface | None = None
    routes: list[Route] = field(default_factory=list)
    lan_ports: dict[int, str] = field(default_factory=dict)  # link index -> bridge port name

    def address_of(self, node: str) -> ipaddress.IPv4Address:
        """The first experiment address of ``node`` (a host's only one)."""
        return self.interfaces[node][0].address.ip

    def iface_towards(self, node: str, peer: str) -> Interface:
        """The interface of ``node`` on the link to ``peer``."""
        for iface in self.interfaces[node]:
            if iface.peer == peer:
                return iface
        raise KeyError(f"{node} has no link to {peer}")

    def routes_of(self, node: str) -> list[Route]:
        """Static routes installed on ``node``."""
        return [r for r in self.routes if r.node == node]

    def next_hop(self, node: str,
                 addr: ipaddress.IPv4Address) -> tuple[ipaddress.IPv4Address | None, str]:
        """Gateway (None on a shared subnet) and device ``node`` reaches ``addr`` by."""
        for iface in self.interfaces[node]:
            if addr in iface.subnet:
                return None, iface.name
        routes = [r for r in self.routes_of(node) if addr in r.dest]
        if not routes:
            raise KeyError(f"{node} has no route to {addr}")
        best = max(routes, key=lambda r: r.dest.prefixlen)
        return best.gateway, best.dev


def plan_addresses(topo: Topology) -> AddressPlan:
    """Assign addresses to every interface and compute static routes."""
    plan = AddressPlan()
    subnets = topo.addressing.experiment.subnets(new_prefix=topo.addressing.link_prefix)
    l3 = [n for n in topo.nodes if topo.kind_of(n) != "lan"]
    counters = {n: 0 for n in l3}
    plan.interfaces = {n: [] for n in l3}
    lan_subnets: dict[str, tuple[ipaddress.IPv4Network, list[ipaddress.IPv4Address]]] = {}

    def next_subnet() -> ipaddress.IPv4Network:
        try:
            return next(subnets)
        except StopIteration:
            raise ValueError(
                f"addressing.experiment {topo.addressing.experiment} has too few "
                f"/{topo.addressing.link_prefix} subnets for {len(topo.links)} links"
            ) from None

    def add(node: str, addr: ipaddress.IPv4Address, net: ipaddress.IPv4Network,
            idx: int, peer: str, lan: str | None) -> None:
        name = f"{node}-eth{counters[node]}"
        counters[node] += 1
        plan.interfaces[node].append(
            Interface(node, name, ipaddress.IPv4Interface(f"{addr}/{net.prefixlen}"), idx, peer,
                      lan)
        )

    for idx, link in enumerate(topo.links):
        a, b = link.endpoints
        lan = a if topo.kind_of(a) == "lan" else b if topo.kind_of(b) == "lan" else None
        if lan is None:
            net = next_subnet()
            hosts = net.hosts()
            add(a, next(hosts), net, idx, b, None)
            add(b, next(hosts), net, idx, a, None)
            continue
        if lan not in lan_subnets:
            net = next_subnet()
            lan_subnets[lan] = (net, list(net.hosts()))
        net, free = lan_subnets[lan]
        if not free:
            raise ValueError(f"LAN {lan} ran out of addresses in {net}")
        member = b if lan == a else a
        add(member, free.pop(0), net, idx, lan, lan)
        plan.lan_ports[idx] = f"mclp{idx}"

    _plan_control(topo, plan, l3)
    plan.routes = _static_routes(topo, plan)
    return plan


def _plan_control(topo: Topology, plan: AddressPlan, nodes: list[str]) -> None:
    """Give the root namespace the first control address and every node the next ones."""
    hosts = topo.addressing.control.hosts()
    prefix = topo.addressing.control.prefixlen
    plan.control_gateway = ipaddress.IPv4Interface(f"{next(hosts)}/{prefix}")
    for node in nodes:
        try:
            plan.control[node] = ipaddress.IPv4Interface(f"{next(hosts)}/{prefix}")
        except StopIteration:
            raise ValueError(f"addressing.control {topo.addressing.control} is too small") from None


def _neighbours(plan: AddressPlan) -> dict[str, list[tuple[str, Interface, Interface]]]:
    """For each L3 node: (neighbour, own interface, neighbour's interface), sorted by name."""
    by_subnet: dict[ipaddress.IPv4Network, list[Interface]] = {}
    for ifaces in plan.interfaces.values():
        for iface in ifaces:
            by_subnet.setdefault(iface.subnet, []).append(iface)
    out: dict[str, list[tuple[str, Interface, Interface]]] = {n: [] for n in plan.interfaces}
    for members in by_subnet.values():
        for mine in members:
            for theirs in members:
                if theirs.node != mine.node:
                    out[mine.node].append((theirs.node, mine, theirs))
    for node in out:
        out[node].sort(key=lambda t: t[0])
    return out


def _static_routes(topo: Topology, plan: AddressPlan) -> list[Route]:
    """Shortest-path (hop count) routes from every node to every subnet it is not on."""
    adj = _neighbours(plan)
    owners: dict[ipaddress.IPv4Network, set[str]] = {}
    for ifs in plan.interfaces.values():
        for iface in ifs:
            owners.setdefault(iface.subnet, set()).add(iface.node)
    routes: list[Route] = []
    for src in plan.interfaces:
        first_hop = _bfs_first_hops(topo, adj, src)
        local = {iface.subnet for iface in plan.interfaces[src]}
        for net in sorted(owners, key=lambda n: int(n.network_address)):
            if net in local:
                continue
            # Reach the subnet through the nearest router attached to it: a host on
            # it would not forward to the subnet's other members.
            routers = {o for o in owners[net] if topo.kind_of(o) == "router"}
            best = min(
                (first_hop[o] for o in (routers or owners[net]) if o in first_hop),
                key=lambda hop: (hop[0], hop[1].node),
                default=None,
            )
            if best is None:
                continue
            _, gw_iface, own_iface = best
            routes.append(Route(src, net, gw_iface.address.ip, own_iface.name))
    return routes


def _bfs_first_hops(
    topo: Topology, adj: dict[str, list[tuple[str, Interface, Interface]]], src: str
) -> dict[str, tuple[int, Interface, Interface]]:
    """Distance and first hop (gateway interface, own interface) from src to each node."""
    result: dict[str, tuple[int, Interface, Interface]] = {}
    Item = tuple[str, int, Interface | None, Interface | None]
    queue: deque[Item] = deque([(src, 0, None, None)])
    seen = {src}
    while queue:
        node, dist, gw, own = queue.popleft()
        if gw is not None and own is not None:
            result[node] = (dist, gw, own)
        if node != src and topo.kind_of(node) == "host":
            continue  # hosts do not forward
        for nbr, mine, theirs in adj[node]:
            if nbr in seen:
                continue
            seen.add(nbr)
            first_gw, first_own = (theirs, mine) if node == src else (gw, own)
            queue.append((nbr, dist + 1, first_gw, first_own))
    return result
