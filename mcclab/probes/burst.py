"""Link probes: a timestamping UDP sender/receiver pair, an ICMP pinger, a CPU stall watcher.

Runs inside a node's namespace as a plain script (no mcclab import, so it
starts fast). Every datagram carries its sequence number and its send time,
so the receiver knows exactly which packets were lost and each one's one-way
delay. Both ends use CLOCK_REALTIME, which every namespace shares. Both the
UDP receiver and the pinger take the kernel's receive timestamp (the read
time when there is none), so a receiver descheduled for a moment does not
lengthen the delays it records. The stamp is set when a packet enters the
node: right for the fidelity and bench paths (s - r - d, where the emulator
of r - d runs at r's egress, or the kernel's qdisc at its egress), but early
behind an emulator at the receiving node's own ingress (a link between two
hosts), which these paths do not have.

    burst.py recv --bind ADDR --port P --out FILE [--idle S] [--max-wait S]
    burst.py send --to ADDR --port P --count N --size BYTES [--pps R]
    burst.py ping --to ADDR --count N --interval S [--size 56]
    burst.py stallwatch --seconds S --cpu K [--period S] [--threshold S]

``--size`` is the IP packet size for UDP (payload + 28) and the ICMP payload
for ping (56: 84-byte packets, as ping(8)). ``--pps 0`` sends back-to-back.
The receiver writes ``FILE.ready`` once bound and ``FILE`` (JSON: seq,
sent_ns, recv_ns) after ``--idle`` seconds without packets. ``ping`` prints
JSON {"sent": N, "rtt_ms": {seq: rtt}, "sent_ns": {seq: CLOCK_REALTIME}} with
microsecond resolution (ping(8) prints whole milliseconds above 100 ms).
``stallwatch`` sleeps ``--period`` at a time on one CPU at a high SCHED_FIFO
priority and prints JSON {"cpu": K, "wakeups": N, "stalls": [[from_ns, to_ns]]}:
the CLOCK_REALTIME spans in which it woke more than ``--threshold`` late, i.e.
in which nothing ran on that CPU, not even the most urgent task of the lab.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import sys
import time

HEADER = struct.Struct("!QQ")
IP_UDP = 28
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
TIMESPEC = struct.Struct("@qq")


def kernel_time_ns(ancdata: list, fallback: int) -> int:
    """The SO_TIMESTAMPNS receive time from recvmsg's ancillary data (CLOCK_REALTIME)."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack_from(data)
            return sec * 1_000_000_000 + nsec
    return fallback


def receive(args: argparse.Namespace) -> None:
    """Record (seq, sent, received) for every datagram until the sender goes quiet."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    # The kernel's arrival time, so a receiver descheduled while the first packets
    # arrive does not lengthen their delays (they set the base of every queue estimate).
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind((args.bind, args.port))
    with open(args.out + ".ready", "w") as fh:
        fh.write(str(os.getpid()))
    seq, sent, recv = [], [], []
    sock.settimeout(args.max_wait)
    while True:
        try:
            data, anc, _, _ = sock.recvmsg(65535, socket.CMSG_SPACE(TIMESPEC.size))
        except TimeoutError:
            break
        now = kernel_time_ns(anc, time.time_ns())
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
            _sleep_until(start + int(i * interval), spin=min(200_000, int(interval / 4)))
        sock.send(HEADER.pack(i, time.time_ns()) + pad)
    took = (time.monotonic_ns() - start) / 1e9
    json.dump({"sent": args.count, "seconds": took}, sys.stdout)


def _sleep_until(due: int, spin: int) -> None:
    """Wait until CLOCK_MONOTONIC ``due``: sleep, then spin the last ``spin`` ns.

    Sleeping alone overshoots by ~60 us; spinning a quarter of the interval at
    most keeps a fast sender from burning a whole core the link emulator needs.
    """
    while True:
        left = due - time.monotonic_ns()
        if left <= 0:
            return
        if left > spin:
            time.sleep((left - spin) / 1e9)


def internet_checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of ``data``."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def realtime(priority: int) -> None:
    """Run SCHED_FIFO at ``priority`` if allowed (0: leave the policy alone)."""
    if priority:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        except PermissionError:
            print(f"burst: SCHED_FIFO {priority} refused; normal priority", file=sys.stderr)


def ping(args: argparse.Namespace) -> None:
    """ICMP echo with kernel receive timestamps: RTTs in ms with microsecond resolution.

    The send time is read just before sendto(); a sender preempted between the
    two would add the wait to the RTT, so ``--rt-priority`` keeps it from
    waiting behind busy processes (it sleeps between echoes, so it costs nothing).
    """
    realtime(args.rt_priority)
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    ident = os.getpid() & 0xFFFF
    payload = b"\x5a" * args.size
    sent: dict[int, int] = {}
    rtt: dict[int, float] = {}
    start = time.monotonic_ns()
    step = int(args.interval * 1e9)
    end = start + args.count * step + int(args.timeout * 1e9)
    i = 0
    while time.monotonic_ns() < end and len(rtt) < args.count:
        now = time.monotonic_ns()
        if i < args.count and now >= start + i * step:
            head = struct.pack("!BBHHH", 8, 0, 0, ident, i)
            check = internet_checksum(head + payload)
            packet = struct.pack("!BBHHH", 8, 0, check, ident, i) + payload
            sent[i] = time.time_ns()
            sock.sendto(packet, (args.to, 0))
            i += 1
            continue
        due = start + i * step if i < args.count else end
        ready, _, _ = select.select([sock], [], [], max(0.0, (due - now) / 1e9))
        if not ready:
            continue
        data, anc, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(TIMESPEC.size))
        got = kernel_time_ns(anc, time.time_ns())
        icmp = data[(data[0] & 0x0F) * 4:]
        kind, _, _, rid, seq = struct.unpack_from("!BBHHH", icmp)
        if kind == 0 and rid == ident and seq in sent and seq not in rtt:
            rtt[seq] = (got - sent[seq]) / 1e6
    json.dump({"sent": i, "rtt_ms": rtt, "sent_ns": sent}, sys.stdout)


def stallwatch(args: argparse.Namespace) -> None:
    """The spans in which this CPU ran nothing for longer than ``--threshold``."""
    os.sched_setaffinity(0, {args.cpu})
    realtime(args.rt_priority)
    period, late = int(args.period * 1e9), int(args.threshold * 1e9)
    stalls: list[list[int]] = []
    wakeups = 0
    end = time.monotonic_ns() + int(args.seconds * 1e9)
    while (before := time.monotonic_ns()) < end:
        wall = time.time_ns()
        time.sleep(args.period)
        overslept = time.monotonic_ns() - before - period
        wakeups += 1
        if overslept > late:
            stalls.append([wall, time.time_ns()])
    json.dump({"cpu": args.cpu, "wakeups": wakeups, "stalls": stalls}, sys.stdout)


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
    p = sub.add_parser("ping")
    p.add_argument("--to", required=True)
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--interval", type=float, default=0.01)
    p.add_argument("--size", type=int, default=56)
    p.add_argument("--timeout", type=float, default=2.0)
    p.add_argument("--rt-priority", type=int, default=0)
    w = sub.add_parser("stallwatch")
    w.add_argument("--seconds", type=float, required=True)
    w.add_argument("--cpu", type=int, required=True)
    w.add_argument("--period", type=float, default=0.001)
    w.add_argument("--threshold", type=float, default=0.001)
    w.add_argument("--rt-priority", type=int, default=30)
    args = ap.parse_args()
    {"recv": receive, "send": send, "ping": ping, "stallwatch": stallwatch}[args.mode](args)


if __name__ == "__main__":
    main()
