"""Per-group packet counters on a node's interfaces, read from nftables as evidence.

Counting in the prerouting hook sees every packet that arrives on an
interface, including multicast that no local socket joined, so it shows what
a link actually carried rather than what an application accepted.
"""

from __future__ import annotations

import json

from mcclab.commands import Cmd, cmd

TABLE = "mclprobe"


def counter_name(iface: str, group: str) -> str:
    """A stable nft counter name for (interface, group)."""
    return f"c_{iface}_{group}".replace("-", "_").replace(".", "_")


def install_cmds(netns: str, pairs: list[tuple[str, str]]) -> list[Cmd]:
    """Create named counters and the rules that feed them, one per (iface, group)."""
    script = [f"add table ip {TABLE}",
              f"add chain ip {TABLE} pre {{ type filter hook prerouting priority -300; }}"]
    for iface, group in pairs:
        name = counter_name(iface, group)
        script.append(f"add counter ip {TABLE} {name}")
        script.append(f'add rule ip {TABLE} pre iifname "{iface}" ip daddr {group} '
                      f'counter name "{name}"')
    return [cmd("nft", "; ".join(script), netns=netns)]


def read_cmd(netns: str) -> Cmd:
    """List the counters as JSON."""
    return cmd("nft", "-j", "list", "counters", "table", "ip", TABLE, netns=netns)


def parse(output: str) -> dict[str, int]:
    """Counter name -> packets, from `nft -j list counters` output."""
    packets = {}
    for item in json.loads(output).get("nftables", []):
        counter = item.get("counter")
        if counter:
            packets[counter["name"]] = int(counter["packets"])
    return packets
