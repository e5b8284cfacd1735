"""Stand-in testbed hosts on this machine: a network namespace with its own sshd per node.

What a testbed gives once an experiment is swapped in, built from a topology:

* one machine per host and router: a namespace ``mcl-<tag>-<node>`` (the tag is
  the test's, so the names never meet a lab's), with the topology's links as
  veth pairs named and addressed by mcclab's address plan, as the exported NS
  file or RSpec asks the testbed for;
* a control network, reached from a namespace ``mcl-<tag>-ctl`` that plays the
  controller's side: a bridge inside it, one veth to each machine holding the
  node's control address. Nothing is added to the root namespace, and the SSH
  client runs inside the control namespace (``ip netns exec`` as the
  inventory's ``mcclab_ssh_command``), or, with ``proxy=True``, in the root
  namespace as a controller's client does, reaching the control network through
  ``socat`` inside the control namespace (a ``ProxyCommand``): its forwards
  (``ssh -O forward -L 127.0.0.1:...``) then listen on the root's loopback,
  where the run's Prometheus is;
* an sshd per machine on its control address, with a throwaway host key and one
  authorized client key, both made in the test's temporary folder;
* an Ansible INI inventory naming them, with a known-hosts file so host keys
  are checked strictly;
* optionally (``shape=True``) the links' rates, delays and queues, as a
  testbed's delay nodes give them: the lab's own userspace link emulator,
  started in the machines' namespaces, so a run on the stand-ins meets the same
  bottleneck as a lab run;
* optionally (``clocks_ahead``) machines whose clocks disagree with the
  controller's, as separate machines' do: such a machine's sshd runs in a time
  namespace of its own (``unshare --time``) whose ``CLOCK_MONOTONIC`` and
  ``CLOCK_BOOTTIME`` are that many whole seconds ahead (negative: behind), so
  every process the backend starts there reads those clocks.

Everything is recorded in a lab record under the machine-wide lab lock
(``nspair.recorded_lab``) before it is made; teardown removes exactly that:
the sshds by their recorded process groups, then the namespaces.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from nspair import recorded_lab

from mcclab.commands import cmd
from mcclab.execute import Runner
from mcclab.links.emulation import UserspaceEmulation
from mcclab.model.addressing import AddressPlan, plan_addresses
from mcclab.model.topology import Topology
from mcclab.net.node_config import netns_name
from mcclab.net.setns import NETNS_DIR
from mcclab.state import LabState
from mcclab.testbed.inventory import Host, ansible_ini, nodes_needing_hosts

SSHD = "/usr/sbin/sshd"
SSHD_CONFIG = """\
Port 22
HostKey {host_key}
AuthorizedKeysFile {authorized}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
MaxSessions 64
MaxStartups 64
"""


@dataclass
class StandIns:
    """The stand-in hosts of one test."""

    tag: str
    state: LabState
    control_ns: str
    plan: AddressPlan
    inventory: Path
    hosts: dict[str, Host]

    def netns(self, node: str) -> str:
        """The namespace standing in for ``node``'s machine."""
        return netns_name(f"{self.tag}-{node}")


def _keygen(path: Path) -> str:
    """A fresh ed25519 key pair at ``path``; its public line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mcclab-standin",
                    "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


def _links(runner: Runner, topo: Topology, plan: AddressPlan, ns: dict[str, str]) -> None:
    """The topology's links as veth pairs between the machines, named and addressed by
    the plan and up, as the testbed gives them."""
    for link in topo.links:
        a, b = link.endpoints
        if a not in ns or b not in ns:
            continue  # a link to a node left out (stand_ins' ``only``)
        ia, ib = plan.iface_towards(a, b), plan.iface_towards(b, a)
        runner.run(cmd("ip", "-n", ns[a], "link", "add", ia.name, "type", "veth", "peer",
                       "name", ib.name, "netns", ns[b]))
        for node, iface in ((a, ia), (b, ib)):
            runner.run(cmd("ip", "-n", ns[node], "addr", "add", str(iface.address),
                           "dev", iface.name))
            runner.run(cmd("ip", "-n", ns[node], "link", "set", iface.name, "up"))


def _control(runner: Runner, plan: AddressPlan, ctl: str, ns: dict[str, str]) -> None:
    """A bridge inside the control namespace holding the gateway address, and one veth
    from it to each machine's ``ctl0``."""
    runner.run(cmd("ip", "-n", ctl, "link", "set", "lo", "up"))
    runner.run(cmd("ip", "-n", ctl, "link", "add", "br0", "type", "bridge"))
    runner.run(cmd("ip", "-n", ctl, "addr", "add", str(plan.control_gateway), "dev", "br0"))
    runner.run(cmd("ip", "-n", ctl, "link", "set", "br0", "up"))
    for i, (node, name) in enumerate(ns.items()):
        port = f"c{i}"
        runner.run(cmd("ip", "-n", ctl, "link", "add", port, "type", "veth", "peer", "name",
                       "ctl0", "netns", name))
        runner.run(cmd("ip", "-n", ctl, "link", "set", port, "master", "br0"))
        runner.run(cmd("ip", "-n", ctl, "link", "set", port, "up"))
        runner.run(cmd("ip", "-n", name, "link", "set", "lo", "up"))
        runner.run(cmd("ip", "-n", name, "addr", "add", str(plan.control[node]), "dev", "ctl0"))
        runner.run(cmd("ip", "-n", name, "link", "set", "ctl0", "up"))


def _wait_for_sshd(ctl: str, address: str, timeout: float = 15.0) -> None:
    """Until ``address``:22 accepts a connection from inside the control namespace."""
    deadline = time.monotonic() + timeout
    probe = ("import socket,sys; socket.create_connection((sys.argv[1], 22), timeout=1)"
             ".close()")
    while subprocess.run(["ip", "netns", "exec", ctl, "python3", "-c", probe, address],
                         capture_output=True, check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"sshd on {address} did not listen within {timeout:g} s")
        time.sleep(0.1)


def _shape(topo: Topology, plan: AddressPlan, state: LabState, ns: dict[str, str],
           folder: Path, seed: int) -> UserspaceEmulation:
    """The lab's userspace link emulation, its commands sent into the machines'
    namespaces (the lab's builders name ``mcl-<node>``; the machines are tagged)."""
    redirect = {netns_name(node): (lambda argv, spawn, name=name:
                                   ["nsenter", f"--net={NETNS_DIR / name}", "--", *argv])
                for node, name in ns.items()}
    emulation = UserspaceEmulation(topo, plan, state,
                                   Runner(transcript=folder / "links.log", remote=redirect),
                                   "the stand-in testbed's delay nodes", seed=seed)
    emulation.start(lambda *a: None)
    return emulation


@contextmanager
def stand_ins(topo: Topology, tag: str, folder: Path, shape: bool = False,
              seed: int = 1, only: Sequence[str] | None = None,
              proxy: bool = False,
              clocks_ahead: Mapping[str, int] | None = None) -> Iterator[StandIns]:
    """Stand-in hosts for every host and router of ``topo`` (no LANs), torn down after;
    ``shape`` emulates the links' parameters (with the link emulator's ``seed``);
    ``only`` builds just those nodes (and the links between them), for tests that
    need a machine rather than the topology; ``proxy`` runs the SSH client in the
    root namespace, through a proxy in the control namespace; ``clocks_ahead`` sets
    nodes' monotonic and boot clocks that many seconds ahead of this machine's."""
    if topo.names("lan"):
        raise ValueError("stand-in hosts do not build LANs")
    if not Path(SSHD).exists():
        raise RuntimeError(f"{SSHD} is missing: install openssh-server (make setup)")
    plan = plan_addresses(topo)
    nodes = [n for n in nodes_needing_hosts(topo) if only is None or n in only]
    if shape and only is not None:
        raise ValueError("shaped stand-ins need every node of the topology")
    ns = {node: netns_name(f"{tag}-{node}") for node in nodes}
    ctl = netns_name(f"{tag}-ctl")
    folder.mkdir(parents=True, exist_ok=True)
    host_pub = _keygen(folder / "host_ed25519")
    client_pub = _keygen(folder / "client_ed25519")
    (folder / "authorized_keys").write_text(client_pub + "\n")
    config = folder / "sshd_config"
    config.write_text(SSHD_CONFIG.format(host_key=folder / "host_ed25519",
                                         authorized=folder / "authorized_keys"))
    known = folder / "known_hosts"
    known.write_text("".join(f"{plan.control[n].ip} {host_pub}\n" for n in nodes))
    # sshd's privilege-separation directory (Debian's ssh.service makes it at boot).
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    runner = Runner(transcript=folder / "standins.log")
    with recorded_lab(f"standins-{tag}", [f"{tag}-ctl", *[f"{tag}-{n}" for n in nodes]]
                      ) as state:
        _control(runner, plan, ctl, ns)
        _links(runner, topo, plan, ns)
        if shape:
            _shape(topo, plan, state, ns, folder, seed)
        for node in nodes:
            log = folder / f"sshd-{node}.log"
            ahead = (clocks_ahead or {}).get(node)
            # unshare --time moves the clocks of the children it forks: sshd, and with
            # it every session, so everything the backend starts on this machine.
            clock = ([] if ahead is None else
                     ["unshare", "--time", "--kill-child", f"--monotonic={ahead}",
                      f"--boottime={ahead}"])
            with log.open("ab") as out:
                proc = subprocess.Popen(
                    ["ip", "netns", "exec", ns[node], *clock, SSHD, "-D", "-e", "-f",
                     str(config),
                     "-o", f"ListenAddress={plan.control[node].ip}"],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True)
            state.add_process(proc.pid, f"stand-in sshd {node}")
        for node in nodes:
            _wait_for_sshd(ctl, str(plan.control[node].ip))
        hosts = {node: Host(address=str(plan.control[node].ip), user="root",
                            identity_file=str(folder / "client_ed25519"),
                            control=str(plan.control[node].ip)) for node in nodes}
        routers = [n for n in nodes if topo.kind_of(n) == "router"]
        inventory = folder / "inventory.ini"
        client = (f'ssh -o "ProxyCommand=ip netns exec {ctl} socat - TCP:%h:%p"' if proxy
                  else f"ip netns exec {ctl} ssh")
        inventory.write_text(ansible_ini(
            hosts,
            settings={"mcclab_ssh_command": client,
                      "mcclab_strict_host_key_checking": "yes",
                      "mcclab_known_hosts": str(known)},
            groups=[("routers", routers)]))
        yield StandIns(tag, state, ctl, plan, inventory, hosts)


def control_dir(state: LabState) -> Path:
    """A short private folder for ssh's control sockets (a socket path has 108 bytes),
    recorded in ``state`` so that teardown removes it."""
    path = Path(tempfile.mkdtemp(prefix="mcs-", dir="/tmp"))
    state.add_dir(path)
    return path
