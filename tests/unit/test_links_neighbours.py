"""Pinned neighbour entries (mcclab.links.userspace): every directly connected pair, both ways."""

from __future__ import annotations

import json

from mcclab.links import userspace
from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import resolve_topology


def path_plan():
    topo = resolve_topology({
        "name": "pins",
        "nodes": {"s": {"kind": "host"}, "r": {"kind": "router"}, "d": {"kind": "host"}},
        "links": [{"endpoints": ["s", "r"]}, {"endpoints": ["r", "d"]}],
    })
    return plan_addresses(topo)


def test_parse_macs_reads_ip_link_json():
    text = json.dumps([{"ifname": "lo", "address": "00:00:00:00:00:00"},
                       {"ifname": "r-eth0", "address": "aa:bb:cc:00:00:01"},
                       {"ifname": "tun0"}])
    assert userspace.parse_macs(text) == {"lo": "00:00:00:00:00:00",
                                          "r-eth0": "aa:bb:cc:00:00:01"}
    assert userspace.parse_macs("") == {}


def test_every_neighbour_is_pinned_both_ways_with_its_own_mac():
    plan = path_plan()
    macs = {node: {i.name: f"02:00:00:00:{n:02x}:{k:02x}" for k, i in enumerate(ifaces)}
            for n, (node, ifaces) in enumerate(sorted(plan.interfaces.items()))}
    netns = {node: f"ns-{node}" for node in plan.interfaces}
    cmds = userspace.pin_neighbour_cmds(plan, macs, netns)
    got = {(c.netns, c.argv[3], c.argv[5], c.argv[7]) for c in cmds}
    want = set()
    for node, ifaces in plan.interfaces.items():
        for mine in ifaces:
            theirs = plan.iface_towards(mine.peer, node)
            want.add((f"ns-{node}", str(theirs.address.ip), macs[mine.peer][theirs.name],
                      mine.name))
    assert len(want) == 4 and got == want  # s->r, r->s, r->d, d->r
    for c in cmds:
        assert c.argv[:3] == ("ip", "neigh", "replace") and c.argv[-2:] == ("nud", "permanent")


def test_link_show_runs_in_the_nodes_namespace():
    c = userspace.link_show_cmd("mcl-r")
    assert c.netns == "mcl-r" and c.argv == ("ip", "-j", "link", "show")
