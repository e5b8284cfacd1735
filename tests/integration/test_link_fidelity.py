"""Acceptance: emulated links deliver the configured rate, delay, loss and queue behaviour.

One lab (s - r - d; the r-d link is the one under test, s-r is unshaped) is
brought up once; each test switches the r-d parameters with
``LinkEmulation.apply`` and measures from the end hosts: iperf3 JSON, ping
output and receiver timestamps, with the emulator's counters as a
cross-check. The full grid is ``make bench-links`` (bench/bench_links.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mcclab.commands import Cmd
from mcclab.lab import Lab, LabOptions, PreflightError
from mcclab.links import LinkEmulationError, userspace
from mcclab.model.loader import resolve_topology
from mcclab.model.topology import RedParams, Topology
from mcclab.net.node_config import netns_name
from mcclab.probes import fidelity as fx
from mcclab.state import STATE_ROOT, leftovers

# timeout: the slowest test measured 16.5 s (2-core VM); a test may also wait up to 60 s for
# a quiet machine and 60 s for a quiet path before it measures
pytestmark = [pytest.mark.root, pytest.mark.timeout(180)]

MCCLAB = [sys.executable, "-m", "mcclab"]
RATE_TOL = 0.02  # rate within ±2%
P99_SPREAD_MS = 1.0  # p99 - median at rates <= 10 Mbit/s
ECHOES = 1000  # the p99 rests on the ten slowest (of 200 it was the second slowest)
RTT_ROUNDS = 6  # rounds of ECHOES at most, until 90 % of ECHOES are clear of stalls
RED_ROUNDS = 3  # RED bursts at most, until one finds a usable machine
TCP_UTILISATION = 0.90
BASE = {"rate": "10Mbit", "delay": "5ms", "queue": {"limit": "40pkt"}}


def path(**link) -> Topology:
    """s - r - d with ``link``'s parameters on r-d (both directions unless overridden)."""
    return resolve_topology({
        "name": "linkfid",
        "nodes": {"s": {"kind": "host"}, "r": {"kind": "router"}, "d": {"kind": "host"}},
        "links": [{"endpoints": ["s", "r"]}, {"endpoints": ["r", "d"], **link}],
        "link_backend": "userspace",
    })


def up_when_free(topo: Topology, features, wait: float = 300.0) -> Lab:  # noqa: ANN001
    """Bring a lab up, waiting while another engineer's lab holds the machine."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return Lab(topo, LabOptions(features=features)).up()
        except PreflightError as exc:
            if "another mcclab lab" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(5)


def pin_neighbours(lab: Lab) -> int:
    """Permanent ARP entries between every two connected nodes; how many were made.

    No address is resolved again during a measurement: a re-resolution holds the
    packets behind it for up to a second (see mcclab.links.userspace). Every test
    measures on them; the RTT test checks that they held.
    """
    nodes = list(lab.plan.interfaces)
    macs = {n: userspace.parse_macs(lab.runner.run(userspace.link_show_cmd(netns_name(n))))
            for n in nodes}
    pins = userspace.pin_neighbour_cmds(lab.plan, macs, {n: netns_name(n) for n in nodes})
    for pin in pins:
        lab.runner.run(pin)
    return len(pins)


def permanent_neighbours(lab: Lab) -> int:
    """How many permanent IPv4 neighbour entries the lab's nodes hold now."""
    return sum(len(json.loads(lab.runner.run(Cmd(("ip", "-j", "-4", "neigh", "show", "nud",
                                                  "permanent"), netns_name(n))) or "[]"))
               for n in lab.plan.interfaces)


@pytest.fixture(scope="module")
def lab(kernel_features):
    if not kernel_features.nfqueue:
        pytest.skip("the kernel has no NFQUEUE target")
    lab = up_when_free(path(**BASE), kernel_features)
    try:
        pin_neighbours(lab)
        yield lab
    finally:
        lab.down()


def use(lab: Lab, **link) -> None:
    """Switch the r-d link to ``link`` and make sure every emulator is running."""
    lab.links.apply(path(**link))
    lab.links.check()
    fx.ping(lab, "s", "d", count=3, interval=0.05)  # ARP warm, path proven


def show(capsys, text: str) -> None:  # noqa: ANN001
    """Print a measured value next to the test result (pytest captures output otherwise)."""
    with capsys.disabled():
        print(f"\n  {text}", end="")


def forward(lab: Lab):
    """The r->d counters now (fresh within 150 ms)."""
    return next(c for c in lab.links.counters(max_age=0.15) if (c.src, c.dst) == ("r", "d"))


def emulator_lateness(lab: Lab) -> str:
    """Each emulated direction's worst delivery lateness since its emulator started."""
    parts = []
    for node, stats in lab.links.stats().items():
        for q in stats["queues"].values():
            parts.append(f"{q['name']} max {q['late_max_us']:.0f} us, "
                         f"{q['late_over_100us']} over 100 us, {q['drops_queue']} queue drops")
        # the loop serves no packet while it writes its stats
        parts.append(f"{node}'s longest stats write {stats['stats_write_max_us']:.0f} us")
    return "; ".join(parts)


def test_backend_is_userspace_and_recorded(lab):
    assert lab.link_backend == "userspace" == lab.links.backend
    assert (lab.run_dir / "links" / "plan.json").is_file()


def fifo_allowed() -> bool:
    """True when this process may start a SCHED_FIFO child (root, and an RT budget)."""
    return subprocess.run(["chrt", "-f", "1", "true"], capture_output=True).returncode == 0


def test_emulators_run_sched_fifo(lab):
    # The RTT-tail target below depends on it: at normal priority the tail
    # followed whatever else wanted the CPU.
    if not fifo_allowed():
        pytest.skip("this machine refuses SCHED_FIFO (no CAP_SYS_NICE or no RT budget in "
                    "this cgroup); the emulators run at normal priority")
    use(lab, **BASE)
    for emu in lab.links.emulators.values():
        assert emu.proc is not None
        assert os.sched_getscheduler(emu.proc.pid) == os.SCHED_FIFO, emu.node
        assert os.sched_getparam(emu.proc.pid).sched_priority == lab.links.rt_priority > 0
        # ... and its pages stay in memory: a page the VM reclaimed faults back from disk
        status = Path(f"/proc/{emu.proc.pid}/status").read_text()
        locked_kb = int(re.search(r"VmLck:\s+(\d+) kB", status).group(1))
        assert locked_kb > 0 and lab.links.stats()[emu.node]["locked"] is True, emu.node


def test_rate_udp_and_tcp_within_2_percent(lab, capsys):
    use(lab, **BASE)
    udp = fx.udp_rate(lab, "s", "d", offered_bps=12e6, seconds=4)
    assert abs(udp.ip_bps / 10e6 - 1) <= RATE_TOL, f"UDP {udp.ip_bps / 1e6:.3f} Mbit/s"
    tcp = fx.tcp_rate(lab, "s", "d", seconds=6)
    show(capsys, f"10 Mbit/s: UDP {udp.ip_bps / 1e6:.4f}, TCP {tcp.ip_bps / 1e6:.4f} Mbit/s")
    assert abs(tcp.ip_bps / 10e6 - 1) <= RATE_TOL, f"TCP {tcp.ip_bps / 1e6:.3f} Mbit/s"
    assert forward(lab).errors == 0


@pytest.mark.timeout(300)  # up to RTT_ROUNDS rounds, each after a wait for a quiet machine
def test_rtt_median_and_tail(lab, capsys):
    use(lab, rate="10Mbit", delay="20ms", queue={"limit": "40pkt"})
    # two propagation delays plus the 84-byte echo's serialisation each way
    want = 2 * 20 + 2 * fx.ICMP_IP_BYTES * 8 / 10e6 * 1e3
    # Watchers on every CPU, above the lab's priorities, mark the spans in which the
    # machine itself ran nothing for longer than the tail target (a stalled VM), and the
    # emulators' own logs mark the spans in which they sent a verdict 0.5 ms or more
    # after the model's due time (held up while the watchers ran: CI once saw an
    # emulator 25 ms late, and the tail of the echoes the watchers cleared 1.76 ms).
    # Echoes in flight then are set aside, and the median and the tail are those of
    # the rest: the model's delays and the kernel's path, which the emulators do not
    # time. A late emulator is set aside, not excused: every such echo counts against
    # the 90 % below.
    # They rest on at least 90 % of ECHOES echoes clear of stalls: a round that leaves
    # fewer is followed by another, at most RTT_ROUNDS in all, and the clear echoes are
    # pooled. A VM can stall for 2-18 ms several times a second for minutes while idle
    # (measured on the CI machine's kind); CI once set aside 760 of 1000 echoes after a
    # minute's wait for quiet, and a median of all echoes then was 1.1 ms late.
    clear: list[float] = []
    for rounds, waited, _ in fx.quiet_rounds(RTT_ROUNDS, threshold=P99_SPREAD_MS / 1e3):
        watchers = fx.machine_stalls(ECHOES * 0.01 + 3, threshold=P99_SPREAD_MS / 1e3)
        arp_before = fx.arp_cache_counters()
        mark = fx.late_mark(lab)
        echoes = fx.icmp_echoes(lab, "s", "d", count=ECHOES, interval=0.01)
        arp = {k: v - arp_before[k] for k, v in fx.arp_cache_counters().items()}
        stalls = fx.stalls_of(watchers)
        held = fx.emulator_late_spans(lab, mark)
        s = fx.rtt_summary([e.rtt_ms for e in echoes])
        mine = fx.clear_of_stalls(echoes, stalls + held)
        clear += mine
        # Where a slow echo was held, if the emulators were late (CI once saw a p99 of
        # 93 ms with a single 2 ms machine stall): for the report, not asserted. A CI
        # rehearsal once lost 43 echoes and held others for 0.9 s with the emulators and
        # the machine on time: an address resolved again (a 1 s ARP retransmit, the queue
        # of packets waiting for it overflowing), which the lab's pinned neighbours now
        # rule out. The sequence numbers and the ARP counters say where such a hold was.
        late = emulator_lateness(lab)
        trouble = fx.echo_trouble(echoes, ECHOES, slow_ms=round(want) + 10)
        show(capsys, f"round {rounds}: RTT want {want:.3f} ms: median {s['median']:.3f}, "
                     f"p99 {s['p99']:.3f} ms; quiet after {waited:.0f} s; "
                     f"{len(stalls)} machine stalls, {len(held)} late emulator verdicts, "
                     f"{s['n'] - len(mine)} echoes set aside; "
                     f"{trouble}; ARP entries made {arp['allocs']}, unresolved discards "
                     f"{arp['unresolved_discards']}; emulators: {late}")
        why = (trouble, arp, stalls, held, late)
        # still pinned (s-r and r-d, both ways): nothing on the path was resolved again
        assert permanent_neighbours(lab) == len(userspace.neighbour_pairs(lab.plan)) == 4
        assert s["n"] == ECHOES, why
        if len(clear) >= 0.9 * ECHOES:
            break
    pooled = fx.rtt_summary(clear)
    show(capsys, f"{rounds} round(s): {pooled['n']} echoes clear of stalls, median "
                 f"{pooled['median']:.3f}, p99 {pooled['p99']:.3f} ms")
    assert pooled["n"] >= 0.9 * ECHOES, (pooled, rounds, stalls)
    assert abs(pooled["median"] - want) <= max(0.5, 0.02 * want), pooled
    assert pooled["p99"] - pooled["median"] <= P99_SPREAD_MS, (pooled, why)


def test_loss_inside_the_99_percent_interval(lab, capsys):
    # The queue is deep enough to ride out a stall of the machine: after one of T seconds
    # the emulator reads the T x 4900 datagrams the kernel held all at once, and the
    # spare 5 Mbit/s drains them. A 40-packet queue (4 ms of these datagrams) overflowed
    # in CI (52 queue drops); 1000 packets absorb a 200 ms stall.
    use(lab, rate="10Mbit", delay="5ms", queue={"limit": "1000pkt"}, forward={"loss": "5%"})
    before = forward(lab)
    got = fx.udp_loss(lab, "s", "d", offered_bps=5e6, seconds=4)
    after = forward(lab)
    lo, hi = got.ci
    show(capsys, f"loss 5%: {got.lost}/{got.sent} = {got.rate:.4f}, 99% CI [{lo:.4f}, {hi:.4f}]")
    assert got.sent > 15000
    assert after.drops_queue == before.drops_queue  # offered below the rate: loss only
    # The emulator's random loss: its own drop count over what reached the link.
    arrived = after.pkts_in - before.pkts_in
    dropped = after.drops_loss - before.drops_loss
    emu_lo, emu_hi = fx.wilson(dropped, arrived)
    assert emu_lo <= 0.05 <= emu_hi, f"emulator: {dropped}/{arrived}, CI [{emu_lo}, {emu_hi}]"
    # End to end the application sees those drops plus whatever the hosts lose under
    # load (socket buffers during a CPU stall): at most 1% of what was sent. The loaded
    # suite once saw 5.65% end to end with the emulator inside its interval.
    assert -0.002 * got.sent <= got.lost - dropped <= 0.01 * got.sent, (got.lost, dropped,
                                                                           got.sent)


def test_droptail_drops_begin_at_the_queue_limit(lab, capsys):
    use(lab, rate="10Mbit", delay="5ms", queue={"limit": "20pkt"})
    before = forward(lab)
    size, pps = 1000, 1.25 * 10e6 / (1000 * 8)  # overload by 25%: the queue stays full
    flow = fx.probe(lab, "s", "d", count=int(pps * 3), size=size, pps=pps, idle=0.5)
    q = fx.queue_at_drops(flow, 10e6, size, skip=1.0, pps=pps)
    after = forward(lab)
    show(capsys, f"drop-tail 20 pkt: queue at drops {q['queue_at_drop']}, "
                 f"emulator max_qlen {after.max_qlen}")
    assert q["drops"] > 100
    assert abs(q["queue_at_drop"] - 20) <= 1, q
    # Data fills the queue to its limit and no further; only the router's IGMP and PIM
    # packets, which the emulator never drops (docs/links.md, "Control packets"), may
    # wait beyond it (the suite once saw 22 with two of them).
    assert 20 <= after.max_qlen <= 20 + after.control_in, after.max_qlen
    # Every probe datagram lost was a queue drop. Other packets may meet the same full
    # queue: CI once counted 919 drops for 918 lost.
    # Drops beyond the probe's must be fewer than the other packets that reached the link.
    extra = after.drops_queue - before.drops_queue - flow.lost
    others = after.pkts_in - before.pkts_in - flow.count
    assert 0 <= extra <= others, (extra, others)


def red_averages(lab: Lab, seconds: float, every: float = 0.2) -> list[tuple[int, float]]:
    """(CLOCK_REALTIME ns, the r->d emulator's RED average) every ``every`` s for ``seconds``.

    The RED test asserts on the queue the receivers' delays show; the emulator's own
    average beside it says, on a miss, whether the emulator's RED or the path strayed.
    """
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        out.append((time.time_ns(), forward(lab).red_avg))
        time.sleep(every)
    return out


@pytest.mark.timeout(300)  # up to RED_ROUNDS bursts, each after waits for a quiet machine
def test_red_drop_probability_follows_its_curve(lab, capsys):
    red = {"min_th": "5pkt", "max_th": "15pkt", "max_p": "10%", "weight": 0.002}
    use(lab, rate="10Mbit", delay="5ms",
        queue={"limit": "40pkt", "discipline": "red", "red": red})
    size, mu = 1000, 10e6 / (1000 * 8)
    target = 0.03  # an open-loop overload forces this drop fraction (conservation)
    pps = mu / (1 - target)
    params = RedParams(min_th="5pkt", max_th="15pkt", max_p="10%")
    # Link time the emulator loses forces drops beyond the target: 0.045-0.051 in three
    # CI rehearsals, never alone (pages the VM reclaimed from the emulator, which now
    # locks its memory; docs/links.md). Machine stalls still cost link time: watchers as
    # in the RTT test measure them, and each stalled second may add mu drops, no more.
    # A burst is measured on a usable machine, stalled for at most a tenth of its
    # window: CI once saw 0.82 s of stalls in 6 s after the waits for quiet, so a burst
    # that finds the machine stalled longer is followed by another, at most RED_ROUNDS.
    for rounds, _, wait in fx.quiet_rounds(RED_ROUNDS, threshold=0.001):
        settled = fx.wait_for_quiet_path(lab, "s", "d", timeout=wait)
        # The path's base delay, from 2 s of sparse datagrams just before the burst: the
        # burst's own packets before its first loss gave a base 5.5 ms high when a stall
        # held them, and a queue 6.7 packets short of the emulator's average.
        base = fx.measure_idle_base(lab, "s", "d", size)
        watchers = fx.machine_stalls(9 + 5, threshold=0.001)
        with ThreadPoolExecutor(1) as pool:  # the emulator's own average, for the report
            averages = pool.submit(red_averages, lab, 11.0)
            burst = fx.probe(lab, "s", "d", count=int(pps * 9), size=size, pps=pps, idle=0.5)
        stalls = fx.stalls_of(watchers)
        lost, sent = fx.drop_fraction_after(burst, skip=3.0, pps=pps)
        measured = lost / sent
        window = [t for seq, t in zip(burst.seq, burst.sent_ns, strict=True)
                  if seq >= 3.0 * pps]
        span = (max(window) - min(window)) / 1e9
        stalled = fx.stalled_seconds(stalls, min(window), max(window))
        explained = stalled * mu / sent
        queue = fx.queue_from_owd(burst, 10e6, size, skip=3.0, base_ns=base)["mean"]
        early = fx.queue_from_owd(burst, 10e6, size, skip=3.0)["mean"]  # the old base
        expected_avg = fx.red_avg_for_fraction(measured, params, wait=True)
        own = [a for t, a in averages.result() if min(window) <= t <= max(window)]
        own_avg = sum(own) / len(own) if own else float("nan")
        show(capsys, f"RED round {rounds}: drop fraction {measured:.4f}, mean queue "
                     f"{queue:.2f} pkts over an idle base of {base / 1e6:.3f} ms ("
                     f"{early:.2f} over the base the burst's first packets give; the "
                     f"emulator's average {own_avg:.2f} over {len(own)} samples), curve "
                     f"{expected_avg:.2f}; path quiet after "
                     f"{settled:.0f} s, machine stalled {stalled * 1e3:.0f} ms of "
                     f"{span:.1f} s (up to {explained:.4f} of the drops); "
                     f"emulators: {emulator_lateness(lab)}")
        if stalled <= 0.1 * span:
            break
    assert stalled <= 0.1 * span, (rounds, stalls)  # a usable machine
    assert -0.01 < measured - target < 0.01 + explained, f"drop fraction {measured:.4f}"
    assert abs(queue - expected_avg) <= 1.0, (
        f"mean queue {queue:.2f} pkts; RED's curve puts drop fraction {measured:.4f} "
        f"at avg {expected_avg:.2f}")
    assert forward(lab).drops_loss == 0


def test_tcp_reno_fills_a_3_2_mbit_100ms_40pkt_link_in_15s(lab, capsys):
    use(lab, rate="3.2Mbit", delay="50ms", queue={"limit": "40pkt"})
    result = fx.iperf3(lab, "s", "d", 15, "-C", "reno", "-l", "8K")
    goodput = result["end"]["sum_received"]["bits_per_second"]
    utilisation = goodput * fx.TCP_IP_BYTES / fx.TCP_PAYLOAD / 3.2e6
    show(capsys, f"TCP Reno 15 s: utilisation {utilisation:.3f}")
    assert utilisation >= TCP_UTILISATION, f"{utilisation:.3f}"


def test_a_dead_emulator_fails_closed_and_check_names_its_node(lab):
    use(lab, **BASE)
    pid = lab.links.emulator_pids()["r"]  # both r - d directions: egress and ingress of r
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(LinkEmulationError, match="link emulator of node r"):
        for _ in range(100):
            lab.links.check()
            time.sleep(0.02)
    assert fx.ping(lab, "s", "d", count=3, interval=0.1) == []  # the link is down, not open
    use(lab, **BASE)  # apply() restarts what died
    assert len(fx.ping(lab, "s", "d", count=3, interval=0.1)) == 3


BAD = {
    "negative-delay": ("delay: -5ms", "links[0].delay"),
    "red-min-above-max": ("queue: {limit: 40pkt, discipline: red, red: {min_th: 20pkt, "
                          "max_th: 10pkt, max_p: 10%}}", "links[0].queue.red"),
    "queue-of-zero": ("queue: {limit: 0pkt}", "links[0].queue"),
    "rate-without-unit": ("rate: 10", "links[0].rate"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_link_parameters_fail_before_anything_is_created(case, tmp_path):
    text, field = BAD[case]
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: badlinks\nnodes: {badxa: {kind: host}, badxr: {kind: router}}\n"
                   f"links:\n  - {{endpoints: [badxa, badxr], {text}}}\n")
    out = subprocess.run(MCCLAB + ["up", str(bad)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert re.search(re.escape(f"{bad}: {field}") + r"\W", " ".join(out.stderr.split())), \
        out.stderr
    # Nothing of this topology exists (other labs may be up on the machine).
    assert not [n for n in leftovers()["netns"] if n.startswith("mcl-badx")]
    assert not list(STATE_ROOT.glob("badlinks-*")) if STATE_ROOT.exists() else True
    assert not Path("/run/netns/mcl-badxa").exists()
