"""Inventories read into node -> host maps, and every refusal named with file and node."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcclab.model.loader import load_topology
from mcclab.testbed.inventory import (
    Host,
    InventoryError,
    ansible_ini,
    detect_format,
    load_inventory,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "inventory"


@pytest.fixture(scope="module")
def dumbbell():
    return load_topology(REPO / "topologies" / "webrc-dumbbell.yaml")


def test_ini_inventory_maps_hosts_and_group_vars(dumbbell):
    inv = load_inventory(FIXTURES / "dumbbell.ini", dumbbell)
    assert inv.format == "ansible-ini"
    assert list(inv.hosts) == ["rl", "rr", "s1", "d1", "s2", "d2"]
    assert inv.hosts["s1"] == Host(address="10.9.0.11", user="alice")
    assert inv.hosts["d1"].port == 2222 and inv.hosts["d1"].user is None
    assert inv.hosts["d2"].control == "192.168.7.14"
    # mcclab_node renames the machine; the group's vars reach its hosts
    assert inv.hosts["rl"] == Host(address="pc401.example.net", user="ops",
                                   identity_file="/keys/ops")
    assert inv.ssh_command == ("ip", "netns", "exec", "ctl", "ssh")
    assert inv.strict_host_key_checking == "yes"
    assert inv.known_hosts == "/keys/known_hosts"


def test_yaml_inventory_nests_groups_and_own_vars_win(dumbbell):
    inv = load_inventory(FIXTURES / "dumbbell.yaml", dumbbell)
    assert inv.format == "ansible-yaml"
    assert inv.hosts["s1"].user == "bob"  # from all's vars
    assert inv.hosts["d1"].user == "carol"  # the host's own
    assert inv.hosts["d2"].port == 2200 and inv.hosts["s2"].port == 22
    assert inv.hosts["rl"] == Host(address="10.9.0.1", user="bob", port=2022)
    assert inv.hosts["rr"].address == "10.9.0.2"
    assert inv.strict_host_key_checking == "accept-new"


def test_cloudlab_manifest_takes_logins_and_control_addresses(dumbbell):
    inv = load_inventory(FIXTURES / "dumbbell-manifest.xml", dumbbell)
    assert inv.format == "cloudlab"
    assert inv.hosts["rl"] == Host(address="pc401.emulab.net", user="alice",
                                   control="155.98.36.101")
    assert inv.hosts["d2"].address == "pc406.emulab.net"
    assert inv.ignored == ("tbsdelay0",)  # the testbed's delay node is no node of ours


def test_cloudlab_manifest_user_chooses_the_login(dumbbell):
    with pytest.raises(InventoryError) as err:
        load_inventory(FIXTURES / "dumbbell-manifest.xml", dumbbell, user="bob")
    # bob may log in to rl only: every other node is named
    assert "node 'rr': no <login> for user 'bob'" in str(err.value)
    assert not any(p.startswith("node 'rl'") for p in err.value.problems)


def test_emulab_node_list(dumbbell):
    inv = load_inventory(FIXTURES / "dumbbell.nodes", dumbbell, user="alice", port=22)
    assert inv.format == "emulab"
    assert inv.hosts["s2"] == Host(address="pc405.emulab.net", user="alice")
    assert inv.ignored == ("tbdelay0",)


def test_unknown_variable_and_unknown_host_are_refused(dumbbell):
    path = FIXTURES / "bad-unknown.ini"
    with pytest.raises(InventoryError) as err:
        load_inventory(path, dumbbell)
    text = str(err.value)
    assert f"{path}: host 's1': unknown variable 'colour'" in text
    assert f"{path}: host 'h9' is no host or router of topology 'webrc-dumbbell'" in text


def test_missing_nodes_shared_machines_and_bad_keys_all_named(dumbbell):
    path = FIXTURES / "bad-missing.yaml"
    with pytest.raises(InventoryError) as err:
        load_inventory(path, dumbbell)
    problems = err.value.problems
    assert "group 'all': unknown key 'routerz'" in problems
    for node in ("rr", "s2", "d2"):
        assert f"node {node!r} of topology 'webrc-dumbbell' has no host" in problems
    assert "nodes 's1' and 'd1' are both on 10.9.0.11:22 (one machine per node)" in problems
    assert all(line.startswith(f"{path}: ") for line in str(err.value).splitlines())


def test_bad_settings_refused(dumbbell, tmp_path):
    path = tmp_path / "inv.ini"
    path.write_text("[all:vars]\nmcclab_strict_host_key_checking=maybe\n"
                    "[routers:vars]\nmcclab_known_hosts=/x\n")
    with pytest.raises(InventoryError) as err:
        load_inventory(path, dumbbell)
    assert "mcclab_strict_host_key_checking: 'maybe' is not yes, no or accept-new" in str(
        err.value)
    assert "mcclab_known_hosts belongs in the vars of group 'all', not 'routers'" in str(
        err.value)


def test_port_and_control_address_checked(dumbbell, tmp_path):
    lines = [f"{n} ansible_host=10.9.0.{i}" for i, n in enumerate(dumbbell.nodes)]
    lines[0] += " ansible_port=70000"
    lines[1] += " mcclab_control=not-an-ip"
    path = tmp_path / "inv.ini"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InventoryError) as err:
        load_inventory(path, dumbbell)
    assert "host 'rl': port:" in str(err.value)
    assert "node 'rr': control address 'not-an-ip' is no IP address" in str(err.value)


def test_unreadable_and_malformed_files(dumbbell, tmp_path):
    with pytest.raises(InventoryError, match="cannot read"):
        load_inventory(tmp_path / "nope.ini", dumbbell)
    bad = tmp_path / "m.xml"
    bad.write_text("<rspec type='request'/>")
    with pytest.raises(InventoryError, match="not a manifest RSpec"):
        load_inventory(bad, dumbbell)
    bad.write_text("<rspec")
    with pytest.raises(InventoryError, match="not XML"):
        load_inventory(bad, dumbbell)
    emu = tmp_path / "n.nodes"
    emu.write_text("rl pc1\nrr pc2 extra\n")
    with pytest.raises(InventoryError, match="line 2: expected 'vname pnode.domain'"):
        load_inventory(emu, dumbbell, fmt="emulab")


def test_format_detection(tmp_path):
    assert detect_format(Path("x.yml"), "all: {}") == "ansible-yaml"
    assert detect_format(Path("x"), "<?xml version='1.0'?><rspec/>") == "cloudlab"
    assert detect_format(Path("x"), "# c\nrl pc1.emulab.net\n") == "emulab"
    assert detect_format(Path("x"), "rl ansible_host=pc1\n") == "ansible-ini"
    assert detect_format(Path("x"), "[routers]\nrl pc1\n") == "ansible-ini"


def test_written_ini_reads_back(dumbbell, tmp_path):
    hosts = {n: Host(address=f"172.30.0.{i + 2}", user="root", identity_file="/k",
                     control=f"172.30.0.{i + 2}") for i, n in enumerate(dumbbell.nodes)}
    path = tmp_path / "inv.ini"
    path.write_text(ansible_ini(hosts, {"mcclab_ssh_command": "ip netns exec c ssh"},
                                groups=[("routers", ["rl", "rr"])]))
    inv = load_inventory(path, dumbbell)
    assert inv.hosts == hosts
    assert inv.ssh_command == ("ip", "netns", "exec", "c", "ssh")
