"""What a lab needs of a network backend: the seam between ``Lab`` and Mininet.

``Lab`` builds a topology through a :class:`NetworkBackend` that it makes with
the factory in ``LabOptions.network_backend`` (``MininetBackend`` unless told
otherwise), so a test hands it a fake instead of patching a module. The
backend only creates the nodes' namespaces and the veth pairs and bridges
between them; everything after that (addresses, routes, the control network,
link emulation, routing daemons) is commands the lab runs by namespace name,
whichever backend made the namespace.

What every backend must keep, because the rest of the lab relies on it:

* each node's namespace is reachable as ``node_config.netns_name(node)`` (an
  ``ip netns attach`` name), and each LAN is the root-namespace bridge
  ``node_config.lan_bridge(lan)``;
* link interfaces are named by the address plan (``plan.iface_towards`` on a
  node, ``plan.lan_ports[index]`` on a LAN's side);
* every namespace, root interface and process is recorded in the
  ``LabState`` *before* it is created, so teardown and ``mcclab clean`` after
  a crash remove it (``state.destroy`` is the teardown; ``close`` runs after it
  and releases only what the backend itself holds, such as ptys).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from mcclab.execute import Runner
from mcclab.model.addressing import AddressPlan
from mcclab.model.topology import Topology
from mcclab.state import LabState


@runtime_checkable
class NetworkBackend(Protocol):
    """Creates a lab's nodes, LANs and links; the lab calls these in that order."""

    def add_node(self, name: str) -> None:
        """A host or router: a fresh network namespace attached as ``mcl-<name>``."""
        ...

    def add_lan(self, lan: str) -> None:
        """A LAN: a bridge in the root namespace named ``lan_bridge(lan)``."""
        ...

    def add_link(self, topo: Topology, plan: AddressPlan, index: int) -> None:
        """The veth pair of ``topo.links[index]``, its ends named by ``plan``."""
        ...

    def close(self) -> None:
        """Release the backend's own handles once teardown has removed the network."""
        ...


class NetworkBackendFactory(Protocol):
    """Makes the backend of one lab from the lab's command runner and state record."""

    def __call__(self, runner: Runner, state: LabState) -> NetworkBackend:
        """A backend that runs its commands through ``runner`` and records in ``state``."""
        ...
