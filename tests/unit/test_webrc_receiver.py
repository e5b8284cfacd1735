"""The WEBRC receiver core (sec. 3, Table 2) on a simulated clock, and whole sessions in
simulated time (agents.sim)."""

from __future__ import annotations

import math

import pytest

from agents.runtime.actions import Join, Leave, Log, SetTimer
from agents.runtime.header import Header
from agents.runtime.session import Session
from agents.sim import Link, simulate
from agents.webrc import WebrcExt
from agents.webrc.contract import RECEIVER_GAUGES
from agents.webrc.model import LAST_PSN, PSN_MOD, gamma, loss_for_rate, peak_to_mean, tcp_rate
from agents.webrc.params import WebrcParams
from agents.webrc.receiver import EPOCH, JOIN_TIMEOUT, WebrcReceiver

PARAMS = {"session_rate": "1Mbit"}


def packet(cn, tsi, psn, seq=0):
    """A decoded header of channel ``cn``."""
    return Header(3, 5, cn, seq, 0, 0, WebrcExt(cn, tsi, psn))


def joins(actions):
    return [a.channel for a in actions if isinstance(a, Join)]


def leaves(actions):
    return [a.channel for a in actions if isinstance(a, Leave)]


class Feed:
    """Drives one receiver core: packets on channels, epochs on time."""

    def __init__(self, **params):
        self.core = WebrcReceiver(WebrcParams(**{**PARAMS, **params}))
        self.base = self.core.base
        self.psn: dict[int, int] = {}
        self.actions = self.core.start(0.0)

    def send(self, now, cn, tsi, skip=0):
        psn = (self.psn.get(cn, 100) + 1 + skip) % 65536
        self.psn[cn] = psn
        out = self.core.on_packet(now, packet(cn, tsi, psn), 1024, "239.0.0.1")
        self.actions += out
        return out

    def epoch(self, now):
        out = self.core.on_timer(now, EPOCH)
        self.actions += out
        return out


def test_joins_base_and_waits_for_a_base_packet_before_any_wave():
    feed = Feed()
    assert joins(feed.actions) == [feed.base]
    assert SetTimer(EPOCH, 0.5) in feed.actions
    assert joins(feed.epoch(0.5)) == []  # no TSI yet
    feed.send(0.6, feed.base, tsi=7)
    assert feed.core.tsi == 7
    assert feed.core.mrtt_last == pytest.approx(0.6)  # the base join is the first MRTT sample
    assert joins(feed.epoch(1.0)) == [7]  # the wave nearest its end: CN = TSI


def test_joins_waves_in_sequence_at_most_every_other_epoch_during_startup():
    feed = Feed()
    feed.send(0.1, feed.base, 7)
    assert joins(feed.epoch(0.5)) == [7]
    assert feed.core.nwc == 1
    # waiting for the join: never another join while it has shown no packet
    assert joins(feed.epoch(1.0)) == []
    feed.send(1.1, 7, 7)  # join took effect
    assert feed.core.pending is None
    assert feed.core.mrtt_last == pytest.approx(0.6)
    assert joins(feed.epoch(1.5)) == []  # the RR check needs a full epoch after the effect
    for i in range(3):  # RR over 1.5..2.0 matches ARR (3.2 packets/s in the model)
        feed.send(1.6 + 0.1 * i, 7, 7)
    assert joins(feed.epoch(2.0)) == [8]  # the next higher-rate wave


def test_startup_target_is_gamma_cubed_times_trr():
    feed = Feed()
    feed.send(0.1, feed.base, 0)
    feed.epoch(0.5)
    core = feed.core
    assert core.startup and core.ssr == math.inf
    # computed before the epoch's join, with NWC = 0
    assert core.trate == pytest.approx(gamma(0, 0.75) ** 3 * core.trr)
    assert core.nwc == 1 and core.arr == pytest.approx(gamma(0, 0.75) * (1.0 * 0.75 ** 0.05 * 0.75
                                                                         + 0.25 * 2.0))


def test_join_timeout_rejoins_then_gives_up():
    feed = Feed(join_retries=1)
    feed.send(0.1, feed.base, 3)
    out = feed.epoch(0.5)
    (timer,) = [a for a in out if isinstance(a, SetTimer) and a.timer_id == JOIN_TIMEOUT]
    assert timer.at >= 0.5 + 2.0
    out = feed.core.on_timer(timer.at, JOIN_TIMEOUT)
    assert leaves(out) == [3] and joins(out) == [3]  # try again
    assert joins(feed.epoch(timer.at + 0.1)) == []  # still waiting
    out = feed.core.on_timer(timer.at + 5, JOIN_TIMEOUT)
    assert feed.core.pending is None and feed.core.timeouts == 2
    assert any(isinstance(a, Log) and a.event == "join_given_up" for a in out)


def test_new_time_slot_leaves_the_newly_quiescent_wave():
    feed = Feed()
    feed.send(0.1, feed.base, 3)
    feed.epoch(0.5)
    feed.send(0.6, 3, 3)
    arr = feed.core.arr
    out = feed.send(0.7, feed.base, 4)  # TSI 4: wave 3 is over
    assert leaves(out) == [3]
    assert feed.core.nwc == 0 and feed.core.leaves == 1
    assert feed.core.arr == pytest.approx(arr * (4 / 3) / gamma(0, 0.75))


def test_tail_loss_of_a_wave_is_counted_when_it_ends():
    # Timed at detection (the old rule, still selectable): the slot change shows the
    # whole tail at once, one event. The default's timing is the next test.
    feed = Feed(loss_timing="detection")
    feed.send(0.1, feed.base, 3)
    feed.epoch(0.5)
    feed.core.on_packet(0.6, packet(3, 3, LAST_PSN - 4), 1024, "g")
    feed.core.on_packet(0.8, packet(4, 4, 10), 1024, "g")  # next slot; 4 tail packets lost
    assert feed.core.lost == 4 and feed.core.loss_events == 1


def test_tail_loss_timed_between_the_waves_last_packet_and_the_slot_change():
    feed = Feed()  # the default timing: interpolated
    feed.send(0.1, feed.base, 3)
    feed.epoch(0.5)
    feed.core.on_packet(0.6, packet(3, 3, LAST_PSN - 4), 1024, "g")
    out = feed.core.on_packet(0.8, packet(4, 4, 10), 1024, "g")  # next slot; 4 tail lost
    assert feed.core.lost == 4
    # The tail is timed between the wave's last packet (0.6) and the slot change (0.8):
    # 0.64, 0.68, 0.72, 0.76. ARTT is 13 ms here (the wave's spacing-corrected sample),
    # so with the 40-ms interpolation step they open events at 0.64 and 0.72.
    events = [a.fields for a in out if isinstance(a, Log) and a.event == "loss_event"]
    assert [(e["cn"], e["psn"]) for e in events] == [(3, LAST_PSN - 3), (3, LAST_PSN - 1)]
    assert [e["at"] for e in events] == pytest.approx([0.64, 0.72])
    assert feed.core.loss_events == 2


def test_losses_within_artt_are_one_loss_event_and_end_startup_with_reqn_equal_trr():
    feed = Feed()
    feed.send(0.2, feed.base, 3)  # ARTT = 0.2 s from the base sample
    core = feed.core
    core.trr = 40.0
    feed.send(0.30, feed.base, 3, skip=1)
    assert core.loss_events == 1 and not core.startup and core.startup_reason == "loss"
    assert tcp_rate(core.lossp, core.current_artt()) == pytest.approx(40.0, rel=1e-6)
    assert core.ssr == pytest.approx(0.75 * 40.0)  # P * TRR (RFC 3738 3.2.2.6)
    feed.send(0.45, feed.base, 3, skip=2)  # within ARTT of the first: same event
    assert core.loss_events == 1 and core.lost == 3
    feed.send(0.55, feed.base, 3, skip=1)  # after ARTT: a new event
    assert core.loss_events == 2


def test_no_join_during_a_loss_event():
    feed = Feed(initial_artt="2s", base_mrtt_sample=False, loss_timing="detection")
    feed.send(0.1, feed.base, 3)
    feed.send(0.2, feed.base, 3, skip=1)
    assert feed.core.loss_event_end == pytest.approx(2.2)  # detected at 0.2 s, lasts ARTT
    assert joins(feed.epoch(0.5)) == [] and feed.core.nwc == 0
    feed.core.trr = 10.0  # the equation would allow a join, but the loss event lasts
    feed.core.loss.reset(1e-5, 5)
    assert joins(feed.epoch(1.0)) == []
    feed.core.trr, feed.core.max_trr = 10.0, 20.0  # (not a flat rate: sec. 3.3 allows it)
    assert joins(feed.epoch(2.5)) == [3]


def test_an_interpolated_loss_event_lasts_artt_from_the_lost_packets_time():
    feed = Feed(initial_artt="2s", base_mrtt_sample=False)  # the default timing
    feed.send(0.1, feed.base, 3)
    feed.send(0.2, feed.base, 3, skip=1)
    # the lost packet is timed between its neighbours (0.15 s), the event lasts ARTT
    assert feed.core.loss_event_end == pytest.approx(0.15 + 2.0)
    assert joins(feed.epoch(0.5)) == [] and feed.core.nwc == 0


def test_mrtt_jump_between_successive_joins_ends_startup():
    feed = Feed(base_mrtt_sample=False)
    core = feed.core
    feed.send(0.1, feed.base, 3)
    feed.epoch(0.5)
    feed.send(0.7, 3, 3)  # MRTT 0.2
    for i in range(4):
        feed.send(1.1 + 0.05 * i, 3, 3)
    feed.epoch(1.0)
    for i in range(4):
        feed.send(1.1 + 0.05 * i, 3, 3)
    assert joins(feed.epoch(1.5)) == [4]
    assert core.startup
    feed.send(1.5 + 0.9, 4, 3)  # MRTT 0.9: buffers are filling
    assert not core.startup and core.startup_reason == "mrtt"


def lagging_after_a_join(trr: float | None = None) -> Feed:
    """A receiver in start-up whose RR lags ARR in the full epoch after a join took
    effect (1 packet where 50 were expected), run to that epoch's end; ``trr`` sets
    TRR just before it."""
    feed = Feed(base_mrtt_sample=False)
    core = feed.core
    feed.send(0.1, feed.base, 3)
    feed.epoch(0.5)
    core.arr = 100.0  # as if the subscribed rate were 100 packets/s
    feed.send(0.7, 3, 3)
    feed.epoch(1.0)
    if trr is not None:
        core.trr = trr
    feed.send(1.2, 3, 3)  # 1 packet in the full epoch after the effect, 50 expected
    feed.epoch(1.5)
    return feed


def test_reception_lagging_arr_ends_startup():
    core = lagging_after_a_join().core
    assert not core.startup and core.startup_reason == "rr_lag"



def test_a_stall_across_an_epochs_end_is_not_rr_lag():
    # A receiver stalled from 0.8 s to 1.3 s reads the packets that arrived meanwhile at
    # 1.3 s, before its late epoch timer (due at 1.0 s). The epoch start-up checks then
    # runs from 1.3 to 1.5 s and holds 4 packets: as expected over 0.2 s at 20 packets/s,
    # though over a whole EL (0.5 s, ~9 expected) it would have looked like RR lag.
    feed = Feed(base_mrtt_sample=False)
    core = feed.core
    feed.send(0.1, feed.base, 3)
    feed.epoch(0.5)
    core.arr = 20.0  # as if the subscribed rate were 20 packets/s
    feed.send(0.7, 3, 3)  # the first packet of the wave joined at 0.5: check [1.0, 1.5)
    for _ in range(10):  # arrived 0.80 ... 1.25 s, read at 1.3 s
        feed.send(1.3, 3, 3)
    feed.epoch(1.3)
    assert core.rr == pytest.approx(11 / 0.8)  # 0.5 -> 1.3 s
    for i in range(4):
        feed.send(1.3 + 0.05 * i, 3, 3)
    assert joins(feed.epoch(1.5)) == [4]  # the check passed: start-up joins the next wave
    assert core.startup and core.rr == pytest.approx(4 / 0.2)


def epoch_timers(actions):
    return [a.at for a in actions if isinstance(a, SetTimer) and a.timer_id == EPOCH]


def test_epochs_run_from_the_receivers_own_start_by_default():
    core = WebrcReceiver(WebrcParams(**PARAMS))
    assert epoch_timers(core.start(0.93)) == [pytest.approx(1.43)]
    assert epoch_timers(core.on_timer(1.43, EPOCH)) == [pytest.approx(1.93)]


def test_an_epoch_phase_puts_every_receiver_on_one_grid_of_the_shared_clock():
    params = WebrcParams(**PARAMS, epoch_phase="200ms")
    a, b = WebrcReceiver(params), WebrcReceiver(params)
    # started 191.07 s apart, at unrelated phases: the first epoch is cut short so that
    # both decide at 0.2 s past every half second
    assert epoch_timers(a.start(8.93)) == [pytest.approx(9.2)]
    assert epoch_timers(b.start(200.0)) == [pytest.approx(200.2)]
    assert epoch_timers(a.on_timer(9.2, EPOCH)) == [pytest.approx(9.7)]
    assert epoch_timers(b.on_timer(200.2, EPOCH)) == [pytest.approx(200.7)]
    # a receiver that starts on a grid point runs a whole first epoch
    assert epoch_timers(WebrcReceiver(params).start(3.2)) == [pytest.approx(3.7)]


def test_a_stalled_receiver_realigns_to_its_epoch_grid():
    core = WebrcReceiver(WebrcParams(**PARAMS, epoch_phase="100ms"))
    core.start(0.0)  # first end at 0.1
    # the timer due at 0.1 s runs at 2.33 s: the next end is on the grid, not 2.83 s
    assert epoch_timers(core.on_timer(2.33, EPOCH)) == [pytest.approx(2.6)]
    assert core.epoch_start == pytest.approx(2.33)


def test_flat_reception_rate_blocks_joins_and_resets_lossp():
    feed = Feed(base_mrtt_sample=False)
    core = feed.core
    feed.send(0.1, feed.base, 3)
    core._end_startup(0.1, "test")
    core.trr = core.max_trr = 50.0
    core.arr = 1.0
    core.loss.reset(1e-6, 25)  # REQN huge: the equation would join
    for i in range(25):  # RR = 50 packets/s: flat at its maximum since the last join
        feed.send(0.11 + 0.015 * i, feed.base, 3)
    out = feed.epoch(0.5)
    assert joins(out) == [] and core.overflow_blocks == 1
    # LOSSP reset so that REQN equals the target rate (here Gamma^1.5 * TRR)
    assert tcp_rate(core.lossp, core.current_artt()) == pytest.approx(core.trate, rel=1e-6)
    core.max_trr = 100.0  # TRR well below its maximum since the last join: may join
    for i in range(25):
        feed.send(0.51 + 0.015 * i, feed.base, 3)
    assert joins(feed.epoch(1.0)) == [3]


def test_metrics_are_finite_gauges():
    feed = Feed()
    feed.send(0.1, feed.base, 3)
    feed.epoch(0.5)
    metrics = feed.core.metrics()
    assert set(RECEIVER_GAUGES) == set(metrics)
    assert metrics["lossp"] == 0.0 and feed.core.startup  # not estimated before
    assert metrics["nwc"] == 1 and metrics["artt_seconds"] == pytest.approx(0.1)
    assert all(math.isfinite(v) for v in metrics.values())


# -- whole sessions in simulated time ----------------------------------------------------


def session(params, nodes=None):
    n = WebrcParams.model_validate(params).channels
    return Session.model_validate({
        "protocol": "webrc", "flow": "w", "session_id": 5, "source": "10.0.0.1",
        "channels": [{"group": f"239.5.{i // 250}.{i % 250 + 1}", "port": 5000}
                     for i in range(n)],
        "params": params, "nodes": nodes or {}})


def steady(node, start):
    stats = [s for s in node.records("stats") if s["t"] >= start]
    return sum(s["throughput_bps"] for s in stats) / len(stats)


def test_lossy_path_converges_towards_eq1_times_eq7():
    # Sec. 5.1.1 in simulated time: 1% loss, 0.2 s MRTT (0.1 s each way, the join
    # reaching the router in 0.1 s); the paper's steady state 403 kbit/s, Eqs. 1+7: 428.
    res = simulate(session({"session_rate": "1Mbit"}), duration=500.0,
                   links=Link(delay=0.1, loss=0.01, join_delay=0.1), starts={"r": 5.0}, seed=2)
    node = res.receivers["r"]
    core = node.agent.core
    # Each value averaged is RTT + (wait - spacing/2): uniform within +-35 ms here, sd
    # ~20 ms; ARTT weighs the last samples ~0.2 each, so its sd is ~7 ms around the RTT.
    assert core.artt.value == pytest.approx(0.2, abs=0.025)
    assert core.lossp == pytest.approx(0.0089, rel=0.35)
    predicted = tcp_rate(0.0089, core.artt.value) * 1024 * 8 * peak_to_mean(0.75)
    assert steady(node, 250.0) == pytest.approx(predicted, rel=0.3)
    assert core.joins >= 25 and core.leaves >= 20


def test_bottleneck_is_used_and_startup_ends_before_overflow():
    # Sec. 5.1.2-like: 320 kbit/s, 4-packet queue on the receiver's path, no random loss.
    res = simulate(session({"session_rate": "1Mbit"}), duration=200.0,
                   links=Link(delay=0.05, join_delay=0.05, rate=320e3 * 1052 / 1024, queue=4),
                   starts={"r": 3.0}, seed=1)
    node = res.receivers["r"]
    assert not node.agent.core.startup
    assert 0.7 * 320e3 <= steady(node, 100.0) <= 320e3 * 1.01


def test_loss_for_rate_is_used_for_the_startup_reset():
    assert loss_for_rate(1.0, 0.2) > loss_for_rate(60.0, 0.2)


@pytest.mark.parametrize(("correct", "idx"), [(True, 700), (True, 0), (False, 700)])
def test_wave_mrtt_value_is_first_packet_time_minus_half_the_spacing(correct, idx):
    # The raw sample (sec. 4.2) is join sent -> first packet; the value averaged into
    # ARTT takes off half the spacing between that packet and the wave's previous one in
    # the sender's schedule (none for a wave's first packet, none when switched off).
    feed = Feed(base_mrtt_sample=False, mrtt_spacing_correction=correct)
    core = feed.core
    offsets = core.model.wave_offsets()
    k = len(offsets)
    feed.send(0.1, feed.base, 3)
    assert joins(feed.epoch(0.5)) == [3]
    feed.psn[3] = (PSN_MOD - k + idx - 1) % PSN_MOD  # the next one sent is packet idx
    out = feed.send(0.8, 3, 3)
    (rec,) = [a.fields for a in out if isinstance(a, Log) and a.event == "mrtt"]
    half = (offsets[idx] - offsets[idx - 1]) / 2 if correct and idx else 0.0
    assert rec["sample"] == pytest.approx(0.3)
    assert rec["used"] == pytest.approx(0.3 - half, abs=1e-12)
    assert core.mrtt_last == rec["used"] and core.artt.value == pytest.approx(rec["used"])
    if correct and idx:
        assert 0.01 < half < 0.2  # a mid-wave packet: tens of ms apart at 1 Mbit/s
