"""``mcclab testbed check`` against a stand-in ssh client that answers for each host."""

from __future__ import annotations

import json
import sys

from typer.testing import CliRunner

from mcclab.cli import app
from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import load_topology
from tests.unit.test_testbed_inventory import FIXTURES, REPO

# 'ip -j -4 addr show' answers from $FAKE_IP/<host>.json; anything else runs here.
FAKE_SSH = """
import os, sys
args = sys.argv[1:]
if "-O" in args:
    sys.exit(0)
rest = args[args.index("--") + 1:]
host, command = rest[0], " ".join(rest[1:])
if command == "ip -j -4 addr show":
    path = os.path.join(os.environ["FAKE_IP"], host + ".json")
    if not os.path.exists(path):
        sys.stderr.write("ssh: connect to host " + host + ": No route to host\\n")
        sys.exit(255)
    sys.stdout.write(open(path).read())
    sys.exit(0)
os.execvp("sh", ["sh", "-c", command])
"""


def _setup(tmp_path, monkeypatch, skip: str = "", misname: str = ""):
    topo = load_topology(REPO / "topologies" / "webrc-dumbbell.yaml")
    plan = plan_addresses(topo)
    (tmp_path / "fake_ssh.py").write_text(FAKE_SSH)
    answers = tmp_path / "ip"
    answers.mkdir()
    monkeypatch.setenv("FAKE_IP", str(answers))
    lines = []
    for i, node in enumerate(topo.nodes):
        host = f"10.9.0.{i + 1}"
        lines.append(f"{node} ansible_host={host}")
        if node == skip:
            continue
        links = [{"ifname": ("eno1" if node == misname else iface.name), "addr_info": [
            {"family": "inet", "local": str(iface.address.ip),
             "prefixlen": iface.address.network.prefixlen}]}
            for iface in plan.interfaces[node]]
        (answers / f"{host}.json").write_text(json.dumps(links))
    lines += ["[all:vars]", f"mcclab_ssh_command={sys.executable} {tmp_path / 'fake_ssh.py'}"]
    inv = tmp_path / "inv.ini"
    inv.write_text("\n".join(lines) + "\n")
    return inv


def test_check_passes_when_every_host_matches(tmp_path, monkeypatch):
    inv = _setup(tmp_path, monkeypatch)
    result = CliRunner().invoke(app, ["testbed", "check", "default", "-i", str(inv), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["ok"] and set(out["hosts"]) == {"rl", "rr", "s1", "d1", "s2", "d2"}
    for row in out["hosts"].values():
        assert row["problems"] == []
        assert abs(row["clock"]["realtime_offset_s"]) <= row["clock"]["uncertainty_s"] + 0.002


def test_check_names_the_host_that_differs_or_cannot_be_reached(tmp_path, monkeypatch):
    inv = _setup(tmp_path, monkeypatch, skip="d2", misname="rr")
    result = CliRunner().invoke(app, ["testbed", "check", "default", "-i", str(inv), "--json"])
    assert result.exit_code == 1
    out = json.loads(result.output)
    assert not out["ok"]
    assert out["hosts"]["rr"]["problems"][0] == (
        "rr: 10.0.0.2/24 is on eno1, the plan names it rr-eth0 (rename the interface)")
    assert out["hosts"]["d2"]["problems"][0].startswith("ssh to d2 (10.9.0.6)")
    assert out["hosts"]["s1"]["problems"] == []


def test_check_refuses_an_inventory_that_does_not_map(tmp_path):
    result = CliRunner().invoke(app, ["testbed", "check", "default", "-i",
                                      str(FIXTURES / "bad-unknown.ini")])
    assert result.exit_code == 2
    assert "host 'h9' is no host or router of topology 'webrc-dumbbell'" in result.output
