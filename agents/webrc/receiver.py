"""WEBRC receiver (sec. 3, Table 2): waves joined in sequence, equation-based target rate.

A pure state machine on the runtime's clock. Triggers and actions follow Table 2:

* **packet**: new time slot? (leave the newly quiescent wave); count for RR;
  PSN gap? (count for IRR, maybe begin a loss event of length ARTT, timed at the
  lost packet's interpolated arrival); first packet of a joined wave? (an MRTT
  sample into ARTT);
* **epoch boundary** (every EL): update ARR, TRR, LOSSP, REQN (Eq. 6) and TRATE
  (Eq. 5); join the next wave if not in a loss event, not waiting for a join,
  and ``Gamma_NWC * ARR <= TRATE``;
* **join timeout**: re-join, then give up waiting.

Start-up (sec. 3.2) runs with SSR = inf and exponent 3 on TRR in Eq. 5, joins at
most once per two epochs (the RR check of a full epoch after each join takes
effect), and ends at the first loss, at a large MRTT increase between
successive wave joins, or when RR lags ARR; then SSR is set in proportion to TRR
(below) and LOSSP so that REQN = TRR (Eq. 6 solved for LOSSP). Sec. 3.3: outside
start-up a join is refused while TRR is not below (by ``overflow_margin``) its
maximum since the last join, and LOSSP is then reset so that REQN equals the
current target rate.

Loss events (footnote 4: "As in TFRC, a loss event is a period of duration ARTT
starting with the detection of a packet loss"): each lost packet is timed as TFRC
times it (RFC 5348 sec. 5.2), by interpolating between the arrival times of the
packets before and after the gap on its channel by PSN, not by when the gap shows.
A slow channel (the base channel, the lowest waves: about 1 packet/s) shows its
gap up to a second after the drop, when a faster channel has long opened the
event and its ARTT has passed; timed at detection, one congestion episode would
count again. A lost packet opens a new loss event only if its time is at least
ARTT away from the start of every loss event counted so far (kept for
:data:`EVENT_MEMORY` events): channels detect out of order, so a loss may be
timed before the start of the event it belongs to. A wave's tail loss is timed
between its last packet and the slot change that ends the wave.

Choices where the paper is silent (all in :class:`~agents.webrc.params.WebrcParams`):

* ARR is an EWMA of IRR per epoch, decayed between epochs by the waves' own
  ``P**(EL/TSD)``, multiplied by Gamma_NWC on a join and by ``r/Gamma`` when the
  lowest wave goes quiescent (the model's exact ratios); IRR is not blended in
  while a join is pending nor in the epoch in which it takes effect.
* Loss events per epoch feed the two-stage LOSSP filter; a wave's tail loss
  (PSN below 2**16-1 when its slot ends) is counted when the wave is left.
* The MRTT jump threshold is ``max(mrtt_jump_min, mrtt_jump_spacing / rate of the
  joined wave)``; a re-joined wave gives no MRTT sample (its state may already be
  upstream).
* A wave's MRTT sample (``mrtt_spacing_correction``, on by default) is the time from
  the join to its first packet *minus half the wave's packet spacing at that packet*
  (known to every receiver: the schedule follows from the session parameters and the
  packet's PSN). The join takes effect at a random phase of the wave's packets (joins
  are made at epoch boundaries), so the first packet comes on average half a spacing
  after the forwarding state is set up; sec. 4.4's taut cycle has MRTT = RTT exactly
  (a fluid wave), and the joined wave carries only ``(Gamma - 1) * ARR``, about
  ``(1 - P)`` of the rate, so without the correction every sample is
  ``1 / (2 (1 - P) REQN)`` too long on average: 1.2 x RTT at 1% loss, fed back through
  Eq. 6. The base channel's sample stays raw (sec. 5.1.1 calls it biased upward by the
  base channel's packet interval).
* SSR ("set in proportion to the current reception rate", sec. 3.2, "below TRR when
  packet losses are detected", sec. 3.1) follows RFC 3738 (3.2.2.6, 3.2.3.4), the
  paper's reference [10] for the receiver's details: at the end of start-up and at
  the start of every loss event it is *set* to max{SSMINR, P * TRR} (``ssr_factor``,
  default P), so it rises again with TRR, and to max{SSMINR, TRR} when start-up ends
  because RR lags; SSMINR = BCR (1 + 1/P + 1/P^2) (``ssr_floor``).
* Epochs run every EL from the receiver's own start, so two receivers decide at an
  unrelated phase; ``epoch_phase`` puts every receiver's boundaries on one grid of the
  agents' shared clock instead (``k * EL + phase``; the first epoch is then shorter).
  Which of the two the paper's ns runs had is not said, and the phase between two
  receivers sets how often their joins to one wave fall close enough together for
  the later one to find no forwarding state yet at the shared router: a slack cycle
  (sec. 4.4), which raises both MRTTs (measured for sec. 5.3.1 in docs/webrc.md).
* RR and IRR of an epoch are its packets over the time since the previous epoch was
  closed (when the epoch timers actually ran), not over EL. A receiver stalled across
  an epoch's end reads what arrived meanwhile before its late epoch timer runs: that
  epoch is long and the next one short, and over EL the short one would look like RR
  lagging ARR, ending start-up far below the bottleneck.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

from agents.runtime.actions import Action, CancelTimer, Join, Leave, Log, Reject, SetTimer
from agents.runtime.core import ReceiverCore
from agents.runtime.header import Header
from agents.runtime.session import Session
from agents.webrc.estimators import LossFilter, SelfAdjustingMean
from agents.webrc.model import LAST_PSN, PSN_MOD, gamma, loss_for_rate, tcp_rate, wave_spacings
from agents.webrc.params import WebrcParams

EPOCH = "epoch"
JOIN_TIMEOUT = "join_timeout"
# Loss-event starts remembered for out-of-order detection: a slow channel's loss is
# detected up to a packet spacing (a tail loss up to a slot) late; a few events suffice.
EVENT_MEMORY = 16


@dataclass
class PendingJoin:
    """A join sent whose wave has not shown a packet yet."""

    cn: int
    sent: float
    rate: float  # the wave's anticipated rate (packets/s), for the MRTT jump threshold
    tries: int = 0


class WebrcReceiver(ReceiverCore):
    """One WEBRC receiver."""

    def __init__(self, params: WebrcParams, session: Session | None = None):
        self.params = params
        self.model = params.model()
        m = self.model
        self.r = 1 / m.p
        self.base = m.base_channel
        self.el = params.epoch
        self.beta = min(1.0, self.el / (params.loss_smoothing or 2 * m.tsd))
        self.mrr_pps = math.inf if params.mrr is None else params.mrr / (8 * params.packet_size)
        self.tsi: int | None = None
        self.waves: list[int] = []  # joined waves, lowest rate first (a pending one last)
        self.pending: PendingJoin | None = None
        self.last_psn: dict[int, int] = {}
        self.last_at: dict[int, float] = {}  # arrival of each channel's last in-order packet
        self.event_starts: deque[float] = deque(maxlen=EVENT_MEMORY)
        self.rx = self.lost = self.events = 0  # this epoch
        self.arr = self.trr = m.bcr
        self.rr = self.irr = 0.0
        self.ssr = math.inf
        self.startup = True
        self.startup_reason = ""
        self.loss = LossFilter(self.beta, params.loss_delta)
        self.artt = SelfAdjustingMean(params.artt_alpha)
        self.mrtt_last = math.nan
        self.prev_wave_mrtt: float | None = None
        self.loss_event_end = -math.inf
        self.reqn = math.inf
        self.trate = math.inf
        self.joins = self.leaves = self.timeouts = self.loss_events = self.overflow_blocks = 0
        self.blend_from = 0.0
        self.check_from: float | None = None
        self.rr_check_ok = True
        self.max_trr = 0.0
        self.base_join_at: float | None = None
        self.epoch_start = 0.0
        self.next_epoch = 0.0
        self.counted_from = 0.0  # when the previous epoch was closed: this one counts since

    # -- helpers ------------------------------------------------------------------
    @property
    def nwc(self) -> int:
        """Number of subscribed wave channels (a pending join included)."""
        return len(self.waves)

    def current_artt(self) -> float:
        """ARTT, or the configured initial value before any MRTT sample."""
        value = self.artt.value
        return self.params.initial_artt if value is None else value

    @property
    def lossp(self) -> float:
        """LOSSP (nan until start-up ends)."""
        return self.loss.lossp

    def _reset_lossp(self, rate: float) -> None:
        rate = max(rate, self.model.bcr)
        self.loss.reset(loss_for_rate(rate, self.current_artt()), max(self.trr * self.el, 1.0))

    # -- triggers -----------------------------------------------------------------
    def start(self, now: float) -> list[Action]:
        self.base_join_at = now
        self.epoch_start = self.counted_from = now
        self.next_epoch = self._epoch_after(now)
        m = self.model
        return [Log("webrc_receiver", {"n": m.n, "t": m.t, "sr_pps": m.sr}),
                Join(self.base), SetTimer(EPOCH, self.next_epoch)]

    def on_packet(self, now: float, header: Header, payload_len: int, group: str) -> list[Action]:
        ext = header.ext
        cn = header.channel
        if ext is None or ext.cn != cn:
            return [Reject()]  # the extension names another channel than it arrived on
        actions: list[Action] = []
        self.rx += 1
        if cn == self.base and self.base_join_at is not None:
            if self.params.base_mrtt_sample:
                actions += self._mrtt(now, now - self.base_join_at, None, cn, ext.psn)
            self.base_join_at = None
        actions += self._track_slot(now, ext.tsi)
        gap = 0
        last = self.last_psn.get(cn)
        before = self.last_at.get(cn, now)
        if last is None:
            self.last_psn[cn] = ext.psn
            self.last_at[cn] = now
        else:
            d = (ext.psn - last - 1) % PSN_MOD
            if d < PSN_MOD // 2:  # otherwise late or duplicate: not a gap
                gap = d
                self.last_psn[cn] = ext.psn
                self.last_at[cn] = now
        pending = self.pending
        if pending is not None and cn == pending.cn:
            self.pending = None
            actions.append(CancelTimer(JOIN_TIMEOUT))
            self.blend_from = self.next_epoch
            if self.startup:
                self.check_from = self.next_epoch
            if pending.tries == 0:
                raw = now - pending.sent
                sample = raw - self.spacing_correction(ext.psn)
                actions += self._mrtt(now, sample, pending.rate, cn, ext.psn, raw)
        if gap:
            actions += self._on_loss(now, gap, cn, (last + 1) % PSN_MOD, before)
        return actions

    def _track_slot(self, now: float, tsi: int) -> list[Action]:
        t = self.model.t
        if tsi >= t:
            return []
        if self.tsi is None:
            self.tsi = tsi
            return [Log("tsi", {"tsi": tsi})]
        d = (tsi - self.tsi) % t
        if d == 0 or d > t // 2:  # same slot, or a late packet of an earlier one
            return []
        actions: list[Action] = []
        for _ in range(d):
            actions += self._new_slot(now)
        return actions

    def _new_slot(self, now: float) -> list[Action]:
        assert self.tsi is not None
        old = self.tsi
        self.tsi = (old + 1) % self.model.t
        if old not in self.waves:
            self.arr *= self.r  # only the base channel steps back up
            return []
        actions: list[Action] = [Leave(old)]
        self.waves.remove(old)
        self.leaves += 1
        last = self.last_psn.pop(old, None)
        last_at = self.last_at.pop(old, now)
        if self.pending is not None and self.pending.cn == old:
            self.pending = None
            self.rr_check_ok = True
            actions.append(CancelTimer(JOIN_TIMEOUT))
        self.arr *= self.r / gamma(self.nwc, self.model.p)
        if last is not None and last != LAST_PSN:
            # The slot change stands in for the packet after the gap: the wave's last
            # packet was due just before it.
            actions += self._on_loss(now, (LAST_PSN - last) % PSN_MOD, old,
                                     (last + 1) % PSN_MOD, last_at)
        return actions

    def _on_loss(self, now: float, count: int, cn: int, first_psn: int,
                 before: float) -> list[Action]:
        """``count`` packets lost on channel ``cn`` from PSN ``first_psn`` on, between
        the packet that arrived at ``before`` and the one arriving ``now``. Lost packet
        ``k`` (1..count) is timed at ``before + k * step``, ``step = (now - before) /
        (count + 1)`` (RFC 5348 sec. 5.2); one that is ARTT + ``step`` or more from every
        loss event's start opens a loss event."""
        self.lost += count
        if self.params.loss_timing == "detection":
            # Timed when the gap shows: a slow channel's gap may open a second event.
            if now < self.loss_event_end:
                return []
            return self._loss_event(now, now, count, cn, first_psn)
        artt = self.current_artt()
        step = (now - before) / (count + 1)
        reach = artt + step  # the interpolation is uncertain by a packet spacing
        actions: list[Action] = []
        k = 1
        while k <= count:
            at = before + k * step
            near = [s for s in self.event_starts if abs(at - s) < reach]
            if near:
                # Skip the lost packets this event covers (evenly spaced: no loop over
                # a long gap one packet at a time).
                end = max(near) + reach
                k = max(k + 1, math.floor((end - before) / step) + 1) if step > 0 else count + 1
                continue
            actions += self._loss_event(now, at, count, cn, (first_psn + k - 1) % PSN_MOD)
            k += 1
        return actions

    def _loss_event(self, now: float, at: float, count: int, cn: int, psn: int
                    ) -> list[Action]:
        """A loss event begins at ``at`` (detected ``now``), opened by packet ``psn`` of
        channel ``cn`` in a gap of ``count``."""
        self.event_starts.append(at)
        self.events += 1
        self.loss_events += 1
        artt = self.current_artt()
        self.loss_event_end = max(self.loss_event_end, at + artt)
        actions: list[Action] = [Log("loss_event", {"lost": count, "trr": self.trr, "cn": cn,
                                                    "psn": psn, "at": at, "artt": artt})]
        if self.startup:
            actions += self._end_startup(now, "loss")
        else:
            self.ssr = self.slow_start_rate(self.ssr_factor)
        return actions

    @property
    def ssr_factor(self) -> float:
        """The fraction of TRR that SSR is set to at a loss event (P unless set)."""
        factor = self.params.ssr_factor
        return self.params.p if factor is None else factor

    def slow_start_rate(self, factor: float) -> float:
        """SSR = max{SSMINR, ``factor`` * TRR} (RFC 3738 3.2.2.6, 3.2.3.4), in packets/s;
        SSMINR = BCR (1 + 1/P + 1/P^2), 0 without ``ssr_floor``."""
        p, bcr = self.params.p, self.params.bcr
        floor = bcr * (1 + 1 / p + 1 / p ** 2) if self.params.ssr_floor else 0.0
        return max(floor, factor * self.trr)

    def _end_startup(self, now: float, reason: str) -> list[Action]:
        self.startup = False
        self.startup_reason = reason
        self.rr_check_ok = True
        self.check_from = None
        # RR lagging ARR says the path is full at TRR: SSR at TRR itself (RFC 3738 3.2.2.6).
        self.ssr = self.slow_start_rate(1.0 if reason == "rr_lag" else self.ssr_factor)
        self._reset_lossp(self.trr)
        return [Log("startup_end", {"reason": reason, "trr": self.trr, "arr": self.arr,
                                    "lossp": self.lossp, "artt": self.current_artt()})]

    def spacing_correction(self, psn: int) -> float:
        """Half the wave's packet spacing at its packet ``psn``: the mean wait, after the
        join takes effect, for that packet (0 for a wave's first packet, or when off)."""
        if not self.params.mrtt_spacing_correction:
            return 0.0
        m = self.model
        spacings = wave_spacings(m.sr, m.bcr, m.p, m.tsd, m.q)
        idx = (psn - (PSN_MOD - len(spacings))) % PSN_MOD
        if idx >= len(spacings) or not math.isfinite(spacings[idx]):
            return 0.0
        return spacings[idx] / 2

    def _mrtt(self, now: float, sample: float, rate: float | None, cn: int, psn: int,
              raw: float | None = None) -> list[Action]:
        # cn and psn of the first packet go to the log: with the sender's schedule they
        # split the raw sample (join sent -> first packet) into join latency and the
        # wait for the wave's next packet; "used" is what went into ARTT.
        actions: list[Action] = []
        if rate is not None:
            prev = self.prev_wave_mrtt
            if self.startup and prev is not None:
                spacing = 1 / rate if rate > 0 else math.inf
                threshold = max(self.params.mrtt_jump_min, self.params.mrtt_jump_spacing * spacing)
                if sample > prev + threshold:
                    actions += self._end_startup(now, "mrtt")
            self.prev_wave_mrtt = sample
        self.mrtt_last = sample
        artt = self.artt.update(sample)
        return [Log("mrtt", {"sample": sample if raw is None else raw, "used": sample,
                             "artt": artt, "wave": rate is not None, "cn": cn, "psn": psn}),
                *actions]

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        if timer_id == EPOCH:
            return self._epoch(now)
        if timer_id == JOIN_TIMEOUT:
            return self._join_timeout(now)
        return []

    def _epoch(self, now: float) -> list[Action]:
        p, m = self.params, self.model
        actions: list[Action] = []
        begin = self.epoch_start
        span = max(now - self.counted_from, 1e-3)
        self.counted_from = now
        self.rr = self.rx / span
        self.irr = (self.rx + self.lost) / span
        self.trr = (1 - p.trr_alpha) * self.trr + p.trr_alpha * self.rr
        self.arr *= m.p ** (self.el / m.tsd)
        if self.startup and self.check_from is not None and begin >= self.check_from - 1e-9:
            self.check_from = None
            expected = (1 - p.rr_lag_margin) * self.arr * span
            if self.rx < expected - p.rr_lag_packets:  # slack: counts of a few packets
                actions += self._end_startup(now, "rr_lag")
            else:
                self.rr_check_ok = True
        if self.pending is None and begin >= self.blend_from - 1e-9:
            self.arr = (1 - p.arr_alpha) * self.arr + p.arr_alpha * self.irr
        if not self.startup:
            self.loss.update(self.rx + self.lost, self.events)
        self.max_trr = max(self.max_trr, self.trr)
        actions += self._decide(now)
        self.rx = self.lost = self.events = 0
        self.epoch_start = self.next_epoch
        self.next_epoch += self.el
        if self.next_epoch <= now:  # far behind (a stalled process): realign
            self.epoch_start, self.next_epoch = now, self._epoch_after(now)
        actions.append(SetTimer(EPOCH, self.next_epoch))
        return actions

    def _epoch_after(self, now: float) -> float:
        """The end of the epoch that begins at ``now``: EL later, or the next point of
        the ``epoch_phase`` grid."""
        phase = self.params.epoch_phase
        if phase is None:
            return now + self.el
        k = math.floor((now - phase) / self.el) + 1
        return phase + k * self.el

    def target_rate(self) -> float:
        """Eq. 5 (exponent 3 on TRR during start-up)."""
        g = gamma(self.nwc, self.model.p)
        exponent = self.params.startup_exponent if self.startup else self.params.exponent
        self.reqn = tcp_rate(self.lossp, self.current_artt()) if self.loss.ready else math.inf
        return min(max(self.ssr, self.reqn), g ** exponent * self.trr, self.mrr_pps)

    def _decide(self, now: float) -> list[Action]:
        m = self.model
        self.trate = self.target_rate()
        if self.tsi is None or self.pending is not None or now < self.loss_event_end:
            return []
        if self.nwc >= m.n or (self.startup and not self.rr_check_ok):
            return []
        g = gamma(self.nwc, m.p)
        if g * self.arr > self.trate:
            return []
        if not self.startup and self.trr >= (1 - self.params.overflow_margin) * self.max_trr:
            # Sec. 3.3: a flat reception rate means queues, not the waves, set it.
            self.overflow_blocks += 1
            if self.reqn > self.trate:
                self._reset_lossp(self.trate)
            return []
        cn = (self.tsi + self.nwc) % m.t
        rate = self.arr * (g - 1)
        self.pending = PendingJoin(cn, now, rate)
        self.waves.append(cn)
        self.arr *= g
        self.joins += 1
        self.max_trr = self.trr
        self.blend_from = math.inf
        if self.startup:
            self.rr_check_ok = False
        return [Join(cn), SetTimer(JOIN_TIMEOUT, now + self._timeout(rate)),
                Log("wave_join", {"cn": cn, "nwc": self.nwc, "arr": self.arr,
                                  "trate": self.trate})]

    def _timeout(self, rate: float) -> float:
        p = self.params
        spacing = 2 / rate if rate > 0 else 0.0
        return max(p.join_timeout, p.join_timeout_artt * self.current_artt()) + spacing

    def _join_timeout(self, now: float) -> list[Action]:
        pending = self.pending
        if pending is None:
            return []
        self.timeouts += 1
        if pending.tries < self.params.join_retries:
            pending.tries += 1
            pending.sent = now
            return [Leave(pending.cn), Join(pending.cn),
                    SetTimer(JOIN_TIMEOUT, now + self._timeout(pending.rate)),
                    Log("join_retry", {"cn": pending.cn, "tries": pending.tries})]
        self.pending = None
        self.rr_check_ok = True
        self.blend_from = self.next_epoch
        return [Log("join_given_up", {"cn": pending.cn})]

    def stop(self, now: float) -> list[Action]:
        return [Log("webrc_summary", self._summary())]

    def _summary(self) -> dict[str, Any]:
        return {"joins": self.joins, "leaves": self.leaves, "timeouts": self.timeouts,
                "loss_events": self.loss_events, "artt": self.artt.value, "lossp": self.lossp,
                "startup_end": self.startup_reason, "overflow_blocks": self.overflow_blocks}

    def metrics(self) -> dict[str, float]:
        """The gauges of ``RECEIVER_GAUGES`` in ``agents/webrc/contract.py``, always finite:
        LOSSP is 0 until start-up ends (it is not estimated before), TRATE is finite since
        TRR bounds it. REQN, SSR and each MRTT sample are in the event log instead."""
        size_bits = 8 * self.params.packet_size
        lossp = self.lossp if math.isfinite(self.lossp) else 0.0
        trate = self.trate if math.isfinite(self.trate) else self.target_rate()
        values = {"artt_seconds": self.current_artt(), "lossp": lossp, "nwc": self.nwc,
                  "trate_bps": trate * size_bits, "arr_pps": self.arr, "trr_pps": self.trr,
                  "rr_pps": self.rr, "startup": float(self.startup), "wave_joins": self.joins,
                  "wave_leaves": self.leaves, "join_timeouts": self.timeouts,
                  "loss_events": self.loss_events}
        return {k: float(v) for k, v in values.items()}
