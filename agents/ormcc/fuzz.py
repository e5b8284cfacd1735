"""ORMCC's hooks for the port fuzzer (bench/fuzz_ports.py; docs/protocols.md lists them)."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

from agents.ormcc.wire import Ci, encode_ci


def refused_ext(g: Any, channel: int) -> bytes:
    """Extensions with an unknown CR flag, or a TRAC or RTT that is not a finite number."""
    value = g.rng.choice([(2, 7, 1.0, 1.0), (1, 7, math.nan, 1.0), (0, 7, 1.0, -5.0),
                          (1, 7, math.inf, 0.0)])
    return struct.pack("!BIdd", *value)


def provoke_feedback(g: Any, send: Callable[[bytes, int], None],
                     data: Callable[[Any, int], bytes]) -> None:
    """Two packets with a gap between them: the receiver sends a CI for the loss."""
    for seq in (0, 5):
        g.seq[0] = seq
        send(data(g, 0), 0)


def feedback_valid_body(g: Any, role: str) -> bytes | None:
    """A CI for the sender; a receiver accepts no feedback."""
    if role != "sender":
        return None
    return encode_ci(Ci(g.rng.getrandbits(32), g.rng.getrandbits(32),
                        max(0, g.now_ns() - g.rng.randrange(10**9)), g.rng.uniform(0, 1e7)))


def feedback_refused(g: Any, role: str) -> list[Callable[[], bytes]]:
    """CIs cut short, too long, of another version, or with a TRAC that is not valid."""
    ci = encode_ci(Ci(1, 2, g.now_ns(), 1000.0))
    return [lambda: ci[:-1], lambda: ci + b"x", lambda: b"\x02" + ci[1:],
            lambda: ci[:20] + struct.pack("!d", math.nan),
            lambda: ci[:20] + struct.pack("!d", -1.0)]


def not_accepted(g: Any, role: str, body: bytes) -> bytes:
    """A random body that happens to look like a CI, cut short."""
    if len(body) == 28 and body[:2] == b"\x01\x01":
        return body[:-1]
    return body
