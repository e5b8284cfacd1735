"""The TFMCC receiver (RFC 4654 sec. 4) as a pure state machine.

Per data packet it detects losses (sequence gaps, with send times interpolated
between the packets around the gap), keeps the loss history, measures its RTT from
the sender's echo of its own timestamp and adjusts it between echoes by the change of
the one-way delay, and computes its rate: the equation's with a loss, else its
receive rate (slow start). The CLR reports once per RTT; every other receiver arms a
rate-biased exponential timer at the start of each feedback round and cancels it when
the round's suppression rate is not above its own rate by the margin.
"""

from __future__ import annotations

import math
import random
from collections import deque

from agents.runtime.actions import Action, CancelTimer, Feedback, Join, SetTimer
from agents.runtime.core import ReceiverCore
from agents.runtime.header import Header
from agents.tfmcc.estimators import LossHistory, invert_rate, tcp_rate
from agents.tfmcc.params import TfmccParams
from agents.tfmcc.wire import (
    CLR_VALID,
    ECHO_VALID,
    HAVE_LOSS,
    HAVE_RTT,
    IS_CLR,
    SLOW_START,
    SUPP_VALID,
    Report,
    TfmccExt,
    encode_report,
)

_HALF = 1 << 31
_MOD = 1 << 32
FB = "feedback"
# A sequence jump longer than this is a restarted or forged stream, not losses: walking
# it packet by packet would let one datagram stall the agent.
MAX_GAP = 10_000
CLR_FB = "clr_feedback"


def feedback_delay(T: float, x: float, n: int, ratio: float, bias: float) -> float:
    """The rate-biased feedback timer (sec. 4.5): a share ``bias`` of T ordered by
    ``ratio`` = own rate / sending rate (capped at 1), the rest the exponential timer
    T * max(1 + ln x / ln N, 0) for x uniform in (0, 1]."""
    random_part = max(1.0 + math.log(x) / math.log(n), 0.0)
    return T * (bias * min(max(ratio, 0.0), 1.0) + (1.0 - bias) * random_part)


class TfmccReceiver(ReceiverCore):
    """``rid`` is the 32-bit receiver id; ``rng`` draws the feedback timers."""

    def __init__(self, params: TfmccParams, session: object | None = None, *, rid: int,
                 rng: random.Random | None = None):
        self.p = params
        self.rid = rid & (_MOD - 1)
        self.rng = rng or random.Random(rid)
        self.loss = LossHistory()
        self.expected: int | None = None  # next wrapped seq
        self.base = 0  # unwrapped = base + wrapped
        self.last_seq = -1  # unwrapped, highest seen
        self.last_sent = 0.0  # sender time of the highest packet seen (s)
        self.last_send_ns = 0
        self.last_arrival = 0.0
        self.rtt: float | None = None  # smoothed measured RTT
        self.owd_at_sample = 0.0  # one-way delay (incl. clock offset) when rtt was sampled
        self.owd = 0.0
        self.used_echo: int | None = None
        self.arrivals: deque[tuple[float, int]] = deque()
        self.arrival_bytes = 0
        self.ext: TfmccExt | None = None
        self.round: int | None = None
        self.x_fbr = 0.0
        self.fb_pending = False
        self.is_clr = False
        self.last_report = -math.inf
        self.counts = {"loss_events": 0, "lost_packets": 0, "rtt_samples": 0, "fb_sent": 0,
                       "fb_suppressed": 0, "fb_sent_clr": 0, "seq_jumps": 0}

    # -- measurements -------------------------------------------------------------

    def rmax(self) -> float:
        return self.ext.rmax_us / 1e6 if self.ext is not None else self.p.initial_rtt

    def current_rtt(self) -> float:
        """The measured RTT adjusted by the one-way delay change since it was sampled, or
        the sender's R_max before any measurement (sec. 4.3)."""
        if self.rtt is None:
            return self.rmax()
        return max(self.rtt + (self.owd - self.owd_at_sample), self.p.min_rtt)

    def receive_rate(self, now: float) -> float:
        """Bytes received after the first arrival of the last RTT (at least 4 arrivals) over
        the time since it, in bit/s."""
        if len(self.arrivals) < 2:
            return self.p.min_rate
        span = max(now - self.arrivals[0][0], 1e-6)
        return max((self.arrival_bytes - self.arrivals[0][1]) * 8 / span, self.p.min_rate)

    def loss_rate(self) -> float:
        return self.loss.loss_rate()

    def calc_rate(self, now: float) -> float:
        """The equation's rate with a loss event so far, else the receive rate."""
        p = self.loss.loss_rate()
        if p > 0:
            return tcp_rate(self.p.packet_size, self.current_rtt(), p)
        return self.receive_rate(now)

    # -- events -------------------------------------------------------------------

    def start(self, now: float) -> list[Action]:
        return [Join(0)]

    def on_packet(self, now: float, header: Header, payload_len: int, group: str) -> list[Action]:
        ext = header.ext
        if not isinstance(ext, TfmccExt):
            return []
        self.ext = ext
        self._account(now, payload_len)
        sent = header.send_ns / 1e9
        if self.expected is None:
            self.expected = (header.seq + 1) % _MOD
            self.base = -header.seq
            self.last_seq = 0
            self.last_sent, self.last_send_ns, self.last_arrival = sent, header.send_ns, now
        else:
            gap = (header.seq - self.expected) % _MOD
            if MAX_GAP < gap < _HALF:  # no plausible loss burst: start counting afresh
                self.counts["seq_jumps"] += 1
                gap = 0
            if gap < _HALF:  # in order or after a gap; late packets are ignored
                seq = self.last_seq + 1 + gap
                for k in range(gap):  # lost packets, send times interpolated
                    at = self.last_sent + (sent - self.last_sent) * (k + 1) / (gap + 1)
                    self._lost(now, self.last_seq + 1 + k, at)
                self.counts["lost_packets"] += gap
                self.expected = (header.seq + 1) % _MOD
                self.last_seq = seq
                self.last_sent, self.last_send_ns, self.last_arrival = sent, header.send_ns, now
        self.loss.received(self.last_seq)
        self.owd = now - sent
        if ext.flags & ECHO_VALID and ext.echo_rid == self.rid and ext.echo_ns != self.used_echo:
            self.used_echo = ext.echo_ns
            sample = now - ext.echo_ns / 1e9 - ext.echo_delay_us / 1e6
            self._rtt_sample(max(sample, self.p.min_rtt))
        return self._feedback_rules(now, ext)

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        if timer_id == FB and self.fb_pending:
            self.fb_pending = False
            if self.ext is not None and self.suppressed(self.ext):  # the latest echo decides
                self.counts["fb_suppressed"] += 1
                return []
            return self._report(now)
        if timer_id == CLR_FB and self.is_clr:
            # Reports are clocked by data: a CLR cut off from the sender falls silent and
            # the sender's no-feedback rules take over (README).
            fresh = self.last_arrival > self.last_report
            out = self._report(now) if fresh else []
            return [*out, SetTimer(CLR_FB, now + self.current_rtt())]
        return []

    def metrics(self) -> dict[str, float]:
        out = {"rtt_s": self.current_rtt(), "loss_event_rate": self.loss.loss_rate(),
               "is_clr": float(self.is_clr), "rid": float(self.rid)}
        out.update({k: float(v) for k, v in self.counts.items()})
        return out

    # -- helpers ------------------------------------------------------------------

    def _account(self, now: float, size: int) -> None:
        self.arrival_bytes += size
        # bytes up to and including each arrival: the first one in the window only opens it
        self.arrivals.append((now, self.arrival_bytes))
        horizon = now - self.current_rtt()
        while len(self.arrivals) > 4 and self.arrivals[0][0] < horizon:
            self.arrivals.popleft()

    def _lost(self, now: float, seq: int, sent: float) -> None:
        first = None
        if self.loss.event_seq is None:  # seed from the receive rate (RFC 5348 sec. 6.3.1)
            p0 = invert_rate(self.p.packet_size, self.current_rtt(), self.receive_rate(now))
            first = 1.0 / p0
        if self.loss.lost(seq, sent, self.current_rtt(), first):
            self.counts["loss_events"] += 1

    def _rtt_sample(self, sample: float) -> None:
        self.counts["rtt_samples"] += 1
        if self.rtt is None:
            self.rtt = sample
        else:
            q = self.p.rtt_gain_clr if self.is_clr else self.p.rtt_gain
            # Smooth against the estimate as the one-way delay has moved it, not against
            # the raw older sample: the reference moves to this packet below, so queueing
            # that sample carried (a non-CLR's only sample is often from slow start's full
            # queue) would otherwise come back in full, or a drained queue would drive the
            # estimate to the floor (README, choice 5).
            self.rtt = q * sample + (1 - q) * self.current_rtt()
        self.owd_at_sample = self.owd

    def _feedback_rules(self, now: float, ext: TfmccExt) -> list[Action]:
        actions: list[Action] = []
        clr = bool(ext.flags & CLR_VALID) and ext.clr == self.rid
        if clr and not self.is_clr:
            self.is_clr = True
            actions.append(SetTimer(CLR_FB, now + self.current_rtt()))
        elif not clr and self.is_clr:
            self.is_clr = False
            actions.append(CancelTimer(CLR_FB))
        if ext.round != self.round:  # a new round cancels feedback for older ones
            self.round = ext.round
            self.x_fbr = self.calc_rate(now)
            # After slow start a receiver without a loss event has no rate to report.
            lossless = not ext.flags & SLOW_START and self.loss.loss_rate() == 0
            wanted = not self.is_clr and not lossless
            if wanted and self.suppressed(ext):
                self.counts["fb_suppressed"] += 1
            elif wanted:
                T = self.p.round_rtts * self.rmax()
                x = 1.0 - self.rng.random()  # (0, 1]
                delay = feedback_delay(T, x, self.p.max_receivers, self.x_fbr / ext.rate,
                                       self.p.bias)
                self.fb_pending = True
                return [*actions, SetTimer(FB, now + delay)]
            if self.fb_pending:
                self.fb_pending = False
                actions.append(CancelTimer(FB))
        if self.fb_pending and self.suppressed(ext):
            self.fb_pending = False
            self.counts["fb_suppressed"] += 1
            actions.append(CancelTimer(FB))
        return actions

    def suppressed(self, ext: TfmccExt) -> bool:
        """Whether this round's report is not needed: the rate at the round's start is not
        below the bound by the margin (sec. 4.5). The bound is the round's suppression rate
        and, while a CLR exists, the sending rate itself (README, choice 7)."""
        bound = ext.rate if ext.flags & CLR_VALID else math.inf
        if ext.flags & SUPP_VALID:
            bound = min(bound, ext.supp_rate)
        # A rate below the sender's floor cannot lower the rate further (README, choice 8).
        own = max(self.x_fbr, self.p.min_rate)
        return not own < (1 - self.p.suppress_margin) * bound

    def _report(self, now: float) -> list[Action]:
        rate = self.calc_rate(now)
        flags = (HAVE_RTT if self.rtt is not None else 0) | \
                (HAVE_LOSS if self.loss.loss_rate() > 0 else 0) | (IS_CLR if self.is_clr else 0)
        report = Report(self.rid, self.round or 0, flags, self.last_send_ns,
                        round(max(now - self.last_arrival, 0.0) * 1e6), int(now * 1e9), rate,
                        self.loss.loss_rate(), int(self.current_rtt() * 1e6))
        self.counts["fb_sent"] += 1
        self.last_report = now
        if self.is_clr:
            self.counts["fb_sent_clr"] += 1
        return [Feedback(encode_report(report))]
