"""STAIR stair layers, sender and receiver cores on a simulated clock (ToN 2006 sec. IV-D, V)."""

from __future__ import annotations

import pytest
from sender_clock import drive_sender

from agents.runtime.actions import Feedback, Join, Leave, Log, Reject, SetTimer
from agents.runtime.header import Header
from agents.runtime.registry import get
from agents.runtime.session import Session
from agents.sim import Link, simulate
from agents.stair.config import CL, NCL, SL, Layout, StairExt, StairParams
from agents.stair.probe import HOLD, PROBE, parse_echo
from agents.stair.receiver import StairReceiver
from agents.stair.sender import StairSender
from agents.stair.stairs import (
    StairClock,
    select_complex,
    select_simple,
    stair_period,
    stair_rtts,
    stair_window,
)

PARAMS = {"base_rate": "256kbit", "packet_size": "512B", "max_rate": "4Mbit",
          "rtt_source": "fixed", "rtt": "32ms"}


def params(**over) -> StairParams:
    return StairParams(**{**PARAMS, **over})


def session(p: dict) -> Session:
    n = Layout(StairParams(**p)).channels
    chans = [{"group": f"239.1.1.{i + 1}", "port": 5000} for i in range(n)]
    return Session(protocol="stair", flow="st", session_id=1, source="10.0.0.1",
                   channels=chans, params=p, nodes={}, feedback_port=6000)


def test_stair_period_def8():
    # the paper's setting: C_0 = 512 kbit/s, 512 B: SL_32 tops out at 4 packets per RTT
    assert stair_window(512e3, 0.032, 512) == pytest.approx(4)
    assert stair_period(512e3, 0.032, 512) == pytest.approx(0.128)
    # p ~ R t^2
    assert stair_period(512e3, 0.064, 512) == pytest.approx(4 * 0.128)
    assert stair_period(1024e3, 0.032, 512) == pytest.approx(2 * 0.128)
    assert stair_rtts(0.016, 5) == [0.016, 0.032, 0.064, 0.128, 0.256]


def test_stair_clock_is_a_cyclic_staircase():
    clock = StairClock(rtt=0.128, window=16, origin=10.0)  # Fig. 6: SL_128, 16 per RTT
    times = []
    while clock.next_due < 10.0 + 2 * clock.period:
        times.append((clock.next_due, clock.cycle, clock.step))
        clock.advance()
    assert clock.period == pytest.approx(16 * 0.128)
    assert len(times) == 2 * 16 * 17 // 2  # 1 + 2 + ... + 16 per cycle
    for step in range(1, 17):
        in_step = [t for t, c, s in times if c == 0 and s == step]
        assert len(in_step) == step  # one packet more per emulated RTT
        assert in_step[0] == pytest.approx(10.0 + (step - 1) * 0.128)
    # back to one packet per RTT when the cycle ends
    assert [s for _, c, s in times if c == 1][:3] == [1, 2, 2]
    # the top step carries exactly the base rate: 16 x 1 kB / 128 ms = 1 Mbit/s (Fig. 6)
    assert clock.rate(10.0 + 15.5 * 0.128, 1000) == pytest.approx(1e6)
    assert clock.rate(10.0 + 16.5 * 0.128, 1000) == pytest.approx(1e6 / 16)


def test_stair_clock_skips_a_stall_without_burst():
    clock = StairClock(rtt=0.032, window=4, origin=0.0)
    clock.skip_to(5.01)
    assert clock.next_due >= 5.01 and clock.next_due - 5.01 < 0.032


@pytest.mark.parametrize(("rtt_ms", "layer_ms"), [
    (11, 16), (20, 16), (21, 16), (22, 32), (30, 32), (40, 32), (42, 32), (43, 64),
    (50, 64), (80, 64), (90, 128), (140, 128), (170, 128), (171, 256), (900, 256)])
def test_simple_option(rtt_ms, layer_ms):
    rtts = stair_rtts(0.016, 5)
    (i,) = select_simple(rtt_ms / 1e3, rtts)
    assert rtts[i] * 1e3 == layer_ms
    if 16 < layer_ms < 256:
        assert 2 / 3 * rtts[i] < rtt_ms / 1e3 <= 4 / 3 * rtts[i]


def test_complex_option():
    rtts = stair_rtts(0.016, 5)
    assert select_complex(0.032, rtts) == (1,)
    assert select_complex(0.037, rtts) == (1,)  # within 2^(1/4) of 32 ms
    assert select_complex(0.045, rtts) == (2, 3)  # near sqrt(32 x 64) = 45 ms
    assert select_complex(0.06, rtts) == (2,)


def test_calibration_is_checked():
    with pytest.raises(ValueError, match="whole number"):
        StairParams(base_rate="200kbit", packet_size="512B")
    with pytest.raises(ValueError, match="rtt"):
        StairParams(rtt_source="fixed")
    assert get("stair").protocol_id == 6


def test_sender_layers_rates_and_headers():
    p = params()
    lay = Layout(p)
    assert (lay.n_cl, lay.n_ncl, lay.n_sl) == (4, 3, 5)  # CL 1,1,2,4; NCL 1,2,4 units
    sends = drive_sender(StairSender(p), 16.384)  # whole cycles of every stair
    for ch in range(lay.channels):
        kind, index = lay.layer(ch)
        mine = [(a, t) for t, a in sends if a.channel == ch]
        assert {(a.ext.kind, a.ext.index) for a, _ in mine} == {(kind, index)}
        rate = len(mine) * 512 * 8 / 16.384
        if kind == SL:
            w = lay.window(index)
            assert rate == pytest.approx(256e3 * (w + 1) / (2 * w), rel=0.01)
            cycles = [a.ext.cycle for a, _ in mine]
            assert cycles == sorted(cycles)
            per_cycle = sum(1 for c in cycles if c == 0)
            assert per_cycle == w * (w + 1) // 2
        else:
            assert rate == pytest.approx(lay.static_rate(kind, index), rel=0.01)
    assert lay.static_rate(CL, 3) == 4 * 256e3 and lay.static_rate(NCL, 2) == 4 * 256e3


class Feed:
    """Feeds a receiver core packets of chosen layers in order (a minimal network)."""

    def __init__(self, core: StairReceiver):
        self.core = core
        self.seq: dict[int, int] = {}
        self.actions: list = []

    def packet(self, now, ch, cycle=0, step=0, skip=0):
        kind, index = self.core.layout.layer(ch)
        seq = self.seq.get(ch, 0) + skip
        self.seq[ch] = seq + 1
        header = Header(6, 1, ch, seq, int(now * 1e9), 0, StairExt(kind, index, cycle, step))
        out = self.core.on_packet(now, header, 512, "239.1.1.1")
        self.actions += out
        return out

    def stair_cycle(self, start, cycle, sl_ch, others=(), loss_at=None):
        """One stair period of SL_32 (W = 2: 1 + 2 packets) plus a packet on other channels."""
        out = []
        for k, t in enumerate((0.0, 0.032, 0.048)):
            out += self.packet(start + t, sl_ch, cycle, 1 if k == 0 else 2)
            for ch in others:
                out += self.packet(start + t + 0.001, ch, skip=1 if loss_at == (k, ch) else 0)
        return out


def test_receiver_increases_after_each_loss_free_period():
    core = StairReceiver(params())
    start = core.start(0.0)
    lay = core.layout
    sl = lay.channel(SL, 1)  # 32 ms RTT: SL_32
    assert Join(lay.channel(CL, 0)) in start and Join(sl) in start
    feed = Feed(core)
    cl0 = lay.channel(CL, 0)
    assert feed.stair_cycle(0.0, 0, sl, [cl0]) == []  # partial first period: no increase
    out = feed.stair_cycle(0.064, 1, sl, [cl0])  # first packet of cycle 1 ends cycle 0
    assert out == []  # the period that ended was the one joined mid-way
    out = feed.stair_cycle(0.128, 2, sl, [cl0])
    assert [a for a in out if isinstance(a, Join)] == [Join(lay.channel(CL, 1))]  # 1 -> 2 units
    assert core.units == 2
    units = [core.units]
    for c in range(3, 12):
        channels = sorted(lay.group_channel(g) for g in core.sub)
        out = feed.stair_cycle(0.064 * c, c, sl, channels)
        joins = [a for a in out if isinstance(a, Join)]
        leaves = [a for a in out if isinstance(a, Leave)]
        assert len(joins) == 1 and len(leaves) <= 2
        units.append(core.units)
    assert units == list(range(2, 12))
    logs = [a for a in feed.actions if isinstance(a, Log) and a.event == "increase"]
    assert [x.fields["units"] for x in logs] == list(range(2, 12))


def test_receiver_decreases_at_once_on_loss_and_once_per_stair_period():
    # Sec. V-A: "if there is a packet loss event in a stair period (of one or more
    # losses), then one round of multiplicative decrease is performed", at once.
    core = StairReceiver(params())
    core.start(0.0)
    lay = core.layout
    core.sub = core.scheme.subscription(13)  # 8 + 5: CL 0..3, NCL 0 and 2 (Fig. 4)
    for ch in sorted(lay.group_channel(g) for g in core.sub):
        core.joined.add(ch)
    feed = Feed(core)
    sl = lay.channel(SL, 1)  # SL_32: a period of 64 ms
    feed.packet(0.99, sl, cycle=5, step=1)
    top_cl, top_ncl = lay.channel(CL, 3), lay.channel(NCL, 2)
    feed.packet(1.0, top_cl)
    out = feed.packet(1.01, top_cl, skip=2)  # two packets lost
    assert Leave(top_cl) in out and Leave(top_ncl) in out
    assert not [a for a in out if isinstance(a, Join)]
    assert core.units == 4 + 1  # 13 -> 5: top CL (8 -> 4) and top NCL (5 -> 1)
    # later losses of the same stair period belong to its decrease, however late (here
    # the stair's packets are late: the period runs on until its next cycle shows)
    cl0 = lay.channel(CL, 0)
    feed.packet(1.02, cl0)
    assert feed.packet(1.03, cl0, skip=1) == []
    assert feed.packet(1.2, cl0, skip=1) == []
    assert core.counts["loss_events"] == 1 and core.units == 5
    # the next period's first loss is the next decrease
    feed.packet(1.21, sl, cycle=6, step=1)
    out = feed.packet(1.22, cl0, skip=1)
    assert Leave(lay.channel(CL, 2)) in out and core.units == 2
    assert core.counts["loss_events"] == 2


def test_md_holdoff_holds_a_decrease_across_a_period_end():
    core = StairReceiver(params(md_holdoff="200ms"))
    core.start(0.0)
    lay = core.layout
    core.sub = core.scheme.subscription(13)
    for ch in sorted(lay.group_channel(g) for g in core.sub):
        core.joined.add(ch)
    feed = Feed(core)
    sl, cl0 = lay.channel(SL, 1), lay.channel(CL, 0)
    feed.packet(0.99, sl, cycle=5, step=1)
    feed.packet(1.0, cl0)
    feed.packet(1.01, cl0, skip=1)
    assert core.units == 5
    feed.packet(1.07, sl, cycle=6, step=1)  # a new period, within the holdoff
    assert feed.packet(1.1, cl0, skip=1) == [] and core.units == 5
    feed.packet(1.27, sl, cycle=9, step=1)
    feed.packet(1.28, cl0, skip=1)  # past the holdoff: a decrease
    assert core.units == 2


def test_receiver_skips_the_increase_after_a_lossy_period():
    core = StairReceiver(params())
    core.start(0.0)
    lay = core.layout
    sl, cl0 = lay.channel(SL, 1), lay.channel(CL, 0)
    feed = Feed(core)
    feed.stair_cycle(0.0, 0, sl, [cl0])
    feed.stair_cycle(0.064, 1, sl, [cl0], loss_at=(1, cl0))  # loss at 1 unit: nothing to drop
    assert core.counts["loss_events"] == 1 and core.units == 1
    feed.stair_cycle(0.128, 2, sl, [cl0])  # ends the lossy period: no increase
    assert core.units == 1
    feed.stair_cycle(0.192, 3, sl, [cl0])
    assert core.units == 2


def test_receiver_rtt_from_probe_and_mrtt():
    core = StairReceiver(params(rtt_source="probe", rtt=None))
    out = core.start(0.0)
    assert not [a for a in out if isinstance(a, Join) and core.layout.layer(a.channel)[0] == SL]
    (fb,) = [a for a in out if isinstance(a, Feedback)]
    assert fb.to is None  # to the sender
    assert SetTimer("probe", 1.0) in out
    # the sender echoes it to the peer it came from, with the time it held it (none here)
    (echo,) = StairSender(params()).on_feedback(0.05, fb.data, "10.0.5.2:40000")
    assert echo == Feedback(fb.data + HOLD.pack(0), to="10.0.5.2:40000")
    assert StairSender(params()).on_feedback(0.05, b"x" * 16, "p") == [Reject()]
    out = core.on_feedback(0.07, echo.data, "10.0.0.1:5000")
    assert core.rtt == pytest.approx(0.07)
    assert Join(core.layout.channel(SL, 2)) in out  # 70 ms -> SL_64
    core.on_feedback(0.2, PROBE.pack(b"STRP", 2, int(0.1e9)), "x")
    assert core.rtt == pytest.approx(0.07 + 0.125 * (0.1 - 0.07))
    assert core.on_feedback(0.3, b"junk", "x") == [Reject()]
    # MRTT: the join latency of the first joined layer
    mr = StairReceiver(params(rtt_source="mrtt", rtt=None))
    mr.start(0.0)
    feed = Feed(mr)
    out = feed.packet(0.12, mr.layout.channel(CL, 0))
    assert mr.rtt == pytest.approx(0.12)
    assert Join(mr.layout.channel(SL, 3)) in out  # 120 ms -> SL_128


def test_probe_rtt_leaves_both_hosts_delay_out():
    # probe sent at 1.000; it reaches the sender's kernel at 1.020 but the sender's loop
    # gets to it at 1.035; the echo reaches the receiver's kernel at 1.055 and is read
    # at 1.080. The network round trip is 40 ms (the paper's ping); handled-at times
    # alone would give 80 ms.
    rx = StairReceiver(params(rtt_source="probe", rtt=None))
    (fb,) = [a for a in rx.start(1.0) if isinstance(a, Feedback)]
    (echo,) = StairSender(params()).on_feedback_at(1.035, 1.020, fb.data, "p")
    seq, sent, hold = parse_echo(echo.data)
    assert (seq, sent, hold) == (1, pytest.approx(1.0), pytest.approx(0.015))
    out = rx.on_feedback_at(1.080, 1.055, echo.data, "s")
    assert rx.rtt == pytest.approx(0.040)
    assert Join(rx.layout.channel(SL, 1)) in out  # 40 ms -> SL_32 (80 ms would be SL_64)
    gauges = rx.metrics()
    assert gauges["rtt_sample_ms"] == pytest.approx(40.0)
    assert gauges["probe_host_ms"] == pytest.approx(40.0)  # 25 ms here + 15 ms there
    # a 16-byte echo (hold unknown) counts a hold of zero
    rx.on_feedback_at(2.1, 2.05, PROBE.pack(b"STRP", 2, int(2.0e9)), "s")
    assert rx.last_sample == pytest.approx(0.05)
    # a sample that is not positive is not taken
    bad = PROBE.pack(b"STRP", 3, int(2.49e9)) + HOLD.pack(int(0.02e9))
    before = rx.rtt
    assert rx.on_feedback_at(3.0, 2.5, bad, "s") == [] and rx.rtt == before
    assert parse_echo(b"STRP" + bytes(13)) is None and parse_echo(b"XXXX" + bytes(12)) is None


def test_session_in_simulated_time_follows_the_bottleneck():
    p = {**PARAMS, "max_rate": "8Mbit"}
    res = simulate(session(p), "s", ["r"], duration=30.0, links={
        "r": Link(delay=0.016, rate=2e6, queue=20, join_delay=0.02, leave_delay=0.1)})
    core = res.receivers["r"].agent.core
    stats = res.receivers["r"].records("stats")
    mean = sum(s["throughput_bps"] for s in stats[5:30]) / len(stats[5:30])
    assert 0.5 * 2e6 < mean <= 2e6 * 1.01
    assert core.counts["decreases"] > 10 and core.counts["increases"] > 50
    assert core.stairs == (1,)  # 32 ms -> SL_32
    assert core.units < 2e6 / 256e3 + 2


def test_additive_increase_is_one_packet_per_rtt_per_rtt():
    # Fig. 7 calibration: with no loss, static rate + stair grows by N_0 per stair
    # period, i.e. one packet per RTT every RTT (S / t^2 bit/s per second)
    p = {**PARAMS, "max_rate": "16Mbit", "rtt": "64ms"}
    res = simulate(session(p), "s", ["r"], duration=6.0, links={"r": Link(delay=0.001)})
    core = res.receivers["r"].agent.core
    period = 0.064 * 4  # SL_64 tops out at 4 packets per RTT
    full_periods = core.counts["periods"] - 1  # the first ends the partial one
    assert core.counts["increases"] == full_periods
    assert core.counts["increases"] == pytest.approx(6.0 / period - 1, abs=1.5)
    assert core.counts["decreases"] == 0


def test_probe_rtt_in_simulated_time():
    # feedback crosses the receiver's link delay each way: RTT = 2 x 40 ms (+ queueing)
    p = {**PARAMS, "rtt_source": "probe", "rtt": None, "probe_interval": "0.5s"}
    p.pop("rtt")
    res = simulate(session(p), "s", ["r"], duration=5.0, links={"r": Link(delay=0.04)})
    core = res.receivers["r"].agent.core
    assert core.counts["probe_replies"] >= 8
    assert core.rtt == pytest.approx(0.08, abs=0.005)
    assert core.stairs == (2,)  # 80 ms -> SL_64
    assert res.sender.agent.core.probes_echoed == core.counts["probe_replies"]
