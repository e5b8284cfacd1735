"""Pure builders of the ip, ethtool and sysctl lines that configure each node."""

from __future__ import annotations

from mcclab.commands import Cmd, cmd, sysctl, sysctls
from mcclab.model.addressing import AddressPlan, Interface, Route
from mcclab.model.topology import Topology

CONTROL_IFACE = "ctl0"
CONTROL_BRIDGE = "mclctl"

# Layered receivers join dozens of groups (STAIR: CLs + NCLs + stair layers);
# the kernel default of 20 memberships per socket is far too low.
IGMP_MAX_MEMBERSHIPS = 1024
IGMP_MAX_MSF = 1024


def netns_name(node: str) -> str:
    """The named network namespace of a node."""
    return f"mcl-{node}"


def control_port(node: str) -> str:
    """Root-namespace end of a node's control veth."""
    return f"mclc-{node}"


def lan_bridge(lan: str) -> str:
    """Root-namespace bridge implementing a LAN node."""
    return f"mclb-{lan}"


def offload_cmds(ns: str | None, iface: str) -> list[Cmd]:
    """Turn off checksum offload and segmentation/aggregation on an interface.

    veth leaves UDP checksums partial (harmless in the kernel, wrong in
    captures and for raw readers), and GSO/GRO would hand the link emulator
    64 KB super-packets, breaking its per-packet queue and serialization model.
    """
    return [cmd("ethtool", "-K", iface, "rx", "off", "tx", "off", "sg", "off", "tso", "off",
                "gso", "off", "gro", "off", netns=ns, check=False)]


def sysctl_cmds(topo: Topology, node: str, ifaces: list[Interface]) -> list[Cmd]:
    """Per-node sysctls: forwarding, rp_filter off, IGMP limits and forced IGMP version.

    One ``sysctl`` process sets them all (``commands.sysctls``).
    """
    router = topo.kind_of(node) == "router"
    out: list[tuple[str, str | int]] = [
        ("net.ipv4.ip_forward", 1 if router else 0),
        ("net.ipv4.conf.all.rp_filter", 0),
        ("net.ipv4.conf.default.rp_filter", 0),
        ("net.ipv4.igmp_max_memberships", IGMP_MAX_MEMBERSHIPS),
        ("net.ipv4.igmp_max_msf", IGMP_MAX_MSF),
        ("net.ipv4.icmp_ratelimit", 0),
    ]
    igmp = topo.routing.igmp
    report_ms = round(igmp.unsolicited_report_interval * 1000)
    for iface in ifaces:
        conf = f"net.ipv4.conf.{iface.name}"
        out.append((f"{conf}.rp_filter", 0))
        out.append((f"{conf}.force_igmp_version", igmp.version))
        if not router:
            out.append((f"{conf}.igmpv{igmp.version}_unsolicited_report_interval", report_ms))
    return [sysctls(netns_name(node), out)]


def interface_cmds(node: str, iface: Interface) -> list[Cmd]:
    """Address an experiment interface and bring it up."""
    ns = netns_name(node)
    return [
        *offload_cmds(ns, iface.name),
        cmd("ip", "addr", "add", str(iface.address), "dev", iface.name, netns=ns),
        cmd("ip", "link", "set", iface.name, "up", netns=ns),
    ]


def route_cmds(routes: list[Route]) -> list[Cmd]:
    """Static unicast routes: one ``ip -batch`` per node.

    A node of a paper-size star has a route to each of some 130 subnets, and one
    ``ip`` process per route (3 ms each) made them most of the bring-up's time
    (18,000 routes, 54 s of 64 at n = 64). ``ip -batch`` stops at the first
    route it cannot add, and so fails the command.
    """
    by_node: dict[str, list[str]] = {}
    for r in routes:
        by_node.setdefault(r.node, []).append(
            f"route replace {r.dest} via {r.gateway} dev {r.dev}")
    return [Cmd(("ip", "-batch", "-"), netns_name(node), input="\n".join(lines) + "\n")
            for node, lines in by_node.items()]


def host_multicast_route(node: str, ifaces: list[Interface]) -> list[Cmd]:
    """Send multicast out of the experiment interface, never the control one."""
    if not ifaces:
        return []
    return [cmd("ip", "route", "replace", "224.0.0.0/4", "dev", ifaces[0].name,
                netns=netns_name(node))]


def root_guard(bridge: str) -> Cmd:
    """Strict reverse-path filtering on a root-namespace bridge facing the lab.

    Linux accepts a packet for any local address on any interface, so without
    this a node could reach the root's control services from an experiment
    address, and the reply would leave through the machine's default route.
    With strict rp_filter only sources routed back through the bridge pass:
    the control subnet on the control bridge, nothing on a LAN bridge.
    """
    return sysctl(None, f"net.ipv4.conf.{bridge}.rp_filter", 1)


def control_root_cmds(plan: AddressPlan) -> list[Cmd]:
    """The root-namespace control bridge, holding the gateway address."""
    return [
        cmd("ip", "link", "add", CONTROL_BRIDGE, "type", "bridge", "mcast_snooping", "0"),
        root_guard(CONTROL_BRIDGE),
        cmd("ip", "addr", "add", str(plan.control_gateway), "dev", CONTROL_BRIDGE),
        cmd("ip", "link", "set", CONTROL_BRIDGE, "up"),
    ]


def control_node_cmds(node: str, plan: AddressPlan) -> list[Cmd]:
    """A veth from the node to the control bridge; ports are isolated from each other.

    Port isolation makes the control net a star: each node reaches the root
    namespace, never another node, so no experiment traffic can shortcut
    through it. The node gets no default route, only the connected subnet.
    """
    ns, port = netns_name(node), control_port(node)
    return [
        cmd("ip", "link", "add", port, "type", "veth", "peer", "name", CONTROL_IFACE,
            "netns", ns),
        cmd("ip", "link", "set", port, "master", CONTROL_BRIDGE),
        cmd("bridge", "link", "set", "dev", port, "isolated", "on"),
        cmd("ip", "link", "set", port, "up"),
        *offload_cmds(ns, CONTROL_IFACE),
        cmd("ip", "addr", "add", str(plan.control[node]), "dev", CONTROL_IFACE, netns=ns),
        cmd("ip", "link", "set", CONTROL_IFACE, "up", netns=ns),
    ]


def lan_bridge_cmds(lan: str) -> list[Cmd]:
    """Settings of a LAN bridge: no IGMP snooping, so routers see every membership report."""
    br = lan_bridge(lan)
    return [
        cmd("ip", "link", "set", br, "type", "bridge", "mcast_snooping", "0"),
        root_guard(br),
        cmd("ip", "link", "set", br, "up"),
    ]


def node_cmds(topo: Topology, plan: AddressPlan, node: str) -> list[Cmd]:
    """Everything that configures one layer-3 node after its links exist."""
    ns = netns_name(node)
    ifaces = plan.interfaces[node]
    out = [cmd("ip", "link", "set", "lo", "up", netns=ns)]
    out += sysctl_cmds(topo, node, ifaces)
    for iface in ifaces:
        out += interface_cmds(node, iface)
    out += route_cmds(plan.routes_of(node))
    if topo.kind_of(node) == "host":
        out += host_multicast_route(node, ifaces)
    return out
