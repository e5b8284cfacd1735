"""Which link directions are emulated, with which parameters, and where.

Pure functions of the Topology and its AddressPlan, shared by both backends.
A link has two directions; each is emulated on its own (``Link.direction``
resolves the per-direction overrides). A direction with the default
parameters (no rate, no delay, no jitter, no loss) is not emulated at all: its
packets cross the veth at memory speed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mcclab.model.addressing import AddressPlan
from mcclab.model.topology import LinkParams, Queue, Topology
from mcclab.net.node_config import netns_name

# ns-2's default queue (Queue set limit_ 50): used when a link has a rate but
# no queue block, so an unspecified queue behaves like the simulator's.
DEFAULT_QUEUE_LIMIT = 50

Hook = Literal["ingress", "egress"]


@dataclass(frozen=True)
class Direction:
    """One emulated direction ``src`` -> ``dst`` of link ``link`` (an index into topo.links)."""

    link: int
    src: str
    dst: str
    forward: bool
    params: LinkParams

    @property
    def queue_num(self) -> int:
        """The direction's NFQUEUE number: unique per lab, stable across re-plans."""
        return 2 * self.link + (0 if self.forward else 1)

    @property
    def name(self) -> str:
        """Short label used in emulator stats and logs (``l3:r1-h2``)."""
        return f"l{self.link}:{self.src}-{self.dst}"

    @property
    def where(self) -> str:
        """How error messages name the direction (matches the topology's field paths)."""
        return f"links[{self.link}] ({self.src}->{self.dst})"

    @property
    def queue(self) -> Queue | None:
        """The queue actually emulated: none without a rate, ns-2's default if unspecified."""
        if self.params.rate is None:
            return None
        if self.params.queue is not None:
            return self.params.queue
        return Queue(limit=f"{DEFAULT_QUEUE_LIMIT}pkt")


@dataclass(frozen=True)
class Placement:
    """Where a direction is emulated: an interface of a node (or of the root namespace)."""

    node: str | None  # None: the root namespace (a LAN bridge port)
    iface: str
    hook: Hook

    @property
    def netns(self) -> str | None:
        """The named namespace commands run in (None for the root namespace)."""
        return netns_name(self.node) if self.node is not None else None


def needs_emulation(p: LinkParams) -> bool:
    """True when a direction has anything to emulate (a queue alone needs a rate)."""
    return (p.rate is not None or p.delay > 0 or p.jitter > 0 or p.loss > 0
            or p.gilbert_elliott is not None)


def plan_directions(topo: Topology) -> list[Direction]:
    """Every direction that needs emulation, in link order (forward before reverse)."""
    out = []
    for index, link in enumerate(topo.links):
        a, b = link.endpoints
        for forward, (src, dst) in ((True, (a, b)), (False, (b, a))):
            params = link.direction(forward)
            if needs_emulation(params):
                out.append(Direction(index, src, dst, forward, params))
    return out


def userspace_placement(topo: Topology, plan: AddressPlan, d: Direction) -> Placement:
    """Userspace: at a router's egress, else at the receiving node's ingress, or at the
    sender's egress towards a LAN.

    A host's egress would charge held packets to the sending socket (TCP small
    queues, SO_SNDBUF) and throttle local senders, so a host's directions are
    emulated where they arrive. A router only forwards, so its directions are
    emulated as they leave it: a host then receives each packet only after the
    emulator released it, and the kernel's receive timestamp (taken as a packet
    enters a namespace, before PREROUTING) is the arrival after the link's delay,
    not before it. A LAN (a bridge in the root namespace) has no netfilter hook
    of its own, so node->LAN directions can only be emulated at the node's egress.
    """
    if topo.kind_of(d.dst) == "lan" or topo.kind_of(d.src) == "router":
        return Placement(d.src, plan.iface_towards(d.src, d.dst).name, "egress")
    return Placement(d.dst, plan.iface_towards(d.dst, d.src).name, "ingress")


def kernel_placement(topo: Topology, plan: AddressPlan, d: Direction) -> Placement:
    """Kernel: always the sender's egress qdisc; for LAN->node, the bridge port's egress.

    netem orphans the packets it delays (skb_orphan_partial), so unlike an
    NFQUEUE at egress, held packets are not charged to the sending socket.
    """
    if topo.kind_of(d.src) == "lan":
        return Placement(None, plan.lan_ports[d.link], "egress")
    return Placement(d.src, plan.iface_towards(d.src, d.dst).name, "egress")


def warnings(topo: Topology, backend: str) -> list[str]:
    """Things that will be emulated differently from what a reader of the topology expects."""
    out = []
    for index, link in enumerate(topo.links):
        a, b = link.endpoints
        for forward, (src, dst) in ((True, (a, b)), (False, (b, a))):
            p = link.direction(forward)
            where = f"links[{index}] ({src}->{dst})"
            if p.queue is not None and p.rate is None:
                out.append(f"{where}: a queue without a rate never fills; it is ignored")
            if (backend == "userspace" and needs_emulation(p) and topo.kind_of(dst) == "lan"
                    and topo.kind_of(src) == "host"):
                out.append(f"{where}: emulated at {src}'s egress (a LAN has no ingress); "
                           "local TCP/UDP senders on this host are throttled by their socket "
                           "buffers, see docs/links.md")
    return out
