"""Static routes at paper scale: one ``ip`` process per route against one ``ip -batch`` per node.

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
holds every route after each. Needs root. Takes about 20 s with the defaults.
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

from mcclab.commands import Cmd, cmd  # noqa: E402
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
    finally:
        for ns in names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
