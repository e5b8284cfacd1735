"""ORMCC cores against Appendix I: one test per branch of each event handler."""

from __future__ import annotations

import pytest

from agents.ormcc.estimators import Ewma
from agents.ormcc.params import OrmccParams
from agents.ormcc.receiver import OrmccReceiver
from agents.ormcc.sender import CR_CHECK, INCREASE, SEND, OrmccSender
from agents.ormcc.wire import (
    CI_LEN,
    INVALID,
    ORMCC_EXT,
    Ci,
    OrmccExt,
    decode_ci,
    encode_ci,
)
from agents.runtime.actions import CancelTimer, Feedback, Log, Reject, Send, SetTimer
from agents.runtime.header import Header

S_BITS = 8000  # 1000-byte packets


def params(**kw: object) -> OrmccParams:
    return OrmccParams(**kw)


def ci(rid: int, trac: float, sent_at: float, seq: int = 0) -> bytes:
    return encode_ci(Ci(rid, seq, int(sent_at * 1e9), trac))


def timers(actions: list, timer_id: str) -> list[SetTimer]:
    return [a for a in actions if isinstance(a, SetTimer) and a.timer_id == timer_id]


def sender_with_cr(rid: int = 1, trac: float = 1e6, now: float = 10.0, rtt: float = 0.1,
                   **kw: object) -> OrmccSender:
    """A started sender whose CR is ``rid`` (chosen with no valid CR, no cut since)."""
    s = OrmccSender(params(**kw))
    s.start(0.0)
    s.rate = 5e6
    s.on_feedback(now, ci(rid, trac, now - rtt), "10.0.0.1:5000")
    assert s.cr == rid and s.cr_valid
    return s


# -- EWMA (sec. III-A.2) ---------------------------------------------------------


def test_ewma_follows_the_papers_order():
    e = Ewma(0.125)
    e.update(100.0)
    assert (e.mean, e.dev) == (100.0, 0.0)
    e.update(200.0)
    assert e.mean == pytest.approx(112.5)
    assert e.dev == pytest.approx(0.125 * abs(112.5 - 200.0))  # |new E - U|


# -- source: "event every RTT_cr" -------------------------------------------------


def test_increase_adds_one_packet_per_rtt_without_a_recent_cut():
    s = OrmccSender(params(initial_rate="80kbit", initial_rtt="100ms"))
    acts = s.start(0.0)
    assert timers(acts, INCREASE)[0].at == pytest.approx(0.1)
    acts = s.on_timer(0.1, INCREASE)
    assert s.rate == pytest.approx(80_000 + S_BITS / 0.1)
    assert timers(acts, INCREASE)[0].at == pytest.approx(0.2)
    assert timers(acts, SEND)  # the pacing timer follows the new rate


def test_increase_is_skipped_within_one_rtt_of_a_cut():
    s = sender_with_cr(trac=1e6, now=10.0, rtt=0.1)
    rate = s.rate
    assert rate == pytest.approx(0.65e6)  # the CR's first CI cut the rate
    s.on_timer(10.05, INCREASE)
    assert s.rate == rate
    s.on_timer(10.0 + s.rtt_cr, INCREASE)
    assert s.rate == pytest.approx(rate + S_BITS / s.rtt_cr)


def test_increase_starts_the_cr_check_at_mean_plus_four_sigma():
    s = sender_with_cr(trac=1e6)
    s.mu.dev = 50_000.0
    s.rate = 1e6 + 4 * 50_000.0 - S_BITS / s.rtt_cr - 1.0  # one step below the threshold
    acts = s.on_timer(20.0, INCREASE)
    assert not timers(acts, CR_CHECK) and s.check_started is None
    acts = s.on_timer(21.0, INCREASE)
    assert s.check_started == 21.0
    assert timers(acts, CR_CHECK)[0].at == pytest.approx(21.0 + s.params.initial_check)


def test_cr_check_length_is_mean_plus_eight_sigma_once_sampled():
    s = sender_with_cr(trac=1e6)
    s.tcr.mean, s.tcr.dev = 0.6, 0.05
    s.rate = 2e6
    acts = s.on_timer(20.0, INCREASE)
    assert timers(acts, CR_CHECK)[0].at == pytest.approx(20.0 + 0.6 + 8 * 0.05)


def test_running_cr_check_is_not_restarted():
    s = sender_with_cr(trac=1e6)
    s.rate = 2e6
    s.on_timer(20.0, INCREASE)
    acts = s.on_timer(20.2, INCREASE)
    assert s.check_started == 20.0 and not timers(acts, CR_CHECK)


def test_no_cr_check_without_a_valid_cr():
    s = OrmccSender(params())
    s.start(0.0)
    s.rate = 9e6
    assert not timers(s.on_timer(0.1, INCREASE), CR_CHECK)


# -- source: CR checking timer expiry, and what data packets carry --------------


def test_cr_check_expiry_invalidates_the_cr_and_packets_say_so():
    s = sender_with_cr(rid=7, trac=1e6)
    sends = [a for a in s.on_timer(10.5, SEND) if isinstance(a, Send)]
    assert sends and sends[0].ext == OrmccExt(1, 7, 1e6, 0.0)
    s.rate = 2e6
    s.on_timer(20.0, INCREASE)
    acts = s.on_timer(22.0, CR_CHECK)
    assert not s.cr_valid and s.counts["cr_timeouts"] == 1
    assert any(isinstance(a, Log) and a.event == "ormcc_cr_timeout" for a in acts)
    sends = [a for a in s.on_timer(22.5, SEND) if isinstance(a, Send)]
    assert sends and all(a.ext == INVALID for a in sends)


def test_stale_cr_check_timer_is_ignored():
    s = sender_with_cr()
    assert s.on_timer(30.0, CR_CHECK) == [] and s.cr_valid


# -- source: CutRate ----------------------------------------------------------


def test_cut_takes_min_of_rate_and_beta_mu_once_per_rtt():
    s = sender_with_cr(rid=1, trac=2e6, now=10.0, beta=0.65)
    assert s.rate == pytest.approx(0.65 * 2e6)
    s.on_feedback(10.05, ci(1, 1e6, 9.95), "p")  # within RTT_cr of the last cut
    assert s.rate == pytest.approx(0.65 * 2e6) and s.counts["rate_cuts"] == 1
    s.on_feedback(10.5, ci(1, 1e6, 10.4), "p")
    assert s.rate == pytest.approx(0.65e6) and s.counts["rate_cuts"] == 2
    s.on_feedback(11.0, ci(1, 5e6, 10.9), "p")  # beta mu above the rate: keep the rate
    assert s.rate == pytest.approx(0.65e6) and s.counts["rate_cuts"] == 3


def test_cut_stops_the_cr_check():
    s = sender_with_cr(rid=1, trac=1e6)
    s.rate = 2e6
    s.on_timer(20.0, INCREASE)
    assert s.check_started is not None
    acts = s._cut(20.5, 1e6)
    assert s.check_started is None and CancelTimer(CR_CHECK) in acts


def test_beta_is_configurable():
    assert sender_with_cr(trac=1e6, beta=0.5).rate == pytest.approx(0.5e6)
    assert sender_with_cr(trac=1e6, beta=0.75).rate == pytest.approx(0.75e6)


# -- source: CI from the CR ----------------------------------------------------


def test_ci_from_cr_samples_t_cr_while_the_check_runs():
    s = sender_with_cr(rid=1, trac=1e6)
    s.rate = 2e6
    s.on_timer(20.0, INCREASE)
    s.cr_valid = False  # e.g. after a timeout, the same CR answers again
    acts = s.on_feedback(20.7, ci(1, 1.2e6, 20.5), "p")
    assert s.cr_valid and s.tcr.mean == pytest.approx(0.7) and s.tcr.dev == pytest.approx(0.35)
    assert CancelTimer(CR_CHECK) in acts and s.check_started is None


def test_ci_from_cr_updates_trac_and_rtt_averages_and_rtt_max():
    s = sender_with_cr(rid=1, trac=1e6, now=10.0, rtt=0.1)
    assert s.rtt_cr == pytest.approx(0.1) and s.rtt_max == pytest.approx(0.1)
    s.on_feedback(11.0, ci(1, 2e6, 10.5), "p")  # RTT sample 0.5 s
    assert s.mu.mean == pytest.approx(1e6 + 0.125 * 1e6)
    assert s.rtt_cr == pytest.approx(0.1 + 0.125 * 0.4)
    assert s.rtt_max == pytest.approx(s.rtt_cr)
    assert s.tcr.mean is None  # no check was running: no T^cr sample


# -- source: CI from another receiver -----------------------------------------------


def test_first_ci_without_valid_cr_elects_sender_and_starts_grace():
    s = OrmccSender(params())
    s.start(0.0)
    s.rtt_max = 0.3
    acts = s.on_feedback(5.0, ci(9, 1e6, 4.8), "10.0.0.9:1")
    assert s.cr == 9 and s.cr_peer == "10.0.0.9:1" and s.cr_valid
    assert s.grace_until == pytest.approx(5.6)
    assert s.counts["cr_switches"] == 1
    assert any(isinstance(a, Log) and a.fields["reason"] == "no_valid_cr" for a in acts)


def test_grace_period_prefers_a_longer_rtt():
    s = OrmccSender(params())
    s.start(0.0)
    s.rtt_max = 0.5
    s.on_feedback(5.0, ci(1, 1e6, 4.9), "a")  # RTT 0.1, grace until 6.0
    s.on_feedback(5.2, ci(2, 1e6, 5.15), "b")  # RTT 0.05: shorter, ignored
    assert s.cr == 1 and s.counts["ci_ignored"] == 1
    s.on_feedback(5.5, ci(3, 1e6, 5.2), "c")  # RTT 0.3: longer, taken
    assert s.cr == 3 and s.rtt_cr == pytest.approx(0.3)
    assert s.grace_until == pytest.approx(6.0)  # not reset by a switch within it


def test_after_grace_only_a_lower_trac_switches():
    s = sender_with_cr(rid=1, trac=1e6, now=10.0)
    s.mu.dev = 1e5
    s.on_feedback(20.0, ci(2, 0.95e6, 19.0), "b")  # above E - sigma, long RTT: ignored
    assert s.cr == 1
    s.on_feedback(21.0, ci(3, 0.85e6, 20.9), "c")  # below E - sigma
    assert s.cr == 3 and s.counts["cr_switches"] == 2


def test_switch_resets_trac_average_rtt_and_cuts():
    """A new CR restarts E(mu^cr) and RTT_cr from its CI (the reading in docs/ormcc.md;
    with an EWMA step instead, the fluid model no longer tracks Table I's period 4)."""
    s = sender_with_cr(rid=1, trac=1e6, now=10.0)
    s.mu.dev = 1e5
    s.rate = 3e6
    acts = s.on_feedback(20.0, ci(3, 0.5e6, 19.6), "c")
    assert s.mu.mean == pytest.approx(0.5e6) and s.mu.dev == pytest.approx(1e5)
    assert s.rtt_cr == pytest.approx(0.4) and s.rtt_max == pytest.approx(0.4)
    assert s.rate == pytest.approx(0.65 * 0.5e6)
    assert any(isinstance(a, Log) and a.event == "ormcc_cr" and a.fields["old"] == 1 for a in acts)


def test_malformed_ci_is_counted_and_ignored():
    s = sender_with_cr()
    assert s.on_feedback(11.0, b"\x01\x02", "x") == [Reject()]
    assert s.counts["ci_malformed"] == 1 and s.cr == 1


# -- receiver (Appendix I-B) --------------------------------------------------------


def header(seq: int, ext: OrmccExt = INVALID, sent: float = 0.0) -> Header:
    return Header(5, 1, 0, seq, int(sent * 1e9), 0, ext)


def feed(r: OrmccReceiver, seqs: list[int], ext: OrmccExt = INVALID, t0: float = 0.0,
         dt: float = 0.01) -> list:
    out = []
    for i, seq in enumerate(seqs):
        out += r.on_packet(t0 + i * dt, header(seq, ext, t0 + i * dt - 0.05), 1000, "239.1.1.1")
    return out


def test_receiver_without_loss_sends_nothing():
    r = OrmccReceiver(params(), rid=5)
    assert r.start(0.0)[0].channel == 0
    assert feed(r, list(range(200))) == [] and r.counts["loss_events"] == 0


def test_loss_without_valid_cr_sends_one_ci_per_gap():
    r = OrmccReceiver(params(), rid=5)
    out = feed(r, [*range(150), 153])  # three packets lost, detected by one arrival
    assert len(out) == 1 and isinstance(out[0], Feedback) and out[0].to is None
    c = decode_ci(out[0].data)
    assert (c.rid, c.seq) == (5, 153)
    assert c.echo_ns == int((1.5 - 0.05) * 1e9)  # the send time of packet 153
    assert r.counts == {"loss_events": 1, "lost_packets": 3, "ci_sent": 1, "ci_suppressed": 0}


def test_trac_is_the_output_rate_over_one_second():
    r = OrmccReceiver(params(), rid=5)
    out = feed(r, [*range(300), 301])  # 100 packets/s of 1000 B
    assert decode_ci(out[0].data).trac == pytest.approx(800_000, rel=0.02)


def test_receiver_below_cr_average_sends():
    r = OrmccReceiver(params(), rid=5)
    ext = OrmccExt(1, 99, 2e6, 1e5)  # its ~800 kbit/s TRAC is far below 2 Mbit/s - sigma
    assert len(feed(r, [*range(300), 301], ext)) == 1 and r.counts["ci_sent"] == 1


def test_receiver_not_below_cr_average_suppresses_and_counts():
    r = OrmccReceiver(params(), rid=5)
    ext = OrmccExt(1, 99, 0.85e6, 0.1e6)  # E(U) ~ 0.8 Mbit/s is not below 0.75 Mbit/s
    assert feed(r, [*range(300), 301], ext) == []
    assert r.counts["ci_suppressed"] == 1 and r.counts["ci_sent"] == 0


def test_the_cr_always_reports():
    r = OrmccReceiver(params(), rid=5)
    ext = OrmccExt(1, 5, 0.1e6, 0.0)
    assert len(feed(r, [*range(300), 301], ext)) == 1
    assert r.metrics()["is_cr"] == 1.0


def test_late_and_duplicate_packets_are_not_losses():
    r = OrmccReceiver(params(), rid=5)
    assert feed(r, [0, 1, 2, 2, 1, 3, 4]) == [] and r.counts["loss_events"] == 0


def test_sequence_wraps_without_loss():
    r = OrmccReceiver(params(), rid=5)
    assert feed(r, [2**32 - 2, 2**32 - 1, 0, 1]) == []


# -- wire --------------------------------------------------------------------------


def test_ci_round_trip_and_rejects():
    c = Ci(0xFFFFFFFF, 12, 123456789, 654321.5)
    data = encode_ci(c)
    assert len(data) == CI_LEN and decode_ci(data) == c
    for bad in (data[:-1], data + b"\0", b"\x02" + data[1:], data[:-8] + b"\x7f\xf8" + bytes(6)):
        with pytest.raises(ValueError):
            decode_ci(bad)


def test_extension_round_trip_and_rejects():
    ext = OrmccExt(1, 42, 512_000.0, 12_500.0)
    assert ORMCC_EXT.decode(ORMCC_EXT.encode(ext)) == ext
    with pytest.raises(ValueError):
        ORMCC_EXT.encode(OrmccExt(2, 0, 0.0, 0.0))
    with pytest.raises(ValueError):
        ORMCC_EXT.encode(OrmccExt(1, 0, -1.0, 0.0))


def test_expired_check_still_samples_t_cr_when_the_same_cr_answers():
    s = sender_with_cr(rid=1, trac=1e6)
    s.rate = 2e6
    s.on_timer(20.0, INCREASE)
    s.on_timer(25.0, CR_CHECK)
    assert not s.cr_valid
    s.on_feedback(27.0, ci(1, 1e6, 26.9), "p")
    assert s.cr_valid and s.tcr.mean == pytest.approx(7.0)
    s.on_feedback(40.0, ci(1, 1e6, 39.9), "p")  # no check ran since: no new sample
    assert s.tcr.samples == 1


def test_expired_check_answered_by_another_receiver_gives_no_t_cr_sample():
    # the paper's rule, kept: only the CR's own CIs time T^cr. With a too-short
    # estimate this is the trap of docs/ormcc.md (Known misses, Fig. 4 at n = 16)
    s = sender_with_cr(rid=1, trac=1e6)
    s.rate = 2e6
    s.on_timer(20.0, INCREASE)
    s.on_timer(25.0, CR_CHECK)
    s.on_feedback(27.0, ci(2, 0.9e6, 26.5), "q")
    assert s.cr == 2 and s.cr_valid and s.tcr.mean is None
    s.on_feedback(28.0, ci(1, 1e6, 27.9), "p")  # the old CR, now too late
    assert s.tcr.samples == 0
