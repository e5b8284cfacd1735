"""The ORMCC source (Appendix I-A) as a pure state machine.

Rates are bit/s of UDP payload, times are seconds on the runtime clock. The
source keeps O(1) state: the CR's id, the averages of its TRAC, of T^cr and of
RTT_cr, RTT_max, the rate and a few timestamps.
"""

from __future__ import annotations

from agents.ormcc.estimators import Ewma
from agents.ormcc.params import OrmccParams
from agents.ormcc.wire import INVALID, OrmccExt, decode_ci
from agents.runtime.actions import Action, CancelTimer, Log, Reject, Send, SetTimer
from agents.runtime.core import SenderCore
from agents.runtime.pacing import Pacer

SEND = "send"
INCREASE = "increase"
CR_CHECK = "cr_check"


class OrmccSender(SenderCore):
    """AIMD driven by the Congestion Representative's CI(mu)s.

    * every RTT_cr without a cut: lambda += s/RTT_cr, and the CR checking timer
      (E(T^cr) + 8 sigma_T) starts once lambda >= E(mu^cr) + 4 sigma_mu;
    * a CI from the CR cuts lambda to min(lambda, beta mu), at most once per RTT_cr;
    * a CI from another receiver makes it the CR when no CR is valid, when it
      has a longer RTT inside the grace period (2 RTT_max after a CR was chosen
      while none was valid), or when mu < E(mu^cr) - sigma_mu;
    * the checking timer's expiry invalidates the CR.
    """

    def __init__(self, params: OrmccParams, session: object | None = None):
        p = self.params = params
        self.size = p.packet_size
        self.rate = p.initial_rate
        self.pacer: Pacer | None = None
        self.cr: int | None = None
        self.cr_peer: str | None = None
        self.cr_valid = False
        self.mu = Ewma(p.alpha, first_dev=0.0)  # E(mu^cr), mu_sigma^cr
        self.tcr = Ewma(p.alpha, first_dev=0.5)  # E(T^cr), T_sigma^cr
        self.rtt_cr = p.initial_rtt
        self.rtt_max = 0.0
        self.last_cut: float | None = None
        self.check_started: float | None = None  # t of the pseudo code; None: not running
        self.expired_check: float | None = None  # t of a check that expired (see on_feedback)
        self.grace_until = float("-inf")
        self.counts = {"ci_rx": 0, "ci_rx_cr": 0, "ci_ignored": 0, "ci_malformed": 0,
                       "rate_cuts": 0, "cr_switches": 0, "cr_timeouts": 0}

    # -- events -----------------------------------------------------------------

    def start(self, now: float) -> list[Action]:
        self.pacer = Pacer(self.rate, now)
        return [*self._send(now), SetTimer(INCREASE, now + self.rtt_cr)]

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        if timer_id == SEND:
            return self._send(now)
        if timer_id == INCREASE:
            return self._increase(now)
        if timer_id == CR_CHECK and self.check_started is not None:
            self.expired_check, self.check_started = self.check_started, None
            self.cr_valid = False
            self.counts["cr_timeouts"] += 1
            return [Log("ormcc_cr_timeout", {"cr": self.cr, "peer": self.cr_peer})]
        return []

    def on_feedback(self, now: float, data: bytes, peer: str) -> list[Action]:
        """A CI(mu) arrived from ``peer`` and is handled at once."""
        return self.on_feedback_at(now, now, data, peer)

    def on_feedback_at(self, now: float, arrival: float, data: bytes, peer: str
                       ) -> list[Action]:
        """A CI(mu) from ``peer`` that reached this host at ``arrival`` (the kernel's
        receive timestamp, as STAIR's probe echoes) and is handled at ``now`` (Appendix
        I-A, "upon receipt of CI(mu)"). The RTT and T^cr samples end at ``arrival``, so
        the time the CI waited for the event loop is not part of them."""
        try:
            ci = decode_ci(data)
        except ValueError:
            self.counts["ci_malformed"] += 1
            return [Reject()]
        self.counts["ci_rx"] += 1
        rtt = max(arrival - ci.echo_ns / 1e9, self.params.min_rtt)
        if self.cr is not None and ci.rid == self.cr:
            self.counts["ci_rx_cr"] += 1
            self.cr_valid = True
            actions: list[Action] = []
            # The pseudo code samples T^cr only while the check runs; a check that
            # expired (CR slower than E(T^cr) + 8 sigma) also yields a sample when the
            # same CR answers next, or a too-short first estimate could never grow.
            started = self.check_started if self.check_started is not None else self.expired_check
            if started is not None:
                self.tcr.update(max(arrival - started, 0.0))
            self.expired_check = None
            self.mu.update(ci.trac)
            self._update_rtt(rtt)
            actions += self._stop_check()
            return actions + self._cut(now, ci.trac)
        if not self.cr_valid:
            reason = "no_valid_cr"
            self.grace_until = now + 2 * self.rtt_max
        elif now < self.grace_until:
            reason = "longer_rtt" if rtt > self.rtt_cr else ""
        elif self.mu.mean is not None and ci.trac < self.mu.mean - self.mu.dev:
            reason = "lower_trac"
        else:
            reason = ""
        if not reason:
            self.counts["ci_ignored"] += 1
            return []
        old = self.cr
        self.cr, self.cr_peer, self.cr_valid = ci.rid, peer, True
        self.expired_check = None
        self.counts["cr_switches"] += 1
        self.mu.reset(ci.trac)
        self.rtt_cr = rtt
        self.rtt_max = max(self.rtt_max, self.rtt_cr)
        log = Log("ormcc_cr", {"cr": ci.rid, "peer": peer, "old": old, "reason": reason,
                               "trac_bps": ci.trac, "rtt_s": rtt, "rate_bps": self.rate})
        return [log, *self._cut(now, ci.trac)]

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {
            "rate_bps": self.rate, "cr_valid": float(self.cr_valid),
            "cr_id": float(self.cr if self.cr is not None else -1),
            "rtt_cr_s": self.rtt_cr, "rtt_max_s": self.rtt_max,
            "mu_cr_bps": self.mu.mean if self.mu.mean is not None else 0.0,
            "sigma_cr_bps": self.mu.dev,
            "t_cr_s": self.tcr.mean if self.tcr.mean is not None else 0.0,
        }
        out.update({k: float(v) for k, v in self.counts.items()})
        return out

    # -- helpers ----------------------------------------------------------------

    def header_ext(self) -> OrmccExt:
        """What data packets carry now: the CR's TRAC average, or invalid."""
        if self.cr_valid and self.cr is not None and self.mu.mean is not None:
            return OrmccExt(1, self.cr, self.mu.mean, self.mu.dev)
        return INVALID

    def check_length(self) -> float:
        """E(T^cr) + 8 T_sigma^cr, or the initial length before any sample."""
        if self.tcr.mean is None:
            return self.params.initial_check
        return self.tcr.mean + 8 * self.tcr.dev

    def _send(self, now: float) -> list[Action]:
        assert self.pacer is not None
        ext = self.header_ext()
        actions: list[Action] = []
        while self.pacer.due(now):
            actions.append(Send(0, self.size, ext=ext))
            self.pacer.sent(self.size)
        actions.append(SetTimer(SEND, self.pacer.next_due))
        return actions

    def _increase(self, now: float) -> list[Action]:
        actions: list[Action] = []
        if self.last_cut is None or now - self.last_cut >= self.rtt_cr:
            actions += self._set_rate(now, self.rate + self.size * 8 / self.rtt_cr)
            mu = self.mu
            if (self.cr_valid and mu.mean is not None and self.check_started is None
                    and self.rate >= mu.mean + 4 * mu.dev):
                self.check_started = now
                actions.append(SetTimer(CR_CHECK, now + self.check_length()))
        actions.append(SetTimer(INCREASE, now + self.rtt_cr))
        return actions

    def _cut(self, now: float, trac: float) -> list[Action]:
        if self.last_cut is not None and now - self.last_cut < self.rtt_cr:
            return []
        self.last_cut = now
        self.counts["rate_cuts"] += 1
        actions = self._set_rate(now, min(self.rate, self.params.beta * trac))
        return actions + self._stop_check()

    def _stop_check(self) -> list[Action]:
        if self.check_started is None:
            return []
        self.check_started = None
        return [CancelTimer(CR_CHECK)]

    def _update_rtt(self, sample: float) -> None:
        a = self.params.alpha
        self.rtt_cr = (1 - a) * self.rtt_cr + a * sample
        self.rtt_max = max(self.rtt_max, self.rtt_cr)

    def _set_rate(self, now: float, rate: float) -> list[Action]:
        """Clamp and apply a new rate; the pacing timer moves with it."""
        self.rate = min(max(rate, self.params.min_rate), self.params.max_rate)
        if self.pacer is None:
            return []
        self.pacer.set_rate(self.rate, now)
        return [SetTimer(SEND, self.pacer.next_due)]
