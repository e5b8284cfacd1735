"""The one backend class that touches Mininet: it creates nodes, links and LAN bridges.

Mininet supplies the node shells (each in its own network namespace) and the
veth pairs. No Open vSwitch is used: LANs are Linux bridges and routers are
plain hosts with forwarding on. Every namespace is also attached under a name
(``ip netns attach mcl-<node>``) so commands, daemons and users reach it with
ordinary tools, and so cleanup can find it after a crash.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

from mcclab.commands import cmd
from mcclab.execute import Runner
from mcclab.model.addressing import AddressPlan
from mcclab.model.topology import Topology
from mcclab.net.node_config import lan_bridge, netns_name
from mcclab.state import LabState


class MininetBackend:
    """Builds a Topology's nodes and links with Mininet, recording each resource first.

    The default ``mcclab.net.backend.NetworkBackend`` (``LabOptions.network_backend``).
    """

    def __init__(self, runner: Runner, state: LabState):
        self.runner = runner
        self.state = state
        self.hosts: dict[str, object] = {}
        self._net = None

    @property
    def net(self):  # noqa: ANN201 - mininet has no type hints
        """The Mininet object holding the nodes (None before the first node), for its CLI."""
        return self._net

    def _mininet(self):  # noqa: ANN202 - mininet has no type hints
        """Create the Mininet container lazily (importing mininet needs Debian's python)."""
        if self._net is None:
            from mininet.net import Mininet

            self._net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False,
                                waitConnected=False)
        return self._net

    def add_node(self, name: str) -> None:
        """A node shell in a fresh namespace, attached as mcl-<name>."""
        from mininet.node import Host

        ns = netns_name(name)
        self.state.add_netns(ns)
        host = self._mininet().addHost(name, cls=Host, ip=None, inNamespace=True)
        self.state.add_process(host.pid, f"shell {name}", stop_signal=signal.SIGKILL)
        self.runner.run(cmd("ip", "netns", "attach", ns, host.pid))
        self.hosts[name] = host

    def add_lan(self, lan: str) -> None:
        """A LAN is a Linux bridge in the root namespace."""
        from mininet.nodelib import LinuxBridge

        bridge = lan_bridge(lan)
        self.state.add_root_iface(bridge)
        switch = self._mininet().addSwitch(bridge, cls=LinuxBridge, stp=False)
        # Mininet gives a switch a shell too, in the root namespace: record it
        # so teardown (and `mcclab clean` after a crash) ends it.
        self.state.add_process(switch.pid, f"shell {bridge}", stop_signal=signal.SIGKILL)
        switch.start([])
        self.hosts[lan] = switch

    def add_link(self, topo: Topology, plan: AddressPlan, index: int) -> None:
        """A veth pair for link ``index``, named after the address plan."""
        a, b = topo.links[index].endpoints
        names = {}
        for end, other in ((a, b), (b, a)):
            if topo.kind_of(end) == "lan":
                names[end] = plan.lan_ports[index]
                self.state.add_root_iface(names[end])
            else:
                names[end] = plan.iface_towards(end, other).name
        self._mininet().addLink(self.hosts[a], self.hosts[b], intfName1=names[a],
                                intfName2=names[b])

    def close(self) -> None:
        """Close the shells' ptys and reap the shells, once teardown has killed them.

        A sweep runs lab after lab in one process; without this every node kept
        two pty descriptors open for good, and past descriptor 1023 select()
        failed (the tenth run of a 60-node sweep).
        """
        for node in self.hosts.values():
            shell = getattr(node, "shell", None)
            if shell is None:
                continue
            node.stdin.close()
            os.close(node.slave)
            with contextlib.suppress(subprocess.TimeoutExpired):
                shell.wait(timeout=2.0)
            node.shell = None
        self.hosts.clear()
        self._net = None
