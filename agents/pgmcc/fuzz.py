"""PGMCC's hooks for the port fuzzer (bench/fuzz_ports.py; docs/protocols.md lists them)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from agents.pgmcc.wire import ACK, ELECTION, NAK, REPORT_LEN, PgmccExt, Report, encode_report
from agents.runtime.header import Header, encode


def refused_ext(g: Any, channel: int) -> bytes:
    """Extensions with an unknown flag, or an acker id without ACKER_VALID."""
    return struct.pack("!IH", *g.rng.choice([(7, 0x0003), (7, 0), (0, 0x8000)]))


def provoke_feedback(g: Any, send: Callable[[bytes, int], None],
                     data: Callable[[Any, int], bytes]) -> None:
    """A packet naming no acker: the receiver answers at once with an election NAK."""
    seq = g.seq.get(0, 0)
    g.seq[0] = (seq + 1) & 0xFFFFFFFF
    header = Header(g.spec.protocol_id, g.session.session_id, 0, seq, g.now_ns(), 0,
                    PgmccExt(0, 0))
    send(encode(header, g.spec.extension, 200), 0)


def feedback_valid_body(g: Any, role: str) -> bytes | None:
    """An ACK or a NAK for the sender; a receiver accepts no feedback."""
    if role != "sender":
        return None
    rng = g.rng
    echo = max(0, g.now_ns() - rng.randrange(10**9))
    if rng.random() < 0.5:
        return encode_report(Report(ACK, rng.getrandbits(32), rng.getrandbits(16), echo,
                                    rng.randrange(10**5), rng.getrandbits(32),
                                    rng.getrandbits(32) | 1))
    return encode_report(Report(NAK, rng.getrandbits(32), rng.getrandbits(16), echo,
                                rng.randrange(10**5), rng.getrandbits(32), 0,
                                rng.choice([0, ELECTION])))


def feedback_refused(g: Any, role: str) -> list[Callable[[], bytes]]:
    """Reports cut short, too long, of another version or type, an ACK whose bitmap misses
    RX_MAX, a NAK with a bitmap."""
    ack = encode_report(Report(ACK, 1, 10, g.now_ns(), 0, 5, 1))
    nak = encode_report(Report(NAK, 1, 10, g.now_ns(), 0, 5))
    return [lambda: ack[:-1], lambda: nak + b"x", lambda: b"\x02" + ack[1:],
            lambda: ack[:1] + b"\x03" + ack[2:], lambda: ack[:-4] + struct.pack("!I", 2),
            lambda: nak[:-4] + struct.pack("!I", 1)]


def not_accepted(g: Any, role: str, body: bytes) -> bytes:
    """A random body that happens to decode as an ACK or NAK, cut short."""
    if len(body) == REPORT_LEN and body[0] == 1 and body[1] in (ACK, NAK):
        return body[:-1]
    return body
