"""Link-emulation fidelity benchmark: configured vs measured over a covering design.

    make bench-links                     # sudo python bench/bench_links.py
    python bench/bench_links.py --quick  # shorter runs, same settings

One lab, a 2-hop path s - r - d: the r-d link carries the setting under test
(both directions; loss on r->d only), s-r is unshaped, so every packet is
forwarded by a router and crosses one emulated direction each way. Between
settings only the link emulation is switched (LinkEmulation.apply).

The full grid (5 rates x 4 delays x 3 losses x 3 queues x 2 disciplines =
360 settings) would take hours, so the design is one factor at a time around
a base point (10 Mbit/s, 10 ms, no loss, 40-packet drop-tail) plus corner
combinations, covering every level of every factor at least once.

Per setting: rate with iperf3 UDP and TCP; RTT over 200 pings (median, p99;
ICMP echoes with kernel receive timestamps, as ping(8) rounds to 1 ms above
100 ms); loss with its 99% Wilson interval; the queue length at which
drop-tail drops happen (overload, receiver timestamps); and RED's drop
fraction against the average queue (open-loop overloads that force known drop
fractions). Then a 60 s TCP Reno run and the packet rate one emulator
sustains. The report goes to docs/bench-links-<backend>.md, raw numbers to
results/.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mcclab.features import probe as probe_features
from mcclab.lab import Lab, LabOptions
from mcclab.links.kernel import htb_burst_bytes
from mcclab.model.loader import resolve_topology
from mcclab.model.topology import RedParams, Topology
from mcclab.probes import fidelity as fx

REPO = Path(__file__).resolve().parent.parent
console = Console()

BASE = {"rate": 10e6, "delay": 0.010, "loss": 0.0, "limit": 40, "disc": "droptail"}
RATE_TOL, RTT_ABS_MS, RTT_REL, P99_MS, QUEUE_TOL = 0.02, 0.5, 0.02, 1.0, 1
RED_TOL_PKTS, RED_TOL_REL = 1.0, 0.05  # avg within max(1 packet, 5%) of the curve's
RED_FRACTIONS_MAIN = [0.01, 0.03, 0.05, 0.10, 0.20]
RED_FRACTIONS_OTHER = [0.03, 0.10]
PPS_STEPS = [10_000, 25_000, 50_000, 75_000, 100_000, 150_000, 200_000]


@dataclass
class Setting:
    """One point of the design: the r-d link's parameters."""

    group: str
    rate: float
    delay: float
    loss: float
    limit: int
    disc: str
    gentle: bool = True

    @property
    def label(self) -> str:
        """Short human label."""
        return (f"{self.rate / 1e6:g} Mbit/s, {self.delay * 1e3:g} ms, {self.loss * 100:g}%, "
                f"{self.limit} pkt {self.disc}")

    def red(self) -> RedParams | None:
        """RED thresholds scaled to the queue (ns-2's 5/15 at 40 packets)."""
        if self.disc != "red":
            return None
        lo = max(1, round(self.limit / 8))
        hi = max(lo + 1, round(3 * self.limit / 8))
        return RedParams(min_th=f"{lo}pkt", max_th=f"{hi}pkt", max_p="10%", gentle=self.gentle)

    def link(self) -> dict:
        """The r-d link as topology data."""
        queue: dict = {"limit": f"{self.limit}pkt", "discipline": self.disc}
        red = self.red()
        if red is not None:
            queue["red"] = {"min_th": f"{red.min_th}pkt", "max_th": f"{red.max_th}pkt",
                            "max_p": "10%", "weight": red.weight, "gentle": red.gentle}
        link = {"rate": f"{self.rate:.0f}bit", "delay": f"{self.delay * 1e3:g}ms",
                "queue": queue}
        if self.loss:
            link["forward"] = {"loss": f"{self.loss * 100:g}%"}
        return link

    @property
    def bdp_pkts(self) -> float:
        """Bandwidth-delay product in full-size packets (RTT = 2 x delay)."""
        return self.rate * 2 * self.delay / (8 * fx.TCP_IP_BYTES)


def design() -> list[Setting]:
    """One factor at a time around BASE, then corners; every level appears at least once."""
    def at(group: str, **over: object) -> Setting:
        return Setting(group, **(BASE | over))  # type: ignore[arg-type]

    out = [at("base")]
    out += [at("rate", rate=r) for r in (0.32e6, 1e6, 3.2e6, 50e6)]
    out += [at("delay", delay=d) for d in (0.0, 0.050, 0.200)]
    out += [at("loss", loss=p) for p in (0.01, 0.05)]
    out += [at("queue", limit=q) for q in (4, 160)]
    out += [at("queue", limit=q, disc="red") for q in (4, 40, 160)]
    out += [
        at("combo", rate=0.32e6, delay=0.200, loss=0.05, limit=4),
        at("combo", rate=50e6, delay=0.200, loss=0.01, limit=160, disc="red"),
        at("combo", rate=1e6, delay=0.050, loss=0.01, limit=40, disc="red"),
        at("combo", rate=3.2e6, delay=0.050, limit=40),
    ]
    return out


def design_vm() -> list[Setting]:
    """One rate, delay, loss, drop-tail and RED setting at rates an emulated CPU carries.

    For `make vm-check` (mcclab/vmcheck): at most 3.2 Mbit/s, and RED without the
    gentle ramp, which the kernel's red lacks (so both backends run the same RED).
    """
    base = {"delay": 0.010, "loss": 0.0, "limit": 40, "disc": "droptail"}
    return [
        Setting("rate", rate=3.2e6, **base),  # type: ignore[arg-type]
        Setting("delay", rate=1e6, **(base | {"delay": 0.050})),  # type: ignore[arg-type]
        Setting("loss", rate=1e6, **(base | {"loss": 0.05})),  # type: ignore[arg-type]
        Setting("droptail", rate=3.2e6, **(base | {"limit": 20})),  # type: ignore[arg-type]
        Setting("red", rate=3.2e6, **(base | {"disc": "red"}), gentle=False),  # type: ignore[arg-type]
    ]


DESIGNS = {"full": design, "vm": design_vm}


def topology(link: dict, backend: str) -> Topology:
    """s - r - d with ``link`` on r-d."""
    return resolve_topology({
        "name": "benchlinks",
        "nodes": {"s": {"kind": "host"}, "r": {"kind": "router"}, "d": {"kind": "host"}},
        "links": [{"endpoints": ["s", "r"]}, {"endpoints": ["r", "d"], **link}],
        "link_backend": backend,
    })


# ------------------------------------------------------------------ measuring


@dataclass
class Result:
    """Everything measured for one setting, and the verdicts."""

    setting: Setting
    rtt: dict = field(default_factory=dict)
    rtt_expected: float = math.nan
    udp_bps: float = math.nan
    tcp_bps: float = math.nan
    tcp: dict = field(default_factory=dict)  # the TCP measurement's detail
    tcp_applicable: bool = True
    loss: dict = field(default_factory=dict)
    queue: dict = field(default_factory=dict)
    red: list[dict] = field(default_factory=list)
    counters: dict = field(default_factory=dict)
    late: dict = field(default_factory=dict)
    verdicts: dict = field(default_factory=dict)


def expected_rtt_ms(s: Setting) -> float:
    """Two propagation delays plus the echo's serialisation in each direction."""
    return (2 * s.delay + 2 * fx.ICMP_IP_BYTES * 8 / s.rate) * 1e3


def lateness(lab: Lab) -> dict:
    """Worst verdict lateness (µs) of the emulators since they (re)started: p99 and max."""
    p99, worst = 0.0, 0.0
    for stats in lab.links.stats().values():  # none on the kernel backend
        for q in stats["queues"].values():
            p99 = max(p99, q["late_p99_us"] if q["late_p99_us"] >= 0 else 2000.0)
            worst = max(worst, q["late_max_us"])
    return {"p99_us": p99, "max_us": worst}


def forward_counters(lab: Lab) -> dict:
    """The r->d direction's counters."""
    return next(c.as_dict() for c in lab.links.counters(max_age=0.15)
                if (c.src, c.dst) == ("r", "d"))


def token_bucket(lab: Lab, rate_bps: float) -> int:
    """Bytes the backend's rate limiter lets through unqueued after idle (the probes need it).

    The kernel backend's htb keeps a bucket of ``htb_burst_bytes``; the userspace
    emulator serialises every packet and has none.
    """
    return htb_burst_bytes(rate_bps) if lab.links.backend == "kernel" else 0


def measure(lab: Lab, s: Setting, quick: bool, step: Callable[[str], None]) -> Result:
    """Run every measurement that applies to ``s``."""
    r = Result(s)
    secs = 3.0 if quick else 5.0
    step("UDP rate")
    size = 1428 if s.rate >= 1e6 else 500  # keep the count of packets per interval up
    r.udp_bps = fx.udp_rate(lab, "s", "d", 1.1 * s.rate, seconds=secs + 1, size=size).ip_bps
    step("TCP rate")
    # cubic keeps a link full when the queue holds >= ~0.43 BDP; random loss caps TCP (Mathis).
    r.tcp_applicable = s.loss == 0 and s.limit >= 0.5 * s.bdp_pkts
    tcp_secs = (8.0 if quick else 12.0) + 4 * s.delay * 10
    tcp = fx.tcp_rate(lab, "s", "d", seconds=tcp_secs, skip=2.0 + 20 * s.delay)
    r.tcp_bps, r.tcp = tcp.ip_bps, tcp.detail | {"seconds": tcp.seconds}
    # Pings after the rate tests: the emulators are warm and the queue has drained.
    step("200 pings")
    r.rtt = fx.rtt_summary(fx.icmp_rtts(lab, "s", "d", count=200, interval=0.01))
    r.rtt_expected = expected_rtt_ms(s)
    r.late = lateness(lab)
    if s.loss:
        step("loss")
        got = fx.udp_loss(lab, "s", "d", offered_bps=0.5 * s.rate,
                          seconds=secs * (3 if s.rate < 1e6 else 1))
        r.loss = {"sent": got.sent, "lost": got.lost, "rate": got.rate, "ci": got.ci}
    if s.disc == "droptail":
        step("drop-tail onset")
        before = forward_counters(lab)
        size, pps = 1000, 1.25 * s.rate / (1000 * 8)  # 25% overload keeps the queue full
        fill = s.limit / (pps - s.rate / (size * 8))
        skip = 0.5 + 2 * fill
        flow = fx.probe(lab, "s", "d", count=int(pps * (skip + 2.0)), size=size, pps=pps,
                        idle=0.5 + 2 * s.delay)
        after = forward_counters(lab)
        r.queue = fx.queue_at_drops(flow, s.rate, size, skip=skip, pps=pps,
                                    bucket_bytes=token_bucket(lab, s.rate)) | {
            "max_qlen": after["max_qlen"], "sent": flow.count, "lost": flow.lost,
            "emulator_drops": after["drops_queue"] - before["drops_queue"]}
    else:
        fractions = RED_FRACTIONS_MAIN if s.group == "queue" and s.limit == 40 else \
            RED_FRACTIONS_OTHER
        for target in fractions:
            step(f"RED at drop fraction {target:g}")
            r.red.append(red_point(lab, s, target, quick))
    r.counters = forward_counters(lab)
    r.verdicts = verdicts(r)
    return r


def red_point(lab: Lab, s: Setting, target: float, quick: bool) -> dict:
    """Overload the RED queue so it must drop ``target`` of arrivals; see where avg settles."""
    red = s.red()
    assert red is not None
    size = 1000
    mu = s.rate / (size * 8)
    admitted = mu / (1 - target)  # arrival rate at the queue that forces the target fraction
    pps = admitted / (1 - s.loss)
    # The average needs a few EWMA time constants (1 / (weight x arrivals/s)) to settle:
    # 0.4 s at 10 Mbit/s, 4 s at 1 Mbit/s with 1000-byte packets.
    tau = 1 / (red.weight * admitted)
    warm, run = max(3.0, 5 * tau), max(6.0 if quick else 9.0, 4 * tau)
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        start = time.monotonic()
        while not stop.is_set():
            c = forward_counters(lab)
            # The kernel's red qdisc does not report its average (counters say None).
            if time.monotonic() - start > warm and c["red_avg"] is not None:
                samples.append(c["red_avg"])
            stop.wait(0.1)

    # the path's base delay, measured apart (fidelity.idle_base_ns): the burst's own
    # packets before its first loss give a base a stall can inflate
    base = fx.measure_idle_base(lab, "s", "d", size, idle=0.5 + 2 * s.delay)
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        burst = fx.probe(lab, "s", "d", count=int(pps * (warm + run)), size=size, pps=pps,
                         idle=0.5 + 2 * s.delay)
    finally:
        stop.set()
        th.join()
    lost, sent = fx.drop_fraction_after(burst, skip=warm, pps=pps)
    total = lost / sent
    fraction = 1 - (1 - total) / (1 - s.loss)  # RED's share (random loss comes first)
    queue = fx.queue_from_owd(burst, s.rate, size, skip=warm, base_ns=base)["mean"]
    early = fx.queue_from_owd(burst, s.rate, size, skip=warm,
                              bucket_bytes=token_bucket(lab, s.rate))["mean"]
    point = {
        "target": target, "sent": sent, "drop_fraction": fraction,
        "avg_queue_owd": queue,
        "avg_queue_owd_early_base": early,  # the base from the burst's pre-loss packets
        "avg_queue_emulator": sum(samples) / len(samples) if samples else math.nan,
        "curve_avg": fx.red_avg_for_fraction(fraction, red),
        "curve_fraction_at_avg": fx.red_expected_fraction(queue, red),
    }
    if lab.links.backend == "kernel":
        # Linux's red spaces drops uniformly on [1, 1/p_b] (Floyd's rule without
        # ns-2's wait_), so it reaches a fraction at a lower average: its own curve,
        # reported beside the target, which stays ns-2's.
        point["curve_avg_linux"] = fx.red_avg_for_fraction(fraction, red, wait=False)
    return point


def verdicts(r: Result) -> dict[str, bool | None]:
    """Each target: True (met), False (missed) or None (does not apply)."""
    s, out = r.setting, {}
    out["udp rate ±2%"] = abs(r.udp_bps / s.rate - 1) <= RATE_TOL
    out["tcp rate ±2%"] = abs(r.tcp_bps / s.rate - 1) <= RATE_TOL if r.tcp_applicable else None
    tol = max(RTT_ABS_MS, RTT_REL * r.rtt_expected)
    out["rtt median"] = abs(r.rtt["median"] - r.rtt_expected) <= tol
    out["rtt p99-median ≤1ms"] = (r.rtt["p99"] - r.rtt["median"] <= P99_MS
                                  if s.rate <= 10e6 else None)
    if r.loss:
        lo, hi = r.loss["ci"]
        out["loss in 99% CI"] = lo <= s.loss <= hi
    if r.queue:
        out["drop-tail onset ±1"] = abs(r.queue["queue_at_drop"] - s.limit) <= QUEUE_TOL
    if r.red:
        out["RED on its curve"] = all(
            abs(p["avg_queue_owd"] - p["curve_avg"]) <= max(RED_TOL_PKTS,
                                                            RED_TOL_REL * p["curve_avg"])
            for p in r.red)
    return out


def tcp_reno(lab: Lab, seconds: float) -> dict:
    """One Reno flow over 3.2 Mbit/s, 100 ms RTT, 40-packet drop-tail."""
    lab.links.apply(topology(Setting("tcp", 3.2e6, 0.050, 0.0, 40, "droptail").link(),
                             lab.links.backend))
    fx.ping(lab, "s", "d", count=3, interval=0.05)
    result = fx.iperf3(lab, "s", "d", seconds, "-C", "reno", "-l", "8K")
    goodput = result["end"]["sum_received"]["bits_per_second"]
    util = goodput * fx.TCP_IP_BYTES / fx.TCP_PAYLOAD / 3.2e6
    return {"seconds": seconds, "goodput_bps": goodput, "utilisation": util,
            "retransmits": result["end"]["sum_sent"].get("retransmits"), "ok": util >= 0.90}


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pps_capacity(lab: Lab, seconds: float, step: Callable[[str], None]) -> list[dict]:
    """Small UDP packets through one emulator (1 ms delay, no rate) at rising packet rates."""
    lab.links.apply(topology({"delay": "1ms"}, lab.links.backend))
    fx.ping(lab, "s", "d", count=3, interval=0.05)
    pid = lab.links.emulator_pids()["d"]  # serves r->d at d's ingress
    rows = []
    for pps in PPS_STEPS:
        step(f"{pps} pkt/s")
        before = forward_counters(lab)
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        rtts: list[float] = []

        def pinger(out: list[float] = rtts) -> None:
            time.sleep(1.0)
            out += fx.ping(lab, "s", "d", count=100, interval=0.02)

        th = threading.Thread(target=pinger)
        th.start()
        result = fx.iperf3(lab, "s", "d", seconds, "-u", "-b", str(pps * 64 * 8), "-l", "64")
        th.join()
        cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
        after = forward_counters(lab)
        end = result["server_output_json"]["end"]["sum"]
        received = end["packets"] - end["lost_packets"]
        rtt = fx.rtt_summary(rtts)
        expected = 2.0
        ok = (end["lost_packets"] <= 0.0001 * end["packets"] and after["errors"] == before["errors"]
              and abs(rtt["median"] - expected) <= RTT_ABS_MS
              and rtt["p99"] - rtt["median"] <= P99_MS)
        rows.append({"offered_pps": pps, "received_pps": received / seconds,
                     "lost": end["lost_packets"], "sent": end["packets"],
                     "emulator_cpu": cpu, "us_per_pkt": cpu / (received / seconds) * 1e6,
                     "rtt_median": rtt["median"], "rtt_p99": rtt["p99"],
                     "emulator_errors": after["errors"] - before["errors"], "ok": ok})
        if not ok:
            break
    return rows


# ------------------------------------------------------------------ report


def mark(v: bool | None) -> str:
    """A verdict cell."""
    return "n/a" if v is None else ("ok" if v else "MISS")


def report(results: list[Result], reno: dict | None, pps: list[dict], meta: dict) -> str:
    """The Markdown report."""
    lines = [f"# Link emulation benchmark: {meta['backend']} backend", "",
             f"Generated by `make bench-links` (bench/bench_links.py) on {meta['date']}: "
             f"{meta['machine']}, kernel {meta['kernel']}, {meta['cpus']} CPUs; backend "
             f"{meta['backend']} ({meta['reason']}); {'quick' if meta['quick'] else 'full'} run, "
             f"{meta['minutes']:.1f} min.", "",
             "Path s - r - d; the r-d link carries the setting (both directions; loss on "
             "r->d only); s-r is unshaped. " + (
                 "Design: one factor at a time around 10 Mbit/s, 10 ms, 0%, 40-packet "
                 "drop-tail, plus corners (see bench/bench_links.py)."
                 if meta.get("design", "full") == "full" else
                 "Design: `vm`, one rate, delay, loss, drop-tail and RED (not gentle) setting "
                 "at <= 3.2 Mbit/s (bench/bench_links.py design_vm, for make vm-check)."), "",
             "Targets: rate within ±2% (UDP always; TCP where a queue of >= 0.5 BDP and no "
             "random loss let one cubic flow fill the link); median RTT within max(0.5 ms, 2%) "
             "of 2 x delay + the echo's serialisation; p99 - median <= 1 ms at <= 10 Mbit/s; "
             "loss inside the 99% Wilson interval; drop-tail drops begin at the limit ±1; "
             "RED's average queue within max(1 packet, 5%) of where its curve puts the "
             "measured drop fraction. 'late p99/max' is the emulators' own verdict lateness "
             "over the setting (userspace), to tell emulator tails from host noise.", "",
             "## Rate, delay, loss", "",
             "| setting | RTT want | RTT median | p99 | late p99/max µs | UDP Mbit/s "
             "| TCP Mbit/s | loss (99% CI) | verdicts |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        s = r.setting
        loss = "-"
        if r.loss:
            lo, hi = r.loss["ci"]
            loss = (f"{r.loss['rate'] * 100:.2f}% [{lo * 100:.2f}, {hi * 100:.2f}] "
                    f"n={r.loss['sent']}")
        tcp = f"{r.tcp_bps / 1e6:.3f}" + ("" if r.tcp_applicable else " (n/a)")
        bad = [k for k, v in r.verdicts.items() if v is False]
        udp_err = (r.udp_bps / s.rate - 1) * 100
        late = f"{r.late['p99_us']:.0f}/{r.late['max_us']:.0f}" if r.late else "-"
        lines.append(f"| {s.label} | {r.rtt_expected:.2f} | {r.rtt['median']:.2f} | "
                     f"{r.rtt['p99']:.2f} | {late} | {r.udp_bps / 1e6:.4f} ({udp_err:+.2f}%) | "
                     f"{tcp} | {loss} | {'all ok' if not bad else 'MISS: ' + ', '.join(bad)} |")
    lines += ["", "## Drop-tail: where drops begin", "",
              "A constant-rate flow at 1.25 x the link rate keeps the queue full; each packet's "
              "one-way delay gives the packets waiting ahead of it, and the packet admitted "
              "just before each loss tells the queue length at which that loss was refused "
              "(median over all losses).", "",
              "| setting | sent | lost (receiver / emulator) | queue at drops (median) "
              "| emulator max_qlen |", "|---|---|---|---|---|"]
    for r in results:
        if r.queue:
            q = r.queue
            lines.append(f"| {r.setting.label} | {q['sent']} | {q['lost']} / "
                         f"{q['emulator_drops']} | **{q['queue_at_drop']:g}** (want "
                         f"{r.setting.limit}) | {q['max_qlen']} |")
    lines += ["", "## RED: drop fraction against average queue", "",
              "Open-loop overload at rate/(1-f) forces a drop fraction f; the average queue "
              "must settle where RED's curve (ns-2, gentle, wait_, count-spaced drops) gives "
              "that fraction.", "",
              "The receivers' one-way delays are read over the idle path's base delay, "
              "measured just before the burst; the reading over the base the burst's own "
              "packets before its first loss give is beside it.", "",
              "| setting | forced f | measured f | avg queue (receiver OWD) | same, pre-loss "
              "base | avg (emulator) | curve: avg for f | curve: f at avg |",
              "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for p in r.red:
            lines.append(f"| {r.setting.label} | {p['target']:.2f} | {p['drop_fraction']:.4f} | "
                         f"{p['avg_queue_owd']:.2f} | "
                         f"{p['avg_queue_owd_early_base']:.2f} | "
                         f"{p['avg_queue_emulator']:.2f} | "
                         f"{p['curve_avg']:.2f} | {p['curve_fraction_at_avg']:.4f} |")
    if reno:
        lines += ["", "## TCP sanity", "",
                  f"One Reno flow, 3.2 Mbit/s, 100 ms RTT, 40-packet drop-tail, "
                  f"{reno['seconds']:g} s: utilisation **{reno['utilisation'] * 100:.1f}%** "
                  f"(goodput {reno['goodput_bps'] / 1e6:.3f} Mbit/s x 1500/1448; "
                  f"{reno['retransmits']} retransmits); target >= 90%: "
                  f"{'ok' if reno['ok'] else 'MISS'}."]
    if pps:
        lines += ["", "## Packet rate of one emulator", "",
                  "64-byte UDP payloads (92-byte IP packets) through d's emulator (r->d, 1 ms, "
                  "no rate limit), with 100 pings alongside; targets: no loss, median RTT "
                  "within 0.5 ms of 2 ms, p99 - median <= 1 ms. Sender, router, receiver and "
                  "emulators share the 2 CPUs.", "",
                  "| offered pkt/s | received pkt/s | lost | emulator CPU | µs/pkt "
                  "| RTT median | p99 | ok |", "|---|---|---|---|---|---|---|---|"]
        for p in pps:
            lines.append(f"| {p['offered_pps']} | {p['received_pps']:.0f} | {p['lost']} | "
                         f"{p['emulator_cpu'] * 100:.0f}% | {p['us_per_pkt']:.1f} | "
                         f"{p['rtt_median']:.2f} | {p['rtt_p99']:.2f} | {mark(p['ok'])} |")
    met = sum(v is True for r in results for v in r.verdicts.values())
    missed = [(r.setting.label, k) for r in results for k, v in r.verdicts.items() if v is False]
    lines += ["", "## Summary", "", f"{met} targets met, {len(missed)} missed."]
    lines += [f"- missed: {label}: {k}" for label, k in missed]
    return "\n".join(lines) + "\n"


def print_table(results: list[Result]) -> None:
    """The main table on the console."""
    t = Table("setting", "RTT want", "median", "p99", "UDP Mbit/s", "TCP Mbit/s", "loss",
              "queue", "verdict", title="configured vs measured")
    for r in results:
        s = r.setting
        loss = f"{r.loss['rate'] * 100:.2f}%" if r.loss else "-"
        queue = (f"{r.queue['queue_at_drop']:g}/{s.limit}" if r.queue else
                 " ".join(f"{p['avg_queue_owd']:.1f}~{p['curve_avg']:.1f}" for p in r.red))
        bad = [k for k, v in r.verdicts.items() if v is False]
        t.add_row(s.label, f"{r.rtt_expected:.2f}", f"{r.rtt['median']:.2f}",
                  f"{r.rtt['p99']:.2f}", f"{r.udp_bps / 1e6:.3f}", f"{r.tcp_bps / 1e6:.3f}",
                  loss, queue, "[green]ok[/green]" if not bad else f"[red]{', '.join(bad)}[/red]")
    console.print(t)


# ------------------------------------------------------------------ main


def up_when_free(topo: Topology, features: object, wait: float) -> Lab:
    """Bring the lab up, waiting up to ``wait`` seconds for the machine's lab lock."""
    return Lab(topo, LabOptions(features=features, lock_timeout=wait)).up()  # type: ignore[arg-type]


def main() -> None:
    """Run the benchmark and write the report."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter measurements")
    ap.add_argument("--backend", default="auto", choices=["auto", "kernel", "userspace"])
    ap.add_argument("--design", default="full", choices=sorted(DESIGNS),
                    help="full: the covering design; vm: five low-rate settings (make vm-check)")
    ap.add_argument("--out-dir", type=Path, default=REPO / "docs")
    ap.add_argument("--raw", type=Path, help="where to write the raw JSON "
                    "(default results/bench-links-<backend>-<time>.json)")
    ap.add_argument("--only", help="comma-separated setting groups "
                    "(base,rate,delay,loss,queue,combo,tcp,pps)")
    ap.add_argument("--wait", type=float, default=1800, help="seconds to wait for a busy machine")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    full = args.design == "full"
    settings = [s for s in DESIGNS[args.design]() if only is None or s.group in only]
    want_reno = full and (only is None or "tcp" in only)
    want_pps = full and (only is None or "pps" in only)
    t_start = time.monotonic()
    features = probe_features()
    lab = up_when_free(topology(settings[0].link() if settings else
                                Setting("x", **BASE).link(), args.backend), features, args.wait)
    results: list[Result] = []
    reno, pps = None, []
    try:
        meta = {"backend": lab.links.backend, "reason": lab.links.reason,
                "date": time.strftime("%Y-%m-%d %H:%M"), "kernel": platform.release(),
                "machine": f"{platform.machine()} {platform.node()}", "cpus": os.cpu_count(),
                "quick": args.quick}
        console.print(f"link backend [bold]{meta['backend']}[/bold] ({meta['reason']}); "
                      f"{len(settings)} settings")
        with Progress(TextColumn("{task.description:<58}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task("settings", total=len(settings) + want_reno + want_pps)
            for s in settings:
                def step(what: str, s: Setting = s) -> None:
                    bar.update(task, description=f"{s.label}: {what}")
                lab.links.apply(topology(s.link(), lab.links.backend))
                lab.links.check()
                fx.ping(lab, "s", "d", count=3, interval=0.05)
                results.append(measure(lab, s, args.quick, step))
                lab.links.check()
                bar.advance(task)
            if want_reno:
                bar.update(task, description="TCP Reno, 3.2 Mbit/s, 100 ms RTT, 40 pkt")
                reno = tcp_reno(lab, 20.0 if args.quick else 60.0)
                bar.advance(task)
            if want_pps:
                pps = pps_capacity(lab, 3.0 if args.quick else 5.0,
                                   lambda w: bar.update(task, description=f"packet rate: {w}"))
                bar.advance(task)
    finally:
        lab.down()
    meta["minutes"] = (time.monotonic() - t_start) / 60
    meta["design"] = args.design
    print_table(results)
    text = report(results, reno, pps, meta)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "" if full else f"-{args.design}"
    out = args.out_dir / f"bench-links-{meta['backend']}{suffix}.md"
    out.write_text(text)
    raw = args.raw or (REPO / "results" / f"bench-links-{meta['backend']}{suffix}-"
                       f"{time.strftime('%Y%m%d-%H%M%S')}.json")
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps({"meta": meta, "results": [asdict(r) for r in results],
                               "reno": reno, "pps": pps}, indent=1, default=str))
    if reno:
        console.print(f"TCP Reno utilisation {reno['utilisation'] * 100:.1f}% over "
                      f"{reno['seconds']:g} s")
    if pps:
        best = max((p for p in pps if p["ok"]), key=lambda p: p["received_pps"], default=None)
        if best:
            console.print(f"one emulator: {best['received_pps']:.0f} pkt/s within targets "
                          f"({best['emulator_cpu'] * 100:.0f}% CPU, "
                          f"{best['us_per_pkt']:.1f} µs/pkt)")
    console.print(f"report: {out}\nraw: {raw}")
    missed = sum(v is False for r in results for v in r.verdicts.values())
    sys.exit(1 if missed or (reno and not reno["ok"]) else 0)


if __name__ == "__main__":
    main()
