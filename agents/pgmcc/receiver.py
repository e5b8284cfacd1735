"""The PGMCC receiver (draft sec. 4) as a pure state machine.

Per data packet it detects losses from sequence gaps, updates its loss-rate EWMA (sec. 2.6)
for every packet received or found missing, sends a NAK for each packet found missing,
and, when the packet names it as the acker, an immediate ACK carrying RX_MAX and the
bitmap of the last 32 sequence numbers. A packet that names no acker is answered with
an election NAK (sec. 2.3.1). Every report echoes the timestamp of the data packet that
caused it, sent at once (so its hold time is zero).
"""

from __future__ import annotations

from agents.pgmcc.estimators import LossEwma
from agents.pgmcc.params import PgmccParams
from agents.pgmcc.wire import (
    ACK,
    ACKER_VALID,
    BITMAP_LEN,
    ELECTION,
    NAK,
    PgmccExt,
    Report,
    encode_report,
    loss_units,
)
from agents.runtime.actions import Action, Feedback, Join
from agents.runtime.core import ReceiverCore
from agents.runtime.header import Header

_HALF = 1 << 31
_MOD = 1 << 32
_MASK = (1 << BITMAP_LEN) - 1
# A sequence jump longer than this is a restarted or forged stream, not losses: walking
# it packet by packet would let one datagram stall the agent.
MAX_GAP = 10_000


class PgmccReceiver(ReceiverCore):
    """``rid`` is the 32-bit receiver id (the acker identity of sec. 2.1.3)."""

    def __init__(self, params: PgmccParams, session: object | None = None, *, rid: int):
        self.p = params
        self.rid = rid & (_MOD - 1)
        self.loss = LossEwma(params.loss_gain)
        self.expected: int | None = None  # next wrapped seq
        self.last_seq = -1  # unwrapped, highest seen (counted from the first packet)
        self.rx_max = 0  # the highest sequence number seen, as on the wire
        self.bitmap = 0  # bit k: packet last_seq - k arrived
        self.is_acker = False
        self.counts = {"received": 0, "lost_packets": 0, "late": 0, "acks_sent": 0,
                       "naks_sent": 0, "election_naks": 0, "naks_capped": 0, "seq_jumps": 0}

    def start(self, now: float) -> list[Action]:
        return [Join(0)]

    def on_packet(self, now: float, header: Header, payload_len: int, group: str) -> list[Action]:
        ext = header.ext
        if not isinstance(ext, PgmccExt):
            return []
        self.counts["received"] += 1
        actions: list[Action] = []
        lost: list[int] = []  # wrapped sequence numbers found missing
        if self.expected is None:
            self.last_seq, self.bitmap = 0, 1
            self.loss.received()
        else:
            gap = (header.seq - self.expected) % _MOD
            if MAX_GAP < gap < _HALF:  # no plausible loss burst: start counting afresh
                self.counts["seq_jumps"] += 1
                self.last_seq += 1
                self.bitmap = 1
                self.loss.received()
            elif gap < _HALF:  # in order, or after `gap` missing packets
                for k in range(gap):
                    self.loss.lost()
                    lost.append((self.expected + k) % _MOD)
                self.loss.received()
                self.counts["lost_packets"] += gap
                self.last_seq += gap + 1
                self.bitmap = ((self.bitmap << (gap + 1)) | 1) & _MASK
            else:  # a late packet, already counted as lost: it only fills its bit
                self.counts["late"] += 1
                back = (self.expected - 1 - header.seq) % _MOD
                if back < BITMAP_LEN:
                    self.bitmap |= 1 << back
        if self.expected is None or (header.seq - self.expected) % _MOD < _HALF:
            self.expected = (header.seq + 1) % _MOD
            self.rx_max = header.seq
        p = loss_units(self.loss.p)
        for seq in lost[:self.p.max_naks_per_gap]:
            actions.append(self._nak(p, header.send_ns, seq, 0))
        self.counts["naks_capped"] += max(len(lost) - self.p.max_naks_per_gap, 0)
        self.is_acker = bool(ext.flags & ACKER_VALID) and ext.acker == self.rid
        if self.is_acker:
            self.counts["acks_sent"] += 1
            ack = Report(ACK, self.rid, p, header.send_ns, 0, self.rx_max, self.bitmap)
            actions.append(Feedback(encode_report(ack)))
        elif not ext.flags & ACKER_VALID and not lost:
            # Sec. 2.3.1: a dummy NAK lets the sender elect an acker (a NAK for a loss,
            # sent in this same event, does the same).
            self.counts["election_naks"] += 1
            actions.append(self._nak(p, header.send_ns, self.rx_max, ELECTION))
        return actions

    def _nak(self, p: int, echo_ns: int, seq: int, flags: int) -> Feedback:
        self.counts["naks_sent"] += 1
        return Feedback(encode_report(Report(NAK, self.rid, p, echo_ns, 0, seq, 0, flags)))

    def metrics(self) -> dict[str, float]:
        out = {"loss_rate": self.loss.p, "is_acker": float(self.is_acker),
               "rid": float(self.rid)}
        out.update({k: float(v) for k, v in self.counts.items()})
        return out
