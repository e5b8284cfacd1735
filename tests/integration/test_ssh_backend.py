"""The SSH backend drives stand-in hosts exactly as testbed hosts: over ssh, from an inventory.

The stand-ins (``standins.py``) are namespaces of this test, one per node of the
default experiment's dumbbell, each with its own sshd on a control network that
exists only inside them. The backend reads the Ansible inventory the stand-ins
wrote, checks and configures every host, measures the clock offsets, starts FRR
on both routers and waits for PIM, then starts a multicast receiver on d1 and a
sender on s1 and sees the sender's packets arrive through the routers. Every
step goes through ``ssh``; nothing runs in a namespace by ``nsenter``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from standins import StandIns, control_dir, stand_ins

from mcclab.commands import cmd
from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import load_topology
from mcclab.net.node_config import netns_name
from mcclab.testbed.clocks import measure_all, read_clocks, write_clocks
from mcclab.testbed.hosts import configure
from mcclab.testbed.inventory import load_inventory
from mcclab.testbed.routers import RemoteRouters
from mcclab.testbed.ssh import Ssh, SshError, SshRunner

# timeout: measured about 35 s (routers and traffic) and 100 s (a 40-s run) on two cores
pytestmark = [pytest.mark.root, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
PROBE = [sys.executable, "-m", "mcclab.probes.mcast"]
GROUP = "232.1.2.3"


def _root_links() -> set[str]:
    out = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {link["ifname"] for link in json.loads(out)}


def _root_untouched(si: StandIns) -> None:
    """The root namespace holds nothing of the stand-ins: none of their interface names,
    no route into their control network (no other lab is up: they hold the lab lock)."""
    ours = {"br0", "ctl0", *(f"c{i}" for i in range(len(si.hosts)))}
    ours |= {i.name for ifaces in si.plan.interfaces.values() for i in ifaces}
    assert not _root_links() & ours
    routes = subprocess.run(["ip", "-4", "route", "show", "table", "all"],
                            capture_output=True, text=True, check=True).stdout
    assert str(si.plan.control_gateway.network) not in routes


def _rx_packets(ssh: Ssh, node: str, iface: str) -> int:
    """Packets ``iface`` of ``node``'s host has received, read over ssh."""
    stats = json.loads(ssh.run(node, ["ip", "-j", "-s", "link", "show", iface]))
    return int(stats[0]["stats64"]["rx"]["packets"])


def _events(log: Path) -> list[dict]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def test_ssh_backend_on_stand_in_hosts(tmp_path):
    topo = load_topology(REPO / "topologies" / "webrc-dumbbell.yaml")
    tag = f"sb{os.getpid() % 100000}"  # this test's own names, never a lab's
    with stand_ins(topo, tag, tmp_path / "standins") as si:
        # the testbed's machines exist; the root namespace gained nothing
        _root_untouched(si)
        inventory = load_inventory(si.inventory, topo)
        assert inventory.ssh_command[:3] == ("ip", "netns", "exec")
        ssh = Ssh(inventory, control_dir(si.state), state=si.state)
        remote = f"/tmp/mcclab-ssh-{tag}"
        si.state.add_dir(Path(remote))
        runner = SshRunner(ssh, transcript=tmp_path / "commands.log")
        routers = RemoteRouters(topo, si.plan, ssh, remote, tmp_path / "logs")
        try:
            # Each host says who it is: the namespace of its own node, reached by ssh.
            for node in inventory.hosts:
                seen = ssh.run(node, ["ip", "netns", "identify"]).strip()
                assert seen == si.netns(node)
                ssh.run(node, ["mkdir", "-p", remote])

            configure(runner, topo, si.plan)
            assert ssh.run("d1", ["sysctl", "-n", "net.ipv4.ip_forward"]).strip() == "0"
            assert ssh.run("rl", ["sysctl", "-n", "net.ipv4.ip_forward"]).strip() == "1"
            assert "10.0.1.0/24 via 10.0.2.1" in ssh.run("d1", ["ip", "route"])

            offsets = measure_all(ssh)
            write_clocks(tmp_path, offsets)
            assert set(read_clocks(tmp_path)) == set(inventory.hosts)
            for off in offsets.values():
                # one kernel, one clock: the offset is zero within its uncertainty
                assert 0 < off.rtt_s < 0.5
                assert abs(off.realtime_offset_s) <= off.uncertainty_s + 0.001
                assert abs(off.monotonic_offset_s) <= off.uncertainty_s + 0.001

            routers.start()
            took = routers.wait_ready(60.0)
            assert took < 60.0
            # the daemons run in the routers' machines, not in the root namespace
            pids = ssh.run("rl", ["sh", "-c", f"cat {remote}/nodes/rl/frr/*.pid"]).split()
            assert pids
            netns = subprocess.run(["ip", "netns", "identify", pids[0]], capture_output=True,
                                   text=True, check=True).stdout.strip()
            assert netns == si.netns("rl")

            source = str(si.plan.address_of("s1"))
            recv_log = tmp_path / "logs" / "recv-d1.out"
            recv = ssh.spawn("d1", [*PROBE, "recv", "--groups", GROUP, "--source", source,
                                    "--hold", "--timeout", "30"], recv_log, "receiver d1",
                             f"{remote}/recv-d1.pgid")
            d2_before = _rx_packets(ssh, "d2", "d2-eth0")
            send = ssh.spawn("s1", [*PROBE, "send", "--groups", GROUP, "--rate", "100",
                                    "--duration", "60"], tmp_path / "logs" / "send-s1.out",
                             "sender s1", f"{remote}/send-s1.pgid")
            deadline = time.monotonic() + 30
            while not any(e.get("event") == "first" for e in _events(recv_log)):
                assert recv.alive(), recv_log.read_text()
                assert time.monotonic() < deadline, recv_log.read_text()
                time.sleep(0.2)
            d1_first = _rx_packets(ssh, "d1", "d1-eth0")
            time.sleep(2.0)
            # about 200 packets in 2 s reached d1 through rl and rr; d2, which joined
            # nothing, saw no more than the routers' hellos and queries
            assert _rx_packets(ssh, "d1", "d1-eth0") - d1_first >= 150
            assert _rx_packets(ssh, "d2", "d2-eth0") - d2_before < 20

            pgid = int(ssh.run("d1", ["cat", f"{remote}/recv-d1.pgid"]))
            ssh.stop([send, recv], grace=1.0)
            # the remote group is gone, not just the ssh client
            assert ssh.run("d1", ["sh", "-c", f"kill -0 -{pgid} 2>/dev/null && echo alive"],
                           check=False).strip() == ""
            assert not recv.alive() and not send.alive()

            routers.collect()
            assert (tmp_path / "logs" / "rl" / "pimd.log").stat().st_size > 0
        finally:
            routers.stop()
            ssh.stop_all(grace=1.0)
            ssh.close()
        # an unreachable host is reported as such, naming its node
        subprocess.run(["ip", "-n", si.netns("d2"), "link", "set", "ctl0", "down"], check=True)
        fresh = SshRunner(Ssh(inventory, control_dir(si.state)))
        with pytest.raises(SshError, match="ssh to d2"):
            fresh.run(cmd("true", netns=netns_name("d2")))
    leftover = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                              check=True).stdout
    assert f"mcl-{tag}-" not in leftover


def _listens(netns: str | None, port: int) -> bool:
    """Whether anything accepts TCP connections on 127.0.0.1:``port`` (in ``netns``, or
    in the root namespace)."""
    probe = ("import socket,sys\ntry:\n socket.create_connection(('127.0.0.1', "
             "int(sys.argv[1])), timeout=2).close()\nexcept OSError:\n sys.exit(1)")
    where = ["ip", "netns", "exec", netns] if netns else []
    return subprocess.run([*where, sys.executable, "-c", probe, str(port)],
                          capture_output=True, check=False).returncode == 0


def test_default_experiment_runs_through_the_ssh_backend(tmp_path):
    """The quick default experiment, shortened to 40 s, on shaped stand-ins: the run
    completes into the usual folder, with both flows measured behind the bottleneck and
    the agents' and routers' series scraped from the hosts through SSH forwards.

    ``s1``, ``s2`` and ``d1`` have clocks of their own, as separate machines do (a time
    namespace each): the monotonic and boot clocks of s1 (WEBRC's sender) and s2 (the
    TCP sender) hours ahead of the controller's, d1's (WEBRC's receiver) behind. The
    agents' logs and the TCP client's armed start come back on the controller's
    clock."""
    from mcclab.experiment.loader import resolve
    from mcclab.experiment.runner import RunOptions, execute
    from mcclab.testbed.lab import REMOTE_ROOT, TestbedLabs

    resolved = resolve("default", "quick", ["duration=40s", "warmup=20s"])
    topo = resolved.topology
    tag = f"sr{os.getpid() % 100000}"
    # Behind by more than the run lasts, and no further than this machine's clock goes
    # back (a clock cannot be set before its zero).
    ahead = {"s1": 12345, "s2": 23456,
             "d1": -min(4321, int(time.clock_gettime(time.CLOCK_BOOTTIME)) // 2)}
    # proxy: the ssh client (and so its forwards) in the root namespace, with Prometheus
    with stand_ins(topo, tag, tmp_path / "standins", shape=True,
                   seed=resolved.experiment.seed, proxy=True, clocks_ahead=ahead) as si:
        labs = TestbedLabs(load_inventory(si.inventory, topo), control_dir(si.state))
        run_dir = execute(resolved, RunOptions(results=tmp_path / "results", lab=labs,
                                               started=labs.started, fork=False))
        remote_left = list(Path(REMOTE_ROOT).glob(f"default-{run_dir.name}*"))
        # teardown ended the routers' exporters and removed their counter tables
        for router in ("rl", "rr"):
            assert not _listens(si.netns(router), 9463), router
            tables = subprocess.run(["ip", "netns", "exec", si.netns(router), "nft", "list",
                                     "tables"], capture_output=True, text=True, check=True)
            assert "mclmon" not in tables.stdout, router
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "complete", record.get("error")
    clocks = json.loads((run_dir / "clocks.json").read_text())
    assert set(clocks["hosts"]) == set(topo.nodes)
    for node, row in clocks["hosts"].items():
        # measured to within their uncertainty (and a millisecond for the hop inside)
        for clock in ("monotonic_offset_s", "boottime_offset_s"):
            assert abs(row[clock] - ahead.get(node, 0)) <= row["uncertainty_s"] + 1e-3, row
    moved = {(t["node"], t["what"]): t for t in clocks["translations"]}
    armed = moved[("s2", "logs/armed-starts.txt")]
    assert armed["clock"] == "boottime" and armed["values"] == 1, armed
    assert abs(armed["offset_s"] - 23456) < 1e-3, armed
    assert abs(moved[("s1", "logs/webrc-sender-s1.jsonl")]["offset_s"] - 12345) < 1e-3, moved
    assert moved[("d1", "logs/webrc-receiver-d1.jsonl")]["offset_s"] < -40, moved
    # the TCP client, armed on s2, began on time by the controller's clock (without the
    # translation its lag would be s2's 23456 s)
    starts = pd.read_csv(run_dir / "tables" / "starts.csv")
    client = starts[(starts["flow"] == "tcp") & (starts["role"] == "client")]
    assert len(client) == 1 and client["how"].item() == "armed", starts
    assert -0.1 < client["lag_s"].item() < 1.0, starts
    # the agents wrote their logs on the hosts; teardown brought them back and removed
    # the hosts' folders
    assert remote_left == []
    receiver_log = run_dir / "logs" / "webrc-receiver-d1.jsonl"
    assert any('"stats"' in line for line in receiver_log.read_text().splitlines())
    assert (run_dir / "logs" / "lab-nodes" / "rl" / "pimd.log").exists()
    rows = pd.read_csv(run_dir / "tables" / "per_second.csv")
    late = rows[rows["t"] > 25].groupby("flow")["throughput_bps"].mean()
    assert late["webrc"] > 0.3e6 and late["tcp"] > 0.3e6, late
    # both flows share the emulated 3.2 Mbit/s bottleneck: together at most its rate
    assert late["webrc"] + late["tcp"] < 3.3e6, late

    # monitoring: Prometheus on the controller scraped every endpoint on the hosts'
    # loopback through a forward, and the run kept the series
    monitoring = json.loads((run_dir / "logs" / "monitoring.json").read_text())
    assert monitoring["notes"] == [] and monitoring["prometheus"], monitoring
    targets = json.loads((run_dir / "logs" / "monitoring" / "targets.json").read_text())
    scraped = {(t["labels"]["node"], t["labels"]["component"]) for t in targets}
    assert scraped == {("root", "exporter"), ("rl", "exporter"), ("rr", "exporter"),
                       ("s1", "agent"), ("d1", "agent")}, scraped
    assert all(t["targets"][0].startswith("127.0.0.1:") for t in targets), targets
    # the forwards were cancelled with the run
    for t in targets:
        assert not _listens(None, int(t["targets"][0].rsplit(":", 1)[1])), t
    series = pd.read_csv(run_dir / "tables" / "metrics.csv.gz", low_memory=False)
    assert series["run"].eq(run_dir.name).all()
    assert not series[["node", "flow", "protocol"]].isna().any().any()
    rx = series[(series["metric"] == "mcc_agent_throughput_bps") & (series["node"] == "d1")]
    assert set(rx["flow"]) == {"webrc"} and rx["value"].max() > 0.3e6
    assert not series[(series["metric"].str.startswith("mcc_agent_"))
                      & (series["node"] == "s1")].empty
    # the routers, read on their own hosts: PIM sent by both, multicast forwarded by rl
    pim = series[(series["metric"] == "mcc_router_pim_packets_total")
                 & (series["direction"] == "out")]
    assert set(pim[pim["value"] > 0]["node"]) == {"rl", "rr"}
    vif = series[(series["metric"] == "mcc_router_vif_packets_total") & (series["node"] == "rl")
                 & (series["direction"] == "out")]
    assert vif["value"].max() > 100
    tcp = series[(series["metric"] == "mcc_iperf_throughput_bps") & (series["flow"] == "tcp")]
    assert tcp["value"].max() > 0.3e6


def test_a_tcp_window_ceiling_is_primed_on_the_stand_in_hosts(tmp_path):
    """The default experiment with ORMCC's TCP model, whose window ceiling (20 packets)
    the lab primes by entering two namespaces: on hosts the locked route goes to s2's
    host, a listener runs on d2's host and the primer on s2's, and the run completes
    with s2's metrics cache holding the ceiling for d2's address."""
    from mcclab.experiment.loader import resolve
    from mcclab.experiment.runner import RunOptions, execute
    from mcclab.testbed.lab import TestbedLabs

    resolved = resolve("default", "quick", ["duration=20s", "warmup=5s", "flows.tcp.start=2s",
                                            "tcp.model=ormcc"])
    topo = resolved.topology
    d2 = str(plan_addresses(topo).address_of("d2"))
    with stand_ins(topo, f"sw{os.getpid() % 100000}", tmp_path / "standins", shape=True,
                   seed=resolved.experiment.seed, proxy=True) as si:
        labs = TestbedLabs(load_inventory(si.inventory, topo), control_dir(si.state))
        run_dir = execute(resolved, RunOptions(results=tmp_path / "results", lab=labs,
                                               started=labs.started, fork=False))
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "complete", record.get("error")
    # what the primer on s2's host found in its cache, checked before the flows started
    assert (run_dir / "logs" / "tcp-windows.log").read_text() == f"s2: {d2} cwnd 20\n"
    rows = pd.read_csv(run_dir / "tables" / "per_second.csv")
    assert rows[rows["flow"] == "tcp"]["throughput_bps"].max() > 0.1e6
