"""Experiment overview: per-flow throughput, fairness, utilisation and loss of a run."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from dashboards.common import RATE, dashboard, sel, series, single

# Each flow's throughput, one value per flow: multicast flows from their receiver
# agents (mean over receivers), TCP/UDP flows from their iperf3 servers.
FLOWS = (f'(avg by (flow) ({sel("mcc_agent_throughput_bps", role="receiver")}) '
         f'or avg by (flow) ({sel("mcc_iperf_throughput_bps")}))')
# Jain's fairness index over the flows: (sum x)^2 / (n * sum x^2).
FAIRNESS = f"(sum({FLOWS}))^2 / (count({FLOWS}) * sum({FLOWS} ^ 2))"
UTILISATION = (f'rate({sel("mcc_link_bytes_total")}[{RATE}]) * 8 '
               f'/ {sel("mcc_link_capacity_bps")}')


def build() -> db.Dashboard:
    """The overview dashboard (runtime and exporter metrics only: shows data for any run)."""
    d = dashboard("mcclab-overview", "Experiment overview",
                  "Per-flow throughput, Jain's fairness index, link utilisation and loss of "
                  "one run. Multicast flows are measured by their receiver agents, TCP/UDP "
                  "flows by their iperf3 servers (mcc_iperf_*).")
    d.with_panel(series(
        "Throughput per flow", "bps",
        [(f'avg by (flow, protocol) ({sel("mcc_agent_throughput_bps", role="receiver")})',
          "{{flow}} ({{protocol}})"),
         (f'avg by (flow, protocol) ({sel("mcc_iperf_throughput_bps")})',
          "{{flow}} ({{protocol}})")],
        "Received bit/s per flow over the last second, mean over the flow's receivers.",
        width=16))
    d.with_panel(single("Fairness index (Jain)", "none", FAIRNESS,
                        "(Σx)² / (n·Σx²) over the flows' throughputs: 1 when all flows get "
                        "the same, 1/n when one flow gets everything.", width=8))
    d.with_panel(series(
        "Throughput per receiver", "bps",
        [(sel("mcc_agent_throughput_bps", role="receiver"), "{{flow}} @ {{node}}"),
         (sel("mcc_iperf_throughput_bps"), "{{flow}} @ {{node}}")],
        "Received bit/s at each receiving node."))
    d.with_panel(series(
        "Fairness index over time", "none", [(FAIRNESS, "Jain's index")],
        "Jain's fairness index of the flows' per-second throughputs."))
    d.with_panel(series(
        "Link utilisation", "percentunit", [(UTILISATION, "{{src}}→{{dst}}")],
        "Bits delivered per second over the emulated rate, per link direction."))
    d.with_panel(series(
        "Loss at receivers", "percentunit",
        [(sel("mcc_agent_loss_fraction", role="receiver"), "{{flow}} @ {{node}}")],
        "Lost / expected packets over the last second (sequence gaps), per multicast "
        "receiver."))
    d.with_panel(series(
        "Link drop rate", "percentunit",
        [(f'sum by (link, src, dst) (rate({sel("mcc_link_drops_total")}[{RATE}])) '
          f'/ sum by (link, src, dst) (rate({sel("mcc_link_arrivals_total")}[{RATE}]))',
          "{{src}}→{{dst}}")],
        "Packets dropped (queue and random loss) over packets arrived, per link direction."))
    d.with_panel(series(
        "Sending rate", "bps",
        [(sel("mcc_agent_send_rate_bps", role="sender"), "{{flow}} from {{node}}")],
        "Bit/s each multicast sender sent over the last second."))
    d.with_panel(series(
        "Scrape targets up", "none", [(sel("up"), "{{component}} {{node}} {{flow}} {{role}}")],
        "1 while Prometheus scrapes a target; agents are down before their flow starts.",
        step=True))
    return d
