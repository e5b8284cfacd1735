"""Acceptance: during a run no packet with a lab address as its source leaves the root
namespace by an uplink (any root interface other than ``lo`` and mcclab's ``mcl*``).

An nftables table of this test's own (``inet mcclab_isolation_<pid>``, removed
afterwards) counts, on the postrouting hook (locally sent and forwarded
packets alike), packets leaving by an uplink whose source is in the lab's
pools (``addressing.experiment`` and ``addressing.control``, less the root's own
uplink addresses, which may lie in a pool). Only the window while this run's
lab exists is judged: another engineer's lab may run before or after it.

The counter is shown to work twice: before the run, three datagrams sent from
a pool address over a veth pair into a namespace of the test's own must be
counted as leaving; during the run, packets from lab addresses arriving in the
root on the lab's control bridge (the scrapes' answers) must be counted by the
same address set.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcclab.experiment.loader import resolve
from mcclab.model.addressing import plan_addresses
from mcclab.state import ROOT_IFACE_PREFIX, STATE_ROOT

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests" / "integration" / "signals-run.yaml"
LAB_WAIT = float(os.environ.get("MCCLAB_TEST_LAB_WAIT", "900"))
# About 3x the measured time (35 s on a 2-core VM); outside CI,
# tests/conftest.py adds the wait for the lab lock.
TIMEOUT = 120
pytestmark = [pytest.mark.root, pytest.mark.timeout(TIMEOUT)]

TABLE = f"mcclab_isolation_{os.getpid()}"
CONTROL_NS = f"isoctl-{os.getpid()}"
VETH_ROOT, VETH_NS = f"isoa{os.getpid() % 100000}", f"isob{os.getpid() % 100000}"
# TEST-NET-2, between the root and the test's own namespace only.
CONTROL_NET = ("198.51.100.1/30", "198.51.100.2")


def sh(*argv: str, check: bool = True) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=check).stdout


def uplink_addresses() -> list[ipaddress.IPv4Address]:
    """The root's own IPv4 addresses on its uplinks (not lo, not mcclab's)."""
    out = []
    for iface in json.loads(sh("ip", "-4", "-j", "addr", "show")):
        name = iface["ifname"]
        if name == "lo" or name.startswith(ROOT_IFACE_PREFIX):
            continue
        out += [ipaddress.IPv4Address(a["local"]) for a in iface.get("addr_info", [])]
    return out


def counted_sources(pools: list[ipaddress.IPv4Network],
                    own: list[ipaddress.IPv4Address]) -> list[ipaddress.IPv4Network]:
    """The pools less the root's own uplink addresses (their traffic is the host's)."""
    nets = list(pools)
    for addr in own:
        host = ipaddress.IPv4Network(addr)
        nets = [part for net in nets
                for part in (net.address_exclude(host) if host.subnet_of(net) else [net])]
    return nets


def ruleset(sources: list[ipaddress.IPv4Network]) -> str:
    elements = ", ".join(str(n) for n in sources)
    return f"""table inet {TABLE} {{
  counter leak {{ }}
  counter fromlab {{ }}
  set lab {{ type ipv4_addr; flags interval; elements = {{ {elements} }} }}
  chain post {{
    type filter hook postrouting priority 0; policy accept;
    oifname "lo" return
    oifname "{ROOT_IFACE_PREFIX}*" return
    ip saddr @lab counter name leak
  }}
  chain pre {{
    type filter hook prerouting priority 0; policy accept;
    iifname "{ROOT_IFACE_PREFIX}*" ip saddr @lab counter name fromlab
  }}
}}
"""


def packets(counter: str) -> int:
    data = json.loads(sh("nft", "-j", "list", "counter", "inet", TABLE, counter))
    return next(item["counter"]["packets"] for item in data["nftables"] if "counter" in item)


def send_from_pool(source: ipaddress.IPv4Address, count: int) -> None:
    """``count`` UDP datagrams from ``source`` (a pool address put on a veth of our own)
    to the other end of that veth, in a namespace of our own."""
    sh("ip", "netns", "add", CONTROL_NS)
    try:
        sh("ip", "link", "add", VETH_ROOT, "type", "veth", "peer", "name", VETH_NS)
        sh("ip", "link", "set", VETH_NS, "netns", CONTROL_NS)
        sh("ip", "addr", "add", CONTROL_NET[0], "dev", VETH_ROOT)
        sh("ip", "addr", "add", f"{source}/32", "dev", VETH_ROOT)
        sh("ip", "link", "set", VETH_ROOT, "up")
        sh("ip", "netns", "exec", CONTROL_NS, "ip", "addr", "add", f"{CONTROL_NET[1]}/30",
           "dev", VETH_NS)
        sh("ip", "netns", "exec", CONTROL_NS, "ip", "link", "set", VETH_NS, "up")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind((str(source), 0))
            for _ in range(count):
                sock.sendto(b"isolation control", (CONTROL_NET[1], 9))
        time.sleep(0.2)
    finally:
        sh("ip", "link", "del", VETH_ROOT, check=False)
        sh("ip", "netns", "del", CONTROL_NS, check=False)


def test_no_lab_address_leaves_by_an_uplink_during_a_run(tmp_path):
    topo = resolve(str(SPEC), "quick", []).topology
    pools = [topo.addressing.experiment, topo.addressing.control]
    sources = counted_sources(pools, uplink_addresses())
    plan = plan_addresses(topo)
    used = {i.address.ip for ifaces in plan.interfaces.values() for i in ifaces}
    # The pool's last host address: the plan hands out subnets from the start.
    spare = topo.addressing.experiment.broadcast_address - 1
    assert spare not in used
    subprocess.run(["nft", "-f", "-"], input=ruleset(sources), text=True, check=True)
    try:
        # Positive control: the rule counts pool-sourced packets leaving the root.
        before = packets("leak")
        send_from_pool(spare, 3)
        assert packets("leak") - before == 3

        proc = subprocess.Popen([sys.executable, "-m", "mcclab", "run", str(SPEC), "--profile",
                                 "quick", "--results", str(tmp_path), "--wait", str(LAB_WAIT)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        # The window: from this run's lab record to its removal (the lab lock is held).
        deadline = time.monotonic() + LAB_WAIT + 120
        state = None
        while state is None and time.monotonic() < deadline and proc.poll() is None:
            runs = list((tmp_path / "signals-run").glob("2*"))
            if runs and (STATE_ROOT / f"signals-run-{runs[0].name}").is_dir():
                state = STATE_ROOT / f"signals-run-{runs[0].name}"
            time.sleep(0.02)
        assert state is not None, proc.communicate()[0][-3000:]
        leak0, seen0 = packets("leak"), packets("fromlab")
        while state.is_dir() and proc.poll() is None:
            time.sleep(0.02)
        leak, seen = packets("leak") - leak0, packets("fromlab") - seen0
        out = proc.communicate(timeout=300)[0]
        print(f"isolation: {leak} lab-sourced packets left by an uplink; {seen} lab-sourced "
              f"packets reached the root from the lab's bridges ({', '.join(map(str, pools))})")
        assert proc.returncode == 0, out[-3000:]
        assert seen > 0, "the lab's own traffic was not seen: the window or the set is wrong"
        assert leak == 0
    finally:
        subprocess.run(["nft", "delete", "table", "inet", TABLE], check=False)
