"""TFMCC on the wire: the data-packet extension and the receiver report (RFC 4654 sec. 2.2).

The sender's timestamp and sequence number are the runtime header's ``send_ns``
and ``seq``; the extension adds the rest of sec. 2.2.1: the sending rate, the
CLR's id, the feedback round, R_max, the suppression rate of the round, and one
receiver's echoed timestamp with the time it was held at the sender. A receiver
report (sec. 2.2.2) carries the receiver id, the echo of the last data packet's
timestamp with the time held at the receiver, the receiver's own timestamp, its
calculated rate and loss-event rate, its RTT and flags.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from agents.runtime.header import StructExtension

_U16 = (1 << 16) - 1
_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1

# TfmccExt.flags
CLR_VALID = 0x01  # ``clr`` names the current CLR
ECHO_VALID = 0x02  # ``echo_rid``/``echo_ns``/``echo_delay_us`` carry a timestamp echo
SUPP_VALID = 0x04  # ``supp_rate`` is the lowest rate reported in this round
SLOW_START = 0x08  # the sender is in slow start
EXT_FLAGS = CLR_VALID | ECHO_VALID | SUPP_VALID | SLOW_START


@dataclass(frozen=True, slots=True)
class TfmccExt:
    """Per data packet: rate (bit/s), CLR id, round, R_max (us), suppression rate (bit/s),
    and the echo of receiver ``echo_rid``'s timestamp ``echo_ns`` held ``echo_delay_us``."""

    rate: float
    clr: int
    round: int
    flags: int
    rmax_us: int
    supp_rate: float
    echo_rid: int
    echo_ns: int
    echo_delay_us: int


def check_ext(ext: TfmccExt) -> None:
    """Reject values a sender never produces (the parser counts them as drops)."""
    for name in ("rate", "supp_rate"):
        value = getattr(ext, name)
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be finite and non-negative, got {value}")
    if ext.rate <= 0:
        raise ValueError("rate must be positive")
    if ext.flags & ~EXT_FLAGS:
        raise ValueError(f"unknown flags {ext.flags:#06x}")
    if ext.rmax_us <= 0:
        raise ValueError("R_max must be positive")
    if not 0 <= ext.round <= _U16 or not 0 <= ext.clr <= _U32 or not 0 <= ext.echo_rid <= _U32:
        raise ValueError("round or id out of range")
    if not 0 <= ext.echo_ns <= _U64 or not 0 <= ext.echo_delay_us <= _U32:
        raise ValueError("echo out of range")


TFMCC_EXT = StructExtension(TfmccExt, "!dIHHIdIQI", check=check_ext,
                            example=TfmccExt(400_000.0, 7, 3, CLR_VALID | ECHO_VALID, 100_000,
                                             0.0, 7, 123_456_789, 1500))
EXT_LEN = TFMCC_EXT.max_len  # 44 bytes

# Report.flags (sec. 2.2.2)
HAVE_RTT = 0x01  # the RTT is measured, not the sender's R_max
HAVE_LOSS = 0x02  # the rate is the equation's, not the receive rate (slow start)
IS_CLR = 0x04  # sent as the CLR
LEAVE = 0x08  # the receiver is leaving the session
REPORT_FLAGS = HAVE_RTT | HAVE_LOSS | IS_CLR | LEAVE

REPORT_VERSION = 1
REPORT_TYPE = 1
_REPORT = struct.Struct("!BBHIHHQIQddI")
REPORT_LEN = _REPORT.size  # 52 bytes


@dataclass(frozen=True, slots=True)
class Report:
    """A receiver report: ``echo_ns`` is the sender timestamp of the last data packet,
    held ``delay_us`` at the receiver; ``rx_ns`` the receiver's own clock."""

    rid: int
    round: int
    flags: int
    echo_ns: int
    delay_us: int
    rx_ns: int
    rate: float
    loss_rate: float
    rtt_us: int


def encode_report(r: Report) -> bytes:
    """The feedback payload for ``r``."""
    return _REPORT.pack(REPORT_VERSION, REPORT_TYPE, r.flags, r.rid & _U32, r.round & _U16, 0,
                        r.echo_ns & _U64, min(r.delay_us, _U32), r.rx_ns & _U64, r.rate,
                        r.loss_rate, min(r.rtt_us, _U32))


def decode_report(data: bytes) -> Report:
    """Parse a report; ValueError for anything a receiver never sends."""
    if len(data) != REPORT_LEN:
        raise ValueError(f"report is {len(data)} bytes, expected {REPORT_LEN}")
    version, kind, flags, rid, rnd, pad, echo_ns, delay, rx_ns, rate, p, rtt = \
        _REPORT.unpack(data)
    if version != REPORT_VERSION or kind != REPORT_TYPE or pad:
        raise ValueError(f"unknown report version/type {version}/{kind}")
    if flags & ~REPORT_FLAGS:
        raise ValueError(f"unknown report flags {flags:#06x}")
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be finite and positive, got {rate}")
    if not (math.isfinite(p) and 0 <= p <= 1):
        raise ValueError(f"loss-event rate must be in [0, 1], got {p}")
    return Report(rid, rnd, flags, echo_ns, delay, rx_ns, rate, p, rtt)
