"""One dashboard per protocol of the papers: WEBRC, RLC, ORMCC and STAIR.

Their agents do not exist yet: the gauges used here are the contract in
``mcclab.monitoring.metric_names.PENDING_CORE_GAUGES``. Every panel filters on
``protocol``, so a run without that protocol shows "No data".
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from dashboards.common import dashboard, rate, sel, series

AT = "{{flow}} @ {{node}}"
FROM = "{{flow}} from {{node}}"
PENDING = (" Its agent does not exist yet: the panels use the metric contract of "
           "mcclab/monitoring/metric_names.py.")


def _rx(metric: str, protocol: str) -> str:
    return sel(metric, protocol=protocol, role="receiver")


def _tx(metric: str, protocol: str) -> str:
    return sel(metric, protocol=protocol, role="sender")


def _throughput(p: str) -> tuple[str, str]:
    return (_rx("mcc_agent_throughput_bps", p), "received " + AT)


def webrc() -> db.Dashboard:
    """WEBRC: ARTT, LOSSP, TRATE, NWC and joins."""
    p = "webrc"
    d = dashboard("mcclab-webrc", "WEBRC", "WEBRC receivers' equation inputs and outputs "
                  "(ARTT, LOSSP, TRATE), wave channels (NWC) and joins." + PENDING)
    d.with_panel(series("TRATE and reception rate", "bps",
                        [(_rx("mcc_agent_trate_bps", p), "TRATE " + AT), _throughput(p)],
                        "Target rate from the equation, and the rate actually received."))
    d.with_panel(series("ARTT", "s", [(_rx("mcc_agent_artt_seconds", p), AT)],
                        "Average round-trip time estimate per receiver."))
    d.with_panel(series("LOSSP", "percentunit", [(_rx("mcc_agent_lossp", p), AT)],
                        "Loss event probability estimate per receiver."))
    d.with_panel(series("NWC", "none", [(_rx("mcc_agent_nwc", p), AT)],
                        "The receivers' NWC variable.", step=True))
    d.with_panel(series("Joins and leaves", "ops",
                        [(rate("mcc_agent_joins_total", protocol=p), "joins " + AT),
                         (rate("mcc_agent_leaves_total", protocol=p), "leaves " + AT)],
                        "Joins and leaves per second (IGMP reports and leaves sent)."))
    d.with_panel(series("Sender", "bps",
                        [(_tx("mcc_agent_send_rate_bps", p), "sent " + FROM),
                         (_tx("mcc_agent_base_rate_bps", p), "base rate " + FROM)],
                        "Sending rate over all wave channels, and the base channel rate."))
    return d


def rlc() -> db.Dashboard:
    """RLC: subscription levels, joins at synchronisation points, deaf periods."""
    p = "rlc"
    d = dashboard("mcclab-rlc", "RLC", "RLC receivers' subscription levels, joins at "
                  "synchronisation points (SPs) and deaf periods." + PENDING)
    d.with_panel(series("Subscription level", "none",
                        [(_rx("mcc_agent_subscription_level", p), AT)],
                        "Layers joined by each receiver.", step=True))
    d.with_panel(series("Throughput", "bps", [_throughput(p)],
                        "Received bit/s per receiver."))
    d.with_panel(series("Joins at SPs", "ops",
                        [(rate("mcc_agent_sp_joins", protocol=p, role="receiver"), AT)],
                        "Joins made at synchronisation points, per second."))
    d.with_panel(series("Deaf periods", "none",
                        [(_rx("mcc_agent_deaf", p), "deaf " + AT),
                         (_rx("mcc_agent_deaf_periods", p), "periods " + AT)],
                        "1 while a receiver ignores losses after a drop; and the number of "
                        "deaf periods so far.", step=True))
    return d


def ormcc() -> db.Dashboard:
    """ORMCC: rate, the congestion representative (CR) and congestion indications (CIs)."""
    p = "ormcc"
    d = dashboard("mcclab-ormcc", "ORMCC", "ORMCC sender rate, the current congestion "
                  "representative (CR) and its switches, CIs sent and suppressed." + PENDING)
    d.with_panel(series("Sending rate", "bps",
                        [(_tx("mcc_agent_rate_bps", p), "rate " + FROM),
                         (_tx("mcc_agent_send_rate_bps", p), "sent " + FROM)],
                        "The rate the sender's controller sets, and what it sent."))
    d.with_panel(series("CR identity", "none",
                        [(_tx("mcc_agent_cr_id", p), "CR id at " + FROM),
                         (_rx("mcc_agent_is_cr", p), "is CR: {{node}}")],
                        "The sender's current CR, and which receiver considers itself CR.",
                        step=True))
    d.with_panel(series("CR switches", "none",
                        [(_tx("mcc_agent_cr_switches", p), FROM)],
                        "Changes of CR so far.", step=True))
    d.with_panel(series("Congestion indications", "ops",
                        [(rate("mcc_agent_ci_sent", protocol=p, role="receiver"), "sent " + AT),
                         (rate("mcc_agent_ci_suppressed", protocol=p, role="receiver"),
                          "suppressed " + AT)],
                        "CIs sent and suppressed per second, per receiver."))
    return d


def stair() -> db.Dashboard:
    """STAIR: subscription (units), stair layer, RTT estimate, AIMD events."""
    p = "stair"
    d = dashboard("mcclab-stair", "STAIR", "STAIR receivers' subscription in base-rate units, "
                  "stair layer, RTT estimate and AIMD events (link dilation: the run's "
                  "Fig. 14 figure).")
    d.with_panel(series("Subscription (units)", "none",
                        [(_rx("mcc_agent_subscription_level", p), AT)],
                        "Units of the base rate held on cumulative and non-cumulative layers.",
                        step=True))
    d.with_panel(series("Stair layer", "none", [(_rx("mcc_agent_stair_layer", p), AT)],
                        "The stair layer each receiver is joined to (-1: none).", step=True))
    d.with_panel(series("RTT estimate", "ms", [(_rx("mcc_agent_rtt_ms", p), AT)],
                        "Each receiver's RTT estimate from its probes."))
    d.with_panel(series("Probe host delay", "ms",
                        [(_rx("mcc_agent_probe_host_ms", p), AT)],
                        "Time the last probe and its echo waited in the two hosts, left out "
                        "of the RTT sample (kernel receive timestamps)."))
    d.with_panel(series("AIMD events", "ops",
                        [(rate("mcc_agent_increases", protocol=p, role="receiver"),
                          "increases " + AT),
                         (rate("mcc_agent_decreases", protocol=p, role="receiver"),
                          "decreases " + AT)],
                        "Additive increases and multiplicative decreases per second."))
    d.with_panel(series("Throughput", "bps", [_throughput(p)], "Received bit/s per receiver."))
    return d
