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

**Pending metrics.** A protocol whose dashboards exist before its agent lists
its gauges in :data:`PENDING_CORE_GAUGES` (and runtime counters it needs in
:data:`PENDING_RUNTIME`): the contract its core must honour when it lands. When a
protocol is registered in ``agents/runtime/registry.py``, its entry moves to
:data:`CORE_GAUGES`; ``tests/unit/test_monitoring_contract.py`` fails until that
is done and until the core really exports every gauge listed for it. All four
papers' protocols (WEBRC, RLC, ORMCC, STAIR) are registered now.
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


# --- agent runtime (exists: agents/runtime/metrics.py) ----------------------------------

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

# Runtime counters the dashboards need that the runtime does not export yet.
PENDING_RUNTIME: tuple[MetricDef, ...] = ()

# --- protocol cores ------------------------------------------------------------------------

# Registered protocols: checked against the real cores by the contract test.
CORE_GAUGES: dict[str, ProtocolGauges] = {
    "cbr": ProtocolGauges("cbr", sender={"target_rate_bps": "configured rate, bit/s"}),
    "layered-cbr": ProtocolGauges(
        "layered-cbr",
        sender={"layers": "number of layers", "target_rate_bps": "sum of the layer rates"},
        receiver={"subscription_level": "layers joined (level k = layers 0..k-1)",
                  "subscribed_rate_bps": "sum of the joined layers' rates, bit/s"}),
    "rlc": ProtocolGauges(
        "rlc",
        sender={"layers": "number of layers", "sp_interval_seconds": "time between SPs",
                "cycle": "current burst cycle number",
                "target_rate_bps": "B_(l-1): all layers, bit/s of payload",
                "skipped_transmissions": "grid points skipped after a stall, cumulative"},
        receiver={
            "subscription_level": "layers joined",
            "level": "the paper's subscription level i (layers 0..i joined)",
            "level_rate_bps": "B_i of the current level, bit/s of payload",
            "sp_joins": "joins made at synchronisation points, cumulative",
            "deaf": "1 while in a deaf period after a drop, else 0",
            "deaf_periods": "deaf periods entered, cumulative",
            "rx_packets": "packets received on joined layers, cumulative",
            "lost_packets": "packets lost on joined layers, cumulative",
            "lost_burst_phase": "lost packets that belonged to a burst, cumulative",
            "lost_normal_phase": "lost packets of the normal phase, cumulative",
            "loss_events": "losses counted once per deaf period (burst losses), cumulative",
            "ignored_deaf": "normal-phase losses ignored in a deaf period, cumulative",
            "sp_seen": "SPs of the current level seen, cumulative",
            "sp_blocked": "SPs where the burst had a loss (no join), cumulative",
            "perceived_loss_rate": "lost over expected packets on joined layers",
            "burst_loss_rate": "loss events over expected packets",
        }),
    "ormcc": ProtocolGauges(
        "ormcc",
        sender={
            "rate_bps": "current sending rate, bit/s",
            "cr_id": "numeric id of the current representative (CR) receiver",
            "cr_switches": "CR changes, cumulative",
            "cr_valid": "1 while the CR is valid (packets carry its TRAC), else 0",
            "rtt_cr_s": "smoothed RTT between the source and the CR, seconds",
            "rtt_max_s": "largest RTT_cr seen, seconds",
            "mu_cr_bps": "E(mu^cr): the CR's average TRAC, bit/s",
            "sigma_cr_bps": "deviation of the CR's TRAC, bit/s",
            "t_cr_s": "E(T^cr): average CR response time at full load, seconds",
            "ci_rx": "CIs received, cumulative",
            "ci_rx_cr": "CIs received from the CR, cumulative",
            "ci_ignored": "CIs from other receivers that changed nothing, cumulative",
            "ci_malformed": "feedback datagrams that were not CIs, cumulative",
            "rate_cuts": "rate cuts, cumulative",
            "cr_timeouts": "CR checking timer expiries, cumulative",
        },
        receiver={
            "is_cr": "1 while this receiver is the CR, else 0",
            "ci_sent": "congestion indications sent, cumulative",
            "ci_suppressed": "congestion indications suppressed, cumulative",
            "rid": "this receiver's 32-bit id (matches the sender's cr_id)",
            "trac_avg_bps": "E(U): this receiver's average TRAC, bit/s",
            "trac_last_bps": "the last TRAC sample, bit/s",
            "loss_events": "packets that revealed a sequence gap, cumulative",
            "lost_packets": "packets missing in those gaps, cumulative",
        }),
    "webrc": ProtocolGauges(
        "webrc",
        sender={"waves": "number of wave channels (T)",
                "base_rate_bps": "base channel rate, bit/s",
                "waves_active": "active waves at any time (N)",
                "tsi": "current time slot index",
                "skipped_packets": "packets skipped by a sender woken too late, cumulative"},
        receiver={
            "artt_seconds": "ARTT: the receiver's average round-trip time estimate, seconds",
            "lossp": "LOSSP: the loss event probability estimate (0..1; 0 until start-up ends)",
            "trate_bps": "TRATE: the target reception rate from the equation, bit/s",
            "nwc": "NWC: the receiver's NWC variable (the wave channel count of RFC 3738)",
            "arr_pps": "ARR: anticipated reception rate, packets/s",
            "trr_pps": "TRR: true (averaged) reception rate, packets/s",
            "rr_pps": "RR: reception rate of the last epoch, packets/s",
            "startup": "1 during start-up (sec. 3.2), else 0",
            "wave_joins": "wave joins, cumulative (the runtime's joins_total adds the base)",
            "wave_leaves": "wave leaves, cumulative",
            "join_timeouts": "join timeouts, cumulative",
            "loss_events": "loss events, cumulative",
        }),
    "stair": ProtocolGauges(
        "stair",
        sender={"layers": "channels: CLs + NCLs + SLs",
                "cumulative_layers": "cumulative layers (CLs) sent",
                "noncumulative_layers": "non-cumulative layers (NCLs) sent",
                "stair_layers": "stair layers (SLs) sent",
                "target_rate_bps": "mean output over every layer, bit/s",
                "probes_echoed": "RTT probes echoed, cumulative"},
        receiver={
            "subscription_level": "units held on CLs and NCLs (base rate units)",
            "static_rate_bps": "rate of the CLs and NCLs held, bit/s",
            "cumulative_layers": "cumulative layers joined",
            "noncumulative_mask": "non-cumulative layers joined (bit i: NCL_i)",
            "stair_layer": "index of the stair layer joined (-1: none)",
            "stair_rtt_ms": "RTT the joined stair layer emulates, ms",
            "rtt_ms": "RTT estimate, ms",
            "mrtt_ms": "last join latency (MRTT), ms",
            "rtt_sample_ms": "last probe RTT sample (kernel timestamps, hosts' delay out), ms",
            "probe_host_ms": "time the last probe and its echo waited in the two hosts, ms",
            "increases": "additive increases, cumulative",
            "decreases": "multiplicative decreases, cumulative",
            "loss_events": "loss events, cumulative",
            "lost_packets": "packets lost (sequence gaps), cumulative",
            "periods": "stair periods ended, cumulative",
            "probes_sent": "RTT probes sent, cumulative",
            "probe_replies": "RTT probe replies received, cumulative",
            "bad_ext": "packets whose extension did not match their channel, cumulative",
        }),
}

# Protocols without an agent yet: THE CONTRACT their cores must export. Every
# gauge is a plain number, refreshed at least once a second through metrics().
PENDING_CORE_GAUGES: dict[str, ProtocolGauges] = {
}

# --- router and link exporter (exists: mcclab/monitoring/exporter.py) -------------------

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
    """Every metric some exporter or agent defines today, by name."""
    defs = [*RUNTIME, *core_metrics(CORE_GAUGES), *EXPORTER, *PROMETHEUS]
    return {m.name: m for m in defs}


def pending() -> dict[str, MetricDef]:
    """Metrics the dashboards expect that nothing exports yet, by name.

    A name a registered core already exports (e.g. ``subscription_level``) is
    available, not pending, even if a pending protocol lists it too; the
    dashboards then tell the protocols apart by the ``protocol`` label.
    """
    ready = available()
    defs = [*PENDING_RUNTIME, *core_metrics(PENDING_CORE_GAUGES)]
    return {m.name: m for m in defs if m.name not in ready}


def pending_protocols() -> list[str]:
    """Protocols whose dashboards cannot show data until their agent lands."""
    return sorted(PENDING_CORE_GAUGES)


def labels_of(name: str) -> set[str]:
    """Every label a series of metric ``name`` may carry (target labels included)."""
    m = available().get(name) or pending().get(name)
    if m is None:
        raise KeyError(name)
    return set(TARGET_LABELS) | set(m.labels)
