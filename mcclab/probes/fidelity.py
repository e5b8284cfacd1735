"""Measuring an emulated link from outside: the evidence the link tests and benchmark use.

Pure statistics (percentiles, binomial confidence intervals, ns-2 RED's
expected drop fraction) and thin runners of ping, iperf3 and the burst probe
(``burst.py``) between two nodes of a running lab. Every measurement is taken
by the end hosts (ping output, iperf3 JSON, receiver timestamps), never from
the emulator's own view; the emulator's counters are read alongside as a
cross-check.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from mcclab.commands import Cmd
from mcclab.model.topology import RedParams
from mcclab.net.node_config import netns_name
from mcclab.state import kill_group

if TYPE_CHECKING:
    from mcclab.lab import Lab

Z99 = 2.5758293035489004  # two-sided 99% normal quantile
ICMP_IP_BYTES = 84  # ping -s 56: 56 + 8 ICMP + 20 IP
TCP_IP_BYTES, TCP_PAYLOAD = 1500, 1448  # full-size segment with timestamps on a 1500 MTU
BURST_SCRIPT = Path(__file__).with_name("burst.py")
# The echo sender runs SCHED_FIFO, below the emulators (DEFAULT_RT_PRIORITY 10):
# it stamps the send time in user space, and a busy machine would otherwise
# put its wait between the stamp and the send.
PING_RT_PRIORITY = 5
_ports = itertools.count(5301)


# ---------------------------------------------------------------- statistics


def nearest_rank(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by the nearest-rank method."""
    xs = sorted(values)
    if not xs:
        return math.nan
    return xs[max(0, math.ceil(q / 100 * len(xs)) - 1)]


def wilson(k: int, n: int, z: float = Z99) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n (99% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def red_pb(avg: float, red: RedParams) -> float:
    """ns-2 RED's base drop probability p_b at average queue ``avg`` (packets)."""
    if avg < red.min_th:
        return 0.0
    if avg >= red.max_th:
        if not red.gentle or avg >= 2 * red.max_th:
            return 1.0
        return min(1.0, red.max_p + (1 - red.max_p) * (avg - red.max_th) / red.max_th)
    return red.max_p * (avg - red.min_th) / (red.max_th - red.min_th)


def red_pa(pb: float, count: int, wait: bool) -> float:
    """ns-2's per-arrival drop probability after ``count`` arrivals since the last drop."""
    cp = count * pb
    if wait:
        return 0.0 if cp < 1 else (pb / (2 - cp) if cp < 2 else 1.0)
    return pb / (1 - cp) if cp < 1 else 1.0


def red_drop_fraction(pb: float, wait: bool = True) -> float:
    """Long-run fraction of arrivals RED drops while p_b stays constant.

    The count-based spacing makes drops more regular than Bernoulli(p_b): the
    gap between drops is ~uniform on [1, 1/p_b] (Floyd) or [1/p_b, 2/p_b]
    (ns-2's wait_), so the fraction is ~2p_b or ~2p_b/3, not p_b.
    """
    if pb <= 0:
        return 0.0
    if pb >= 1:
        return 1.0
    gap, survive = 0.0, 1.0
    for count in itertools.count(1):
        gap += survive
        survive *= 1 - min(1.0, red_pa(pb, count, wait))
        if survive < 1e-12:
            break
    return 1 / gap


def red_expected_fraction(avg: float, red: RedParams, wait: bool = True) -> float:
    """Expected drop fraction when the RED average holds at ``avg``."""
    return red_drop_fraction(red_pb(avg, red), wait)


def red_avg_for_fraction(fraction: float, red: RedParams, wait: bool = True) -> float:
    """The average queue at which RED drops ``fraction`` of arrivals (its curve, inverted)."""
    lo, hi = float(red.min_th), float(2 * red.max_th if red.gentle else red.max_th)
    for _ in range(60):
        mid = (lo + hi) / 2
        if red_expected_fraction(mid, red, wait) < fraction:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# ---------------------------------------------------------------- ping


_TIME = re.compile(r"time=([0-9.]+) ms")


def parse_ping(text: str) -> list[float]:
    """RTTs in ms from ping's per-reply lines."""
    return [float(m.group(1)) for m in _TIME.finditer(text)]


def rtt_summary(rtts: list[float]) -> dict[str, float]:
    """n, min, median, p99 and max of RTTs (ms)."""
    if not rtts:
        return {"n": 0, "min": math.nan, "median": math.nan, "p99": math.nan, "max": math.nan}
    return {"n": len(rtts), "min": min(rtts), "median": nearest_rank(rtts, 50),
            "p99": nearest_rank(rtts, 99), "max": max(rtts)}


def ping(lab: Lab, src: str, dst: str, count: int = 200, interval: float = 0.01,
         size: int = 56) -> list[float]:
    """RTTs (ms) of ``count`` pings from ``src`` to ``dst``'s first address."""
    addr = str(lab.plan.address_of(dst))
    argv = ("ping", "-n", "-c", str(count), "-i", str(interval), "-s", str(size), "-W", "2",
            addr)
    out = lab.runner.run(Cmd(argv, netns_name(src), check=False),
                         timeout=count * interval + 30)
    return parse_ping(out)


class Echo(NamedTuple):
    """One answered ICMP echo."""

    seq: int
    sent_ns: int  # CLOCK_REALTIME, read just before sendto()
    rtt_ms: float  # to the reply's kernel receive timestamp


def icmp_echoes(lab: Lab, src: str, dst: str, count: int = 200, interval: float = 0.01,
                size: int = 56) -> list[Echo]:
    """Each answered ICMP echo, in sequence order; the missing sequence numbers were lost.

    ping(8) prints whole milliseconds above 100 ms, too coarse for a 1 ms
    tail target; this sends the same 84-byte echo requests from a raw socket
    and timestamps replies in the kernel (SO_TIMESTAMPNS).
    """
    addr = str(lab.plan.address_of(dst))
    argv = (sys.executable, str(BURST_SCRIPT), "ping", "--to", addr, "--count", str(count),
            "--interval", str(interval), "--size", str(size), "--rt-priority",
            str(PING_RT_PRIORITY))
    out = json.loads(lab.runner.run(Cmd(argv, netns_name(src)), timeout=count * interval + 30))
    rtt, sent = out["rtt_ms"], out["sent_ns"]
    return [Echo(int(k), sent[k], rtt[k]) for k in sorted(rtt, key=int)]


def _runs(seqs: list[int]) -> str:
    """Sorted sequence numbers as ranges: ``3-7, 12``."""
    parts = []
    for _, group in itertools.groupby(enumerate(seqs), key=lambda kv: kv[1] - kv[0]):
        run = [seq for _, seq in group]
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(parts)


def echo_trouble(echoes: list[Echo], count: int, slow_ms: float) -> str:
    """Where the lost echoes and those slower than ``slow_ms`` lie in the sequence.

    A path that held packets for a while and then let them go at once shows as
    one run of slow echoes followed by losses (the burst overflowing a queue);
    a lossy or jittery one as scattered sequence numbers.
    """
    got = {e.seq for e in echoes}
    lost = [seq for seq in range(count) if seq not in got]
    slow = [e for e in echoes if e.rtt_ms > slow_ms]
    text = f"lost {len(lost)}" + (f" (seq {_runs(lost)})" if lost else "")
    text += f"; slower than {slow_ms:g} ms {len(slow)}"
    if slow:
        worst = max(slow, key=lambda e: e.rtt_ms)
        text += (f" (seq {_runs([e.seq for e in slow])}; worst {worst.rtt_ms:.1f} ms "
                 f"at seq {worst.seq})")
    return text


ARP_CACHE_STATS = Path("/proc/net/stat/arp_cache")


def arp_cache_counters(path: Path = ARP_CACHE_STATS) -> dict[str, int]:
    """The kernel's ARP table counters summed over CPUs (all namespaces share the table).

    ``allocs`` counts neighbour entries created, ``unresolved_discards`` packets
    dropped while waiting for an address to resolve: a path that had to resolve
    again holds its packets for up to a retransmit time (1 s) meanwhile.
    """
    lines = path.read_text().split("\n")
    names = lines[0].split()
    totals = dict.fromkeys(names, 0)
    for line in filter(None, (x.strip() for x in lines[1:])):
        for name, value in zip(names, line.split(), strict=True):
            count = int(value, 16)
            # every row repeats the table's size; the other columns count per CPU
            totals[name] = max(totals[name], count) if name == "entries" else totals[name] + count
    return totals


def icmp_rtts(lab: Lab, src: str, dst: str, count: int = 200, interval: float = 0.01,
              size: int = 56) -> list[float]:
    """RTTs (ms, microsecond resolution) of ``count`` ICMP echoes, kernel-timestamped."""
    return [e.rtt_ms for e in icmp_echoes(lab, src, dst, count, interval, size)]


def machine_stalls(seconds: float, threshold: float = 0.001) -> list[subprocess.Popen]:
    """Start one ``burst.py stallwatch`` per CPU for ``seconds``; read them with ``stalls_of``.

    A stall is a span in which a watcher at SCHED_FIFO 30 (above the emulators and
    the pinger) woke more than ``threshold`` seconds late on its CPU: the whole
    machine, not the lab, held it up.
    """
    return [subprocess.Popen([sys.executable, str(BURST_SCRIPT), "stallwatch", "--seconds",
                              f"{seconds:g}", "--cpu", str(cpu), "--threshold", f"{threshold:g}"],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
            for cpu in sorted(os.sched_getaffinity(0))]


def stalls_of(watchers: list[subprocess.Popen], timeout: float = 30.0) -> list[tuple[int, int]]:
    """The stall spans (CLOCK_REALTIME ns) the watchers of ``machine_stalls`` saw."""
    spans: list[tuple[int, int]] = []
    try:
        for watch in watchers:
            out, _ = watch.communicate(timeout=timeout)
            spans += [(a, b) for a, b in json.loads(out)["stalls"]]
    finally:
        for watch in watchers:
            if watch.poll() is None:
                os.killpg(watch.pid, signal.SIGKILL)
                watch.wait()
    return sorted(spans)


def wait_for_quiet_machine(timeout: float = 60.0, window: float = 1.0,
                           threshold: float = 0.001) -> float:
    """Poll until a ``window`` passes without a machine stall; the seconds it took.

    Right after other labs are torn down the machine can stay busy in bursts for a
    while (20 s once in CI; freeing their namespaces, presumably). After ``timeout``
    it gives up and returns, and the measurement that follows counts what it meets.
    """
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if not stalls_of(machine_stalls(window, threshold)):
            break
    return time.monotonic() - start


class QuietRound(NamedTuple):
    """One round of a measurement that wants a quiet machine (``quiet_rounds``)."""

    number: int  # from 1
    waited: float  # seconds waited for the machine to be quiet
    budget: float  # the longest this round waits for quiet, for any further wait


def quiet_rounds(rounds: int, first: float = 60.0, later: float = 15.0,
                 threshold: float = 0.001) -> Iterator[QuietRound]:
    """Up to ``rounds`` rounds, each begun once the machine is quiet or its wait is over.

    A measurement that a stalled machine spoils repeats until it has what it needs
    (the caller breaks out of the loop) or the rounds are spent. The first round
    may wait ``first`` s for quiet (other labs' teardown can keep the machine busy
    for 20 s), later ones ``later`` s: by then the machine was quiet once.
    """
    for number in range(1, rounds + 1):
        budget = first if number == 1 else later
        yield QuietRound(number, wait_for_quiet_machine(timeout=budget, threshold=threshold),
                         budget)


def wait_for_quiet_path(lab: Lab, src: str, dst: str, timeout: float = 60.0,
                        spread_ms: float = 1.0) -> float:
    """Poll with 1 s of echoes until none is held ``spread_ms`` beyond the fastest; seconds taken.

    Stall watchers see a machine that runs nothing; this also sees a path whose
    emulators are held up while the machine runs (an emulator 36 ms late with the
    watchers quiet, in a CI rehearsal: pages the VM had reclaimed, docs/links.md).
    After ``timeout`` it returns, and the measurement that follows counts what it meets.
    """
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        echoes = [e.rtt_ms for e in icmp_echoes(lab, src, dst, count=100, interval=0.01)]
        if len(echoes) == 100 and max(echoes) - min(echoes) <= spread_ms:
            break
    return time.monotonic() - start


def stalled_seconds(stalls: list[tuple[int, int]], start_ns: int, end_ns: int) -> float:
    """Seconds of [start_ns, end_ns] covered by at least one stall span (their union)."""
    total, reach = 0, start_ns
    for a, b in sorted(stalls):
        a, b = max(a, reach), min(b, end_ns)
        if b > a:
            total += b - a
            reach = b
    return total / 1e9


def clear_of_stalls(echoes: list[Echo], stalls: list[tuple[int, int]]) -> list[float]:
    """RTTs of the echoes whose flight (send to reply) overlaps no stall."""
    return [e.rtt_ms for e in echoes
            if not any(a < e.sent_ns + e.rtt_ms * 1e6 and e.sent_ns < b for a, b in stalls)]


class LateMark(NamedTuple):
    """Where the emulators' logs of late verdicts stood when a measurement began."""

    at_ns: int  # CLOCK_REALTIME
    totals: dict[tuple[str, str], int]  # (node, queue name) -> late_events_total


def late_mark(lab: Lab) -> LateMark:
    """Mark the emulators' late-verdict logs now, for ``emulator_late_spans`` after."""
    return LateMark(time.time_ns(), {(node, q["name"]): q["late_events_total"]
                                     for node, st in lab.links.stats().items()
                                     for q in st["queues"].values()})


def late_spans(stats: dict[str, dict], mark: LateMark) -> list[tuple[int, int]]:
    """The spans (CLOCK_REALTIME ns, due to released) of verdicts an emulator sent late
    after ``mark``, from its stats (``late_events``: the last 256 verdicts at least
    ``late_log_us`` late).

    A log that took more events since the mark than it keeps lost the oldest: the
    span from the mark to the oldest event kept stands for them, so nothing late
    goes unmarked.
    """
    spans: list[tuple[int, int]] = []
    for node, st in stats.items():
        for q in st["queues"].values():
            events = [(int(a), int(b)) for a, b in q["late_events"]]
            since = q["late_events_total"] - mark.totals.get((node, q["name"]), 0)
            if since > len(events):
                spans.append((mark.at_ns, events[0][0]))
            spans += [(a, b) for a, b in events if b > mark.at_ns]
    return sorted(spans)


def emulator_late_spans(lab: Lab, mark: LateMark) -> list[tuple[int, int]]:
    """``late_spans`` of the lab's emulators since ``mark``, from stats at most 150 ms
    old (rewritten every 100 ms): they hold every verdict released until 150 ms before
    the call (the RTT test calls it seconds after its last echo, once its stall
    watchers have ended)."""
    return late_spans(lab.links.stats(max_age=0.15), mark)


# ---------------------------------------------------------------- iperf3


def _wait_listening(lab: Lab, node: str, port: int, proto: str = "t",
                    timeout: float = 10.0) -> None:
    """Poll until something listens on ``port`` in ``node`` (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = lab.runner.run(Cmd(("ss", f"-Hln{proto}", f"sport = :{port}"), netns_name(node),
                                 check=False))
        if out.strip():
            return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listens on port {port} in {node} after {timeout:g}s")


def iperf3(lab: Lab, src: str, dst: str, seconds: float, *args: str) -> dict:
    """Run one iperf3 test src -> dst and return the client's JSON with the server's inside."""
    port = next(_ports)
    addr = str(lab.plan.address_of(dst))
    server, _ = lab.spawn(dst, ["iperf3", "-s", "-1", "-J", "-B", addr, "-p", str(port)],
                          f"iperf3-server-{port}")
    try:
        _wait_listening(lab, dst, port)
        argv = ("iperf3", "-c", addr, "-p", str(port), "-t", f"{seconds:g}", "-J",
                "--get-server-output", *args)
        out = lab.runner.run(Cmd(argv, netns_name(src), check=False), timeout=seconds + 30)
    finally:
        kill_group(server, grace=5.0)
    result = json.loads(out)
    if "error" in result:
        raise RuntimeError(f"iperf3 {src}->{dst}: {result['error']}")
    return result


def _server_intervals(result: dict, skip: float, seconds: float) -> list[dict]:
    """The server's interval sums from ``skip`` seconds to the client's last second.

    Not the last interval (partial), and not any interval starting in the client's
    last second of a ``seconds``-long test: the server's clock starts after the
    client's, so the client may stop sending inside the server's last whole interval.
    In the VM (kernel backend, 1 Mbit/s, 50 ms) that interval held 63 % of a second's
    bytes and took a 7-interval TCP window to -5.4 %.
    """
    intervals = result["server_output_json"]["intervals"][:-1]
    return [i["sum"] for i in intervals
            if skip - 1e-6 <= i["sum"]["start"] < seconds - 1 - 1e-6]


@dataclass
class RateResult:
    """A rate measured at the receiver, in IP bits per second."""

    ip_bps: float
    seconds: float
    detail: dict


def udp_rate(lab: Lab, src: str, dst: str, offered_bps: float, seconds: float = 5.0,
             size: int = 1428, skip: float = 1.0) -> RateResult:
    """Receiver-side IP rate of a UDP flow offered at ``offered_bps`` (IP bits/s)."""
    payload = size - 28
    udp_bps = offered_bps * payload / size
    result = iperf3(lab, src, dst, seconds, "-u", "-b", f"{udp_bps:.0f}", "-l", str(payload))
    sums = _server_intervals(result, skip, seconds)
    received = sum(s["packets"] - s["lost_packets"] for s in sums)
    secs = sum(s["seconds"] for s in sums)
    byts = sum(s["bytes"] for s in sums) + 28 * received
    end = result["server_output_json"]["end"]["sum"]
    return RateResult(byts * 8 / secs, secs, {"packets": received, "lost": end["lost_packets"],
                                              "sent": end["packets"]})


def tcp_rate(lab: Lab, src: str, dst: str, seconds: float = 8.0, cc: str = "cubic",
             skip: float = 2.0) -> RateResult:
    """Receiver-side IP rate of one TCP flow (goodput scaled by 1500/1448), after ``skip``."""
    # 8 KB reads: with iperf3's default 128 KB, a read straddling an interval
    # boundary moves up to 1 Mbit between intervals (1.6% of 10 Mbit/s over 6 s).
    result = iperf3(lab, src, dst, seconds, "-C", cc, "-l", "8K")
    sums = _server_intervals(result, skip, seconds)
    secs = sum(s["seconds"] for s in sums)
    goodput = sum(s["bytes"] for s in sums) * 8 / secs
    sent = result["end"]["sum_sent"]
    return RateResult(goodput * TCP_IP_BYTES / TCP_PAYLOAD, secs,
                      {"goodput_bps": goodput, "retransmits": sent.get("retransmits"),
                       "whole_test_goodput_bps": result["end"]["sum_received"]
                       ["bits_per_second"],
                       # the receiver's intervals counted, for a rate that misses
                       "intervals": [[round(s["start"], 3), round(s["seconds"], 3),
                                      s["bytes"]] for s in sums]})


@dataclass
class LossResult:
    """Datagrams lost between two hosts, with the 99% Wilson interval of the loss rate."""

    sent: int
    lost: int
    ci: tuple[float, float]

    @property
    def rate(self) -> float:
        """Measured loss probability."""
        return self.lost / self.sent if self.sent else math.nan


def udp_loss(lab: Lab, src: str, dst: str, offered_bps: float, seconds: float = 5.0,
             size: int = 128) -> LossResult:
    """Loss of small UDP datagrams offered below the link rate (so no queue drops)."""
    payload = size - 28
    result = iperf3(lab, src, dst, seconds, "-u", "-b", f"{offered_bps * payload / size:.0f}",
                    "-l", str(payload))
    end = result["server_output_json"]["end"]["sum"]
    sent, lost = int(end["packets"]), int(end["lost_packets"])
    return LossResult(sent, lost, wilson(lost, sent))


# ---------------------------------------------------------------- timestamped UDP


@dataclass
class Probe:
    """What the burst receiver saw: per received datagram its sequence and times (ns)."""

    count: int
    seq: list[int]
    sent_ns: list[int]
    recv_ns: list[int]

    @property
    def lost(self) -> int:
        """Datagrams sent but never received."""
        return self.count - len(set(self.seq))


def probe(lab: Lab, src: str, dst: str, count: int, size: int = 1000, pps: float = 0.0,
          idle: float = 2.0) -> Probe:
    """Send ``count`` timestamped datagrams src -> dst (back-to-back when pps is 0)."""
    port = next(_ports)
    out = lab.run_dir / "probes" / f"burst-{port}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    addr = str(lab.plan.address_of(dst))
    receiver, log = lab.spawn(dst, [sys.executable, str(BURST_SCRIPT), "recv", "--bind", addr,
                                    "--port", str(port), "--out", str(out), "--idle",
                                    str(idle)], f"burst-recv-{port}")
    try:
        deadline = time.monotonic() + 10
        while not Path(str(out) + ".ready").exists():
            if time.monotonic() > deadline or not receiver.alive():
                raise RuntimeError(f"burst receiver did not start: {log.read_text()[-500:]}")
            time.sleep(0.02)
        seconds = count / pps if pps else 1.0
        lab.runner.run(Cmd((sys.executable, str(BURST_SCRIPT), "send", "--to", addr, "--port",
                            str(port), "--count", str(count), "--size", str(size), "--pps",
                            str(pps)), netns_name(src)), timeout=seconds + 30)
        deadline = time.monotonic() + idle + 40
        while not out.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("burst receiver never wrote its results")
            time.sleep(0.05)
    finally:
        kill_group(receiver)
    data = json.loads(out.read_text())
    return Probe(count, data["seq"], data["sent_ns"], data["recv_ns"])


def _waits_before_first_loss(p: Probe, t: float, bucket: float) -> dict[int, float]:
    """The wait (ns) the queue's recursion gives each packet sent before the first loss.

    A token bucket of depth ``bucket`` (ns of the rate; 0: none) lets a packet
    leave as soon as the tokens are not negative, and each departure takes T of
    them: with ``bucket`` = 0 this is W_i = max(0, W_i-1 + T - gap_i).
    """
    sent = dict(zip(p.seq, p.sent_ns, strict=True))
    out: dict[int, float] = {}
    tokens, updated, free = bucket, None, -math.inf
    for seq in range(p.count):
        if seq not in sent:
            break
        leave = max(float(sent[seq]), free)
        if updated is not None:
            tokens = min(bucket, tokens + leave - updated)
        if tokens < 0:
            leave -= tokens
            tokens = 0.0
        out[seq] = leave - sent[seq]
        tokens, updated, free = tokens - t, leave, leave
    return out


def _waiting_ahead(p: Probe, rate_bps: float, size: int, bucket_bytes: int = 0,
                   base_ns: float | None = None) -> dict[int, int]:
    """Per received datagram: how many packets were waiting ahead of it, from its delay.

    A packet that waited W behind k queued packets and the residual of the one
    in service has W = residual + k * T (T = size*8/rate), so k = ceil(W/T) - 1.
    W is the one-way delay minus the path's base delay. The base is not simply
    the smallest delay: a packet reaching an idle emulator waits for it to wake
    up (~0.1-0.2 ms here), one reaching a busy one does not, which at 50 Mbit/s
    is a whole packet time. So the base is taken from the packets before the
    first loss, each minus the wait the queue's recursion gives it from the
    send times, and the median of those. ``bucket_bytes`` is the depth of a
    rate limiter's token bucket (the kernel backend's htb): its tokens let the
    first packets of an overload pass unqueued, and a recursion without them
    would read those packets' delays as a base too low by up to the bucket,
    and every queue after it as one or two packets longer (measured on htb).
    ``base_ns``, the base measured apart (``idle_base_ns``), replaces that estimate.
    """
    t = size * 8 / rate_bps * 1e9
    owd = {seq: r - s for seq, s, r in zip(p.seq, p.sent_ns, p.recv_ns, strict=True)}
    if base_ns is None:
        waits = _waits_before_first_loss(p, t, bucket_bytes * 8 / rate_bps * 1e9)
        bases = [owd[seq] - w for seq, w in waits.items()]
        base_ns = statistics.median(bases) if bases else min(owd.values())
    return {seq: max(0, math.ceil((o - base_ns) / t - 1e-6) - 1) for seq, o in owd.items()}


def queue_at_drops(p: Probe, rate_bps: float, size: int, skip: float,
                   pps: float, bucket_bytes: int = 0) -> dict[str, float]:
    """The queue length at which arrivals are dropped, from an overloading constant-rate flow.

    Once the queue is full, every admitted packet finds the queue one short of
    full, and the arrival after it (before the next departure) is dropped. So
    the packet admitted just before each loss saw k waiting ahead and left the
    queue at k + 1, the length at which the lost one was refused. The median
    over every loss is robust to the odd delay sample off by one.
    """
    first = math.ceil(skip * pps)
    ahead = _waiting_ahead(p, rate_bps, size, bucket_bytes)
    got = sorted(s for s in ahead if s >= first)
    lost = sorted(set(range(first, p.count)) - set(got))
    at_drop = []
    for seq in lost:
        prev = seq - 1
        while prev >= first and prev not in ahead:
            prev -= 1
        if prev >= first:
            at_drop.append(ahead[prev] + 1)
    return {"drops": len(lost), "samples": len(got),
            "queue_at_drop": statistics.median(at_drop) if at_drop else math.nan,
            "max_queue": max((ahead[s] + 1 for s in got), default=math.nan)}


def idle_base_ns(p: Probe) -> float:
    """The path's base one-way delay (ns): the median delay of a probe too sparse to queue.

    A flow that overloads a link from its first packet leaves only the packets
    before its first loss to estimate the base from (``_waiting_ahead``), a
    second or so of them, and a machine stall can hold all of them. On CI's kind
    of VM a RED burst once read a base of 11.46 ms where idle probes said
    5.94 ms, and so a mean queue of 2.84 packets where the emulator's own average
    and RED's curve said 9.5 (the idle base gave 9.71). Measured just before the
    flow, on the same path and clocks, the idle base has no such window to fall
    into. It includes the emulator's wake-up from idle (0.1-0.2 ms here), which a
    packet meeting a busy queue does not wait for, so it reads such a packet's
    queue at most that much short.
    """
    if not p.seq:
        raise ValueError("the idle probe received nothing")
    return statistics.median(r - s for s, r in zip(p.sent_ns, p.recv_ns, strict=True))


def measure_idle_base(lab: Lab, src: str, dst: str, size: int, idle: float = 0.5) -> float:
    """``idle_base_ns`` of 100 datagrams of ``size`` bytes at 50 per second (2 s), none of
    which queues on the links the RED test and bench overload (0.4 Mbit/s)."""
    return idle_base_ns(probe(lab, src, dst, count=100, size=size, pps=50, idle=idle))


def queue_from_owd(p: Probe, rate_bps: float, size: int, skip: float,
                   bucket_bytes: int = 0, base_ns: float | None = None) -> dict[str, float]:
    """Mean number of packets waiting ahead of each arrival sent after ``skip`` seconds.

    ``base_ns`` is the path's base delay measured apart (``idle_base_ns``); without
    it the base is estimated from the packets before the first loss.
    """
    ahead = _waiting_ahead(p, rate_bps, size, bucket_bytes, base_ns)
    start = p.sent_ns[0] + skip * 1e9
    ks = [ahead[seq] for seq, s in zip(p.seq, p.sent_ns, strict=True) if s >= start]
    return {"mean": sum(ks) / len(ks) if ks else math.nan, "samples": len(ks)}


def drop_fraction_after(p: Probe, skip: float, pps: float) -> tuple[int, int]:
    """(lost, sent) among datagrams sent after ``skip`` seconds (sequence-based)."""
    first = math.ceil(skip * pps)
    got = {s for s in p.seq if s >= first}
    sent = p.count - first
    return sent - len(got), sent
