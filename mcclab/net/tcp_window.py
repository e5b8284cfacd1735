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
So the setup installs the route, then the primer drops any older cache entry for
the receiver's address, opens and closes one connection to it from the sender,
and checks that the cache holds the ceiling, all before any flow starts. One
process primes every flow of a run at once (``prime_all``), entering each
sender's and receiver's namespace in turn.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import select
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import NoReturn

from mcclab.commands import Cmd, cmd
from mcclab.net.setns import NETNS_DIR, Namespaces

PRIME_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Prime:
    """One sender's ceiling towards one receiver: what the primer must leave in the cache."""

    sender_ns: str
    listener_ns: str
    address: str
    segments: int

    def line(self) -> str:
        """The primer's input line for this pair."""
        return f"{self.sender_ns} {self.listener_ns} {self.address} {self.segments}"


def clamp_route(sender_ns: str, dest: ipaddress.IPv4Address,
                gateway: ipaddress.IPv4Address | None, dev: str, segments: int) -> Cmd:
    """The route to ``dest`` in the sender's namespace, with a locked cwnd of ``segments``."""
    via = ("via", str(gateway)) if gateway is not None else ()
    return cmd("ip", "route", "replace", f"{dest}/32", *via, "dev", dev,
               "cwnd", "lock", segments, netns=sender_ns)


def prime_cmd(primes: list[Prime], python: str = sys.executable) -> Cmd:
    """One process that primes every pair's cache, entering each namespace in turn.

    It runs in the root namespace and reads its pairs from stdin: a Python
    process a pair cost about 0.3 s of bring-up each (64 TCP flows on ORMCC's
    64-leaf star took some 20 s), while the work itself is a connection and
    two ``ip tcp_metrics`` lines.
    """
    return Cmd((python, "-m", "mcclab.net.tcp_window"), None, True,
               "".join(p.line() + "\n" for p in primes))


def clamp_cmds(sender_ns: str, receiver_ns: str, dest: ipaddress.IPv4Address,
               gateway: ipaddress.IPv4Address | None, dev: str, segments: int,
               python: str = sys.executable) -> list[Cmd]:
    """Route ``dest`` with a locked cwnd of ``segments``, then prime the metrics cache."""
    return [clamp_route(sender_ns, dest, gateway, dev, segments),
            prime_cmd([Prime(sender_ns, receiver_ns, str(dest), segments)], python)]


def cached_cwnd(address: str) -> int | None:
    """The cwnd the TCP metrics cache of this thread's namespace holds for ``address``."""
    out = subprocess.run(["ip", "tcp_metrics", "show", address], capture_output=True,
                         text=True, check=False).stdout.split()
    return int(out[out.index("cwnd") + 1]) if "cwnd" in out else None


def _fail(p: Prime, what: str) -> NoReturn:
    raise SystemExit(f"tcp_window: {p.sender_ns} -> {p.address}: {what}; the window "
                     "ceiling would not apply")


def prime_all(primes: list[Prime]) -> None:
    """Close one connection per pair from its sender; fail unless every cache holds its cap.

    All pairs at once: each connection crosses the lab's emulated links, so its
    handshake and close take a few round trips (on ORMCC's 64-leaf star, 64
    connections one after another took 17 s of the bring-up). Every step is
    started for every pair before the primer waits for any.
    """
    opened: list[tuple[Prime, socket.socket, socket.socket]] = []
    spaces = Namespaces()
    try:
        for p in primes:
            with spaces.inside(NETNS_DIR / p.sender_ns):
                # An entry left by an earlier connection predates the route: no lock.
                subprocess.run(["ip", "tcp_metrics", "delete", p.address],
                               capture_output=True, check=False)
                client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            with spaces.inside(NETNS_DIR / p.listener_ns):
                listener = socket.create_server((p.address, 0))
            opened.append((p, listener, client))
            client.setblocking(False)
            client.connect_ex(listener.getsockname()[:2])
        deadline = time.monotonic() + PRIME_TIMEOUT_S
        for p, listener, client in opened:
            _, writable, _ = select.select([], [client], [], max(deadline - time.monotonic(), 0))
            error = client.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if not writable or error:
                _fail(p, f"no connection ({os.strerror(error) if error else 'timed out'})")
            listener.settimeout(max(deadline - time.monotonic(), 0.01))
            conn, _ = listener.accept()
            # The sender closes first, like a finished transfer; its close fills the cache.
            client.close()
            conn.close()
        for p, _, _ in opened:
            with spaces.inside(NETNS_DIR / p.sender_ns):
                while (seen := cached_cwnd(p.address)) != p.segments:
                    if time.monotonic() > deadline:
                        _fail(p, f"the TCP metrics cache holds cwnd {seen}, not {p.segments}")
                    time.sleep(0.02)
    finally:
        for _, listener, client in opened:
            listener.close()
            client.close()
        spaces.close()


def parse_primes(text: str) -> list[Prime]:
    """The pairs of the primer's input: ``SENDER_NS LISTENER_NS ADDRESS SEGMENTS`` a line."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        words = line.split()
        if len(words) != 4 or not words[3].isdigit():
            raise SystemExit(f"tcp_window: input line {number} is not "
                             f"'SENDER_NS LISTENER_NS ADDRESS SEGMENTS': {line!r}")
        out.append(Prime(words[0], words[1], str(ipaddress.IPv4Address(words[2])),
                         int(words[3])))
    return out


def main(argv: list[str] | None = None) -> None:
    """Command line of ``prime_all``: the pairs come on stdin, one a line."""
    parser = argparse.ArgumentParser(description=prime_all.__doc__)
    parser.parse_args(argv)
    prime_all(parse_primes(sys.stdin.read()))


if __name__ == "__main__":
    main()
