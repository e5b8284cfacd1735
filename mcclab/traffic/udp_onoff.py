"""A constant-rate UDP source that follows a whole run's on/off schedule, and its sink.

ORMCC's Table II puts two 200 kbit/s UDP flows, on and off for exponential
periods of mean 1 s, on every link of its tree: thousands of on-periods per
run. One iperf3 client per on-period cannot start that often on two cores, so
an on/off UDP flow is one source process for the whole run, reading its
periods from a file, and one sink process counting what arrives.

    python -m mcclab.traffic.udp_onoff send --dest A --port P --rate BPS --size B \\
        --schedule FILE --log FILE [--t0 T]
    python -m mcclab.traffic.udp_onoff recv --bind A --port P --log FILE

The schedule file is JSON ``{"periods": [[start, end], ...]}`` in seconds from
the source's own start, or, with ``--t0`` (the run's time 0, CLOCK_MONOTONIC,
the same in every namespace), from ``t0 + origin_s`` (the file's ``origin_s``):
a source started late then keeps the run's schedule, and skips the datagrams
due more than one gap before it started instead of sending them in a burst
(skipped ones take no sequence number, so the sink counts no loss for them).
Within each period the source sends ``size``-byte payloads every
``size * 8 / rate`` seconds, each beginning with a 64-bit sequence number
that runs on across periods, so the sink counts losses of the whole flow.
Both write JSON lines; the sink's once-a-second ``stats`` records carry the
cumulative ``total_rx_bytes``/``total_rx_packets``/``total_lost`` of the
agents' stats records (monotonic ``t``), so the run's tables read them the
same way. Only the standard library is imported: dozens of these start at once.
A run with its agents in host mode puts all of its on/off flows in one
:mod:`mcclab.traffic.onoff_host` instead, which drives the same
:class:`SourceState` and :class:`SinkState` and writes the same records.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterator
from typing import IO

SEQ = struct.Struct("!Q")
STATS_INTERVAL = 1.0


def send_offsets(periods: list[tuple[float, float]], rate_bps: float, size: int
                 ) -> Iterator[float]:
    """Send times (s from the schedule's origin) of a ``rate_bps`` source during ``periods``.

    Each period starts with a packet at its start; a packet is sent only if it
    starts before the period's end.
    """
    gap = size * 8.0 / rate_bps
    for start, end in periods:
        for k in range(max(0, math.ceil((end - start) / gap - 1e-9))):
            yield start + k * gap


def read_schedule(path: str) -> list[tuple[float, float]]:
    """The periods of a schedule file, checked to be ordered and not overlapping."""
    with open(path) as fh:
        periods = [(float(a), float(b)) for a, b in json.load(fh)["periods"]]
    for (a, b), nxt in zip(periods, [*periods[1:], None], strict=True):
        if not 0 <= a < b or (nxt is not None and nxt[0] < b):
            raise ValueError(f"{path}: periods must be ordered, disjoint, from 0 on: {a}-{b}")
    return periods


class SourceState:
    """One source's schedule and counts, without sockets or clocks (sans-I/O).

    ``start`` is the time (CLOCK_MONOTONIC) of the schedule's offset 0 and ``began``
    when the source began; a datagram due more than one gap before ``began`` is
    skipped (counted, no sequence number) instead of sent in a burst. The caller
    asks :meth:`next_due` when to send, sends :meth:`datagram` then, and writes
    :meth:`start_record` and :meth:`done_record`. The one-flow command
    (:func:`send`) and the on/off host (:mod:`mcclab.traffic.onoff_host`) both
    drive one.
    """

    def __init__(self, periods: list[tuple[float, float]], rate_bps: float, size: int,
                 start: float, began: float):
        self.periods = len(periods)
        self.rate_bps = rate_bps
        self.size = size
        self.start = start
        self.began = began
        self.gap = size * 8.0 / rate_bps
        self.sent = self.errors = self.skipped = 0
        self._offsets = send_offsets(periods, rate_bps, size)
        self._payload = bytearray(size)

    def start_record(self) -> dict[str, object]:
        """The log's first record."""
        return {"event": "start", "t": self.began, "periods": self.periods,
                "rate_bps": self.rate_bps, "size": self.size, "origin": self.start}

    def next_due(self) -> float | None:
        """When the next datagram is due (None: the schedule is over), skipping those
        due before a late start."""
        for offset in self._offsets:
            due = self.start + offset
            if due < self.began - self.gap:
                self.skipped += 1
                continue
            return due
        return None

    def datagram(self) -> bytearray:
        """The next datagram's payload, numbered (reused: send it before the next call)."""
        SEQ.pack_into(self._payload, 0, self.sent)
        self.sent += 1
        return self._payload

    def refused(self) -> None:
        """The last datagram could not be sent (ICMP unreachable, ENOBUFS)."""
        self.errors += 1

    def done_record(self, now: float) -> dict[str, object]:
        """The log's last record."""
        return {"event": "done", "t": now, "sent": self.sent, "send_errors": self.errors,
                "skipped": self.skipped}


class SinkState:
    """One sink's counts and its once-a-second ``stats`` records (sans-I/O)."""

    def __init__(self, now: float):
        self.rx_bytes = self.rx_packets = 0
        self.highest = -1
        self.last_t = now
        self._last_bytes = 0

    def datagram(self, data: bytes) -> None:
        """Count one arrival (shorter than a sequence number: not ours, ignored)."""
        if len(data) >= SEQ.size:
            self.rx_bytes += len(data)
            self.rx_packets += 1
            self.highest = max(self.highest, SEQ.unpack_from(data)[0])

    @property
    def next_stats(self) -> float:
        """When the next ``stats`` record is due."""
        return self.last_t + STATS_INTERVAL

    def stats(self, now: float) -> dict[str, object]:
        """A ``stats`` record at ``now``: cumulative counts, the rate since the last one."""
        elapsed = now - self.last_t
        rate = (self.rx_bytes - self._last_bytes) * 8.0 / elapsed if elapsed > 0 else 0.0
        self.last_t, self._last_bytes = now, self.rx_bytes
        return {"event": "stats", "t": now, "total_rx_bytes": self.rx_bytes,
                "total_rx_packets": self.rx_packets,
                "total_lost": max(0, self.highest + 1 - self.rx_packets),
                "throughput_bps": rate}


def write_record(log: IO[str], fields: dict[str, object]) -> None:
    """Append one JSON line and flush it (the run's readers tail the file)."""
    log.write(json.dumps(fields) + "\n")
    log.flush()


def schedule_origin(path: str) -> float:
    """The schedule's ``origin_s`` (0 if it has none): run seconds of its time 0."""
    with open(path) as fh:
        return float(json.load(fh).get("origin_s", 0.0))


class _Stop(Exception):
    """SIGTERM or SIGINT arrived: write the last record and leave."""


def _on_signal(signum: int, _frame: object) -> None:
    """Turn a stop signal into an exception at the next Python instruction."""
    raise _Stop(signum)


def send(dest: str, port: int, rate_bps: float, size: int, schedule: str, log_path: str,
         t0: float | None = None) -> int:
    """Send the schedule's packets to dest:port; log how many were sent, skipped (due
    before a late start) and refused. ``t0``: the run's time 0 (see the module's doc)."""
    periods = read_schedule(schedule)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect((dest, port))
    with open(log_path, "a") as log:
        now = time.monotonic()
        source = SourceState(periods, rate_bps, size,
                             now if t0 is None else t0 + schedule_origin(schedule), now)
        write_record(log, source.start_record())
        try:
            while (due := source.next_due()) is not None:
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                try:
                    sock.send(source.datagram())
                except OSError:  # ICMP unreachable from an earlier packet, ENOBUFS
                    source.refused()
        except _Stop:
            pass
        write_record(log, source.done_record(time.monotonic()))
    return 0


def recv(bind: str, port: int, log_path: str) -> int:
    """Count the datagrams arriving at bind:port; a stats record every second."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((bind, port))
    with open(log_path, "a") as log:
        sink = SinkState(time.monotonic())
        write_record(log, sink.stats(sink.last_t))
        print("ready", flush=True)  # after the first record: a reader finds one at once
        try:
            while True:
                # Never 0: that would make the socket non-blocking (BlockingIOError).
                sock.settimeout(max(1e-3, sink.next_stats - time.monotonic()))
                with contextlib.suppress(TimeoutError, BlockingIOError):
                    sink.datagram(sock.recv(65536))
                now = time.monotonic()
                if now >= sink.next_stats:
                    write_record(log, sink.stats(now))
        except _Stop:
            write_record(log, sink.stats(time.monotonic()))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line: ``send`` or ``recv``."""
    parser = argparse.ArgumentParser(prog="python -m mcclab.traffic.udp_onoff",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send", help="send a schedule's on-periods at a constant rate")
    s.add_argument("--dest", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--rate", type=float, required=True, help="bit/s of payload while on")
    s.add_argument("--size", type=int, required=True, help="payload bytes per datagram")
    s.add_argument("--schedule", required=True, help='JSON {"periods": [[start, end], ...]}')
    s.add_argument("--log", required=True)
    s.add_argument("--t0", type=float, default=None,
                   help="the run's time 0 (CLOCK_MONOTONIC); the schedule counts from "
                        "t0 + its origin_s instead of from this start")
    r = sub.add_parser("recv", help="count arrivals, a stats record every second")
    r.add_argument("--bind", required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--log", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "send" and (args.rate <= 0 or args.size < SEQ.size):
        parser.error(f"--rate must be positive and --size at least {SEQ.size} bytes")
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_signal)
    if args.cmd == "send":
        return send(args.dest, args.port, args.rate, args.size, args.schedule, args.log,
                    args.t0)
    return recv(args.bind, args.port, args.log)


if __name__ == "__main__":
    sys.exit(main())
