"""WEBRC's Grafana dashboard, collected by dashboards/build.py (``make dashboards``)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from dashboards.common import (
    AT,
    FROM,
    dashboard,
    rate,
    receiver,
    sender,
    series,
    throughput,
)


def build() -> db.Dashboard:
    """WEBRC: ARTT, LOSSP, TRATE, NWC and joins."""
    p = "webrc"
    d = dashboard("mcclab-webrc", "WEBRC", "WEBRC receivers' equation inputs and outputs "
                  "(ARTT, LOSSP, TRATE), wave channels (NWC) and joins.")
    d.with_panel(series("TRATE and reception rate", "bps",
                        [(receiver("mcc_agent_trate_bps", p), "TRATE " + AT), throughput(p)],
                        "Target rate from the equation, and the rate actually received."))
    d.with_panel(series("ARTT", "s", [(receiver("mcc_agent_artt_seconds", p), AT)],
                        "Average round-trip time estimate per receiver."))
    d.with_panel(series("LOSSP", "percentunit", [(receiver("mcc_agent_lossp", p), AT)],
                        "Loss event probability estimate per receiver."))
    d.with_panel(series("NWC", "none", [(receiver("mcc_agent_nwc", p), AT)],
                        "The receivers' NWC variable.", step=True))
    d.with_panel(series("Joins and leaves", "ops",
                        [(rate("mcc_agent_joins_total", protocol=p), "joins " + AT),
                         (rate("mcc_agent_leaves_total", protocol=p), "leaves " + AT)],
                        "Joins and leaves per second (IGMP reports and leaves sent)."))
    d.with_panel(series("Sender", "bps",
                        [(sender("mcc_agent_send_rate_bps", p), "sent " + FROM),
                         (sender("mcc_agent_base_rate_bps", p), "base rate " + FROM)],
                        "Sending rate over all wave channels, and the base channel rate."))
    return d
