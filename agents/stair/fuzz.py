"""STAIR's hooks for the port fuzzer (bench/fuzz_ports.py; docs/protocols.md lists them)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from agents.stair.config import Layout, StairExt
from agents.stair.probe import HOLD, PROBE

# The receiver probes (RTT from probes), so its feedback socket opens and sends.
PARAMS: dict[str, Any] = {"rtt_source": "probe", "rtt": None, "probe_interval": "500ms"}
_U32 = (1 << 32) - 1


def valid_ext(g: Any, channel: int) -> Any:
    """The kind and index of the layer ``channel`` carries."""
    kind, index = Layout(g.session.params_for(None)).layer(channel)
    return StairExt(kind, index, 0, 0)


def refused_ext(g: Any, channel: int) -> bytes:
    """An unknown layer kind, or another index than the channel's layer."""
    kind, index = Layout(g.session.params_for(None)).layer(channel)
    if g.rng.random() < 0.5:
        return struct.pack("!BBIH", g.rng.choice([5, 9, 255]), index, 0, 0)
    return struct.pack("!BBIH", kind, (index + 1 + g.rng.randrange(200)) & 0xFF, 0, 0)


def layer(ext: Any) -> Any:
    """The layer an extension names (the receiver refuses one that is not its channel's)."""
    return (ext.kind, ext.index)


def feedback_valid_body(g: Any, role: str) -> bytes:
    """A probe for the sender to echo; an echo (probe and hold time) for a receiver."""
    g.probe += 1
    probe = PROBE.pack(b"STRP", g.probe & _U32, max(0, g.now_ns() - 50_000_000))
    return probe if role == "sender" else probe + HOLD.pack(g.rng.randrange(10**6))


def feedback_refused(g: Any, role: str) -> list[Callable[[], bytes]]:
    """Probes and echoes cut short, too long, misnamed or from the future."""
    probe = PROBE.pack(b"STRP", 1, max(0, g.now_ns() - 10**6))
    if role == "sender":
        return [lambda: probe[:-1], lambda: probe + HOLD.pack(0), lambda: b"STRQ" + probe[4:]]
    future = PROBE.pack(b"STRP", 1, g.now_ns() + 10**12)
    return [lambda: probe[:-1], lambda: probe + b"x", lambda: future,
            lambda: b"XTRP" + probe[4:] + HOLD.pack(0)]


def not_accepted(g: Any, role: str, body: bytes) -> bytes:
    """``body`` changed so the core refuses it, if a random body happens to be a probe or
    echo it would accept."""
    if len(body) in (PROBE.size, PROBE.size + HOLD.size) and body[:4] == b"STRP":
        sent = struct.unpack_from("!Q", body, 8)[0]
        if (role == "sender" and len(body) == PROBE.size) or \
                (role == "receiver" and sent <= g.now_ns()):
            return b"STRQ" + body[4:]
    return body
