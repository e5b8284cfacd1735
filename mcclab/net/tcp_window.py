"""A ceiling on a TCP sender's congestion window, as ns-2's ``Agent/TCP window_`` gives.

ns-2 caps every TCP agent's window at ``window_`` packets (20 unless the script
says otherwise). Linux has the same cap per connection (``snd_cwnd_clamp``) and
takes it from a route's locked ``cwnd`` metric, but reads the lock through the
TCP metrics cache, and a new connection only looks that cache up: the entry is
made when an earlier connection to the same address closes. Measured on kernel
6.18 (docs/experiments.md), with a route ``cwnd lock 8`` alone: a first connection
reached cwnd 136, one after a connection that had closed before the route existed
51 (that entry has no lock), and one after a connection that closed once the route
was in place stayed at 8.
So the setup installs the route, then ``prime`` drops any older cache entry for
the receiver's address, opens and closes one connection to it from the sender,
and checks that the cache holds the ceiling, all before any flow starts.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import subprocess
import sys
import time

from mcclab.commands import Cmd, cmd
from mcclab.net.setns import NETNS_DIR, enter_netns, setns_fd

PRIME_TIMEOUT_S = 5.0


def clamp_cmds(sender_ns: str, receiver_ns: str, dest: ipaddress.IPv4Address,
               gateway: ipaddress.IPv4Address | None, dev: str, segments: int,
               python: str = sys.executable) -> list[Cmd]:
    """Route ``dest`` with a locked cwnd of ``segments``, then prime the metrics cache."""
    via = ("via", str(gateway)) if gateway is not None else ()
    return [
        cmd("ip", "route", "replace", f"{dest}/32", *via, "dev", dev,
            "cwnd", "lock", segments, netns=sender_ns),
        cmd(python, "-m", "mcclab.net.tcp_window", "--listen-netns", receiver_ns,
            "--address", dest, "--segments", segments, netns=sender_ns),
    ]


def cached_cwnd(address: str) -> int | None:
    """The cwnd the TCP metrics cache of this namespace holds for ``address``."""
    out = subprocess.run(["ip", "tcp_metrics", "show", address], capture_output=True,
                         text=True, check=False).stdout.split()
    return int(out[out.index("cwnd") + 1]) if "cwnd" in out else None


def prime(listen_netns: str, address: str, segments: int) -> None:
    """Close one connection to ``address`` from here; fail unless the cache then holds the cap."""
    # An entry left by an earlier connection predates the route and has no lock.
    subprocess.run(["ip", "tcp_metrics", "delete", address], capture_output=True, check=False)
    # The listener lives in the receiver's namespace (a socket keeps the namespace it
    # was made in). setns(2) directly: this runs once per TCP flow at bring-up, and
    # importing pyroute2 for it cost 125 ms a flow.
    here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        enter_netns(NETNS_DIR / listen_netns)
        try:
            listener = socket.create_server((address, 0))
        finally:
            setns_fd(here, "back to the sender's namespace")
    finally:
        os.close(here)
    with listener:
        client = socket.create_connection(listener.getsockname()[:2], timeout=PRIME_TIMEOUT_S)
        conn, _ = listener.accept()
        # The sender closes first, like a finished transfer; its close fills the cache.
        client.close()
        conn.close()
    deadline = time.monotonic() + PRIME_TIMEOUT_S
    while (seen := cached_cwnd(address)) != segments:
        if time.monotonic() > deadline:
            raise SystemExit(f"tcp_window: the TCP metrics cache holds cwnd {seen} for "
                             f"{address}, not {segments}; the window ceiling would not apply")
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    """Command line of ``prime`` (run inside the sender's namespace)."""
    parser = argparse.ArgumentParser(description=prime.__doc__)
    parser.add_argument("--listen-netns", required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--segments", type=int, required=True)
    args = parser.parse_args(argv)
    prime(args.listen_netns, args.address, args.segments)


if __name__ == "__main__":
    main()
