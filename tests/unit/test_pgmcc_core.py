"""PGMCC's cores against draft-ietf-rmt-bb-pgmcc-03, event by event on a hand-driven clock:
the wire formats (sec. 2.1), the throughput formula and the switch test (sec. 2.3, 2.4), the
loss-rate EWMA (sec. 2.6), the timeout estimator (sec. 2.7), the receiver's ACKs and NAKs
(sec. 4) and the sender's window, acker election and timeouts (sec. 2.2, 2.3.1, 3)."""

from __future__ import annotations

import math
import random
import struct

import pytest

from agents.pgmcc.estimators import LossEwma, RtoEstimator, inverse_throughput, should_switch
from agents.pgmcc.params import PgmccParams
from agents.pgmcc.receiver import PgmccReceiver
from agents.pgmcc.sender import RTO, SEND, PgmccSender
from agents.pgmcc.wire import (
    ACK,
    ACKER_VALID,
    ELECTION,
    NAK,
    PGMCC_EXT,
    REPORT_LEN,
    PgmccExt,
    Report,
    decode_report,
    encode_report,
    loss_units,
)
from agents.runtime.actions import CancelTimer, Feedback, Log, Reject, Send, SetTimer
from agents.runtime.header import Header
from agents.runtime.registry import get

P = PgmccParams(packet_size="1000B")


# -- sec. 2.1: wire formats ------------------------------------------------------------------

def test_extension_round_trip_and_rejects():
    for ext in (PgmccExt(0, 0), PgmccExt(7, ACKER_VALID), PgmccExt(2**32 - 1, ACKER_VALID)):
        assert PGMCC_EXT.decode(PGMCC_EXT.encode(ext)) == ext
    assert PGMCC_EXT.max_len == 6
    with pytest.raises(ValueError):
        PGMCC_EXT.decode(struct.pack("!IH", 5, 0))  # an id without ACKER_VALID
    with pytest.raises(ValueError):
        PGMCC_EXT.decode(struct.pack("!IH", 5, 0x0003))  # unknown flag
    with pytest.raises(ValueError):
        PGMCC_EXT.decode(b"\0" * 5)


@pytest.mark.parametrize("report", [
    Report(ACK, 42, 655, 123_456_789_000, 0, 2**32 - 1, 0xFFFF_FFFF),
    Report(ACK, 1, 0, 1, 17, 5, 0b1011),
    Report(NAK, 2**32 - 1, 65535, 2**63, 250, 0, 0, 0),
    Report(NAK, 9, 300, 10, 0, 77, 0, ELECTION),
])
def test_report_round_trip(report):
    data = encode_report(report)
    assert len(data) == REPORT_LEN == 32
    assert decode_report(data) == report


def test_loss_is_a_16_bit_fraction():
    assert loss_units(0.0) == 0 and loss_units(1.0) == 65535
    assert loss_units(0.01) == 655 and loss_units(2.0) == 65535
    assert Report(NAK, 1, 65535, 0, 0, 0).p == 1.0


_FMT = struct.Struct("!BBHIHHQIII")


@pytest.mark.parametrize(("fields", "why"), [
    ((2, ACK, 0, 1, 0, 0, 0, 0, 5, 1), "version"),
    ((1, 3, 0, 1, 0, 0, 0, 0, 5, 1), "type"),
    ((1, ACK, 0, 1, 0, 0, 0, 0, 5, 0b10), "ACK bitmap without RX_MAX"),
    ((1, ACK, ELECTION, 1, 0, 0, 0, 0, 5, 1), "ACK with a flag"),
    ((1, NAK, 0, 1, 0, 0, 0, 0, 5, 1), "NAK with a bitmap"),
    ((1, NAK, 0x80, 1, 0, 0, 0, 0, 5, 0), "unknown NAK flag"),
    ((1, NAK, 0, 1, 0, 9, 0, 0, 5, 0), "padding"),
])
def test_malformed_reports_are_rejected(fields, why):
    with pytest.raises(ValueError):
        decode_report(_FMT.pack(*fields))


def test_random_bytes_never_raise_anything_but_value_error():
    rng = random.Random(1)
    good = encode_report(Report(ACK, 1, 10, 5, 0, 9, 1))
    accepted = 0
    for _ in range(3000):
        data = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.1:
            data = data[:rng.randrange(len(data))]
        try:
            decode_report(bytes(data))
            accepted += 1
        except ValueError:
            pass
    assert 0 < accepted < 3000


def test_the_registered_spec():
    spec = get("pgmcc")
    assert spec.protocol_id == 7 and spec.feedback
    assert spec.params(**spec.example_params) == P
    assert set(spec.sender_gauges) == set(PgmccSender(P).metrics())
    assert set(spec.receiver_gauges) == set(PgmccReceiver(P, rid=1).metrics())


# -- sec. 2.4, 2.3: throughput formula and the switch ---------------------------------------

def test_inverse_throughput_by_hand():
    # 0.1 * sqrt(0.01) * (1 + 0.09 * (1 + 0.0032)) = 0.01 * 1.0902880 = 0.010902880
    assert inverse_throughput(0.1, 0.01) == pytest.approx(0.010902880, rel=1e-7)
    # 0.2 * sqrt(0.04) * (1 + 0.36 * (1 + 0.0512)) = 0.04 * 1.378432 = 0.05513728
    assert inverse_throughput(0.2, 0.04) == pytest.approx(0.05513728, rel=1e-7)
    assert inverse_throughput(0.5, 0.0) == 0.0


def test_switch_only_past_the_bias():
    m_acker = inverse_throughput(0.1, 0.01)
    # T_i < 0.75 T_acker, i.e. M_i > M_acker / 0.75
    assert should_switch(m_acker / 0.75 * 1.01, m_acker, 0.75)
    assert not should_switch(m_acker / 0.75 * 0.99, m_acker, 0.75)
    assert not should_switch(m_acker * 1.2, m_acker, 0.75)  # slower, but within the bias
    assert should_switch(1e-9, 0.0, 0.75)  # any loss beats a lossless acker
    assert not should_switch(0.0, 0.0, 0.75)


# -- sec. 2.6: loss rate ------------------------------------------------------------------------

def test_loss_ewma_weight_and_steady_state():
    e = LossEwma(500 / 65536)
    e.lost()
    assert e.p == pytest.approx(500 / 65536)
    e.received()
    assert e.p == pytest.approx(500 / 65536 * (1 - 500 / 65536))
    e = LossEwma(500 / 65536)
    for i in range(20_000):  # one packet in 50 lost: p converges to 0.02
        e.lost() if i % 50 == 49 else e.received()
    assert e.p == pytest.approx(0.02, rel=0.25)


def test_rto_estimator_follows_rfc_6298():
    r = RtoEstimator()
    assert r.rto(3.0, 0.2, 60.0) == 3.0
    r.sample(0.1)
    assert (r.srtt, r.rttvar) == (0.1, 0.05)
    assert r.rto(3.0, 0.2, 60.0) == pytest.approx(0.3)
    r.sample(0.2)
    assert r.rttvar == pytest.approx(0.0625) and r.srtt == pytest.approx(0.1125)
    r.reset()
    assert r.srtt is None


# -- sec. 4: the receiver ----------------------------------------------------------------------

def packet(r: PgmccReceiver, seq: int, t: float, acker: int | None = None):
    ext = PgmccExt(acker or 0, ACKER_VALID if acker is not None else 0)
    return r.on_packet(t + 0.05, Header(7, 1, 0, seq, int(t * 1e9), 0, ext), 1000, "g")


def reports(actions) -> list[Report]:
    return [decode_report(a.data) for a in actions if isinstance(a, Feedback)]


def test_the_acker_acks_every_packet_with_rx_max_and_bitmap():
    r = PgmccReceiver(P, rid=5)
    for seq in range(10):
        if seq in (6, 7):
            continue
        out = reports(packet(r, 100 + seq, seq * 0.01, acker=5))
        acks = [x for x in out if x.kind == ACK]
        assert len(acks) == 1
        assert acks[0].seq == 100 + seq and acks[0].echo_ns == int(seq * 0.01 * 1e9)
    # last 10 packets, 106 and 107 missing: bits 2 and 3 clear
    assert acks[0].bitmap == 0b1111110011
    assert r.counts["acks_sent"] == 8


def test_a_receiver_naks_each_lost_packet_with_its_loss_rate():
    r = PgmccReceiver(P, rid=5)
    assert reports(packet(r, 0, 0.0, acker=9)) == []
    out = reports(packet(r, 4, 0.04, acker=9))
    assert [x.kind for x in out] == [NAK] * 3 and [x.seq for x in out] == [1, 2, 3]
    c = 500 / 65536
    p = ((c * (1 - c) + c) * (1 - c) + c) * (1 - c)  # three losses, then a reception
    assert out[-1].loss == loss_units(p)
    assert r.counts["lost_packets"] == 3 and r.counts["acks_sent"] == 0


def test_naks_per_gap_are_capped_and_jumps_are_not_losses():
    r = PgmccReceiver(P, rid=5)
    packet(r, 0, 0.0, acker=9)
    assert len(reports(packet(r, 101, 0.1, acker=9))) == P.max_naks_per_gap
    assert r.counts["naks_capped"] == 100 - P.max_naks_per_gap
    assert reports(packet(r, 1_000_000, 0.2, acker=9)) == []
    assert r.counts["seq_jumps"] == 1 and r.counts["lost_packets"] == 100


def test_a_packet_without_acker_draws_an_election_nak():
    r = PgmccReceiver(P, rid=5)
    out = reports(packet(r, 3, 0.0))
    assert len(out) == 1 and out[0].kind == NAK and out[0].flags == ELECTION
    assert out[0].seq == 3 and r.counts["election_naks"] == 1


def test_a_late_packet_fills_its_bit_and_is_not_a_new_loss():
    r = PgmccReceiver(P, rid=5)
    packet(r, 0, 0.0, acker=5)
    packet(r, 2, 0.02, acker=5)
    out = reports(packet(r, 1, 0.01, acker=5))
    assert out[0].seq == 2 and out[0].bitmap == 0b111
    assert r.counts["late"] == 1 and r.counts["lost_packets"] == 1


def test_sequence_wrap_is_not_a_loss():
    r = PgmccReceiver(P, rid=5)
    for i, seq in enumerate((2**32 - 2, 2**32 - 1, 0, 1)):
        out = reports(packet(r, seq, i * 0.01, acker=5))
    assert r.counts["lost_packets"] == 0 and out[0].seq == 1 and out[0].bitmap == 0b1111


# -- sec. 2.2, 2.3, 3: the sender ---------------------------------------------------------------

# No rate ceiling in the way: the window alone decides what is sent.
PW = PgmccParams(packet_size="1000B", max_rate="1000Gbit")


def sends(actions) -> list[Send]:
    return [a for a in actions if isinstance(a, Send)]


def bits(rx: int, got: set[int]) -> int:
    """The ACK bitmap for RX_MAX ``rx`` when the packets in ``got`` arrived."""
    return sum(1 << (rx - seq) for seq in got if 0 <= rx - seq < 32)


def feed(s: PgmccSender, now: float, data: bytes) -> list:
    """Hand ``data`` to the sender, then run the send timers it sets (the rate ceiling
    spaces a burst by nanoseconds); every action, in order."""
    out = s.on_feedback(now, data, "r")
    todo = [x for x in out if isinstance(x, SetTimer) and x.timer_id == SEND]
    while todo:
        more = s.on_timer(todo[-1].at, SEND)
        out += more
        todo = [x for x in more if isinstance(x, SetTimer) and x.timer_id == SEND]
    return out


def ack(rid: int, rx: int, bitmap: int, sent: float, loss: float = 0.0) -> bytes:
    return encode_report(Report(ACK, rid, loss_units(loss), int(sent * 1e9), 0, rx, bitmap))


def nak(rid: int, seq: int, sent: float, loss: float) -> bytes:
    return encode_report(Report(NAK, rid, loss_units(loss), int(sent * 1e9), 0, seq))


class Acker:
    """A receiver that ACKs what the sender has in flight, losing ``lose``."""

    def __init__(self, s: PgmccSender, rid: int = 5):
        self.s, self.rid, self.got = s, rid, set()

    def round(self, now: float, lose: frozenset[int] = frozenset(), rtt: float = 0.1) -> None:
        """One ACK per packet in flight now (in order), the ``lose`` ones missing."""
        for seq in sorted(self.s.in_flight):
            if seq in lose:
                continue
            self.got.add(seq)
            feed(self.s, now, ack(self.rid, seq, bits(seq, self.got), now - rtt))


def elected(rid: int = 5, params: PgmccParams = PW) -> tuple[PgmccSender, float]:
    """A sender that sent packet 0 at t=0 and elected ``rid`` from its NAK at t=0.1."""
    s = PgmccSender(params)
    first = sends(s.start(0.0))
    assert len(first) == 1 and first[0].ext == PgmccExt(0, 0)
    out = s.on_feedback(0.1, nak(rid, 0, 0.0, 0.0), "r")
    assert s.acker == rid and s.counts["elections"] == 1
    # sec. 3: T = T + 1 on election, so one packet naming the acker goes out
    assert [x.ext for x in sends(out)] == [PgmccExt(rid, ACKER_VALID)]
    return s, 0.1


def test_slow_start_to_ssthresh_then_one_packet_per_window():
    s, now = elected()
    a = Acker(s)
    windows = [s.window]
    acks = []
    for _ in range(8):
        now += 0.1
        acks.append(len(s.in_flight))
        a.round(now)
        windows.append(s.window)
    # slow start doubles W per round trip up to SSTHRESH = 4, then +1/W per ACK: about +1
    # per window of ACKs
    assert windows[:3] == [1.0, 2.0, 4.0]
    for n, x, y in zip(acks[2:], windows[2:], windows[3:], strict=False):
        assert y - x == pytest.approx(n / x, rel=0.15)  # n ACKs, + 1/W each
        assert 0.6 < y - x <= 1.0
    assert s.tokens + len(s.in_flight) == pytest.approx(s.window)


def test_each_ack_in_slow_start_sends_two_packets():
    s, now = elected()
    out = []
    for seq in (1, 2):
        out.append(sends(feed(s, now + 0.1 * seq, ack(5, seq, bits(seq, {1, 2}), now))))
    assert [len(x) for x in out] == [2, 2]
    assert all(x.ext == PgmccExt(5, ACKER_VALID) for x in out[0] + out[1])


def grown(window: float = 16.0) -> tuple[PgmccSender, Acker, float]:
    s, now = elected()
    a = Acker(s)
    while s.window < window:
        now += 0.1
        a.round(now)
    return s, a, now


def test_loss_halves_the_window_once_per_rtt():
    s, a, now = grown()
    w0 = s.window
    flight = sorted(s.in_flight)
    # two packets of one window lost: one cut
    a.round(now + 0.1, lose=frozenset(flight[:2]))
    assert s.counts["lost"] == 2 and s.counts["cuts"] == 1
    # the three ACKs that show the loss opened the window by 1/W each first
    assert w0 / 2 < s.window < (w0 + 3 / w0) / 2 + 1e-9
    assert s.tokens + len(s.in_flight) == pytest.approx(s.window)
    # the loss of the first packet sent after the cut cuts again
    target = s.recover_until
    assert target in s.in_flight
    w1 = s.window
    out = []
    for seq in sorted(x for x in s.in_flight if x != target):
        a.got.add(seq)
        out += feed(s, now + 0.2, ack(5, seq, bits(seq, a.got), now + 0.1))
    cuts = [x for x in out if isinstance(x, Log) and x.event == "pgmcc_cut"]
    # the ACKs before the loss shows (three later packets) still open the window a little
    assert s.counts["cuts"] == 2 and len(cuts) == 1
    assert w1 / 2 < s.window < (w1 + 3 / w1) / 2 + 1e-9


def test_loss_needs_three_later_packets_acknowledged():
    s, a, now = grown()
    flight = sorted(s.in_flight)
    lost = flight[0]
    for k, seq in enumerate(flight[1:4]):
        a.got.add(seq)
        feed(s, now + 0.1, ack(5, seq, bits(seq, a.got), now))
        assert s.counts["lost"] == (1 if k == 2 else 0)
        assert lost not in s.in_flight or k < 2


def test_a_loss_from_before_the_cut_found_later_does_not_cut_again():
    s, a, now = grown()
    a.round(now + 0.1, lose=frozenset(sorted(s.in_flight)[:1]))
    assert s.counts["cuts"] == 1
    before = s.recover_until - 1  # the last packet sent before the cut, still in flight
    assert before in s.in_flight and s.in_flight[before] == 5
    w = s.window
    # it is lost; three packets sent after the cut report it once the freeze is over
    a.round(now + 0.2, lose=frozenset({before}))
    assert s.recover_until is None and s.counts["lost"] == 2
    assert s.counts["cuts"] == 1 and s.window > w


def test_no_window_growth_while_frozen_after_a_cut():
    s, a, now = grown()
    flight = sorted(s.in_flight)
    for seq in flight[1:4]:  # flight[0] lost: the third later ACK reports it
        a.got.add(seq)
        feed(s, now + 0.1, ack(5, seq, bits(seq, a.got), now))
    w = s.window
    assert s.counts["cuts"] == 1
    for seq in flight[4:]:  # the rest of the old window: tokens, no growth
        a.got.add(seq)
        feed(s, now + 0.1, ack(5, seq, bits(seq, a.got), now))
    assert s.window == w and s.recover_until is not None
    a.round(now + 0.2)  # the packets sent after the cut
    assert s.recover_until is None and s.window > w


def test_switch_needs_the_bias_and_follows_the_slowest():
    s, now = elected()
    s.on_feedback(now + 0.1, ack(5, 1, 0b11, now, loss=0.01), "r")
    m5 = s.acker_m
    rtt = 0.1

    def p_for(ratio: float) -> float:  # the loss rate giving M = ratio * m5 at the same RTT
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if inverse_throughput(rtt, mid) < ratio * m5 else (lo, mid)
        return lo

    # T_i < 0.75 T_acker: M_i > M_acker / 0.75 = 1.333 M_acker
    s.on_feedback(now + 0.2, nak(6, 1, now + 0.1, p_for(1.25)), "r6")
    assert s.acker == 5
    s.on_feedback(now + 0.2, nak(7, 1, now + 0.1, p_for(1.45)), "r7")
    assert s.acker == 7 and s.counts["acker_switches"] == 1
    # a longer RTT counts as well: 7's loss rate over 1.2 times its RTT stays out, over
    # twice its RTT wins
    assert s.acker_rtt == pytest.approx(0.1)
    s.on_feedback(now + 0.62, nak(8, 1, now + 0.5, s.acker_loss), "r8")
    assert s.acker == 7
    s.on_feedback(now + 0.7, nak(8, 1, now + 0.5, s.acker_loss), "r8")
    assert s.acker == 8


def test_acks_from_a_previous_acker_settle_its_packets_only():
    s, a, now = grown(6.0)
    old = sorted(s.in_flight)
    s.on_feedback(now + 0.01, nak(6, old[0], now, 0.05), "r6")
    assert s.acker == 6
    s.on_feedback(now + 0.02, ack(6, old[-1], 0b1, now), "r6")  # not its packets
    assert sorted(s.in_flight) == old
    a.round(now + 0.1)
    assert not set(old) & set(s.in_flight)
    assert all(v == 6 for v in s.in_flight.values())  # what went out since names 6


def test_timeouts_reset_the_window_and_drop_a_silent_acker():
    s, _, now = grown()
    out = s.on_timer(now + 1.0, RTO)
    assert s.window == 1.0 and s.counts["timeouts"] == 1 and s.acker == 5
    assert len(sends(out)) == 1 and len(s.in_flight) == 1 and s.tokens == 0.0
    out = s.on_timer(now + 2.0, RTO)
    # sec. 2.7: after two successive timeouts a new acker is elected
    assert s.acker is None and s.counts["acker_drops"] == 1
    assert sends(out)[0].ext == PgmccExt(0, 0)
    s.on_feedback(now + 2.1, nak(6, s.next_seq - 1, now + 2.0, 0.0), "r6")
    assert s.acker == 6 and s.counts["elections"] == 2


def test_the_timeout_backs_off_and_feedback_restarts_it():
    s, _, now = grown()
    rto = s._rto()
    assert rto == pytest.approx(P.min_rto)  # constant RTT samples: SRTT + 4 RTTVAR -> floor
    out = s.on_timer(now + rto, RTO)
    timers = [a for a in out if isinstance(a, SetTimer) and a.timer_id == RTO]
    assert timers and timers[0].at == pytest.approx(now + rto + 2 * rto)
    s.on_feedback(now + 0.5, nak(5, 1, now + 0.4, 0.0), "r")
    assert s.retry == 0


def test_the_timeout_is_armed_while_packets_are_in_flight():
    s, now = elected(params=PW.model_copy(update={"max_window": 2.0, "ssthresh": 2.0}))
    out = feed(s, now + 0.1, ack(5, 1, 0b1, now))
    assert s.in_flight and any(isinstance(x, SetTimer) and x.timer_id == RTO for x in out)
    s.tokens = -10.0  # nothing more goes out: the last ACK settles everything
    out = []
    for seq in sorted(s.in_flight):
        out = s.on_feedback(now + 0.2, ack(5, seq, bits(seq, set(range(seq + 1))), now), "r")
    assert not s.in_flight and CancelTimer(RTO) in out


def test_bad_feedback_is_rejected_or_ignored():
    s, now = elected()
    assert s.on_feedback(now, b"\x01" * 31, "r") == [Reject()]
    assert s.counts["fb_malformed"] == 1
    assert s.on_feedback(now, ack(5, 1000, 1, now), "r") == []  # never sent
    assert s.counts["fb_ignored"] == 1


def test_rtt_is_measured_to_arrival_minus_hold_time():
    s, now = elected()
    data = encode_report(Report(ACK, 5, 0, int(0.1 * 1e9), 20_000, 1, 0b11))
    s.on_feedback_at(0.5, 0.33, data, "r")
    assert s.acker_rtt == pytest.approx(0.33 - 0.1 - 0.02)
    assert math.isclose(s.rtt.srtt, s.acker_rtt)
