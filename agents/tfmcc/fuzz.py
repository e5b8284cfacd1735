"""TFMCC's hooks for the port fuzzer (bench/fuzz_ports.py; docs/protocols.md lists them)."""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Callable
from typing import Any

from agents.runtime.header import Header, encode
from agents.tfmcc.wire import HAVE_LOSS, HAVE_RTT, REPORT_LEN, SLOW_START, Report, encode_report


def refused_ext(g: Any, channel: int) -> bytes:
    """Extensions with values a sender never produces: a rate that is not finite and
    positive, unknown flags, a zero R_max, a negative suppression rate."""
    rate, flags, rmax, supp = g.rng.choice([(math.nan, 0, 1000, 0.0), (0.0, 0, 1000, 0.0),
                                            (-1.0, 0, 1000, 0.0), (math.inf, 0, 1000, 0.0),
                                            (1e5, 0x80, 1000, 0.0), (1e5, 0, 0, 0.0),
                                            (1e5, 0, 1000, -5.0)])
    return struct.pack("!dIHHIdIQI", rate, 7, 3, flags, rmax, supp, 0, 0, 0)


def provoke_feedback(g: Any, send: Callable[[bytes, int], None],
                     data: Callable[[Any, int], bytes]) -> None:
    """A packet opening a new round in slow start, without a CLR or a suppression rate: the
    receiver has a rate to report and nothing suppresses it, so it reports within the
    round's feedback delay (at most 4 R_max = 0.4 s with the example's R_max)."""
    example = g.spec.extension.example()
    ext = dataclasses.replace(example, flags=SLOW_START, round=(example.round + 1) & 0xFFFF)
    seq = g.seq.get(0, 0)
    g.seq[0] = (seq + 1) & 0xFFFFFFFF
    header = Header(g.spec.protocol_id, g.session.session_id, 0, seq, g.now_ns(), 0, ext)
    send(encode(header, g.spec.extension, 200), 0)


def feedback_valid_body(g: Any, role: str) -> bytes | None:
    """A receiver report for the sender; a receiver accepts no feedback."""
    if role != "sender":
        return None
    rng = g.rng
    return encode_report(Report(rng.getrandbits(32), rng.getrandbits(16),
                                rng.choice([0, HAVE_RTT, HAVE_RTT | HAVE_LOSS]),
                                max(0, g.now_ns() - rng.randrange(10**9)), rng.randrange(10**5),
                                g.now_ns(), rng.uniform(1e3, 1e7), rng.uniform(0, 1),
                                rng.randrange(1, 10**6)))


def feedback_refused(g: Any, role: str) -> list[Callable[[], bytes]]:
    """Reports cut short, too long, of another version, with unknown flags, or with a rate
    or loss-event rate that is not valid."""
    report = encode_report(Report(1, 2, HAVE_RTT, g.now_ns(), 10, g.now_ns(), 1e5, 0.01, 1000))
    rate_at = REPORT_LEN - 20  # rate (d), loss-event rate (d), RTT (I) end the report
    return [lambda: report[:-1], lambda: report + b"x", lambda: b"\x02" + report[1:],
            lambda: report[:2] + struct.pack("!H", 0x80) + report[4:],
            lambda: report[:rate_at] + struct.pack("!d", math.nan) + report[rate_at + 8:],
            lambda: report[:rate_at] + struct.pack("!d", 0.0) + report[rate_at + 8:],
            lambda: report[:rate_at + 8] + struct.pack("!d", 1.5) + report[rate_at + 16:]]


def not_accepted(g: Any, role: str, body: bytes) -> bytes:
    """A random body that happens to decode as a report, cut short."""
    if len(body) == REPORT_LEN and body[:2] == b"\x01\x01":
        return body[:-1]
    return body
