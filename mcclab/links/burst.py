"""A timestamping UDP sender and receiver for queue and RED measurements.

Runs inside a node's namespace as a plain script (no mcclab import, so it
starts fast). Every datagram carries its sequence number and its send time
(CLOCK_MONOTONIC, which all namespaces share), so the receiver knows exactly
which packets were lost and each one's one-way delay.

    burst.py recv --bind ADDR --port P --out FILE [--idle S] [--max-wait S]
    burst.py send --to ADDR --port P --count N --size BYTES [--pps R]

``--size`` is the IP packet size (UDP payload + 28). ``--pps 0`` sends
back-to-back. The receiver writes ``FILE.ready`` once bound and ``FILE``
(JSON: seq, sent_ns, recv_ns) after ``--idle`` seconds without packets.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time

HEADER = struct.Struct("!QQ")
IP_UDP = 28


def receive(args: argparse.Namespace) -> None:
    """Record (seq, sent, received) for every datagram until the sender goes quiet."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((args.bind, args.port))
    with open(args.out + ".ready", "w") as fh:
        fh.write(str(os.getpid()))
    seq, sent, recv = [], [], []
    sock.settimeout(args.max_wait)
    while True:
        try:
            data = sock.recv(65535)
        except TimeoutError:
            break
        now = time.monotonic_ns()
        s, t = HEADER.unpack_from(data)
        seq.append(s)
        sent.append(t)
        recv.append(now)
        sock.settimeout(args.idle)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"seq": seq, "sent_ns": sent, "recv_ns": recv}, fh)
    os.replace(tmp, args.out)


def send(args: argparse.Namespace) -> None:
    """Send ``count`` datagrams, paced at ``pps`` (0: as fast as the socket takes them)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    sock.connect((args.to, args.port))
    pad = b"\0" * max(0, args.size - IP_UDP - HEADER.size)
    interval = 1e9 / args.pps if args.pps > 0 else 0.0
    start = time.monotonic_ns()
    for i in range(args.count):
        if interval:
            due = start + int(i * interval)
            while True:
                left = due - time.monotonic_ns()
                if left <= 0:
                    break
                # Sleep most of the wait, spin the last 0.2 ms: sleep alone overshoots.
                if left > 300_000:
                    time.sleep((left - 200_000) / 1e9)
        sock.send(HEADER.pack(i, time.monotonic_ns()) + pad)
    took = (time.monotonic_ns() - start) / 1e9
    json.dump({"sent": args.count, "seconds": took}, sys.stdout)


def main() -> None:
    """Command line."""
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--idle", type=float, default=2.0)
    r.add_argument("--max-wait", type=float, default=30.0)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--count", type=int, required=True)
    s.add_argument("--size", type=int, default=1000)
    s.add_argument("--pps", type=float, default=0.0)
    args = ap.parse_args()
    receive(args) if args.mode == "recv" else send(args)


if __name__ == "__main__":
    main()
