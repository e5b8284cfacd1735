"""RLC's hooks for the port fuzzer (bench/fuzz_ports.py; docs/protocols.md lists them)."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any


def valid_ext(g: Any, channel: int) -> Any:
    """An extension the receiver accepts on ``channel``: its own layer, no SP."""
    return dataclasses.replace(g.spec.extension.example(), layer=channel, sp=255)


def refused_ext(g: Any, channel: int) -> bytes:
    """An extension naming another layer, or one the session does not have."""
    other = g.rng.choice([c for c in range(12) if c != channel] + [12, 200])
    return struct.pack("!BIHB", other, 0, 0, 255)


def layer(ext: Any) -> Any:
    """The layer an extension names (the receiver refuses one that is not its channel's)."""
    return ext.layer
