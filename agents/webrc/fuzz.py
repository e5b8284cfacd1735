"""WEBRC's hooks for the port fuzzer (bench/fuzz_ports.py; docs/protocols.md lists them).

``g`` is the fuzzer's generator: the spec, the session, a seeded ``rng`` and the next
sequence number per channel (``seq``).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any


def valid_ext(g: Any, channel: int) -> Any:
    """An extension the receiver accepts on ``channel``: the channel's CN, slot 0 and the
    channel's next PSN."""
    ext = g.spec.extension.example()
    return dataclasses.replace(ext, cn=channel, tsi=0, psn=g.seq.get(channel, 0) & 0xFFFF)


def refused_ext(g: Any, channel: int) -> bytes:
    """An extension naming another channel's CN (the receiver refuses it)."""
    return struct.pack("!HHH", g.rng.choice([c for c in range(0xFFFF) if c != channel][:50]),
                       0, 0)


def layer(ext: Any) -> Any:
    """The channel an extension names (the receiver refuses one that is not its own)."""
    return ext.cn
