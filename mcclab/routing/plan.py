"""A topology's routing, planned: each router's RouterSpec and DaemonPlan, without I/O.

The bridge between the topology model and the backend-neutral planners
(``frr``, ``pimd``, ``smcroute``): it reads interfaces, neighbours, the RP,
IGMP timers and static groups from a Topology and its AddressPlan and returns
the plain inputs and plans those planners work with. ``runner`` executes the
plans; ``mcclab.links.plan`` is the same step for link emulation.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from mcclab.model.addressing import AddressPlan
from mcclab.model.topology import Topology
from mcclab.routing import BINARIES, plan_router
from mcclab.routing.common import DaemonPlan, IgmpTimers, RouterIface, RouterSpec, StaticMroute


def required_binaries(backend: str) -> list[str]:
    """Executables a routing backend needs (checked before anything starts)."""
    return list(BINARIES[backend])


def igmp_timers(topo: Topology) -> IgmpTimers:
    """The topology's IGMP settings in the planners' integer units."""
    igmp = topo.routing.igmp
    return IgmpTimers(
        query_interval_s=round(igmp.query_interval),
        query_max_response_ms=round(igmp.query_response_interval * 1000),
        last_member_query_interval_ms=round(igmp.last_member_query_interval * 1000),
        last_member_query_count=igmp.last_member_query_count,
        version=igmp.version,
        immediate_leave=igmp.immediate_leave,
    )


def router_spec(topo: Topology, plan: AddressPlan, node: str, run_dir: Path) -> RouterSpec:
    """The planner input for one router."""
    ifaces = tuple(RouterIface(i.name, str(i.address)) for i in plan.interfaces[node])
    neighbours = []
    own = {i.subnet for i in plan.interfaces[node]}
    for other in topo.names("router"):
        if other == node:
            continue
        for iface in plan.interfaces[other]:
            if iface.subnet in own:
                neighbours.append(str(iface.address.ip))
    rp = topo.rp
    return RouterSpec(
        name=node,
        ifaces=ifaces,
        run_dir=str(run_dir),
        rp=str(plan.address_of(rp)) if rp and topo.routing.backend != "smcroute" else None,
        ssm_range=str(topo.routing.ssm_range),
        igmp=igmp_timers(topo),
        pim_neighbors=tuple(sorted(neighbours)),
    )


def static_routes(topo: Topology, plan: AddressPlan, node: str) -> list[StaticMroute]:
    """smcroute routes on ``node``: each static group flows down the shortest-path tree
    from its source to every host, with no pruning (hosts get it joined or not)."""
    routes = []
    for sg in topo.routing.static_groups:
        parent = _tree_parents(topo, plan, sg.source)
        if node not in parent:
            continue
        children = [n for n, p in parent.items() if p == node]
        outbound = tuple(plan.iface_towards(node, c).name for c in children
                         if _has_host_below(topo, parent, c))
        if not outbound:
            continue
        inbound = plan.iface_towards(node, parent[node]).name
        in_ssm = sg.group in topo.routing.ssm_range
        source = str(plan.address_of(sg.source)) if in_ssm else None
        routes.append(StaticMroute(str(sg.group), inbound, outbound, source))
    return routes


def _tree_parents(topo: Topology, plan: AddressPlan, root: str) -> dict[str, str]:
    """Breadth-first tree from ``root`` over router-to-node adjacency (hosts are leaves)."""
    parent: dict[str, str] = {}
    queue, seen = deque([root]), {root}
    while queue:
        node = queue.popleft()
        if node != root and topo.kind_of(node) == "host":
            continue
        nets = {i.subnet for i in plan.interfaces[node]}
        for other in sorted(plan.interfaces):
            if other in seen or not nets & {i.subnet for i in plan.interfaces[other]}:
                continue
            seen.add(other)
            parent[other] = node
            queue.append(other)
    return parent


def _has_host_below(topo: Topology, parent: dict[str, str], node: str) -> bool:
    """True when ``node`` is a host or has a host somewhere below it in the tree."""
    if topo.kind_of(node) == "host":
        return True
    return any(_has_host_below(topo, parent, c) for c, p in parent.items() if p == node)


def daemon_plan(topo: Topology, plan: AddressPlan, node: str, run_dir: Path) -> DaemonPlan:
    """The backend's plan for one router."""
    spec = router_spec(topo, plan, node, run_dir)
    backend = topo.routing.backend
    routes = static_routes(topo, plan, node) if backend == "smcroute" else ()
    return plan_router(backend, spec, routes)
