"""A network backend for unit tests: it creates nothing and remembers what it was asked.

Injected through ``LabOptions(network_backend=FakeNetwork)``, it lets a test drive a
Lab's build without root, Mininet or namespaces, and without patching any module.
"""

from __future__ import annotations

from mcclab.execute import Runner
from mcclab.model.addressing import AddressPlan
from mcclab.model.topology import Topology
from mcclab.state import LabState


class FakeNetwork:
    """Records every call of the ``NetworkBackend`` protocol, in order; builds nothing."""

    def __init__(self, runner: Runner, state: LabState):
        self.runner, self.state = runner, state
        self.calls: list[tuple[str, str | int]] = []
        self.seen: list[tuple[Topology, AddressPlan]] = []  # add_link's inputs
        self.closed = False

    def add_node(self, name: str) -> None:
        """Remember a node."""
        self.calls.append(("node", name))

    def add_lan(self, lan: str) -> None:
        """Remember a LAN."""
        self.calls.append(("lan", lan))

    def add_link(self, topo: Topology, plan: AddressPlan, index: int) -> None:
        """Remember a link by index, and what topology and plan it came with."""
        self.calls.append(("link", index))
        self.seen.append((topo, plan))

    def close(self) -> None:
        """Remember that the lab released the backend."""
        self.closed = True
