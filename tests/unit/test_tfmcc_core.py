"""TFMCC's cores against RFC 4654, event by event on a hand-driven clock: the throughput
equation (sec. 2.1), the loss-event rate (sec. 4.1), RTT measurement and the one-way delay
adjustment (sec. 4.3), the feedback timer and suppression (sec. 4.5), and the sender's CLR
selection, increase limit, feedback rounds, no-feedback rules and slow start (sec. 3)."""

from __future__ import annotations

import math
import random

import pytest

from agents.runtime.actions import Feedback, Reject, Send, SetTimer
from agents.runtime.header import Header
from agents.runtime.registry import get
from agents.tfmcc.estimators import WEIGHTS, LossHistory, invert_rate, tcp_rate
from agents.tfmcc.params import TfmccParams
from agents.tfmcc.receiver import FB, TfmccReceiver, feedback_delay
from agents.tfmcc.sender import ROUND, TfmccSender
from agents.tfmcc.wire import (
    CLR_VALID,
    ECHO_VALID,
    HAVE_LOSS,
    HAVE_RTT,
    SUPP_VALID,
    TFMCC_EXT,
    Report,
    TfmccExt,
    decode_report,
    encode_report,
)

P = TfmccParams(packet_size="1000B")


# -- sec. 2.1: the equation ---------------------------------------------------------------

@pytest.mark.parametrize(("s", "rtt", "p", "expected"), [
    # sqrt(2p/3) = 0.0816497, 12 sqrt(3p/8) p (1 + 32p^2) = 0.00734847 * 1.0032 = 0.0073720,
    # X = 8000 / (0.1 * 0.0890217) = 898,657 bit/s
    (1000, 0.1, 0.01, 898_657.0),
    # 0.1825742 + 1.643168 * 0.05 * 1.08 = 0.2713052; X = 8000 / (0.2 * 0.2713052) = 147,435
    (1000, 0.2, 0.05, 147_435.0),
])
def test_equation_matches_hand_computed_values(s, rtt, p, expected):
    assert tcp_rate(s, rtt, p) == pytest.approx(expected, rel=1e-5)


def test_equation_scales_with_packet_size_and_rtt_and_has_no_loss_limit():
    assert tcp_rate(500, 0.1, 0.01) == pytest.approx(tcp_rate(1000, 0.1, 0.01) / 2)
    assert tcp_rate(1000, 0.05, 0.01) == pytest.approx(2 * tcp_rate(1000, 0.1, 0.01))
    assert tcp_rate(1000, 0.1, 0.0) == math.inf
    for rate in (20_000.0, 500_000.0, 5e6):
        assert tcp_rate(1000, 0.1, invert_rate(1000, 0.1, rate)) == pytest.approx(rate, rel=1e-6)


# -- sec. 4.1: loss-event rate --------------------------------------------------------------

def periodic(history: LossHistory, every: int, events: int, rtt: float = 0.05) -> None:
    """One lost packet in every ``every``, 10 ms apart, so each loss is its own event."""
    for seq in range(every * events + 1):
        if seq % every == every - 1:
            history.lost(seq, seq * 0.01, rtt)
        else:
            history.received(seq)


def test_loss_event_rate_of_periodic_losses():
    h = LossHistory()
    periodic(h, 100, 12)
    assert h.intervals == [100.0] * 8
    assert h.loss_rate() == pytest.approx(0.01)


def test_losses_within_one_rtt_are_one_event():
    h = LossHistory()
    # two losses 5 packets (50 ms) apart: one event with RTT 100 ms, two with RTT 20 ms
    assert h.lost(10, 0.10, 0.1) and not h.lost(15, 0.15, 0.1)
    assert h.events == 1
    h2 = LossHistory()
    assert h2.lost(10, 0.10, 0.02) and h2.lost(15, 0.15, 0.02)
    assert h2.events == 2 and h2.intervals == [5.0]


def test_weighted_intervals_by_hand():
    h = LossHistory()
    h.intervals = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0]
    h.event_seq, h.highest = 1000, 1000  # open interval of 1 packet
    # closed: (10+20+30+40 + 0.8*50 + 0.6*60 + 0.4*70 + 0.2*80) / 6 = 220/6
    assert sum(WEIGHTS) == 6.0
    assert h.loss_rate() == pytest.approx(6 / 220)


def test_a_long_open_interval_lowers_the_rate():
    h = LossHistory()
    periodic(h, 100, 12)
    last = h.event_seq
    for seq in range(last + 1, last + 1000):
        h.received(seq)
    # with open: (1000 + 100 * (1+1+1+0.8+0.6+0.4+0.2)) / 6 = 1500 / 6 = 250
    assert h.open_interval() == 1000
    assert h.loss_rate() == pytest.approx(1 / 250)


# -- the receiver, one packet at a time --------------------------------------------------------

def ext(rate=400_000.0, clr=0, rnd=1, flags=0, rmax=0.1, supp=0.0, echo=(0, 0, 0)) -> TfmccExt:
    return TfmccExt(rate, clr, rnd, flags, int(rmax * 1e6), supp, *echo)


def packet(r: TfmccReceiver, seq: int, sent: float, owd: float = 0.05, **kw):
    header = Header(8, 1, 0, seq, int(sent * 1e9), 0, ext(**kw))
    return r.on_packet(sent + owd, header, 1000, "239.1.1.1")


def test_receiver_counts_periodic_losses_as_loss_events():
    r = TfmccReceiver(P, rid=5)
    seq = 0
    for i in range(2000):
        if i % 50 == 49:
            continue  # lost
        packet(r, i, i * 0.01)
        seq += 1
    assert r.counts["lost_packets"] == 39 and r.counts["loss_events"] == 39
    assert r.loss_rate() == pytest.approx(1 / 50)
    rate = r.calc_rate(20.0)
    assert r.loss.events and rate == pytest.approx(tcp_rate(1000, 0.1, 1 / 50))


def test_first_interval_is_seeded_from_the_receive_rate():
    r = TfmccReceiver(P, rid=5)
    for i in range(100):  # 800 kbit/s for a second
        packet(r, i, i * 0.01)
    packet(r, 101, 1.01)  # 100 lost
    # the equation gives the receive rate (800 kbit/s, less the one missing packet) for the
    # seeded interval, with the R_max of 100 ms as RTT
    assert r.loss.intervals and r.loss.events == 1
    seeded = tcp_rate(1000, 0.1, 1 / r.loss.intervals[0])
    assert seeded == pytest.approx(r.receive_rate(1.06), rel=1e-6)
    assert 0.6e6 < seeded < 0.85e6


def test_rtt_from_the_senders_echo_and_one_way_delay_adjustment():
    r = TfmccReceiver(P, rid=5)
    packet(r, 0, 1.0)
    assert r.current_rtt() == pytest.approx(0.1)  # the sender's R_max before any sample
    # The sender echoes our timestamp 0.7 s, held 20 ms there; arrival at 1.06 (sent 1.01)
    packet(r, 1, 1.01, echo=(5, int(0.7e9), 20_000), flags=ECHO_VALID)
    assert r.rtt == pytest.approx(1.06 - 0.7 - 0.02)
    assert r.counts["rtt_samples"] == 1
    # the same echo again is not a new sample
    packet(r, 2, 1.02, echo=(5, int(0.7e9), 30_000), flags=ECHO_VALID)
    assert r.counts["rtt_samples"] == 1
    # an echo for another receiver is not ours
    packet(r, 3, 1.03, echo=(6, int(0.9e9), 0), flags=ECHO_VALID)
    assert r.counts["rtt_samples"] == 1
    # the one-way delay grows by 30 ms: the RTT estimate grows with it until the next echo
    packet(r, 4, 1.04, owd=0.08)
    assert r.current_rtt() == pytest.approx(0.34 + 0.03)
    # a second sample at a non-CLR receiver: EWMA with gain 0.5
    packet(r, 5, 1.05, owd=0.08, echo=(5, int(1.0e9), 10_000), flags=ECHO_VALID)
    sample = 1.13 - 1.0 - 0.01
    # smoothed against the estimate as the one-way delay moved it (0.37), not the raw 0.34
    assert r.rtt == pytest.approx(0.5 * sample + 0.5 * 0.37)
    assert r.current_rtt() == pytest.approx(r.rtt)


# The two tests below follow ORMCC Fig. 6 with TFMCC: 35 ms each way and a full 50-packet
# queue at 1 Mbit/s (0.38 s) during slow start.
HALF = 0.035
FULL_QUEUE = 0.38


def _echo(rid: int, arrival: float, rtt: float) -> tuple[int, int, int]:
    """An echo, held 0 s at the sender, of the report this receiver sent ``rtt`` before
    ``arrival``: the sample it gives is ``rtt``."""
    return (rid, int((arrival - rtt) * 1e9), 0)


def test_queueing_in_an_old_sample_does_not_come_back_with_the_next_one():
    r = TfmccReceiver(P, rid=5)
    # the only sample of slow start crosses the full queue
    packet(r, 0, 1.0, owd=HALF + FULL_QUEUE, flags=ECHO_VALID,
           echo=_echo(5, 1.0 + HALF + FULL_QUEUE, 2 * HALF + FULL_QUEUE))
    assert r.current_rtt() == pytest.approx(2 * HALF + FULL_QUEUE)
    t = 1.0
    for seq in range(1, 51):  # the queue drains: the one-way delay takes the estimate down
        t += 0.01
        packet(r, seq, t, owd=HALF)
    assert r.current_rtt() == pytest.approx(2 * HALF, abs=1e-3)
    # made CLR much later, its next sample crosses the empty queue
    t += 5.0
    packet(r, 51, t, owd=HALF, clr=5, flags=CLR_VALID)
    t += 0.01
    packet(r, 52, t, owd=HALF, clr=5, flags=CLR_VALID | ECHO_VALID,
           echo=_echo(5, t + HALF, 2 * HALF))
    # smoothing against the raw old sample gives 0.95 x 0.45 + 0.05 x 0.07 = 0.43 s
    assert r.current_rtt() == pytest.approx(2 * HALF, abs=0.005)


def test_a_sample_through_a_full_queue_does_not_end_at_the_floor_once_it_drains():
    r = TfmccReceiver(P, rid=5)
    t = 1.0
    for seq in range(40):  # a CLR's many samples over the empty queue
        t += 0.05
        packet(r, seq, t, owd=HALF, clr=5, flags=CLR_VALID | ECHO_VALID,
               echo=_echo(5, t + HALF, 2 * HALF))
    assert r.current_rtt() == pytest.approx(2 * HALF, abs=1e-3)
    t += 0.05
    packet(r, 40, t, owd=HALF + FULL_QUEUE, clr=5, flags=CLR_VALID | ECHO_VALID,
           echo=_echo(5, t + HALF + FULL_QUEUE, 2 * HALF + FULL_QUEUE))
    for seq in range(41, 61):  # the queue drains
        t += 0.01
        packet(r, seq, t, owd=HALF, clr=5, flags=CLR_VALID)
    # smoothing against the raw sample leaves 0.089 s less the 0.38 s drained: the 1-ms floor
    assert r.current_rtt() == pytest.approx(2 * HALF, abs=0.005)


def test_clr_uses_the_small_rtt_gain():
    r = TfmccReceiver(P, rid=5)
    packet(r, 0, 1.0, clr=5, flags=CLR_VALID | ECHO_VALID, echo=(5, int(0.9e9), 0))
    first = r.rtt
    packet(r, 1, 1.01, clr=5, flags=CLR_VALID | ECHO_VALID, echo=(5, int(0.95e9), 0))
    assert r.is_clr
    assert r.rtt == pytest.approx(0.95 * first + 0.05 * (1.06 - 0.95))


def test_feedback_timer_shape():
    T = 1.0
    assert feedback_delay(T, 1.0, 10_000, 1.0, 0.25) == pytest.approx(1.0)
    assert feedback_delay(T, 1e-4, 10_000, 1.0, 0.25) == pytest.approx(0.25)
    assert feedback_delay(T, 1e-9, 10_000, 0.0, 0.25) == 0.0
    # a lower rate ratio fires earlier, same draw
    assert feedback_delay(T, 0.5, 10_000, 0.2, 0.25) < feedback_delay(T, 0.5, 10_000, 0.9, 0.25)
    # T (1 + log x / log N): exponential in x
    assert feedback_delay(T, 0.01, 100, 1.0, 0.0) == pytest.approx(0.0)
    assert feedback_delay(T, 0.1, 100, 1.0, 0.0) == pytest.approx(0.5)


def lossy_receiver(rid=5) -> TfmccReceiver:
    """A receiver with a loss history of one loss in 50 (rate ~ 290 kbit/s at 100 ms)."""
    r = TfmccReceiver(P, rid=rid, rng=random.Random(1))
    for i in range(500):
        if i % 50 != 49:
            packet(r, i, i * 0.01, rnd=1)
    return r


def test_new_round_arms_a_timer_and_suppression_cancels_it():
    r = lossy_receiver()
    own = r.calc_rate(5.0)
    actions = packet(r, 500, 5.0, rnd=2, rate=1e6)
    timers = [a for a in actions if isinstance(a, SetTimer) and a.timer_id == FB]
    assert len(timers) == 1 and 5.05 <= timers[0].at <= 5.05 + 4 * 0.1
    assert r.x_fbr == pytest.approx(own)
    # a suppression rate only 5 % above our rate: cancelled (margin 10 %)
    packet(r, 501, 5.01, rnd=2, rate=1e6, flags=SUPP_VALID, supp=own * 1.05)
    assert not r.fb_pending and r.counts["fb_suppressed"] == 1
    assert r.on_timer(5.5, FB) == []


def test_a_clearly_lower_rate_is_not_suppressed_and_reports():
    r = lossy_receiver()
    own = r.calc_rate(5.0)
    packet(r, 500, 5.0, rnd=2, rate=1e6)
    packet(r, 501, 5.01, rnd=2, rate=1e6, flags=SUPP_VALID, supp=own * 1.2)
    assert r.fb_pending
    out = r.on_timer(5.3, FB)
    assert len(out) == 1 and isinstance(out[0], Feedback)
    rep = decode_report(out[0].data)
    assert rep.rid == 5 and rep.round == 2 and rep.flags & HAVE_LOSS and not rep.flags & HAVE_RTT
    assert rep.rate == pytest.approx(r.calc_rate(5.3)) and rep.loss_rate == r.loss_rate()
    assert rep.echo_ns == int(5.01 * 1e9) and rep.delay_us == pytest.approx(240_000, abs=2)


def test_a_rate_above_the_sending_rate_does_not_report_while_a_clr_exists():
    r = lossy_receiver()
    low = r.calc_rate(5.0) * 0.5
    packet(r, 500, 5.0, rnd=2, rate=low, clr=9, flags=CLR_VALID)
    packet(r, 501, 5.01, rnd=2, rate=low, clr=9, flags=CLR_VALID)
    assert not r.fb_pending
    # without a CLR the sender needs any report
    packet(r, 502, 5.02, rnd=3, rate=low)
    packet(r, 503, 5.03, rnd=3, rate=low)
    assert r.fb_pending


def test_clr_reports_once_per_rtt_only_while_data_arrives():
    r = lossy_receiver()
    actions = packet(r, 500, 5.0, rnd=2, clr=5, flags=CLR_VALID)
    assert SetTimer("clr_feedback", pytest.approx(5.15)) in actions and r.is_clr
    out = r.on_timer(5.15, "clr_feedback")
    assert isinstance(out[0], Feedback) and out[-1] == SetTimer("clr_feedback", 5.25)
    out = r.on_timer(5.25, "clr_feedback")  # nothing arrived since: silent
    assert out == [SetTimer("clr_feedback", 5.35)]
    packet(r, 501, 5.3, rnd=2, clr=5, flags=CLR_VALID)
    assert isinstance(r.on_timer(5.35, "clr_feedback")[0], Feedback)


def test_a_forged_sequence_jump_is_not_a_loss_burst():
    r = lossy_receiver()
    events, lost = r.counts["loss_events"], r.counts["lost_packets"]
    packet(r, 500 + 2**30, 5.0)
    assert r.counts["seq_jumps"] == 1
    assert (r.counts["loss_events"], r.counts["lost_packets"]) == (events, lost)


# -- the sender ----------------------------------------------------------------------------

def report(rid, rate, rnd=0, flags=HAVE_LOSS | HAVE_RTT, echo=0.0, delay=0.0, p=0.01):
    """A report echoing sender time ``echo`` held ``delay`` at the receiver."""
    return encode_report(Report(rid, rnd, flags, int(echo * 1e9), int(delay * 1e6), 0, rate, p,
                                100_000))


def started(rate=None) -> TfmccSender:
    s = TfmccSender(P)
    s.start(0.0)
    if rate is not None:
        s.slow_start = False
        s._apply(rate, 0.0)
        s.target = rate
    return s


def test_lowest_report_becomes_clr_and_cuts_at_once():
    s = started(1e6)
    s.on_feedback(1.0, report(1, 600_000.0), "a")
    assert s.clr == 1 and s.rate == pytest.approx(600_000.0)
    s.on_feedback(1.1, report(2, 800_000.0), "b")  # higher: no switch
    assert s.clr == 1 and s.rate == pytest.approx(600_000.0)
    s.on_feedback(1.2, report(3, 300_000.0), "c")
    assert s.clr == 3 and s.rate == pytest.approx(300_000.0)
    assert s.counts["clr_switches"] == 2


def test_clr_increase_is_limited_to_one_packet_per_rmax_per_rmax():
    s = started(200_000.0)
    s.rmax = 0.1
    s.on_feedback(0.0, report(1, 150_000.0), "a")
    assert s.rate == pytest.approx(150_000.0)
    s.on_feedback(0.0, report(1, 1e6), "a")  # the CLR now reports much more
    s._send(1.0)
    # 8 s / R_max bit/s every R_max: 80 kbit/s per 0.1 s, 800 kbit/s in one second
    assert s.rate == pytest.approx(150_000.0 + 800_000.0)
    s._send(1.5)
    assert s.rate == pytest.approx(1e6)


def test_sender_measures_rtt_from_the_report_echo_and_grows_rmax():
    s = started(1e6)
    s.rmax = 0.1
    s.on_feedback_at(2.0, 2.0, report(1, 5e5, echo=1.5, delay=0.2), "a")
    assert s.rmax == pytest.approx(0.3) and s.clr_rtt == pytest.approx(0.3)
    ext_ = s.header_ext(2.05)
    assert ext_.flags & ECHO_VALID and ext_.echo_rid == 1 and ext_.echo_delay_us == 50_000


def test_round_ends_after_T_with_non_clr_feedback_else_waits_up_to_2T():
    s = started(1e6)
    s.rmax = 0.1
    T = 4 * 0.1
    s.on_feedback(0.1, report(1, 5e5, rnd=0, echo=0.0), "a")  # CLR (non-CLR when sent)
    assert s.supp_rate == pytest.approx(5e5)
    out = s.on_timer(T, ROUND)
    assert s.round == 1 and s.supp_rate is None and out == [SetTimer(ROUND, T + T)]
    # round 1: only the CLR reports; at T the round waits for a non-CLR report
    s.on_feedback(T + 0.1, report(1, 5e5, rnd=1, echo=T), "a")
    out = s.on_timer(2 * T, ROUND)
    assert s.round == 1 and out == [SetTimer(ROUND, T + 2 * T)]
    s.on_feedback(2 * T + 0.05, report(2, 9e5, rnd=1, echo=2 * T - 0.05), "b")
    assert s.round == 2
    # round 2: nothing at all; it ends at 2T
    s.on_timer(2 * T + 0.05 + T, ROUND)
    assert s.round == 2
    s.on_timer(2 * T + 0.05 + 2 * T, ROUND)
    assert s.round == 3


def test_clr_silence_halves_then_drops_the_clr():
    s = started(1e6)
    s.on_feedback_at(1.0, 1.0, report(1, 8e5, echo=0.9), "a")  # RTT 0.1
    assert s.clr == 1
    s.on_timer(1.5, "clr_check")  # silent 5 RTTs but selected < 10 RTTs ago: no halving
    assert s.rate == pytest.approx(8e5) and s.clr == 1
    s.on_feedback(1.6, report(1, 8e5, echo=1.5), "a")
    s.on_timer(2.05, "clr_check")  # 4.5 RTTs silent, selected 10.5 RTTs ago: halve
    assert s.rate == pytest.approx(4e5) and s.counts["halvings"] == 1
    s.on_timer(2.15, "clr_check")  # not again within 4 RTTs
    assert s.counts["halvings"] == 1
    s.on_timer(2.7, "clr_check")  # 11 RTTs silent: dropped
    assert s.clr is None and s.counts["clr_timeouts"] == 1


def test_slow_start_goes_to_twice_the_lowest_receive_rate_and_ends_at_a_loss():
    s = started()
    assert s.slow_start and s.rate == pytest.approx(16_000.0)  # one packet per 0.5 s
    s.on_feedback(0.5, report(1, 16_000.0, flags=HAVE_RTT), "a")
    assert s.rate == pytest.approx(32_000.0)
    s.on_feedback(0.6, report(2, 12_000.0, flags=HAVE_RTT), "b")  # lower receive rate
    assert s.clr == 2 and s.rate == pytest.approx(24_000.0)
    s.on_feedback(1.0, report(2, 24_000.0, flags=HAVE_RTT), "b")
    assert s.rate == pytest.approx(48_000.0)
    s.on_feedback(1.5, report(2, 30_000.0, flags=HAVE_RTT | HAVE_LOSS), "b")
    assert not s.slow_start and s.rate == pytest.approx(30_000.0)


def test_sender_rejects_malformed_reports():
    s = started(1e6)
    assert s.on_feedback(0.0, b"\x00" * 10, "a") == [Reject()]
    bad = bytearray(report(1, 5e5))
    bad[2:4] = b"\xff\xff"  # unknown flags
    assert s.on_feedback(0.0, bytes(bad), "a") == [Reject()]
    assert s.counts["fb_malformed"] == 2


def test_data_packets_carry_the_extension_and_round_trip():
    s = started(1e6)
    sends = [a for a in s._send(1.0) if isinstance(a, Send)]
    assert sends and all(isinstance(a.ext, TfmccExt) for a in sends)
    e = sends[0].ext
    assert TFMCC_EXT.decode(TFMCC_EXT.encode(e)) == e
    assert get("tfmcc").protocol_id == 8 and get("tfmcc").feedback


def test_params_reject_unknown_keys_and_bad_ranges():
    with pytest.raises(ValueError):
        TfmccParams(packet_size="1000B", nonsense=1)
    with pytest.raises(ValueError):
        TfmccParams(suppress_margin=1.5)
    with pytest.raises(ValueError):
        TfmccParams(clr_halve_rtts=20, clr_timeout_rtts=10)


def test_receiver_open_interval_lowers_its_loss_event_rate():
    r = TfmccReceiver(P, rid=5)
    for i in range(1200):  # one loss in 100 packets...
        if i % 100 != 99:
            packet(r, i, i * 0.01)
    assert r.loss_rate() == pytest.approx(1 / 100)
    for i in range(1200, 2199):  # ...then 1000 without: (1000 + 100 * 5) / 6 = 250
        packet(r, i, i * 0.01)
    assert r.loss_rate() == pytest.approx(1 / 250)


def test_receiver_rate_uses_its_own_rtt_not_rmax():
    r = lossy_receiver()
    packet(r, 500, 5.0, rmax=0.4, echo=(5, int(4.96e9), 0), flags=ECHO_VALID)
    assert r.current_rtt() == pytest.approx(0.09)
    assert r.calc_rate(5.05) == pytest.approx(tcp_rate(1000, 0.09, r.loss_rate()))


def test_suppression_rate_is_the_lowest_non_clr_report_of_the_round():
    s = started(1e6)
    s.on_feedback(1.0, report(1, 3e5, echo=0.9), "a")  # the CLR, chosen in round 0
    s._new_round(1.05)
    assert s.supp_rate is None
    s.on_feedback(1.1, report(2, 6e5, rnd=1, echo=1.0), "b")
    s.on_feedback(1.2, report(3, 5e5, rnd=1, echo=1.1), "c")
    assert s.clr == 1 and s.supp_rate == pytest.approx(5e5)
    assert s.header_ext(1.3).flags & SUPP_VALID


def test_after_slow_start_a_report_without_loss_moves_nothing():
    s = started(5e5)
    s.on_feedback(1.0, report(1, 4e5, echo=0.9), "a")
    s.on_feedback(1.1, report(2, 1e5, echo=1.0, flags=HAVE_RTT), "b")  # a receive rate
    assert s.clr == 1 and s.rate == pytest.approx(4e5) and s.counts["fb_no_loss"] == 1
