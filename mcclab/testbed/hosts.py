"""Configure allocated hosts as a topology's nodes: check their addresses, set what the lab sets.

A testbed gives each node its experiment interfaces with mcclab's addresses
(the export writes them into the NS file or the RSpec). Before anything runs,
:func:`interface_problems` checks on every host that each planned address is
there, on the interface the address plan names (the routers' configurations
name interfaces). Then :func:`setup_cmds` gives the same sysctls, offload
settings, static routes and multicast route the lab gives its namespaces, built
by ``mcclab.net.node_config`` and run through :class:`~mcclab.testbed.ssh.SshRunner`.
"""

from __future__ import annotations

import ipaddress
import json

from mcclab.commands import Cmd, cmd
from mcclab.model.addressing import AddressPlan
from mcclab.model.topology import Topology
from mcclab.net import node_config
from mcclab.testbed.ssh import SshError, SshRunner


def parse_addresses(out: str) -> dict[str, list[ipaddress.IPv4Interface]]:
    """Interface name -> its IPv4 addresses, from ``ip -j -4 addr show``."""
    found: dict[str, list[ipaddress.IPv4Interface]] = {}
    for link in json.loads(out or "[]"):
        addrs = found.setdefault(link.get("ifname", ""), [])
        for info in link.get("addr_info", []):
            if info.get("family", "inet") == "inet" and "local" in info:
                addrs.append(ipaddress.IPv4Interface(f"{info['local']}/{info['prefixlen']}"))
    return found


def interface_problems(plan: AddressPlan, node: str,
                       found: dict[str, list[ipaddress.IPv4Interface]]) -> list[str]:
    """Why ``node``'s host does not carry its planned interfaces (empty: it does)."""
    where = {addr: name for name, addrs in found.items() for addr in addrs}
    problems = []
    for iface in plan.interfaces[node]:
        name = where.get(iface.address)
        if name is None:
            problems.append(f"{node}: no interface has {iface.address} (planned on "
                            f"{iface.name})")
        elif name != iface.name:
            problems.append(f"{node}: {iface.address} is on {name}, the plan names it "
                            f"{iface.name} (rename the interface)")
    return problems


def setup_cmds(topo: Topology, plan: AddressPlan, node: str) -> list[Cmd]:
    """What the lab sets in a node after its addresses: loopback, sysctls, offloads,
    interfaces up, static routes and (on hosts) the multicast route."""
    ns = node_config.netns_name(node)
    ifaces = plan.interfaces[node]
    out = [cmd("ip", "link", "set", "lo", "up", netns=ns)]
    out += node_config.sysctl_cmds(topo, node, ifaces)
    for iface in ifaces:
        out += node_config.offload_cmds(ns, iface.name)
        out.append(cmd("ip", "link", "set", iface.name, "up", netns=ns))
    out += node_config.route_cmds(plan.routes_of(node))
    if topo.kind_of(node) == "host":
        out += node_config.host_multicast_route(node, ifaces)
    return out


def configure(runner: SshRunner, topo: Topology, plan: AddressPlan) -> None:
    """Check every host's interfaces (all problems at once), then configure each node."""
    nodes = list(runner.ssh.inventory.hosts)
    problems = []
    for node in nodes:
        out = runner.run(cmd("ip", "-j", "-4", "addr", "show",
                             netns=node_config.netns_name(node)))
        problems += interface_problems(plan, node, parse_addresses(out))
    if problems:
        raise SshError("the hosts do not match the address plan:\n  - "
                       + "\n  - ".join(problems))
    for node in nodes:
        runner.run_all(setup_cmds(topo, plan, node))
