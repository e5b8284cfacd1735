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

On allocated hosts (``mcclab.testbed``) each node is a machine of its own and
there are no namespaces to enter, so the same work is split by machine, with
no namespace anywhere, as commands the launch planner names by the node whose
machine runs them (``mcclab.experiment.launch.window_setup``): ``listen`` on each
receiver's host binds the receivers' addresses on a port the planner chose,
then leaves a child behind that accepts the primers' connections and ends once
it has served as many as the planner said (or after a limit), so the command
itself returns at once; ``prime`` on each sender's host then primes every flow
of that sender at once in its own network stack, checking each cache as
``prime_all`` does, and appends what each cache held to a log.
:func:`listen_argv` and :func:`prime_host_argv` build their command lines.
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
from pathlib import Path
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


# Seconds a host's listener serves at most, should a connection it expects never come
# (a primer that failed): past a primer's own PRIME_TIMEOUT_S and the ssh round trips
# around it; the planner adds PRIMER_BUDGET_S per sender's host, as the primers run one
# after another.
LISTEN_LIMIT_S = 60.0
PRIMER_BUDGET_S = PRIME_TIMEOUT_S + 10.0


@dataclass(frozen=True)
class HostTarget:
    """One flow's ceiling as a sender's host primes it: the receiver's address, the port
    its host's listener accepts on, and the cap the cache must hold."""

    address: str
    port: int
    segments: int

    def word(self) -> str:
        """The target as one argv word of ``prime``: ``ADDRESS:PORT:SEGMENTS``."""
        return f"{self.address}:{self.port}:{self.segments}"


def _module(python: str) -> list[str]:
    return [python, "-m", "mcclab.net.tcp_window"]


def listen_limit(senders: int) -> float:
    """The listeners' limit when ``senders`` hosts prime one after another."""
    return LISTEN_LIMIT_S + senders * PRIMER_BUDGET_S


def listen_argv(addresses: list[str], port: int, expect: int, python: str = sys.executable,
                limit_s: float = LISTEN_LIMIT_S) -> list[str]:
    """The listener on a receiver's host: binds ``port`` on each of ``addresses``, prints
    ``ADDRESS PORT`` lines and returns, leaving a child that accepts until ``expect``
    connections have been closed by their peers or ``limit_s`` seconds pass."""
    return [*_module(python), "listen", "--port", str(port), "--expect", str(expect),
            "--limit", f"{limit_s:g}", *(str(ipaddress.IPv4Address(a)) for a in addresses)]


def prime_host_argv(targets: list[HostTarget], python: str = sys.executable,
                    log: str | None = None, node: str | None = None) -> list[str]:
    """The primer on a sender's host: one connection to each target, then the check that
    its TCP metrics cache holds each target's ceiling; with ``log``, what each cache held
    appended there as ``NODE: ADDRESS cwnd N`` lines (``node``: the host's name)."""
    logged = ["--log", log] if log is not None else []
    named = ["--node", node] if node is not None else []
    return [*_module(python), "prime", *logged, *named, *(t.word() for t in targets)]


def parse_target(word: str) -> HostTarget:
    """A ``prime`` argument, ``ADDRESS:PORT:SEGMENTS``."""
    parts = word.split(":")
    if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
        raise SystemExit(f"tcp_window: {word!r} is not ADDRESS:PORT:SEGMENTS")
    return HostTarget(str(ipaddress.IPv4Address(parts[0])), int(parts[1]), int(parts[2]))


def bind(addresses: list[str], port: int) -> list[socket.socket]:
    """A socket listening on ``port`` of each address. With SO_REUSEPORT, so that a
    listener left by an earlier run whose primer failed (it ends by its own limit) does
    not keep this one from binding: it accepts and closes just as this one would."""
    return [socket.create_server((a, port), reuse_port=True) for a in addresses]


def serve(listeners: list[socket.socket], expect: int,
          limit_s: float = LISTEN_LIMIT_S) -> int:
    """Accept on ``listeners`` until ``expect`` connections have been closed by their
    peers (or ``limit_s`` passes); returns how many were. Closes every socket.

    An accepted connection is closed once its peer has closed: the primer's side
    closes first, like a finished transfer, and its close is what fills its cache.
    """
    accepted: list[socket.socket] = []
    served = 0
    deadline = time.monotonic() + limit_s
    try:
        while served < expect and (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([*listeners, *accepted], [], [], left)
            for ready in readable:
                if ready in listeners:
                    accepted.append(ready.accept()[0])
                    continue
                try:
                    data = ready.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    accepted.remove(ready)
                    ready.close()
                    served += 1
    finally:
        for sock in accepted + listeners:
            sock.close()
    return served


def _detach() -> None:
    """Go on in a child, in a session of its own and with no standard streams, and end
    this process: whoever waits for it (the runner, through ssh) returns now, while the
    child keeps every socket this process opened."""
    sys.stdout.flush()
    if os.fork():
        os._exit(0)
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)


def prime_here(targets: list[HostTarget], timeout_s: float = PRIME_TIMEOUT_S) -> list[str]:
    """Prime this machine's TCP metrics cache for every target at once; fail (SystemExit,
    naming the address) unless each holds its ceiling. Returns one ``ADDRESS cwnd N``
    line per target, what the cache held."""
    host = socket.gethostname()

    def fail(t: HostTarget, what: str) -> NoReturn:
        raise SystemExit(f"tcp_window: {host} -> {t.address}: {what}; the window ceiling "
                         "would not apply")

    clients: list[tuple[HostTarget, socket.socket]] = []
    try:
        for t in targets:
            # An entry left by an earlier connection predates the route: no lock.
            subprocess.run(["ip", "tcp_metrics", "delete", t.address],
                           capture_output=True, check=False)
            client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            clients.append((t, client))
            client.setblocking(False)
            client.connect_ex((t.address, t.port))
        deadline = time.monotonic() + timeout_s
        for t, client in clients:
            _, writable, _ = select.select([], [client], [], max(deadline - time.monotonic(), 0))
            error = client.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if not writable or error:
                fail(t, f"no connection to port {t.port} "
                        f"({os.strerror(error) if error else 'timed out'})")
            client.close()  # first, as a sender ending its transfer
        lines = []
        for t, _ in clients:
            while (seen := cached_cwnd(t.address)) != t.segments:
                if time.monotonic() > deadline:
                    fail(t, f"the TCP metrics cache holds cwnd {seen}, not {t.segments}")
                time.sleep(0.02)
            lines.append(f"{t.address} cwnd {seen}")
        return lines
    finally:
        for _, client in clients:
            client.close()


def _host_main(argv: list[str]) -> None:
    """``listen`` and ``prime``: the modes for a machine of its own (no namespaces)."""
    parser = argparse.ArgumentParser(prog="python -m mcclab.net.tcp_window")
    modes = parser.add_subparsers(dest="mode", required=True)
    lis = modes.add_parser("listen", help=listen_argv.__doc__)
    lis.add_argument("--port", type=int, required=True)
    lis.add_argument("--expect", type=int, required=True)
    lis.add_argument("--limit", type=float, default=LISTEN_LIMIT_S)
    lis.add_argument("addresses", nargs="+")
    pri = modes.add_parser("prime", help=prime_here.__doc__)
    pri.add_argument("--log", help="append what each cache held to this file")
    pri.add_argument("--node", default=socket.gethostname(),
                     help="the name the log gives this host")
    pri.add_argument("targets", nargs="+", help="ADDRESS:PORT:SEGMENTS")
    args = parser.parse_args(argv)
    if args.mode == "listen":
        listeners = bind([str(ipaddress.IPv4Address(a)) for a in args.addresses], args.port)
        for sock in listeners:
            address, port = sock.getsockname()[:2]
            print(f"{address} {port}")
        # Bound and listening: a primer's connection waits in the backlog from now on.
        _detach()
        serve(listeners, args.expect, args.limit)
        return
    lines = prime_here([parse_target(w) for w in args.targets])
    for line in lines:
        print(line)
    if args.log:
        log = Path(args.log)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as fh:
            fh.writelines(f"{args.node}: {line}\n" for line in lines)


def main(argv: list[str] | None = None) -> None:
    """Command line of ``prime_all`` (the pairs on stdin, one a line); with ``listen`` or
    ``prime`` first, the modes for allocated hosts (:func:`serve`, :func:`prime_here`)."""
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] in ("listen", "prime"):
        _host_main(words)
        return
    parser = argparse.ArgumentParser(description=prime_all.__doc__)
    parser.parse_args(argv)
    prime_all(parse_primes(sys.stdin.read()))


if __name__ == "__main__":
    main()
