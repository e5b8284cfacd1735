"""The RTT probe ("ping", sec. VI): a receiver's unicast feedback datagram that the sender
echoes unchanged; the receiver's RTT sample is the time since it sent it.

Payload: ``b"STRP"``, probe number (u32), send time in nanoseconds on the receiver's
clock (u64); 16 bytes, checked on both sides.
"""

from __future__ import annotations

import struct

from agents.runtime.actions import Feedback

MAGIC = b"STRP"
PROBE = struct.Struct("!4sIQ")


def probe(seq: int, now: float) -> Feedback:
    """The feedback action carrying probe ``seq`` sent at ``now`` (to the sender)."""
    return Feedback(PROBE.pack(MAGIC, seq & 0xFFFFFFFF, max(0, int(now * 1e9))))


def parse(data: bytes) -> tuple[int, float] | None:
    """(probe number, send time in seconds), or None for anything that is not a probe."""
    if len(data) != PROBE.size:
        return None
    magic, seq, sent_ns = PROBE.unpack(data)
    if magic != MAGIC:
        return None
    return seq, sent_ns / 1e9


def echo(data: bytes, peer: str) -> Feedback | None:
    """The sender's reply to a probe: the same bytes back to ``peer`` (None if not a probe)."""
    if parse(data) is None:
        return None
    return Feedback(data, to=peer)
