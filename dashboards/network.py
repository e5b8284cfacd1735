"""Routers & links: queues, drops, multicast forwarding, IGMP and PIM rates."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from dashboards.common import dashboard, rate, sel, series

LINK = "{{src}}→{{dst}}"


def build() -> db.Dashboard:
    """The routers and links dashboard (exporter metrics only)."""
    d = dashboard("mcclab-network", "Routers & links",
                  "Per link direction: queue occupancy, drops and throughput from the link "
                  "emulator; per router: multicast forwarding (ip_mr_vif, ip_mr_cache) and "
                  "IGMP/PIM messages (nft counters).")
    d.with_panel(series(
        "Queue occupancy", "none", [(sel("mcc_link_queue_packets"), LINK)],
        "Packets waiting in each direction's queue.", step=True))
    d.with_panel(series(
        "Queue occupancy (fraction of the limit)", "percentunit",
        [(f'{sel("mcc_link_queue_packets")} / {sel("mcc_link_queue_limit_packets")}', LINK)],
        "Queue length over the queue's capacity."))
    d.with_panel(series(
        "Drops by cause", "pps",
        [(f'sum by (src, dst, cause) ({rate("mcc_link_drops_total")})',
          "{{src}}→{{dst}} {{cause}}")],
        "Packets dropped per second: 'queue' (overflow, RED) and 'loss' (random loss)."))
    d.with_panel(series(
        "Link throughput", "bps", [(f'{rate("mcc_link_bytes_total")} * 8', LINK)],
        "IP bits delivered per second per direction."))
    d.with_panel(series(
        "Multicast forwarding per interface", "pps",
        [(rate("mcc_router_vif_packets_total"), "{{node}} {{iface}} {{direction}}")],
        "Packets per second through each router's multicast virtual interfaces "
        "(/proc/net/ip_mr_vif)."))
    d.with_panel(series(
        "Forwarding cache", "pps",
        [(rate("mcc_router_mroute_packets_total"), "{{node}} ({{source}}, {{group}})"),
         (f'sum by (node) ({rate("mcc_router_mroute_wrong_iif_total")})',
          "{{node}} wrong iif")],
        "Packets per second per (S,G) entry of each router's forwarding cache, and packets "
        "that arrived on the wrong interface."))
    d.with_panel(series(
        "Forwarding cache entries", "none", [(sel("mcc_router_mroutes"), "{{node}}")],
        "Entries in each router's multicast forwarding cache.", step=True))
    d.with_panel(series(
        "IGMP messages", "pps",
        [(f'sum by (node, iface, direction) ({rate("mcc_router_igmp_packets_total")})',
          "{{node}} {{iface}} {{direction}}")],
        "IGMP messages per second on each router interface, received (in) and sent (out)."))
    d.with_panel(series(
        "PIM messages", "pps",
        [(f'sum by (node, iface, direction) ({rate("mcc_router_pim_packets_total")})',
          "{{node}} {{iface}} {{direction}}")],
        "PIM messages per second on each router interface, received (in) and sent (out)."))
    d.with_panel(series(
        "Emulator and exporter errors", "none",
        [(sel("mcc_link_emulator_errors_total"), "emulator " + LINK),
         (sel("mcc_exporter_errors_total"), "exporter {{source}}")],
        "Should stay at 0: packets the link emulator lost outside the model, and sources the "
        "exporter failed to read."))
    return d
