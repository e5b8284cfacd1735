"""ORMCC's Grafana dashboard, collected by dashboards/build.py (``make dashboards``)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from dashboards.common import AT, FROM, dashboard, rate, receiver, sender, series


def build() -> db.Dashboard:
    """ORMCC: rate, the congestion representative (CR) and congestion indications (CIs)."""
    p = "ormcc"
    d = dashboard("mcclab-ormcc", "ORMCC", "ORMCC sender rate, the current congestion "
                  "representative (CR) and its switches, CIs sent and suppressed.")
    d.with_panel(series("Sending rate", "bps",
                        [(sender("mcc_agent_rate_bps", p), "rate " + FROM),
                         (sender("mcc_agent_send_rate_bps", p), "sent " + FROM)],
                        "The rate the sender's controller sets, and what it sent."))
    d.with_panel(series("CR identity", "none",
                        [(sender("mcc_agent_cr_id", p), "CR id at " + FROM),
                         (receiver("mcc_agent_is_cr", p), "is CR: {{node}}")],
                        "The sender's current CR, and which receiver considers itself CR.",
                        step=True))
    d.with_panel(series("CR switches", "none",
                        [(sender("mcc_agent_cr_switches", p), FROM)],
                        "Changes of CR so far.", step=True))
    d.with_panel(series("Congestion indications", "ops",
                        [(rate("mcc_agent_ci_sent", protocol=p, role="receiver"), "sent " + AT),
                         (rate("mcc_agent_ci_suppressed", protocol=p, role="receiver"),
                          "suppressed " + AT)],
                        "CIs sent and suppressed per second, per receiver."))
    return d
