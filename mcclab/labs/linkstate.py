"""``mcclab link A B down|up`` on a live lab: the link, and the unicast routes around it.

mcclab routes unicast statically along shortest paths (``mcclab.model.addressing``),
so taking a link down also moves the routes: every node's routes are recomputed
over the links still up and replaced, which is what a routing protocol would
converge to. PIM then follows on its own: each router's RPF interface comes
from those routes, so a router whose RPF changed joins on its new upstream
interface (RFC 7761). The set of links down is kept in the lab's
state folder, so later commands add to it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from mcclab.commands import Cmd
from mcclab.model.addressing import AddressPlan, Route, _static_routes
from mcclab.model.topology import Topology
from mcclab.net.node_config import netns_name

DOWN_FILE = "links-down.json"


def link_key(a: str, b: str) -> str:
    """A link's name, its ends sorted (``r1-r2``)."""
    return "-".join(sorted((a, b)))


def read_down(state_path: Path) -> set[str]:
    """The links taken down in this lab so far."""
    try:
        return set(json.loads((state_path / DOWN_FILE).read_text()))
    except (OSError, ValueError):
        return set()


def write_down(state_path: Path, down: set[str]) -> None:
    """Record the links that are down."""
    (state_path / DOWN_FILE).write_text(json.dumps(sorted(down)))


def routes_without(topo: Topology, plan: AddressPlan, down: set[str]) -> list[Route]:
    """Shortest-path routes of every node over the links not in ``down``."""
    kept = {
        node: [i for i in ifaces if link_key(node, i.peer) not in down]
        for node, ifaces in plan.interfaces.items()
    }
    return _static_routes(topo, dataclasses.replace(plan, interfaces=kept))


def link_cmds(
    topo: Topology, plan: AddressPlan, a: str, b: str, up: bool, down_before: set[str]
) -> tuple[list[Cmd], set[str]]:
    """Commands that set link a-b up or down and re-route, and the new set of links down.

    Raises ValueError if there is no such link.
    """
    if not any({a, b} == set(link.endpoints) for link in topo.links):
        raise ValueError(f"{topo.name} has no link between {a} and {b}")
    key = link_key(a, b)
    down = (down_before - {key}) if up else (down_before | {key})
    state = "up" if up else "down"
    cmds = [
        Cmd(("ip", "link", "set", plan.iface_towards(n, m).name, state), netns_name(n))
        for n, m in ((a, b), (b, a))
        if topo.kind_of(n) != "lan"
    ]
    before = {(r.node, r.dest) for r in routes_without(topo, plan, down_before)}
    after = routes_without(topo, plan, down)
    for r in after:
        cmds.append(
            Cmd(
                ("ip", "route", "replace", str(r.dest), "via", str(r.gateway), "dev", r.dev),
                netns_name(r.node),
            )
        )
    for node, dest in sorted(before - {(r.node, r.dest) for r in after}):
        # No path left: drop the stale route (check=False: going down removed it already).
        cmds.append(Cmd(("ip", "route", "del", str(dest)), netns_name(node), check=False))
    return cmds, down
