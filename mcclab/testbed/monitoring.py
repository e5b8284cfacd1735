"""Monitoring on allocated hosts: every endpoint on a host's loopback, scraped through SSH.

A lab run scrapes its agents on the control network and reads its routers from
the root namespace. On a testbed the controller has neither, and an endpoint on
a host's testbed address could be reached from the experiment's own network.
So here every endpoint listens on ``127.0.0.1`` of its host, and the
controller reaches it through a local forward of the host's master SSH
connection (``ssh -O forward -L 127.0.0.1:LOCAL:127.0.0.1:REMOTE``):

* each agent's ``--metrics ADDR:PORT`` becomes ``127.0.0.1:PORT`` on its host
  (:func:`loopback_metrics`);
* each router's host runs the lab's own router exporter
  (``mcclab.monitoring.exporter``, ``in_place``: the host is the router), on
  ``127.0.0.1:EXPORTER_PORT``; so does each host whose on/off UDP sink writes
  its log there (:func:`plan_sites`). iperf3's reports come back live through
  their SSH connection, so the controller's own exporter reads them, as in a lab;
* the controller's Prometheus, on its loopback, scrapes the forwards, with the
  target labels a lab run gives (:func:`forwarded_targets`), so the dashboards,
  ``tables/metrics.csv.gz`` and the analysis read a testbed run unchanged.

Everything above is data; :class:`HostMonitoring` carries it out for a
``TestbedLab`` (its ``monitoring_hosts``, which ``mcclab.monitoring.session``
calls). The exporters run like every other process on a host (a session of
their own, a pid file), so the lab's teardown ends them; it cancels the
forwards first (``-O cancel``) and removes the routers' counter tables.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import yaml

from mcclab.commands import Cmd
from mcclab.monitoring import exporter, lifecycle
from mcclab.monitoring import metric_names as mn
from mcclab.monitoring import prometheus as prom
from mcclab.monitoring.exporter import NFT_TABLE, ExporterConfig, IperfSource
from mcclab.net.node_config import netns_name
from mcclab.processes import spawn
from mcclab.slowdown import scaled
from mcclab.state import TrackedProcess
from mcclab.testbed.ssh import Ssh, SshError

if TYPE_CHECKING:
    from mcclab.model.addressing import AddressPlan
    from mcclab.testbed.inventory import Host
    from mcclab.testbed.lab import TestbedLab

LOOPBACK = "127.0.0.1"
EXPORTER_PORT = 9463  # the exporter's port on each host's loopback (a lab's exporter's too)
EXPORTER_WHAT = "monitoring exporter"
OPERATIONS = ("forward", "cancel")


class MonitoringRefused(ValueError):
    """A monitoring plan that cannot be carried out on the hosts (nothing was started)."""


@dataclass(frozen=True)
class Forward:
    """One local forward: ``LOCAL`` on the controller's loopback to ``REMOTE`` on the
    loopback of ``node``'s host."""

    node: str
    local_port: int
    remote_port: int

    def spec(self) -> str:
        """The ``-L`` argument: both ends on loopback, never a wildcard address."""
        return f"{LOOPBACK}:{self.local_port}:{LOOPBACK}:{self.remote_port}"


def forward_argv(ssh: Ssh, forward: Forward, operation: str) -> list[str]:
    """The local argv that asks ``forward.node``'s master connection to open
    (``forward``) or close (``cancel``) a forward; refused for another operation or a
    port outside 1-65535."""
    if operation not in OPERATIONS:
        raise MonitoringRefused(f"ssh -O {operation}: not a forwarding operation")
    for port in (forward.local_port, forward.remote_port):
        if not 1 <= port <= 65535:
            raise MonitoringRefused(f"forward {forward.spec()} to {forward.node}: port {port} "
                                    "is outside 1-65535")
    return [*ssh.inventory.ssh_command, *ssh.options(forward.node), "-O", operation,
            "-L", forward.spec(), "--", ssh.host(forward.node).target()]


def _split(address: str) -> tuple[str, int]:
    """``ADDR:PORT`` -> (ADDR, PORT); refused without a port."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise MonitoringRefused(f"{address!r} is no ADDRESS:PORT")
    return host, int(port)


def loopback_metrics(argv: Sequence[str]) -> list[str]:
    """``argv`` with its ``--metrics ADDR:PORT`` moved to ``127.0.0.1:PORT`` (the host's
    loopback); other words as they are."""
    out = list(argv)
    for i, word in enumerate(out[:-1]):
        if word == "--metrics":
            _, port = _split(out[i + 1])
            out[i + 1] = f"{LOOPBACK}:{port}"
    return out


@dataclass(frozen=True)
class Site:
    """An exporter on one host: that host's router (if it is one) and the sinks whose
    logs are written there."""

    node: str
    router: bool
    sources: tuple[IperfSource, ...] = ()


def plan_sites(routers: Sequence[str], sources: Sequence[IperfSource],
               remote_path: Callable[[str], str], hosts: Mapping[str, Host]
               ) -> tuple[list[Site], list[IperfSource]]:
    """Which hosts run an exporter, and the sources left to the controller's.

    Every router's host does; so does every host of an on/off UDP sink (format
    ``stats``), whose log is a file there (``remote_path`` says where). An iperf3
    server's report is its output, which comes back live through its SSH
    connection into the local log, so the controller's exporter reads it.
    """
    missing = sorted({*routers, *(s.node for s in sources)} - set(hosts))
    if missing:
        raise MonitoringRefused(f"no host for {', '.join(missing)}: their series cannot "
                                "be read")
    on_host: dict[str, list[IperfSource]] = {}
    here = []
    for src in sources:
        if src.format == "stats":
            on_host.setdefault(src.node, []).append(replace(src, log=remote_path(src.log)))
        else:
            here.append(src)
    nodes = [*routers, *sorted(n for n in on_host if n not in routers)]
    return [Site(n, n in routers, tuple(on_host.get(n, ()))) for n in nodes], here


def site_paths(remote_dir: str, node: str) -> tuple[str, str]:
    """(config file, topology file) of ``node``'s exporter in the host's lab folder."""
    folder = PurePosixPath(remote_dir) / "monitoring"
    return str(folder / f"exporter-{node}.json"), str(folder / "topology.yaml")


def site_config(site: Site, remote_dir: str) -> ExporterConfig:
    """The exporter of one host: on its loopback, its router read in place (the host is
    the router; links are the testbed's, so none)."""
    _, topology = site_paths(remote_dir, site.node)
    return ExporterConfig(listen=LOOPBACK, port=EXPORTER_PORT, lab_dir=remote_dir,
                          topology=topology, link_backend="testbed",
                          routers=[site.node] if site.router else [],
                          iperf=list(site.sources), in_place=True)


def site_files(site: Site, remote_dir: str, topology: str) -> dict[str, str]:
    """The files written on the host before its exporter starts: path -> text."""
    config, topology_file = site_paths(remote_dir, site.node)
    return {topology_file: topology, config: site_config(site, remote_dir).to_json()}


def site_command(site: Site, remote_dir: str, python: str = sys.executable) -> Cmd:
    """The exporter's command, in the node's namespace name: the lab's runner sends it
    to the node's host."""
    config, _ = site_paths(remote_dir, site.node)
    return Cmd(tuple(exporter.argv(python, Path(config))), netns_name(site.node))


def forwarded_targets(targets: Sequence[prom.Target], sites: Sequence[Site],
                      plan: AddressPlan, hosts: Mapping[str, Host], ports: Iterator[int]
                      ) -> tuple[list[prom.Target], list[Forward]]:
    """Every target as the controller's Prometheus scrapes it, and the forwards that
    carry them (local ports drawn from ``ports``).

    The controller's own exporter stays where it is (it must be on loopback). Each
    agent, planned on its node's control address, is scraped through a forward to
    the same port on its host's loopback, its labels unchanged. Each site's exporter
    gets a target labelled as the controller's exporter is, but with its node.
    Refused: a target off loopback that is no agent's, an agent whose address is not
    its node's control address or whose node has no host, an agent on the
    exporter's port of a host that runs one, and two endpoints on one host's port.
    """
    exporters = [t for t in targets if t.labels.get("component") == "exporter"]
    if len(exporters) != 1:
        raise MonitoringRefused(f"expected the controller's exporter among the targets, "
                                f"found {len(exporters)}")
    site_nodes = {s.node for s in sites}
    out: list[prom.Target] = []
    forwards: list[Forward] = []
    used: set[tuple[str, int]] = set()

    def forward(node: str, remote_port: int, labels: dict[str, str]) -> None:
        if (node, remote_port) in used:
            raise MonitoringRefused(f"two endpoints on port {remote_port} of {node}'s host")
        used.add((node, remote_port))
        fwd = Forward(node, next(ports), remote_port)
        forwards.append(fwd)
        out.append(prom.Target(f"{LOOPBACK}:{fwd.local_port}", labels))

    for target in targets:
        address, port = _split(target.address)
        if target.labels.get("component") != "agent":
            if address != LOOPBACK:
                raise MonitoringRefused(f"target {target.address} "
                                        f"({target.labels.get('node')}) is not on loopback")
            out.append(target)
            continue
        node = target.labels.get("node", "")
        if node not in hosts or node not in plan.control:
            raise MonitoringRefused(f"agent endpoint {target.address}: node {node!r} has "
                                    "no host")
        if address != str(plan.control[node].ip):
            raise MonitoringRefused(f"agent endpoint {target.address} is not on {node}'s "
                                    f"control address {plan.control[node].ip}")
        if port == EXPORTER_PORT and node in site_nodes:
            raise MonitoringRefused(f"agent endpoint {target.address} takes port "
                                    f"{EXPORTER_PORT}, the exporter's on {node}'s host")
        forward(node, port, dict(target.labels))
    for site in sites:
        forward(site.node, EXPORTER_PORT, {**exporters[0].labels, "node": site.node,
                                           "flow": mn.NO_FLOW, "protocol": mn.NO_FLOW})
    return out, forwards


def free_loopback_ports(taken: set[int] | None = None) -> Iterator[int]:
    """Ports free on this machine's loopback now, each once."""
    seen = set() if taken is None else taken
    while True:
        port = prom.free_port(LOOPBACK, 0)
        if port not in seen:
            seen.add(port)
            yield port


def counters_cleanup() -> list[str]:
    """Removes the IGMP/PIM counter table the exporter installs in a router (a lab's
    goes with its namespace; a host keeps it)."""
    return ["nft", "delete", "table", "ip", NFT_TABLE]


@dataclass
class HostMonitoring:
    """Monitoring's part on one TestbedLab's hosts (``session.RemoteSites``)."""

    lab: TestbedLab
    python: str = sys.executable
    sites: list[Site] = field(default_factory=list)
    forwards: list[Forward] = field(default_factory=list)  # open now

    def start(self, targets: list[prom.Target], sources: list[IperfSource],
              started: list[TrackedProcess]) -> tuple[list[prom.Target], list[IperfSource]]:
        """Start the hosts' exporters, open every forward, and wait until each exporter
        answers through its forward; return the targets and the controller's sources."""
        lab = self.lab
        sites, here = plan_sites(lab.topo.names("router"), sources, lab.remote_path,
                                 lab.inventory.hosts)
        scraped, forwards = forwarded_targets(targets, sites, lab.plan, lab.inventory.hosts,
                                              free_loopback_ports())
        self.sites = sites
        topology = yaml.safe_dump(lab.topo.model_dump(mode="json"), sort_keys=False)
        logs = lab.state.path / "logs"
        procs = []
        for site in sites:
            for path, text in site_files(site, lab.remote_dir, topology).items():
                lab.ssh.put(site.node, path, text)
            log = logs / f"monitoring-exporter-{site.node}.log"
            proc = spawn(lab.state, site_command(site, lab.remote_dir, self.python), log,
                         f"{EXPORTER_WHAT} {site.node}", runner=lab.runner)
            started.append(proc)
            procs.append((site, proc, log))
        for fwd in forwards:
            self.open(fwd)
        local = {(f.node, f.remote_port): f.local_port for f in forwards}
        timeout = scaled(1.0)
        for site, proc, log in procs:
            url = f"http://{LOOPBACK}:{local[(site.node, EXPORTER_PORT)]}/metrics"
            lifecycle.wait_ready(lambda url=url: lifecycle.answers(url, timeout), [proc],
                                 f"the exporter on {site.node}'s host", log)
        return scraped, here

    def open(self, fwd: Forward) -> None:
        """Open one forward on its host's master connection."""
        proc = subprocess.run(forward_argv(self.lab.ssh, fwd, "forward"), capture_output=True,
                              text=True, timeout=30, check=False)
        if proc.returncode != 0:
            raise SshError(f"ssh -O forward -L {fwd.spec()} to {fwd.node} failed: "
                           f"{proc.stderr.strip()[-300:]}")
        self.forwards.append(fwd)

    def cancel(self) -> None:
        """Close every open forward (the master connections stay)."""
        while self.forwards:
            fwd = self.forwards.pop()
            # A hung master: closing the connections (the lab's teardown) ends its forwards.
            with contextlib.suppress(subprocess.TimeoutExpired):
                subprocess.run(forward_argv(self.lab.ssh, fwd, "cancel"), capture_output=True,
                               timeout=30, check=False)

    def cleanup(self) -> None:
        """Remove the counter tables from the routers' hosts (after their exporters ended)."""
        for site in self.sites:
            if site.router:
                self.lab.ssh.run(site.node, counters_cleanup(), check=False)
        self.sites = []
