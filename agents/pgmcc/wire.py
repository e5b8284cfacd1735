"""PGMCC on the wire: the data-packet extension and the ACK/NAK feedback (draft sec. 2.1).

A data packet's sequence number and timestamp (sec. 2.1.1) are the runtime header's
``seq`` (32 bits) and ``send_ns``; the extension adds the ACKER IDENTITY, with a flag
for "no acker designated" (the request to elect one). ACKs and NAKs share one 32-byte
layout (sec. 2.1.2, 2.1.3): type, receiver id, loss rate p as a 16-bit fraction of
2^16 - 1, the echo of a data timestamp with the time it was held at the receiver
(sec. 2.5.1), and a sequence number: RX_MAX for an ACK, the lost packet for a NAK.
An ACK also carries the 32-bit ACK_BITMAP, least significant bit for RX_MAX.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from agents.runtime.header import StructExtension

_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1
LOSS_SCALE = 65535  # sec. 2.1.3: 0 is no loss, 2^16 - 1 is 100 % loss
BITMAP_LEN = 32  # sec. 2.1.2: the status of RX_MAX - 31 .. RX_MAX

# PgmccExt.flags
ACKER_VALID = 0x0001  # ``acker`` names the receiver that ACKs this packet
EXT_FLAGS = ACKER_VALID


@dataclass(frozen=True, slots=True)
class PgmccExt:
    """Per data packet: the acker's id, valid only with ACKER_VALID."""

    acker: int
    flags: int


def check_ext(ext: PgmccExt) -> None:
    """Reject values a sender never produces (the parser counts them as drops)."""
    if ext.flags & ~EXT_FLAGS:
        raise ValueError(f"unknown flags {ext.flags:#06x}")
    if not 0 <= ext.acker <= _U32:
        raise ValueError("acker id out of range")
    if not ext.flags & ACKER_VALID and ext.acker:
        raise ValueError("acker id without ACKER_VALID")


PGMCC_EXT = StructExtension(PgmccExt, "!IH", check=check_ext,
                            example=PgmccExt(7, ACKER_VALID))
EXT_LEN = PGMCC_EXT.max_len  # 6 bytes

ACK = 1
NAK = 2
# Report.flags
ELECTION = 0x01  # a NAK sent because a data packet named no acker (sec. 2.3.1)
REPORT_FLAGS = ELECTION

REPORT_VERSION = 1
_REPORT = struct.Struct("!BBHIHHQIII")
REPORT_LEN = _REPORT.size  # 32 bytes


@dataclass(frozen=True, slots=True)
class Report:
    """An ACK or a NAK. ``loss`` is p in units of 1/65535; ``echo_ns`` is the sender
    timestamp of the data packet echoed, held ``delay_us`` at the receiver; ``seq`` is
    RX_MAX (ACK) or the lost packet (NAK); ``bitmap`` only in an ACK."""

    kind: int
    rid: int
    loss: int
    echo_ns: int
    delay_us: int
    seq: int
    bitmap: int = 0
    flags: int = 0

    @property
    def p(self) -> float:
        """The loss rate as a fraction."""
        return self.loss / LOSS_SCALE


def loss_units(p: float) -> int:
    """A loss rate in [0, 1] as the 16-bit wire value."""
    return min(max(round(p * LOSS_SCALE), 0), LOSS_SCALE)


def encode_report(r: Report) -> bytes:
    """The feedback payload for ``r``."""
    return _REPORT.pack(REPORT_VERSION, r.kind, r.flags, r.rid & _U32, r.loss, 0,
                        r.echo_ns & _U64, min(r.delay_us, _U32), r.seq & _U32, r.bitmap & _U32)


def decode_report(data: bytes) -> Report:
    """Parse an ACK or NAK; ValueError for anything a receiver never sends."""
    if len(data) != REPORT_LEN:
        raise ValueError(f"report is {len(data)} bytes, expected {REPORT_LEN}")
    version, kind, flags, rid, loss, pad, echo_ns, delay, seq, bitmap = _REPORT.unpack(data)
    if version != REPORT_VERSION or pad:
        raise ValueError(f"unknown report version {version}")
    if kind == ACK:
        if flags:
            raise ValueError(f"ACK with flags {flags:#06x}")
        if not bitmap & 1:
            raise ValueError("ACK bitmap without RX_MAX")
    elif kind == NAK:
        if flags & ~REPORT_FLAGS:
            raise ValueError(f"unknown NAK flags {flags:#06x}")
        if bitmap:
            raise ValueError("NAK with a bitmap")
    else:
        raise ValueError(f"unknown report type {kind}")
    return Report(kind, rid, loss, echo_ns, delay, seq, bitmap, flags)
