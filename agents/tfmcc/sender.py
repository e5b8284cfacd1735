"""The TFMCC sender (RFC 4654 sec. 3) as a pure state machine.

Rates are bit/s of UDP payload, times seconds on the runtime clock. The sender
follows the CLR, the receiver with the lowest reported rate: a lower report makes
its receiver the CLR and cuts the rate to it at once; the CLR's higher reports raise
the rate by at most one packet per R_max every R_max. Feedback rounds last T =
``round_rtts`` R_max; the lowest non-CLR rate of a round is echoed for suppression.
In slow start the rate goes to twice the lowest receive rate reported.
"""

from __future__ import annotations

from agents.runtime.actions import Action, Log, Reject, Send, SetTimer
from agents.runtime.core import SenderCore
from agents.runtime.pacing import Pacer
from agents.tfmcc.params import TfmccParams
from agents.tfmcc.wire import (
    CLR_VALID,
    ECHO_VALID,
    HAVE_LOSS,
    HAVE_RTT,
    SLOW_START,
    SUPP_VALID,
    Report,
    TfmccExt,
    decode_report,
)

SEND = "send"
ROUND = "round"
CLR_CHECK = "clr_check"


class TfmccSender(SenderCore):
    """CLR selection, rate changes, feedback rounds and the CLR no-feedback rules."""

    def __init__(self, params: TfmccParams, session: object | None = None):
        p = self.p = params
        self.size = p.packet_size
        self.rate = p.initial_rate
        self.target = self.rate
        self.pacer: Pacer | None = None
        self.last_update = 0.0
        self.slow_start = True
        self.clr: int | None = None
        self.clr_rate = 0.0
        self.clr_rtt = p.initial_rtt
        self.clr_last = 0.0
        self.clr_since = 0.0
        self.halved_at = 0.0
        self.rmax = p.initial_rtt
        self.rpeak = 0.0
        self.round = 0
        self.round_start = 0.0
        self.round_nonclr = False
        self.round_ended_wait = False  # T passed without non-CLR feedback
        self.supp_rate: float | None = None
        self.echo: tuple[int, int, float, bool] | None = None  # rid, rx_ns, arrival, priority
        self.counts = {"fb_rx": 0, "fb_clr": 0, "fb_nonclr": 0, "fb_malformed": 0, "fb_no_loss": 0,
                       "clr_switches": 0, "clr_timeouts": 0, "halvings": 0, "rounds": 0,
                       "round_fb_nonclr": 0}
        self.round_history: list[int] = []  # non-CLR reports per finished round

    # -- events -------------------------------------------------------------------

    def start(self, now: float) -> list[Action]:
        self.pacer = Pacer(self.rate, now)
        self.last_update = self.round_start = self.clr_last = now
        return [*self._send(now), SetTimer(ROUND, now + self.T())]

    def T(self) -> float:
        """The feedback round duration."""
        return self.p.round_rtts * self.rmax

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        if timer_id == SEND:
            return self._send(now)
        if timer_id == ROUND:
            return self._round_timer(now)
        if timer_id == CLR_CHECK:
            return self._clr_check(now)
        return []

    def on_feedback(self, now: float, data: bytes, peer: str) -> list[Action]:
        return self.on_feedback_at(now, now, data, peer)

    def on_feedback_at(self, now: float, arrival: float, data: bytes, peer: str
                       ) -> list[Action]:
        try:
            r = decode_report(data)
        except ValueError:
            self.counts["fb_malformed"] += 1
            return [Reject()]
        self.counts["fb_rx"] += 1
        actions: list[Action] = []
        rtt = max(arrival - r.echo_ns / 1e9 - r.delay_us / 1e6, self.p.min_rtt)
        self.rpeak = max(self.rpeak, rtt)
        if rtt > self.rmax:  # R_max grows at once (sec. 3.2)
            self.rmax = rtt
        from_clr = self.clr is not None and r.rid == self.clr
        # Echo priority (sec. 3.5): the CLR, then receivers without an RTT measurement.
        prio = from_clr or not r.flags & HAVE_RTT
        if self.echo is None or prio or not self.echo[3]:
            self.echo = (r.rid, r.rx_ns, arrival, prio)
        if r.flags & HAVE_LOSS and self.slow_start:
            self.slow_start = False
            actions.append(Log("tfmcc_slow_start_end", {"rid": r.rid, "rate_bps": self.rate}))
        if not self.slow_start and not r.flags & HAVE_LOSS:
            # After slow start a rate without a loss event is only a receive rate, which
            # says nothing about congestion: it would pin the rate where it is (README).
            self.counts["fb_no_loss"] += 1
            return actions
        if from_clr:
            self.counts["fb_clr"] += 1
            self.clr_last, self.clr_rate, self.clr_rtt = now, r.rate, rtt
            actions += self._follow(now, r.rate)
            return actions
        self.counts["fb_nonclr"] += 1
        self.counts["round_fb_nonclr"] += 1
        if r.round == self.round % 65536:
            self.round_nonclr = True
            self.supp_rate = r.rate if self.supp_rate is None else min(self.supp_rate, r.rate)
        if self.clr is None or r.rate < self.clr_rate:
            actions += self._switch(now, r, rtt, peer)
        if self.round_ended_wait and r.round == self.round % 65536:
            actions += self._new_round(now)
        return actions

    def metrics(self) -> dict[str, float]:
        out = {"rate_bps": self.rate, "target_bps": self.target,
               "clr_id": float(self.clr if self.clr is not None else -1),
               "clr_rate_bps": self.clr_rate, "rmax_s": self.rmax, "round": float(self.round),
               "slow_start": float(self.slow_start)}
        out.update({k: float(v) for k, v in self.counts.items()})
        return out

    # -- helpers ------------------------------------------------------------------

    def header_ext(self, now: float) -> TfmccExt:
        flags = (CLR_VALID if self.clr is not None else 0) | \
                (SLOW_START if self.slow_start else 0) | \
                (SUPP_VALID if self.supp_rate is not None else 0)
        echo_rid = echo_ns = delay_us = 0
        if self.echo is not None:
            flags |= ECHO_VALID
            echo_rid, echo_ns = self.echo[0], self.echo[1]
            delay_us = round(max(now - self.echo[2], 0.0) * 1e6)
        return TfmccExt(self.rate, self.clr or 0, self.round % 65536, flags,
                        max(int(self.rmax * 1e6), 1), self.supp_rate or 0.0, echo_rid, echo_ns,
                        delay_us)

    def _switch(self, now: float, r: Report, rtt: float, peer: str) -> list[Action]:
        old = self.clr
        self.clr, self.clr_rate, self.clr_rtt = r.rid, r.rate, rtt
        self.clr_last = self.clr_since = now
        self.counts["clr_switches"] += 1
        log = Log("tfmcc_clr", {"clr": r.rid, "peer": peer, "old": old, "rate_bps": r.rate,
                                "rtt_s": rtt})
        return [log, *self._follow(now, r.rate), SetTimer(CLR_CHECK, now + self._clr_rtt())]

    def _clr_rtt(self) -> float:
        return max(self.clr_rtt, self.p.min_rtt)

    def _follow(self, now: float, reported: float) -> list[Action]:
        """Apply the CLR's rate: twice a receive rate in slow start (sec. 3.6); else a cut at
        once, an increase limited by _ramp (sec. 3.3)."""
        if self.slow_start:
            self.target = 2 * reported
            return self._set_rate(now, self.target)
        self.target = reported
        if reported < self.rate:
            return self._set_rate(now, reported)
        return []

    def _ramp(self, now: float) -> None:
        """Raise the rate towards the target by at most 8s/R_max bit/s per R_max."""
        dt = max(now - self.last_update, 0.0)
        self.last_update = now
        if self.rate < self.target and not self.slow_start:
            step = dt * self.size * 8 / (self.rmax * self.rmax)
            self._apply(min(self.target, self.rate + step), now)

    def _clr_check(self, now: float) -> list[Action]:
        """The CLR's no-feedback rules: halve after ``clr_halve_rtts`` silent CLR RTTs (not
        within ``clr_timeout_rtts`` RTTs of its selection, and once per such silence), drop
        it after ``clr_timeout_rtts`` silent RTTs."""
        if self.clr is None:
            return []
        rtt = self._clr_rtt()
        # A CLR reports at most once per packet it receives: at a few packets per RTT, a
        # silence of 4 RTTs is normal, so the limits are also at least 2 and 5 packet
        # intervals (TFRC's no-feedback timer, RFC 5348 sec. 4.3, does the same).
        gap = self.size * 8 / self.rate
        halve_after = max(self.p.clr_halve_rtts * rtt, 2 * gap)
        drop_after = max(self.p.clr_timeout_rtts * rtt, 5 * gap)
        silent = now - self.clr_last
        actions: list[Action] = []
        if silent >= drop_after:
            actions.append(Log("tfmcc_clr_timeout", {"clr": self.clr}))
            self.clr = None
            self.clr_rate = 0.0
            self.counts["clr_timeouts"] += 1
            return actions
        if (silent >= halve_after and now - self.clr_since >= drop_after
                and now - self.halved_at >= halve_after):
            self.halved_at = now
            self.counts["halvings"] += 1
            self.target = self.rate / 2
            actions += self._set_rate(now, self.rate / 2)
        return [*actions, SetTimer(CLR_CHECK, now + rtt)]

    def _round_timer(self, now: float) -> list[Action]:
        """T after the round began: a round with non-CLR feedback ends; one without waits for
        the first such report, at most 2T (sec. 3.4)."""
        if self.round_nonclr or self.round_ended_wait:
            return self._new_round(now)
        self.round_ended_wait = True
        return [SetTimer(ROUND, self.round_start + 2 * self.T())]

    def _new_round(self, now: float) -> list[Action]:
        self.round_history.append(self.counts["round_fb_nonclr"])
        self.counts["round_fb_nonclr"] = 0
        self.counts["rounds"] += 1
        if self.rpeak > 0:  # R_max decays towards the round's peak (sec. 3.2)
            self.rmax = max(0.9 * self.rmax, self.rpeak)
        self.rpeak = 0.0
        self.round += 1
        self.round_start = now
        self.round_nonclr = self.round_ended_wait = False
        self.supp_rate = None
        return [SetTimer(ROUND, now + self.T())]

    def _send(self, now: float) -> list[Action]:
        assert self.pacer is not None
        self._ramp(now)
        actions: list[Action] = []
        while self.pacer.due(now):
            actions.append(Send(0, self.size, ext=self.header_ext(now)))
            self.pacer.sent(self.size)
        actions.append(SetTimer(SEND, self.pacer.next_due))
        return actions

    def _apply(self, rate: float, now: float) -> None:
        self.rate = min(max(rate, self.p.min_rate), self.p.max_rate)
        if self.pacer is not None:
            self.pacer.set_rate(self.rate, now)

    def _set_rate(self, now: float, rate: float) -> list[Action]:
        self.last_update = now
        self._apply(rate, now)
        if self.pacer is None:
            return []
        return [SetTimer(SEND, self.pacer.next_due)]
