"""Address plan and static routes: deterministic, complete, and never through hosts."""

import ipaddress

from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import resolve_topology


def chain():
    return resolve_topology({"name": "c", "generate": {"kind": "chain", "routers": 3,
                                                        "hosts_per_router": 1}})


def test_every_link_gets_its_own_subnet_and_each_end_an_address():
    topo = chain()
    plan = plan_addresses(topo)
    subnets = {i.subnet for ifs in plan.interfaces.values() for i in ifs}
    assert len(subnets) == len(topo.links)
    iface = plan.iface_towards("r1", "r2")
    peer = plan.iface_towards("r2", "r1")
    assert iface.subnet == peer.subnet and iface.address != peer.address
    assert iface.name == "r1-eth1"  # r1's links: src, r2, h1n1 in declaration order


def test_routes_cover_every_remote_subnet_along_the_chain():
    topo = chain()
    plan = plan_addresses(topo)
    all_nets = {i.subnet for ifs in plan.interfaces.values() for i in ifs}
    for node, ifaces in plan.interfaces.items():
        local = {i.subnet for i in ifaces}
        routed = {r.dest for r in plan.routes_of(node)}
        assert routed == all_nets - local, node
    src_route = next(r for r in plan.routes_of("src")
                     if r.dest == plan.iface_towards("h3n1", "r3").subnet)
    assert src_route.gateway == plan.iface_towards("r1", "src").address.ip


def test_routes_never_transit_a_host():
    # Two routers joined only through a host: a path through the host must not be used.
    topo = resolve_topology({"name": "x", "nodes": {
        "r1": {"kind": "router"}, "h": {"kind": "host"}, "r2": {"kind": "router"},
        "r3": {"kind": "router"}}, "links": [
        {"endpoints": ["r1", "h"]}, {"endpoints": ["h", "r2"]},
        {"endpoints": ["r1", "r3"]}, {"endpoints": ["r3", "r2"]}]})
    plan = plan_addresses(topo)
    to_r2 = [r for r in plan.routes_of("r1") if r.dest == plan.iface_towards("r2", "h").subnet]
    assert to_r2 and to_r2[0].gateway == plan.iface_towards("r3", "r1").address.ip


def test_lan_members_share_one_subnet():
    topo = resolve_topology({"name": "lan", "nodes": {
        "r1": {"kind": "router"}, "lan1": {"kind": "lan"}, "a": {"kind": "host"},
        "b": {"kind": "host"}}, "links": [
        {"endpoints": ["r1", "lan1"]}, {"endpoints": ["a", "lan1"]}, {"endpoints": ["lan1", "b"]}]})
    plan = plan_addresses(topo)
    nets = {plan.interfaces[n][0].subnet for n in ("r1", "a", "b")}
    assert len(nets) == 1
    assert set(plan.lan_ports) == {0, 1, 2}


def test_control_addresses_are_unique_and_outside_the_experiment_pool():
    topo = chain()
    plan = plan_addresses(topo)
    addrs = [a.ip for a in plan.control.values()] + [plan.control_gateway.ip]
    assert len(set(addrs)) == len(addrs)
    assert all(a in ipaddress.IPv4Network("172.30.0.0/16") for a in addrs)


def test_plan_is_deterministic():
    assert plan_addresses(chain()) == plan_addresses(chain())
