"""The router and link exporter: one process in the root namespace, on the control gateway.

    python -m mcclab.monitoring.exporter --config exporter.json

It serves ``/metrics`` on the control gateway address only (never 0.0.0.0) and
reads everything fresh at each scrape:

* **links**: the link emulator's counters per direction, through the same
  parsers the lab uses (``mcclab.links.userspace`` stats files, or ``tc -s``
  for the kernel backend);
* **routers**: ``/proc/net/ip_mr_vif`` and ``/proc/net/ip_mr_cache`` read
  inside each router's namespace (``setns`` in a helper thread), and IGMP and
  PIM messages per interface and direction from nft counters the exporter
  installs in each router (table ``ip mclmon``; it goes with the namespace);
* **TCP/UDP flows**: the iperf3 servers' per-second reports, so the
  dashboards can compare multicast flows with the TCP flows they compete with.

Metric names and labels are the contract in ``mcclab.monitoring.metric_names``.
A source that cannot be read is counted in ``mcc_exporter_errors_total{source}``
and skipped; a scrape never fails because one router or file is missing.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from mcclab.commands import cmd
from mcclab.execute import Runner
from mcclab.experiment.tables import (
    IntervalParser,
    IperfInterval,
    LogFollower,
    iperf_intervals,
)
from mcclab.links import kernel, userspace
from mcclab.links.counters import LinkCounters
from mcclab.links.plan import (
    Direction,
    Placement,
    kernel_placement,
    plan_directions,
    userspace_placement,
)
from mcclab.model.addressing import plan_addresses
from mcclab.model.topology import Topology
from mcclab.monitoring import metric_names as mn
from mcclab.monitoring.netns import read_net_files
from mcclab.net.node_config import netns_name

NFT_TABLE = "mclmon"
BASE = ("node", "flow", "protocol")


# --- configuration -------------------------------------------------------------------------

@dataclass
class IperfSource:
    """One iperf3 server (or on/off UDP sink) whose reports give a flow's received rate."""

    flow: str
    node: str
    protocol: str
    log: str
    format: str = "iperf3"  # or "stats": mcclab.traffic.udp_onoff's sink (JSON lines)


@dataclass
class ExporterConfig:
    """Everything the exporter needs, written by start_monitoring as JSON."""

    listen: str
    port: int
    lab_dir: str
    topology: str  # the run's topology.yaml (resolved, as the lab was built from it)
    link_backend: str
    routers: list[str] = field(default_factory=list)
    iperf: list[IperfSource] = field(default_factory=list)
    # True on a testbed host (mcclab.testbed.monitoring): the one router listed is this
    # machine, read here rather than inside a namespace mcl-<router>.
    in_place: bool = False

    def to_json(self) -> str:
        """The config file's text."""
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> ExporterConfig:
        """Read a config file's text."""
        data = json.loads(text)
        data["iperf"] = [IperfSource(**s) for s in data.get("iperf", [])]
        return cls(**data)


def argv(python: str, config: Path) -> list[str]:
    """The exporter's command line."""
    return [python, "-m", "mcclab.monitoring.exporter", "--config", str(config)]


# --- pure parsers ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Vif:
    """One line of /proc/net/ip_mr_vif."""

    index: int
    iface: str
    bytes_in: int
    pkts_in: int
    bytes_out: int
    pkts_out: int


@dataclass(frozen=True)
class Mroute:
    """One line of /proc/net/ip_mr_cache (unresolved entries have iif -1)."""

    group: str
    source: str
    iif: int
    pkts: int
    bytes: int
    wrong: int


def parse_vifs(text: str) -> list[Vif]:
    """Virtual interfaces and their forwarding counters."""
    out = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 6 and parts[0].isdigit():
            out.append(Vif(int(parts[0]), parts[1], int(parts[2]), int(parts[3]),
                           int(parts[4]), int(parts[5])))
    return out


def _hex_addr(text: str) -> str:
    """An address as the kernel prints it (%08X of the network-order word, host order)."""
    return socket.inet_ntoa(struct.pack("=I", int(text, 16)))


def parse_mroutes(text: str) -> list[Mroute]:
    """Multicast forwarding cache entries."""
    out = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 6:
            continue
        try:
            source = _hex_addr(parts[1])
            out.append(Mroute(_hex_addr(parts[0]), "*" if source == "0.0.0.0" else source,
                              int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5])))
        except (ValueError, struct.error):
            continue
    return out


def nft_counter_name(proto: str, direction: str, iface: str) -> str:
    """The named nft counter of (protocol, direction, interface)."""
    return f"{proto}_{direction}_{re.sub(r'[^A-Za-z0-9]', '_', iface)}"


def nft_script(ifaces: list[str]) -> str:
    """An nft script (re)creating table ip mclmon with IGMP and PIM counters per interface.

    Prerouting and postrouting see every IGMP/PIM packet on the wire of an
    interface, received or sent, whether or not a local socket wants it.
    """
    lines = [f"add table ip {NFT_TABLE}", f"delete table ip {NFT_TABLE}",
             f"add table ip {NFT_TABLE}",
             f"add chain ip {NFT_TABLE} pre {{ type filter hook prerouting priority -300; }}",
             f"add chain ip {NFT_TABLE} post {{ type filter hook postrouting priority 300; }}"]
    for iface in ifaces:
        for proto in ("igmp", "pim"):
            for direction, chain, key in (("in", "pre", "iifname"), ("out", "post", "oifname")):
                name = nft_counter_name(proto, direction, iface)
                lines.append(f"add counter ip {NFT_TABLE} {name}")
                lines.append(f'add rule ip {NFT_TABLE} {chain} {key} "{iface}" ip protocol '
                             f'{proto} counter name "{name}"')
    return "\n".join(lines) + "\n"


def parse_nft_counters(output: str) -> dict[str, int]:
    """Counter name -> packets, from ``nft -j list counters table ...``."""
    out = {}
    for item in json.loads(output or "{}").get("nftables", []):
        counter = item.get("counter")
        if counter:
            out[counter["name"]] = int(counter["packets"])
    return out


def parse_iperf(text: str) -> tuple[float | None, float]:
    """(rate of the last per-second report in bit/s, bytes over all reports) of a server log.

    After a test's end-of-test summary the rate is 0 (the test is over) until
    the next test's first report.
    """
    return tally_intervals(None, 0.0, iperf_intervals(text))


def tally_intervals(last: float | None, total: float, reports: list[IperfInterval | None]
                    ) -> tuple[float | None, float]:
    """``(last, total)`` of :func:`parse_iperf` carried on over further ``reports``."""
    for iv in reports:
        if iv is None:
            last = 0.0
            continue
        last = iv.rate_bps
        total += iv.rate_bps * (iv.end - iv.start) / 8.0
    return last, total


def parse_sink_stats(text: str) -> tuple[float | None, float]:
    """(rate over the last second in bit/s, bytes received) from an on/off UDP sink's log."""
    for line in reversed(text.splitlines()):
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut short by a read mid-write
        if isinstance(rec, dict) and rec.get("event") == "stats":
            return float(rec["throughput_bps"]), float(rec["total_rx_bytes"])
    return None, 0.0


class SourceTally:
    """What :func:`parse_iperf` or :func:`parse_sink_stats` says of one growing log,
    kept up to date from the lines appended since the last scrape: a scrape once a
    second that parsed each whole log cost more the longer the run (64 iperf3 servers
    over 1000 s)."""

    def __init__(self, src: IperfSource):
        self.stats = src.format == "stats"
        self.lines = LogFollower(Path(src.log))
        self.parser = IntervalParser()
        self.last: float | None = None
        self.total = 0.0

    def update(self) -> tuple[float | None, float]:
        """(rate of the newest report in bit/s, bytes so far), as the parse functions."""
        lines = self.lines.new_lines()
        if self.lines.restarted:
            self.parser, self.last, self.total = IntervalParser(), None, 0.0
        for line in lines:
            if self.stats:
                last, total = parse_sink_stats(line)
                if last is not None:
                    self.last, self.total = last, total
                continue
            self.last, self.total = tally_intervals(self.last, self.total,
                                                    self.parser.feed(line))
        return self.last, self.total


# --- sources ---------------------------------------------------------------------------------

class LinkSource:
    """The lab's link directions, read the way the lab's own LinkEmulation reads them."""

    def __init__(self, topo: Topology, backend: str, lab_dir: Path, runner: Runner):
        self.backend, self.lab_dir, self.runner = backend, lab_dir, runner
        plan = plan_addresses(topo)
        self.directions = plan_directions(topo) if backend in ("kernel", "userspace") else []
        place = userspace_placement if backend == "userspace" else kernel_placement
        self.placed: list[tuple[Direction, Placement]] = [
            (d, place(topo, plan, d)) for d in self.directions]

    def counters(self) -> list[LinkCounters]:
        """Counters of every emulated direction now."""
        if self.backend == "userspace":
            by_node: dict[str, list[tuple[Direction, Placement]]] = {}
            for d, where in self.placed:
                by_node.setdefault(where.node or "", []).append((d, where))
            out = []
            for node, placed in by_node.items():
                path = self.lab_dir / "links" / f"{node}.stats.json"
                out += userspace.parse_stats(json.loads(path.read_text()), placed)
            return out
        if self.backend == "kernel":
            return [kernel.parse_stats(self.runner.run(kernel.stats_cmd(where)), d, where,
                                       time.monotonic()) for d, where in self.placed]
        return []


class LabCollector:
    """A prometheus_client collector reading links, routers and iperf3 logs at each scrape."""

    def __init__(self, config: ExporterConfig, topo: Topology, runner: Runner | None = None):
        self.config = config
        self.topo = topo
        self.runner = runner or Runner()
        self.links = LinkSource(topo, config.link_backend, Path(config.lab_dir), self.runner)
        plan = plan_addresses(topo)
        self.router_ifaces = {r: [i.name for i in plan.interfaces[r]] for r in config.routers}
        self.errors: dict[str, int] = {}
        self._lock = threading.Lock()
        self._reading = threading.Lock()
        self._last: list[Metric] = []
        self._tallies: dict[str, SourceTally] = {}  # iperf3 / sink log -> what it said so far

    def install(self) -> None:
        """Create the IGMP/PIM counters in every router (replacing an earlier table)."""
        for router, ifaces in self.router_ifaces.items():
            self._nft_install(router, ifaces)

    def _netns(self, router: str) -> str | None:
        """The namespace a router's sources are read in (None: this machine is the router)."""
        return None if self.config.in_place else netns_name(router)

    def _nft_install(self, router: str, ifaces: list[str]) -> None:
        """Run the nft script inside the router (nft -f reads it from a file)."""
        path = Path(self.config.lab_dir) / "monitoring" / f"nft-{router}.nft"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(nft_script(ifaces))
        self.runner.run(cmd("nft", "-f", str(path), netns=self._netns(router)))

    def _error(self, source: str) -> None:
        with self._lock:
            self.errors[source] = self.errors.get(source, 0) + 1

    def describe(self) -> list[Metric]:
        """No static description: collect() reads live sources."""
        return []

    def collect(self) -> Iterator[Metric]:
        """All families, read now; while another scrape is reading, the last complete read.

        One read at a time: on a slow machine (the VM check's emulated guest) a
        read outlasts Prometheus's 1-s scrape interval, and overlapping reads
        would pile up (one thread each) and take the CPU the lab's agents need.
        """
        if not self._reading.acquire(blocking=False):
            yield from self._last
            return
        try:
            metrics = self._read()
            self._last = metrics
        finally:
            self._reading.release()
        yield from metrics

    def _read(self) -> list[Metric]:
        """Every family, read from the live sources."""
        out = [*self._link_families(), *self._router_families(), *self._iperf_families()]
        errors = CounterMetricFamily("mcc_exporter_errors", "Failed reads, by source",
                                     labels=[*BASE, "source"])
        for source in ("links", *(f"router:{r}" for r in self.config.routers), "iperf"):
            errors.add_metric([mn.ROOT_NODE, mn.NO_FLOW, mn.NO_FLOW, source],
                              self.errors.get(source, 0))
        out.append(errors)
        return out

    def _link_families(self) -> Iterable[Metric]:
        labels = [*BASE, *mn.LINK]
        fam = {
            "packets": CounterMetricFamily("mcc_link_packets", "", labels=labels),
            "bytes": CounterMetricFamily("mcc_link_bytes", "", labels=labels),
            "arrivals": CounterMetricFamily("mcc_link_arrivals", "", labels=labels),
            "drops": CounterMetricFamily("mcc_link_drops", "", labels=[*labels, "cause"]),
            "qpkts": GaugeMetricFamily("mcc_link_queue_packets", "", labels=labels),
            "qbytes": GaugeMetricFamily("mcc_link_queue_bytes", "", labels=labels),
            "limit": GaugeMetricFamily("mcc_link_queue_limit_packets", "", labels=labels),
            "capacity": GaugeMetricFamily("mcc_link_capacity_bps", "", labels=labels),
            "errors": CounterMetricFamily("mcc_link_emulator_errors", "", labels=labels),
        }
        for key, f in fam.items():
            f.documentation = _HELP.get(f.name, key)
        try:
            counters = self.links.counters()
        except Exception:  # noqa: BLE001 - counted, the scrape goes on
            self._error("links")
            counters = []
        params = {(d.link, d.src): d for d in self.links.directions}
        for c in counters:
            v = [c.src, mn.NO_FLOW, mn.NO_FLOW, str(c.link), c.src, c.dst]
            fam["packets"].add_metric(v, c.pkts_sent)
            fam["bytes"].add_metric(v, c.bytes_sent)
            fam["arrivals"].add_metric(v, c.pkts_in)
            fam["drops"].add_metric([*v, "queue"], c.drops_queue)
            fam["drops"].add_metric([*v, "loss"], c.drops_loss)
            fam["qpkts"].add_metric(v, c.qlen_pkts)
            fam["qbytes"].add_metric(v, c.qlen_bytes)
            fam["errors"].add_metric(v, c.errors)
            d = params.get((c.link, c.src))
            if d is not None and d.params.rate:
                fam["capacity"].add_metric(v, float(d.params.rate))
            if d is not None and d.params.queue is not None:
                fam["limit"].add_metric(v, float(d.params.queue.limit))
        return fam.values()

    def _router_families(self) -> Iterable[Metric]:
        vif_pkts = CounterMetricFamily("mcc_router_vif_packets", _HELP["mcc_router_vif_packets"],
                                       labels=[*BASE, "vif", "iface", "direction"])
        vif_bytes = CounterMetricFamily("mcc_router_vif_bytes", _HELP["mcc_router_vif_bytes"],
                                        labels=[*BASE, "vif", "iface", "direction"])
        mroutes = GaugeMetricFamily("mcc_router_mroutes", _HELP["mcc_router_mroutes"],
                                    labels=list(BASE))
        mr_pkts = CounterMetricFamily("mcc_router_mroute_packets",
                                      _HELP["mcc_router_mroute_packets"],
                                      labels=[*BASE, "group", "source", "iif"])
        mr_wrong = CounterMetricFamily("mcc_router_mroute_wrong_iif",
                                       _HELP["mcc_router_mroute_wrong_iif"],
                                       labels=[*BASE, "group", "source", "iif"])
        msgs = {p: CounterMetricFamily(f"mcc_router_{p}_packets", _HELP[f"mcc_router_{p}_packets"],
                                       labels=[*BASE, "iface", "direction"])
                for p in ("igmp", "pim")}
        for router in self.config.routers:
            base = [router, mn.NO_FLOW, mn.NO_FLOW]
            try:
                netns = self._netns(router)
                wanted = ["ip_mr_vif", "ip_mr_cache"]
                files = (read_net_files(netns, wanted) if netns is not None
                         else {n: Path(f"/proc/net/{n}").read_text() for n in wanted})
                vifs = parse_vifs(files["ip_mr_vif"])
                cache = parse_mroutes(files["ip_mr_cache"])
                counts = parse_nft_counters(self.runner.run(cmd(
                    "nft", "-j", "list", "counters", "table", "ip", NFT_TABLE,
                    netns=netns)))
            except Exception:  # noqa: BLE001 - counted, the scrape goes on
                self._error(f"router:{router}")
                continue
            names = {v.index: v.iface for v in vifs}
            for v in vifs:
                for direction, pkts, nbytes in (("in", v.pkts_in, v.bytes_in),
                                                ("out", v.pkts_out, v.bytes_out)):
                    vif_pkts.add_metric([*base, str(v.index), v.iface, direction], pkts)
                    vif_bytes.add_metric([*base, str(v.index), v.iface, direction], nbytes)
            mroutes.add_metric(base, len(cache))
            for m in cache:
                iif = names.get(m.iif, str(m.iif))
                mr_pkts.add_metric([*base, m.group, m.source, iif], m.pkts)
                mr_wrong.add_metric([*base, m.group, m.source, iif], m.wrong)
            for iface in self.router_ifaces[router]:
                for proto, fam in msgs.items():
                    for direction in ("in", "out"):
                        value = counts.get(nft_counter_name(proto, direction, iface), 0)
                        fam.add_metric([*base, iface, direction], value)
        return [vif_pkts, vif_bytes, mroutes, mr_pkts, mr_wrong, *msgs.values()]

    def _iperf_families(self) -> Iterable[Metric]:
        rate = GaugeMetricFamily("mcc_iperf_throughput_bps", _HELP["mcc_iperf_throughput_bps"],
                                 labels=list(BASE))
        total = CounterMetricFamily("mcc_iperf_bytes_received",
                                    _HELP["mcc_iperf_bytes_received"], labels=list(BASE))
        for src in self.config.iperf:
            tally = self._tallies.setdefault(src.log, SourceTally(src))
            try:
                last, nbytes = tally.update()  # nothing yet while the server has not started
            except OSError:
                self._error("iperf")
                continue
            labels = [src.node, src.flow, src.protocol]
            rate.add_metric(labels, last or 0.0)
            total.add_metric(labels, nbytes)
        return [rate, total]


_HELP = {m.name.removesuffix("_total"): m.help for m in mn.EXPORTER}
_HELP.update({m.name: m.help for m in mn.EXPORTER})


def registry_for(collector: LabCollector) -> CollectorRegistry:
    """A registry holding only the lab collector (no process or GC metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def main(args: list[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m mcclab.monitoring.exporter")
    parser.add_argument("--config", required=True, type=Path)
    opts = parser.parse_args(args)
    config = ExporterConfig.from_json(opts.config.read_text())
    topo = Topology.model_validate(yaml.safe_load(Path(config.topology).read_text()))
    collector = LabCollector(config, topo)
    collector.install()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server, _thread = start_http_server(config.port, addr=config.listen,
                                        registry=registry_for(collector))
    print(json.dumps({"event": "ready", "listen": f"{config.listen}:{config.port}"}),
          flush=True)
    stop.wait()
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
