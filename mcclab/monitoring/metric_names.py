"""The metric contract: every series the dashboards may query, in one place.

Three kinds of producers feed Prometheus during a run:

* the **agent runtime** (``agents/runtime/metrics.py``): ``mcc_agent_*`` for every protocol;
* the **protocol cores**: gauges returned by ``metrics()`` (or set with a ``Metric``
  action), exported by the runtime as ``mcc_agent_<name>``;
* the **router and link exporter** (``mcclab.monitoring.exporter``): ``mcc_link_*``,
  ``mcc_router_*``, ``mcc_iperf_*`` and ``mcc_exporter_*``.

Prometheus adds the target labels ``run``, ``experiment``, ``node``, ``flow``,
``protocol``, ``role`` and ``component`` (and ``job``, ``instance``), so every
series carries at least :data:`COMMON_LABELS`. Series that belong to no flow
(links, routers) carry ``flow="none"`` and ``protocol="none"``.

**Protocol gauges** are declared by each protocol in its own package (its SPEC's
``sender_gauges`` and ``receiver_gauges``, see docs/protocols.md) and assembled by
:func:`core_gauges` from the protocols the registry discovers;
``tests/unit/test_monitoring_contract.py`` checks that every core exports exactly
what its protocol declares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

PREFIX = "mcc_agent_"

# Labels every stored series of a run carries (target labels and relabelling).
COMMON_LABELS: tuple[str, ...] = ("run", "experiment", "node", "flow", "protocol")
# Labels Prometheus attaches from the generated target files, plus its own two.
TARGET_LABELS: tuple[str, ...] = (*COMMON_LABELS, "role", "component", "job", "instance")
# Value of flow/protocol on series that belong to no flow (links, routers, the exporter).
NO_FLOW = "none"
# The node label of the exporter's own target (it runs in the root namespace).
ROOT_NODE = "root"
# Every scrape job of a run has this job name.
JOB = "mcclab"

Kind = Literal["counter", "gauge"]


@dataclass(frozen=True)
class MetricDef:
    """One metric name with the labels it carries beyond :data:`TARGET_LABELS`."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()  # agent roles exporting it ('' = not an agent metric)


@dataclass(frozen=True)
class ProtocolGauges:
    """The core gauges one protocol exports, by role (names without ``mcc_agent_``)."""

    protocol: str
    sender: dict[str, str] = field(default_factory=dict)  # name -> meaning
    receiver: dict[str, str] = field(default_factory=dict)

    def metrics(self) -> list[MetricDef]:
        """The gauges as MetricDefs (a name both roles export is listed once)."""
        out: dict[str, MetricDef] = {}
        for role, gauges in (("sender", self.sender), ("receiver", self.receiver)):
            for name, meaning in gauges.items():
                old = out.get(name)
                roles = (*old.roles, role) if old else (role,)
                out[name] = MetricDef(PREFIX + name, "gauge", meaning, (), roles)
        return list(out.values())


# --- agent runtime (agents/runtime/metrics.py) -------------------------------------------

RUNTIME: tuple[MetricDef, ...] = (
    MetricDef(PREFIX + "packets_sent_total", "counter", "Packets sent", (), ("sender",)),
    MetricDef(PREFIX + "bytes_sent_total", "counter", "UDP payload bytes sent", (), ("sender",)),
    MetricDef(PREFIX + "packets_received_total", "counter", "Well-formed packets received", (),
              ("receiver",)),
    MetricDef(PREFIX + "bytes_received_total", "counter", "UDP payload bytes received", (),
              ("receiver",)),
    MetricDef(PREFIX + "send_errors_total", "counter", "Packets the kernel refused", (),
              ("sender",)),
    MetricDef(PREFIX + "malformed_datagrams_total", "counter", "Datagrams dropped, by reason",
              ("reason",), ("sender", "receiver")),
    MetricDef(PREFIX + "packets_lost", "gauge", "Packets lost (sequence gaps), cumulative", (),
              ("receiver",)),
    MetricDef(PREFIX + "loss_fraction", "gauge", "Lost / expected over the last second", (),
              ("receiver",)),
    MetricDef(PREFIX + "throughput_bps", "gauge", "Received bit/s over the last second", (),
              ("receiver",)),
    MetricDef(PREFIX + "send_rate_bps", "gauge", "Sent bit/s over the last second", (),
              ("sender",)),
    MetricDef(PREFIX + "joined_channels", "gauge", "Channels currently joined", (),
              ("receiver",)),
    MetricDef(PREFIX + "joins_total", "counter", "Joins carried out (Join actions)", (),
              ("receiver",)),
    MetricDef(PREFIX + "leaves_total", "counter", "Leaves carried out (Leave actions)", (),
              ("receiver",)),
    MetricDef(PREFIX + "feedback_sent_total", "counter", "Unicast feedback datagrams sent", (),
              ("sender", "receiver")),
    MetricDef(PREFIX + "feedback_received_total", "counter",
              "Well-formed unicast feedback datagrams received", (), ("sender", "receiver")),
)


# --- protocol cores ------------------------------------------------------------------------


def core_gauges() -> dict[str, ProtocolGauges]:
    """The gauges of every registered protocol, as each declares them in its own package
    (``SENDER_GAUGES`` and ``RECEIVER_GAUGES`` of its SPEC); the contract test checks them
    against the real cores."""
    # Imported here: the registry imports every protocol package, which the exporter and
    # the dashboards' label checks do not need until they ask for core gauges.
    from agents.runtime.registry import protocols

    return {name: ProtocolGauges(name, dict(spec.sender_gauges), dict(spec.receiver_gauges))
            for name, spec in protocols().items()}


# --- router and link exporter (mcclab/monitoring/exporter.py) ---------------------------

LINK = ("link", "src", "dst")
EXPORTER: tuple[MetricDef, ...] = (
    MetricDef("mcc_link_packets_total", "counter", "Packets delivered to the far end", LINK),
    MetricDef("mcc_link_bytes_total", "counter", "IP bytes delivered to the far end", LINK),
    MetricDef("mcc_link_arrivals_total", "counter", "Packets that reached the link", LINK),
    MetricDef("mcc_link_drops_total", "counter",
              "Packets dropped, by cause (queue: overflow/RED, loss: random loss)",
              (*LINK, "cause")),
    MetricDef("mcc_link_queue_packets", "gauge", "Packets waiting in the queue", LINK),
    MetricDef("mcc_link_queue_bytes", "gauge", "Bytes waiting in the queue", LINK),
    MetricDef("mcc_link_queue_limit_packets", "gauge", "Queue capacity in packets", LINK),
    MetricDef("mcc_link_capacity_bps", "gauge", "Emulated rate of the direction, bit/s", LINK),
    MetricDef("mcc_link_emulator_errors_total", "counter",
              "Packets lost by the emulator itself (should stay 0)", LINK),
    MetricDef("mcc_router_vif_packets_total", "counter",
              "Multicast packets forwarded per virtual interface (ip_mr_vif)",
              ("vif", "iface", "direction")),
    MetricDef("mcc_router_vif_bytes_total", "counter",
              "Multicast bytes forwarded per virtual interface (ip_mr_vif)",
              ("vif", "iface", "direction")),
    MetricDef("mcc_router_mroutes", "gauge", "Entries in the multicast forwarding cache"),
    MetricDef("mcc_router_mroute_packets_total", "counter",
              "Packets forwarded per (source, group) entry (ip_mr_cache)",
              ("group", "source", "iif")),
    MetricDef("mcc_router_mroute_wrong_iif_total", "counter",
              "Packets of an entry that arrived on the wrong interface",
              ("group", "source", "iif")),
    MetricDef("mcc_router_igmp_packets_total", "counter", "IGMP messages per interface",
              ("iface", "direction")),
    MetricDef("mcc_router_pim_packets_total", "counter", "PIM messages per interface",
              ("iface", "direction")),
    MetricDef("mcc_iperf_throughput_bps", "gauge",
              "Throughput of a TCP/UDP flow at its receiver over the last interval reported "
              "(iperf3 server or on/off UDP sink)"),
    MetricDef("mcc_iperf_bytes_received_total", "counter",
              "Bytes an iperf3 server or on/off UDP sink received (from its per-second reports)"),
    MetricDef("mcc_exporter_errors_total", "counter", "Failed reads, by source", ("source",)),
)

# Series Prometheus writes itself for every target.
PROMETHEUS: tuple[MetricDef, ...] = (
    MetricDef("up", "gauge", "1 if the last scrape of the target succeeded"),
    MetricDef("scrape_duration_seconds", "gauge", "Duration of the last scrape"),
    MetricDef("scrape_samples_scraped", "gauge", "Samples in the last scrape"),
)


def core_metrics(table: dict[str, ProtocolGauges]) -> list[MetricDef]:
    """Every core gauge of a protocol table, once per name."""
    out: dict[str, MetricDef] = {}
    for gauges in table.values():
        for m in gauges.metrics():
            old = out.get(m.name)
            roles = tuple(sorted(set(m.roles) | set(old.roles if old else ())))
            out[m.name] = MetricDef(m.name, m.kind, m.help, m.labels, roles)
    return list(out.values())


def available() -> dict[str, MetricDef]:
    """Every metric some exporter or agent defines, by name."""
    defs = [*RUNTIME, *core_metrics(core_gauges()), *EXPORTER, *PROMETHEUS]
    return {m.name: m for m in defs}


def labels_of(name: str) -> set[str]:
    """Every label a series of metric ``name`` may carry (target labels included)."""
    m = available().get(name)
    if m is None:
        raise KeyError(name)
    return set(TARGET_LABELS) | set(m.labels)
