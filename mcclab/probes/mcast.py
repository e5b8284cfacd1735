"""A minimal multicast sender and receiver, run inside lab nodes to check routing.

Used by `mcclab check` and by the routing acceptance tests. The receiver
reports, as JSON lines on stdout, when it joined and when the first packet of
each group arrived; every node shares the root's monotonic clock, so those
times compare directly with the sender's.

    python -m mcclab.probes.mcast send --groups 239.1.1.1 --rate 200 --duration 30
    python -m mcclab.probes.mcast recv --groups 239.1.1.1 --source 10.0.0.1 --dwell 1
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import sys
import time

from mcclab import multicast

PORT = 5001
MAGIC = b"MCLP"
HEADER = struct.Struct("!4sIQ")  # magic, sequence, send time (monotonic ns)


def _emit(record: dict) -> None:
    """One JSON line, flushed at once so a reader sees it live."""
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def send(groups: list[str], rate: float, duration: float, ttl: int, size: int) -> None:
    """Send ``rate`` packets/s to each group, round-robin, for ``duration`` seconds."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, ttl)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    interval = 1.0 / (rate * len(groups))
    start = time.monotonic()
    seq = 0
    padding = b"\0" * max(0, size - HEADER.size)
    while (now := time.monotonic()) - start < duration:
        due = start + seq * interval
        if due > now:
            time.sleep(due - now)
        group = groups[seq % len(groups)]
        sock.sendto(HEADER.pack(MAGIC, seq, time.monotonic_ns()) + padding, (group, PORT))
        seq += 1
    _emit({"event": "sent", "packets": seq})


def receive(groups: list[str], source: str | None, dwell: float, timeout: float,
            hold: bool) -> None:
    """Join each group in turn; report join latency; stay ``dwell`` s; leave (unless hold)."""
    for group in groups:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((group, PORT))  # binding to the group filters out other groups
        joined = time.monotonic()
        multicast.join(sock, group, source)
        _emit({"event": "joined", "group": group, "t": joined})
        first = None
        count = 0
        deadline = joined + timeout
        while True:
            now = time.monotonic()
            limit = deadline if first is None else first + dwell
            if not hold and now >= limit:
                break
            ready, _, _ = select.select([sock], [], [], max(0.0, limit - now) if not hold else 1)
            if not ready:
                continue
            data = sock.recv(65535)
            if len(data) < HEADER.size or not data.startswith(MAGIC):
                continue
            count += 1
            if first is None:
                first = time.monotonic()
                _emit({"event": "first", "group": group, "t": first,
                       "latency": first - joined})
        multicast.leave(sock, group, source)
        _emit({"event": "left", "group": group, "t": time.monotonic(), "packets": count,
               "latency": None if first is None else first - joined})
        sock.close()


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send")
    s.add_argument("--groups", required=True)
    s.add_argument("--rate", type=float, default=200.0, help="packets/s per group")
    s.add_argument("--duration", type=float, default=30.0)
    s.add_argument("--ttl", type=int, default=32)
    s.add_argument("--size", type=int, default=64)
    r = sub.add_parser("recv")
    r.add_argument("--groups", required=True)
    r.add_argument("--source", default=None, help="SSM source address (IGMPv3 join)")
    r.add_argument("--dwell", type=float, default=0.5, help="seconds to stay after 1st packet")
    r.add_argument("--timeout", type=float, default=10.0, help="give up on a group after")
    r.add_argument("--hold", action="store_true", help="stay joined until killed")
    args = parser.parse_args(argv)
    groups = args.groups.split(",")
    if args.mode == "send":
        send(groups, args.rate, args.duration, args.ttl, args.size)
    else:
        receive(groups, args.source, args.dwell, args.timeout, args.hold)


if __name__ == "__main__":
    main()
