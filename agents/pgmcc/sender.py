"""The PGMCC sender (draft sec. 2.2, 2.3, 2.7 and 3) as a pure state machine.

Times are seconds on the runtime clock. The sender keeps a window W and a token count T
(both in packets, non-integer): a packet goes out when T >= 1 and consumes a token;
ACKs from the acker return tokens and open the window (exponentially below a fixed
SSTHRESH, by 1/W per acknowledged packet above it); a packet the ACK bitmap shows
missing with at least ``dupthresh`` acknowledged packets after it halves W and removes
W/2 tokens, after which the window stays as it is until an ACK reports the first packet
sent after the cut. A timeout resets W and T to 1; after ``acker_timeouts`` successive
timeouts the acker is dropped and the next packets ask for an election. Every ACK or NAK
gives the sender its source's loss rate and RTT; the source replaces the acker when its
throughput estimate is below C times the acker's.

Tokens are conserved: a packet the sender stops waiting for (acknowledged, found lost,
or out of reach of the acker's bitmaps) returns its token, so T plus the packets in
flight equals W, and the draft's T = T - W/2 halves the packets in flight (README).
"""

from __future__ import annotations

from agents.pgmcc.estimators import RtoEstimator, inverse_throughput, should_switch
from agents.pgmcc.params import PgmccParams
from agents.pgmcc.wire import ACK, ACKER_VALID, BITMAP_LEN, PgmccExt, Report, decode_report
from agents.runtime.actions import Action, CancelTimer, Log, Reject, Send, SetTimer
from agents.runtime.core import SenderCore
from agents.runtime.pacing import Pacer

SEND = "send"
RTO = "rto"
_MOD = 1 << 32
_HALF = 1 << 31


class PgmccSender(SenderCore):
    """The window, the acker and the timeout."""

    def __init__(self, params: PgmccParams, session: object | None = None):
        p = self.p = params
        self.size = p.packet_size
        self.window = 1.0  # W
        self.tokens = 1.0  # T
        self.next_seq = 0  # unwrapped sequence number of the next packet
        # unwrapped seq -> the acker the packet named (None: none), for packets not settled
        self.in_flight: dict[int, int | None] = {}
        self.acker: int | None = None
        self.acker_loss = 0.0
        self.acker_rtt = 0.0
        self.acker_m = 0.0  # the acker's 1/T
        self.rtt = RtoEstimator()
        self.retry = 0  # successive timeouts
        self.recover_until: int | None = None  # no window change until this seq is reported
        self.cut_floor = 0  # packets sent before this one cannot cause another cut
        self.rto_at: float | None = None
        self.pacer: Pacer | None = None
        self.counts = {"acks_rx": 0, "naks_rx": 0, "fb_malformed": 0, "fb_ignored": 0,
                       "acker_acks": 0, "acker_switches": 0, "elections": 0, "acker_drops": 0,
                       "cuts": 0, "lost": 0, "unreported": 0, "timeouts": 0, "sent": 0}

    # -- events -------------------------------------------------------------------

    def start(self, now: float) -> list[Action]:
        self.pacer = Pacer(self.p.max_rate, now)
        return self._send(now)

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        if timer_id == SEND:
            return self._send(now)
        if timer_id == RTO:
            self.rto_at = None
            return self._timeout(now)
        return []

    def on_feedback(self, now: float, data: bytes, peer: str) -> list[Action]:
        return self.on_feedback_at(now, now, data, peer)

    def on_feedback_at(self, now: float, arrival: float, data: bytes, peer: str
                       ) -> list[Action]:
        """An ACK or NAK (sec. 3, "on ACK/NAK reception"), its RTT measured to ``arrival``."""
        try:
            r = decode_report(data)
        except ValueError:
            self.counts["fb_malformed"] += 1
            return [Reject()]
        rx = None
        if r.kind == ACK:
            rx = self._unwrap(r.seq)
            if rx is None:  # reports a packet never sent
                self.counts["fb_ignored"] += 1
                return []
            self.counts["acks_rx"] += 1
        else:
            self.counts["naks_rx"] += 1
        rtt = max(arrival - r.echo_ns / 1e9 - r.delay_us / 1e6, self.p.min_rtt)
        m = inverse_throughput(rtt, r.p)
        self.retry = 0
        actions: list[Action] = []
        if self.acker is None:  # the first report elects its source (sec. 2.3.1)
            self.counts["elections"] += 1
            actions.append(self._new_acker(r, rtt, m, peer, "election"))
            # Sec. 3 adds a token here so that a packet naming the acker goes out. The
            # packets in flight that named no acker give theirs back instead: one packet
            # at start and after a timeout, the same T + 1, and tokens stay conserved.
            unnamed = [seq for seq, named in self.in_flight.items() if named is None]
            for seq in unnamed:
                del self.in_flight[seq]
            self.tokens += len(unnamed)
        elif r.rid != self.acker and should_switch(m, self.acker_m, self.p.switch_factor):
            self.counts["acker_switches"] += 1
            actions.append(self._new_acker(r, rtt, m, peer, "switch"))
        if r.rid == self.acker:
            self.acker_loss, self.acker_rtt, self.acker_m = r.p, rtt, m
            if rx is not None:
                self.counts["acker_acks"] += 1
                self.rtt.sample(rtt)
        settled = 0
        if rx is not None:
            # An ACK settles the packets that named its sender, the current acker's or a
            # previous one's (README: ACKs after a switch).
            settled, cut = self._on_ack(rx, r.bitmap, r.rid)
            actions += cut
        return [*actions, *self._send(now), *self._arm(now, progress=settled > 0)]

    def metrics(self) -> dict[str, float]:
        srtt = self.rtt.srtt
        out = {"window": self.window, "tokens": self.tokens,
               "in_flight": float(len(self.in_flight)),
               "acker_id": float(self.acker if self.acker is not None else -1),
               "acker_loss": self.acker_loss, "acker_rtt_s": self.acker_rtt,
               "srtt_s": srtt or 0.0, "rto_s": self._rto(),
               "rate_bps": self.window * self.size * 8 / srtt if srtt else 0.0}
        out.update({k: float(v) for k, v in self.counts.items()})
        return out

    # -- the window (sec. 2.2) ----------------------------------------------------

    def _on_ack(self, rx: int, bitmap: int, rid: int) -> tuple[int, list[Action]]:
        """Settle the packets an ACK from ``rid`` reports and move the window; the number
        of packets settled, and the log of a cut."""
        if self.recover_until is not None and rx >= self.recover_until:
            self.recover_until = None  # the first packet after the cut is reported
        acked = lost = unreported = 0
        last_lost: int | None = None
        for seq in sorted(s for s in self.in_flight if s <= rx):
            k = rx - seq
            named = self.in_flight[seq]
            if named is not None and named != rid:
                if k < BITMAP_LEN or rid != self.acker:
                    continue  # its own acker may still report it
                unreported += 1  # named an earlier acker, beyond the current one's bitmap
            elif k < BITMAP_LEN:
                if bitmap >> k & 1:
                    acked += 1
                elif bin(bitmap & ((1 << k) - 1)).count("1") >= self.p.dupthresh:
                    lost += 1
                    last_lost = seq
                else:
                    continue  # not yet decided
            else:
                # The acker ACKs each packet naming it: 32 ACKs later still unreported.
                lost += 1
                last_lost = seq
            del self.in_flight[seq]
        self.counts["lost"] += lost
        self.counts["unreported"] += unreported
        # A settled packet leaves the pipe: its token comes back (README, conservation).
        self.tokens += acked + lost + unreported
        actions: list[Action] = []
        if (last_lost is not None and self.recover_until is None
                and last_lost >= self.cut_floor):
            # One cut per RTT: no cut while the window is frozen, and none for a packet
            # sent before the last cut.
            self.tokens -= self.window / 2
            self.window = max(self.window / 2, 1.0)
            self.recover_until = self.cut_floor = self.next_seq
            self.counts["cuts"] += 1
            actions.append(Log("pgmcc_cut", {"window": self.window, "seq": last_lost}))
        elif self.recover_until is None:  # frozen after a cut: tokens flow, W stays
            self._open(acked)
        self.tokens = min(self.tokens, self.window)
        return acked + lost + unreported, actions

    def _open(self, n: float) -> None:
        """Sec. 2.2, no loss, for ``n`` newly acknowledged packets (whose tokens came back
        already): the first ones up to SSTHRESH open the window by one each (T + 2 in the
        draft), the rest by 1/W each (T + 1 + 1/W)."""
        if self.window < self.p.ssthresh:
            d = min(n, self.p.ssthresh - self.window)
            n -= d
            self.tokens += d
            self.window += d
        self.tokens += n / self.window
        self.window = min(self.window + n / self.window, self.p.max_window)

    # -- the acker (sec. 2.3) -----------------------------------------------------

    def _new_acker(self, r: Report, rtt: float, m: float, peer: str, why: str) -> Log:
        old = self.acker
        self.acker = r.rid
        self.acker_loss, self.acker_rtt, self.acker_m = r.p, rtt, m
        self.rtt.reset()  # sec. 2.7: SRTT and RTTVAR restart with each acker
        return Log("pgmcc_acker", {"acker": r.rid, "old": old, "peer": peer, "why": why,
                                   "loss": r.p, "rtt_s": rtt})

    # -- timeouts (sec. 2.7) ------------------------------------------------------

    def _rto(self) -> float:
        base = self.rtt.rto(self.p.initial_rto, self.p.min_rto, self.p.max_rto)
        return min(base * 2 ** min(self.retry, 6), self.p.max_rto)

    def _arm(self, now: float, progress: bool) -> list[Action]:
        """Keep a timeout pending while packets are in flight; an ACK that settles packets
        restarts it."""
        if not self.in_flight:
            if self.rto_at is None:
                return []
            self.rto_at = None
            return [CancelTimer(RTO)]
        if self.rto_at is not None and not progress:
            return []
        self.rto_at = now + self._rto()
        return [SetTimer(RTO, self.rto_at)]

    def _timeout(self, now: float) -> list[Action]:
        """W = T = 1 and forget the packets in flight; after ``acker_timeouts`` successive
        timeouts the acker is no longer valid (sec. 3, "on timeout expiration")."""
        self.counts["timeouts"] += 1
        self.window = self.tokens = 1.0
        self.in_flight.clear()
        self.recover_until = None
        self.cut_floor = self.next_seq
        self.retry += 1
        actions: list[Action] = [Log("pgmcc_timeout", {"acker": self.acker, "retry": self.retry})]
        if self.acker is not None and self.retry >= self.p.acker_timeouts:
            self.counts["acker_drops"] += 1
            actions.append(Log("pgmcc_acker_drop", {"acker": self.acker}))
            self.acker = None
            self.acker_m = 0.0
            self.rtt.reset()
        return [*actions, *self._send(now)]

    # -- sending ------------------------------------------------------------------

    def header_ext(self) -> PgmccExt:
        """The extension of the next data packet."""
        if self.acker is None:
            return PgmccExt(0, 0)
        return PgmccExt(self.acker, ACKER_VALID)

    def _send(self, now: float) -> list[Action]:
        assert self.pacer is not None
        actions: list[Action] = []
        ext = self.header_ext()
        while self.tokens >= 1 and self.pacer.due(now):
            actions.append(Send(0, self.size, ext=ext))
            self.pacer.sent(self.size)
            self.in_flight[self.next_seq] = self.acker
            self.next_seq += 1
            self.tokens -= 1
            self.counts["sent"] += 1
        if self.tokens >= 1:  # the rate ceiling holds it back
            actions.append(SetTimer(SEND, self.pacer.next_due))
        if actions and self.rto_at is None and self.in_flight:
            self.rto_at = now + self._rto()
            actions.append(SetTimer(RTO, self.rto_at))
        return actions

    def _unwrap(self, seq: int) -> int | None:
        """The unwrapped number of a sent packet's 32-bit sequence number, or None if it
        names no packet sent yet."""
        last = self.next_seq - 1
        back = (last - seq) % _MOD
        if last < 0 or back >= _HALF or back > last:
            return None
        return last - back
