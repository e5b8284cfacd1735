"""RLC's Grafana dashboard, collected by dashboards/build.py (``make dashboards``)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from dashboards.common import AT, dashboard, rate, receiver, series, throughput


def build() -> db.Dashboard:
    """RLC: subscription levels, joins at synchronisation points, deaf periods."""
    p = "rlc"
    d = dashboard("mcclab-rlc", "RLC", "RLC receivers' subscription levels, joins at "
                  "synchronisation points (SPs) and deaf periods.")
    d.with_panel(series("Subscription level", "none",
                        [(receiver("mcc_agent_subscription_level", p), AT)],
                        "Layers joined by each receiver.", step=True))
    d.with_panel(series("Throughput", "bps", [throughput(p)],
                        "Received bit/s per receiver."))
    d.with_panel(series("Joins at SPs", "ops",
                        [(rate("mcc_agent_sp_joins", protocol=p, role="receiver"), AT)],
                        "Joins made at synchronisation points, per second."))
    d.with_panel(series("Deaf periods", "none",
                        [(receiver("mcc_agent_deaf", p), "deaf " + AT),
                         (receiver("mcc_agent_deaf_periods", p), "periods " + AT)],
                        "1 while a receiver ignores losses after a drop; and the number of "
                        "deaf periods so far.", step=True))
    return d
