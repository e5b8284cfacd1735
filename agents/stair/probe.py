"""The RTT probe ("ping", sec. VI): a receiver's unicast feedback datagram that the sender
echoes; the receiver's RTT sample is the time since it sent it, less the time the probe
and its echo waited inside the two hosts.

Probe: ``b"STRP"``, probe number (u32), send time in nanoseconds on the receiver's clock
(u64); 16 bytes. Echo: the probe's 16 bytes followed by the sender's hold time in
nanoseconds (u64): from the probe's arrival in the sender's kernel to the echo being
handed back to it. The paper's ``ping`` is answered by the kernel; a Python sender
answers after its event loop gets to it, so the hold time is measured (kernel receive
timestamps, ``SO_TIMESTAMPNS``) and subtracted, as is the echo's wait in the receiver's
host. A 16-byte echo (hold unknown) counts as a hold of zero.
"""

from __future__ import annotations

import struct

from agents.runtime.actions import Feedback

MAGIC = b"STRP"
PROBE = struct.Struct("!4sIQ")
HOLD = struct.Struct("!Q")


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


def parse_echo(data: bytes) -> tuple[int, float, float] | None:
    """(probe number, send time, sender's hold time) of an echo, in seconds; None for
    anything else."""
    if len(data) not in (PROBE.size, PROBE.size + HOLD.size):
        return None
    got = parse(data[:PROBE.size])
    if got is None:
        return None
    hold = HOLD.unpack(data[PROBE.size:])[0] / 1e9 if len(data) > PROBE.size else 0.0
    return got[0], got[1], hold


def echo(data: bytes, peer: str, hold: float = 0.0) -> Feedback | None:
    """The sender's reply to a probe: its bytes and the time ``hold`` (s) it waited in the
    sender, back to ``peer`` (None if ``data`` is not a probe)."""
    if parse(data) is None:
        return None
    return Feedback(data + HOLD.pack(max(0, int(hold * 1e9))), to=peer)


def rtt_sample(sent: float, hold: float, arrival: float) -> float | None:
    """The network round trip of one probe: its echo's ``arrival`` (kernel timestamp) less
    its send time and the sender's ``hold``; None when that is not positive (clock or
    timestamp trouble)."""
    sample = arrival - sent - hold
    return sample if sample > 0 else None
