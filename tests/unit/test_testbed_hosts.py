"""Host configuration over SSH: the address check and the lab's own setup commands."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import load_topology
from mcclab.testbed.hosts import interface_problems, parse_addresses, setup_cmds

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dumbbell():
    topo = load_topology(REPO / "topologies" / "webrc-dumbbell.yaml")
    return topo, plan_addresses(topo)


def _ip_json(links: dict[str, list[str]]) -> str:
    return json.dumps([{"ifname": name, "addr_info": [
        {"family": "inet", "local": a.split("/")[0], "prefixlen": int(a.split("/")[1])}
        for a in addrs]} for name, addrs in links.items()])


def test_parse_addresses():
    found = parse_addresses(_ip_json({"lo": ["127.0.0.1/8"], "rl-eth0": ["10.0.0.1/24"],
                                      "eth9": []}))
    assert found == {"lo": [ipaddress.IPv4Interface("127.0.0.1/8")],
                     "rl-eth0": [ipaddress.IPv4Interface("10.0.0.1/24")], "eth9": []}


def test_interfaces_as_planned_pass(dumbbell):
    _, plan = dumbbell
    found = parse_addresses(_ip_json({i.name: [str(i.address)] for i in plan.interfaces["rl"]}))
    assert interface_problems(plan, "rl", found) == []


def test_missing_and_misnamed_interfaces_named(dumbbell):
    _, plan = dumbbell
    found = parse_addresses(_ip_json({"eno2": ["10.0.0.1/24"], "rl-eth1": ["10.0.1.2/24"]}))
    assert interface_problems(plan, "rl", found) == [
        "rl: 10.0.0.1/24 is on eno2, the plan names it rl-eth0 (rename the interface)",
        "rl: no interface has 10.0.3.2/24 (planned on rl-eth2)",
    ]
    # the prefix length is part of the address
    wrong = parse_addresses(_ip_json({"s1-eth0": ["10.0.1.1/16"]}))
    assert interface_problems(plan, "s1", wrong) == [
        "s1: no interface has 10.0.1.1/24 (planned on s1-eth0)"]


def test_setup_is_the_labs_configuration_without_addresses(dumbbell):
    topo, plan = dumbbell
    lines = [str(c) for c in setup_cmds(topo, plan, "d1")]
    assert all(line.startswith("[mcl-d1] ") for line in lines)
    assert any(line.startswith("[mcl-d1] sysctl -q -w net.ipv4.ip_forward=0 ") for line in lines)
    assert "[mcl-d1] ip link set d1-eth0 up" in lines
    assert "[mcl-d1] ip route replace 224.0.0.0/4 dev d1-eth0" in lines
    assert any("route replace 10.0.1.0/24 via 10.0.2.1 dev d1-eth0" in line for line in lines)
    # the testbed gave the addresses: nothing adds one
    assert not any(" addr add " in line for line in lines)
    router = [str(c) for c in setup_cmds(topo, plan, "rl")]
    assert any(line.startswith("[mcl-rl] sysctl -q -w net.ipv4.ip_forward=1 ") for line in router)
    assert not any("224.0.0.0/4" in line for line in router)
