"""Node configuration at paper scale: one process per change against one per node.

    python bench/routes.py [--routes 135] [--nodes 16]

A node of the n = 64 ORMCC star has a route to each of some 135 subnets, and
the star has 135 nodes. The benchmark makes ``--nodes`` network namespaces of
its own (``mcb-routes-<pid>-<i>``: loopback and a veth pair inside each, nothing
leaves them) and installs ``--routes`` routes in each, both ways in the same
run, one after the other, with the routes flushed in between: ``ip route
replace`` once per route (what the lab did), then one ``ip -batch -`` per node
fed every route (what ``mcclab.net.node_config.route_cmds`` builds now). Both
go through ``mcclab.execute.Runner`` as the lab's commands do. It prints the
wall time per way, per route and per node, and checks that every namespace
holds every route after each. Then the same for a host node's sysctls
(``mcclab.net.node_config.sysctl_cmds``: 9 keys on a host with one
interface): one ``sysctl`` process per key, then one per node, checking the
values read back. Needs root. Takes about 20 s with the defaults.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcclab.commands import Cmd, cmd, sysctl, sysctls  # noqa: E402
from mcclab.execute import Runner  # noqa: E402

GATEWAY = "10.254.0.1"


def routes(count: int) -> list[str]:
    """``count`` distinct /24 destinations, none of them d0's own subnet."""
    base = ipaddress.ip_network("10.0.0.0/24")
    return [str(ipaddress.ip_network((int(base.network_address) + (i << 8), 24)))
            for i in range(count)]


def make(names: list[str]) -> None:
    """Each namespace with loopback and a veth pair (both ends inside it), ``d0`` at
    10.254.0.2/24, up (this kernel may lack the dummy interface)."""
    for ns in names:
        subprocess.run(["ip", "netns", "add", ns], check=True)
        for argv in (["ip", "link", "set", "lo", "up"],
                     ["ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1"],
                     ["ip", "addr", "add", "10.254.0.2/24", "dev", "d0"],
                     ["ip", "link", "set", "d1", "up"],
                     ["ip", "link", "set", "d0", "up"]):
            subprocess.run(["ip", "netns", "exec", ns, *argv], check=True)


def count_routes(ns: str) -> int:
    """Routes via GATEWAY in ``ns``."""
    out = subprocess.run(["ip", "netns", "exec", ns, "ip", "-4", "route", "show", "via",
                          GATEWAY], capture_output=True, text=True, check=True).stdout
    return len(out.splitlines())


def flush(runner: Runner, names: list[str]) -> None:
    for ns in names:
        runner.run(cmd("ip", "route", "flush", "via", GATEWAY, netns=ns))


def one_per_route(dests: list[str], ns: str) -> list[Cmd]:
    return [cmd("ip", "route", "replace", d, "via", GATEWAY, "dev", "d0", netns=ns)
            for d in dests]


def batched(dests: list[str], ns: str) -> list[Cmd]:
    lines = "".join(f"route replace {d} via {GATEWAY} dev d0\n" for d in dests)
    return [Cmd(("ip", "-batch", "-"), ns, input=lines)]


# A host's keys as node_config sets them (values the kernel's defaults are not).
SYSCTLS: list[tuple[str, str | int]] = [
    ("net.ipv4.ip_forward", 0), ("net.ipv4.conf.all.rp_filter", 0),
    ("net.ipv4.conf.default.rp_filter", 0), ("net.ipv4.igmp_max_memberships", 1024),
    ("net.ipv4.igmp_max_msf", 1024), ("net.ipv4.icmp_ratelimit", 0),
    ("net.ipv4.conf.d0.rp_filter", 0), ("net.ipv4.conf.d0.force_igmp_version", 3),
    ("net.ipv4.conf.d0.igmpv3_unsolicited_report_interval", 100)]


def sysctls_hold(ns: str) -> bool:
    """Every key of SYSCTLS reads back its value in ``ns``."""
    out = subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-n", *(k for k, _ in SYSCTLS)],
                         capture_output=True, text=True, check=True).stdout.split()
    return out == [str(v) for _, v in SYSCTLS]


def reset_sysctls(runner: Runner, names: list[str]) -> None:
    """Values other than SYSCTLS', so that each way really writes."""
    for ns in names:
        runner.run(cmd("sysctl", "-q", "-w", "net.ipv4.igmp_max_memberships=20",
                       "net.ipv4.conf.d0.igmpv3_unsolicited_report_interval=1000", netns=ns))


def compare_sysctls(runner: Runner, names: list[str]) -> bool:
    """Both ways for SYSCTLS in every namespace; True when all read back after each."""
    ok = True
    print(f"\n{len(names)} namespaces x {len(SYSCTLS)} sysctls")
    print(f"{'way':<16} {'commands':>9} {'wall s':>8} {'ms/key':>9} {'ms/node':>8}")
    for way, commands in (
            ("one per key", [sysctl(ns, k, v) for ns in names for k, v in SYSCTLS]),
            ("one per node", [sysctls(ns, SYSCTLS) for ns in names])):
        reset_sysctls(runner, names)
        began = time.monotonic()
        runner.run_all(commands)
        took = time.monotonic() - began
        good = all(sysctls_hold(ns) for ns in names)
        ok &= good
        print(f"{way:<16} {len(commands):>9} {took:>8.2f} "
              f"{1e3 * took / (len(names) * len(SYSCTLS)):>9.3f} {1e3 * took / len(names):>8.1f}"
              + ("" if good else "  NOT SET"))
    return ok


def main(argv: list[str] | None = None) -> int:
    """Run both ways; 0 when every namespace held every route after each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, default=135)
    parser.add_argument("--nodes", type=int, default=16)
    args = parser.parse_args(argv)
    names = [f"mcb-routes-{os.getpid()}-{i}" for i in range(args.nodes)]
    dests = routes(args.routes)
    runner = Runner()
    ok = True
    try:
        make(names)
        print(f"{args.nodes} namespaces x {args.routes} routes")
        print(f"{'way':<16} {'commands':>9} {'wall s':>8} {'ms/route':>9} {'ms/node':>8}")
        for way, build in (("one per route", one_per_route), ("ip -batch", batched)):
            flush(runner, names)
            commands = [c for ns in names for c in build(dests, ns)]
            began = time.monotonic()
            runner.run_all(commands)
            took = time.monotonic() - began
            held = [count_routes(ns) for ns in names]
            ok &= all(h == args.routes for h in held)
            total = args.routes * args.nodes
            print(f"{way:<16} {len(commands):>9} {took:>8.2f} {1e3 * took / total:>9.3f} "
                  f"{1e3 * took / args.nodes:>8.1f}"
                  + ("" if all(h == args.routes for h in held) else f"  MISSING: {held}"))
        ok &= compare_sysctls(runner, names)
    finally:
        for ns in names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
