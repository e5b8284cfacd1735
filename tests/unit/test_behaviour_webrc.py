"""WEBRC's loss events on the simulated clock: one congestion episode is one loss event;
and the slow start rate SSR each loss event sets.

Footnote 4 of the paper: "As in TFRC, a loss event is a period of duration ARTT starting
with the detection of a packet loss". The base channel and the lowest waves carry about
one packet per second, so their gap shows up to a second after the drop, when the
event opened by the fast waves is long over; the receiver times each lost packet by
interpolation between its neighbours' arrivals (RFC 5348 sec. 5.2), so the episode
counts once. Each episode here is centred on a base-channel packet, so the base channel
loses a packet in every one of them. The sessions run the receiver's default parameters:
with ``loss_timing="detection"`` as the default, ``test_each_drop_episode_is_one_loss_event``
fails (the last test shows why).
"""

from __future__ import annotations

import pytest

from agents.runtime.actions import Send, SetTimer
from agents.sim import Link, simulate
from agents.webrc.params import WebrcParams
from agents.webrc.sender import WebrcSender
from tests.unit.test_webrc_receiver import Feed, lagging_after_a_join, session

PARAMS = {"session_rate": "1Mbit"}  # loss_timing: the default (interpolated)
DELAY = 0.02
EPISODE = 0.04  # s: every channel's packets sent in it are dropped


def send_times(duration: float) -> tuple[list[tuple[float, int]], int]:
    """(send time, channel) of every packet of a sender core started at 0, and the base
    channel (the simulation's sender runs the same deterministic schedule)."""
    core = WebrcSender(WebrcParams(**PARAMS))
    now, out = 0.0, []
    actions = core.start(now)
    while True:
        out += [(now, a.channel) for a in actions if isinstance(a, Send)]
        (timer,) = [a for a in actions if isinstance(a, SetTimer)]
        if timer.at >= duration:
            return out, core.model.base_channel
        now = timer.at
        actions = core.on_timer(now, timer.timer_id)


def episodes_on_base(targets: list[float], duration: float) -> list[tuple[float, float]]:
    """A drop episode of EPISODE seconds around the base channel's packet nearest each
    target time."""
    sent, base = send_times(duration)
    base_times = [t for t, cn in sent if cn == base]
    out = []
    for target in targets:
        tb = min(base_times, key=lambda t: abs(t - target))
        out.append((tb - EPISODE / 2, tb + EPISODE / 2))
    return out


def run(outages: list[tuple[float, float]], duration: float, params: dict | None = None):
    res = simulate(session(params or PARAMS), duration=duration, seed=1,
                   links=Link(delay=DELAY, join_delay=DELAY, outages=tuple(outages)))
    return res.receivers["r"]


# Slot boundaries (multiples of TSD = 10 s: the base channel's spacing jumps there from
# 1/(P BCR) to 1/BCR) and times inside slots.
TARGETS = [60.0, 73.3, 80.0, 96.7, 110.0, 124.1, 140.0, 157.5]
DURATION = 170.0


@pytest.fixture(scope="module")
def single():
    outages = episodes_on_base(TARGETS, DURATION)
    return outages, run(outages, DURATION)


def test_each_drop_episode_is_one_loss_event(single):
    outages, node = single
    events = node.records("loss_event")
    assert len(events) == len(outages)
    # Every event starts inside its episode (arrival = send + DELAY), and every episode
    # has its event: none merged, none doubled.
    for (start, end), event in zip(outages, events, strict=True):
        assert start + DELAY - 1e-6 <= event["at"] < end + DELAY + 1e-6
        assert event["t"] >= event["at"]  # detected at or after the loss


def test_the_slow_channels_lost_packets_in_every_episode(single):
    # The behaviour under test needs the slow channels hit: the base channel lost one
    # packet per episode, and its gaps were detected long after the event opened.
    outages, node = single
    core = node.agent.core
    assert node.agent.stats.channels[core.base].lost == len(outages)
    assert node.port.counters.outage_drops > 2 * len(outages)
    assert not core.startup and core.loss_events == len(outages)


def test_episodes_apart_by_more_than_the_loss_event_interval_count_apart():
    # Pairs of episodes 0.5 s apart (ARTT here is ~0.1 s): two events per pair; the
    # base channel's gap (about 1 s) spans both episodes of a pair and must add none.
    firsts = episodes_on_base([62.0, 91.0, 121.0], 140.0)
    outages = []
    for start, end in firsts:
        outages += [(start, end), (start + 0.5, end + 0.5)]
    node = run(outages, 140.0)
    events = node.records("loss_event")
    assert len(events) == len(outages)
    artt = node.agent.core.current_artt()
    assert artt < 0.5 / 2
    starts = [e["at"] for e in events]
    assert all(b - a >= artt for a, b in zip(starts, starts[1:], strict=False))


def test_loss_event_records_name_the_packet_that_opened_them(single):
    outages, node = single
    core = node.agent.core
    for event in node.records("loss_event"):
        assert {"lost", "trr", "cn", "psn", "at", "artt"} <= event.keys()
        assert 0 <= event["cn"] <= core.base and 0 <= event["psn"] < 65536
        assert event["lost"] >= 1


def test_timed_at_detection_the_slow_channels_count_episodes_again():
    # The old rule, still selectable: timed when the gap shows, the base channel's late
    # gaps open extra events for the same episodes.
    outages = episodes_on_base(TARGETS, DURATION)
    node = run(outages, DURATION, {**PARAMS, "loss_timing": "detection"})
    assert len(node.records("loss_event")) > len(outages)


def test_a_late_detected_loss_blocks_joins_only_while_its_event_lasts():
    # Table 2: no join while in a loss event, which lasts ARTT from the loss (footnote
    # 4). The base channel's gap shows a second after its packet was lost, when that
    # event is long over: the next epoch may join.
    from tests.unit.test_webrc_receiver import Feed, joins

    feed = Feed(initial_artt="0.2s", base_mrtt_sample=False)
    feed.send(0.0, feed.base, 3)
    feed.send(2.0, feed.base, 3, skip=1)  # lost at about 1.0 s, seen at 2.0 s
    core = feed.core
    assert core.loss_events == 1 and not core.startup
    assert core.loss_event_end == pytest.approx(1.0 + 0.2)
    core.trr, core.max_trr = 10.0, 20.0  # the equation allows a join (not a flat rate)
    core.loss.reset(1e-5, 5)
    assert joins(feed.epoch(2.1)) == [3]


# --- SSR: set at every loss event, never below SSMINR (RFC 3738 3.2.2.6, 3.2.3.4) ------

SSMINR = 1.0 * (1 + 1 / 0.75 + 1 / 0.75 ** 2)  # BCR (1 + 1/P + 1/P^2) = 4.11 packets/s


def test_ssr_is_set_at_every_loss_event_so_it_rises_with_trr():
    # Sec. 3.1: SSR is "set below TRR when packet losses are detected"; RFC 3738
    # (3.2.3.4) sets it to max{SSMINR, P * TRR} at the start of each loss event, so a
    # receiver whose rate has grown since its last loss gets a higher SSR, not the old one.
    feed = Feed(loss_timing="detection")
    core = feed.core
    feed.send(0.2, feed.base, 3)  # ARTT 0.2 s
    core.trr = 40.0
    feed.send(0.3, feed.base, 3, skip=1)  # the first loss ends start-up
    assert core.ssr == pytest.approx(30.0)
    core.trr = 80.0
    feed.send(1.0, feed.base, 3, skip=1)  # a new loss event, ARTT later
    assert core.loss_events == 2 and core.ssr == pytest.approx(60.0)
    core.trr = 20.0
    feed.send(2.0, feed.base, 3, skip=1)
    assert core.loss_events == 3 and core.ssr == pytest.approx(15.0)


def test_ssr_never_falls_below_ssminr_and_keeps_the_lowest_waves_reachable():
    feed = Feed(loss_timing="detection")
    core = feed.core
    feed.send(0.2, feed.base, 3)
    core.trr = 2.0  # P * TRR = 1.5 packets/s, below the base and two lowest waves
    feed.send(0.3, feed.base, 3, skip=1)
    assert core.ssr == pytest.approx(SSMINR)
    core.loss.reset(0.5, 5)  # an equation rate far below SSMINR
    feed.epoch(0.5)
    assert core.reqn < 1.0 and core.trate > 3 * core.reqn  # the floor lifts the target
    off = Feed(loss_timing="detection", ssr_floor=False, ssr_factor=0.5)
    off.send(0.2, off.base, 3)
    off.core.trr = 2.0
    off.send(0.3, off.base, 3, skip=1)
    assert off.core.ssr == pytest.approx(1.0)  # another factor, and no floor


def test_start_up_ended_by_rr_lag_sets_ssr_at_trr_itself():
    # RR lagging ARR says the path is full at the current rate: RFC 3738 (3.2.2.6) sets
    # SSR to max{SSMINR, TRR} there, not P * TRR.
    core = lagging_after_a_join(trr=40.0).core  # well above SSMINR, so the factor shows
    assert not core.startup and core.startup_reason == "rr_lag"
    assert core.trr > 2 * SSMINR and core.ssr == pytest.approx(core.trr)
