"""STAIR's Grafana dashboard, collected by dashboards/build.py (``make dashboards``)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from dashboards.common import AT, dashboard, rate, receiver, series, throughput


def build() -> db.Dashboard:
    """STAIR: subscription (units), stair layer, RTT estimate, AIMD events."""
    p = "stair"
    d = dashboard("mcclab-stair", "STAIR", "STAIR receivers' subscription in base-rate units, "
                  "stair layer, RTT estimate and AIMD events (link dilation: the run's "
                  "Fig. 14 figure).")
    d.with_panel(series("Subscription (units)", "none",
                        [(receiver("mcc_agent_subscription_level", p), AT)],
                        "Units of the base rate held on cumulative and non-cumulative layers.",
                        step=True))
    d.with_panel(series("Stair layer", "none", [(receiver("mcc_agent_stair_layer", p), AT)],
                        "The stair layer each receiver is joined to (-1: none).", step=True))
    d.with_panel(series("RTT estimate", "ms", [(receiver("mcc_agent_rtt_ms", p), AT)],
                        "Each receiver's RTT estimate from its probes."))
    d.with_panel(series("Probe host delay", "ms",
                        [(receiver("mcc_agent_probe_host_ms", p), AT)],
                        "Time the last probe and its echo waited in the two hosts, left out "
                        "of the RTT sample (kernel receive timestamps)."))
    d.with_panel(series("AIMD events", "ops",
                        [(rate("mcc_agent_increases", protocol=p, role="receiver"),
                          "increases " + AT),
                         (rate("mcc_agent_decreases", protocol=p, role="receiver"),
                          "decreases " + AT)],
                        "Additive increases and multiplicative decreases per second."))
    d.with_panel(series("Throughput", "bps", [throughput(p)], "Received bit/s per receiver."))
    return d
