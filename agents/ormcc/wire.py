"""ORMCC on the wire: the data-packet extension and the CI(mu) feedback datagram.

Data packets carry the CR's average TRAC E(mu^cr) and its deviation (or "invalid"
while no CR is valid) and the CR's receiver id, so the CR knows it is the CR
(sec. III-A.3: "tell all receivers of the change"). A CI(mu) carries the
receiver's id, the sequence number and send time of the packet whose arrival
revealed the loss (the source's RTT sample, sec. III-A.6), and the TRAC mu.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from agents.runtime.header import StructExtension

_U32 = (1 << 32) - 1


@dataclass(frozen=True, slots=True)
class OrmccExt:
    """Per data packet: ``valid`` (0/1), CR id, E(mu^cr) and its deviation in bit/s."""

    valid: int
    cr: int
    mu_cr: float
    sigma_cr: float


INVALID = OrmccExt(0, 0, 0.0, 0.0)


def check_ext(ext: OrmccExt) -> None:
    """Reject values a sender never produces (the parser counts them as drops)."""
    if ext.valid not in (0, 1):
        raise ValueError(f"valid must be 0 or 1, got {ext.valid}")
    if not 0 <= ext.cr <= _U32:
        raise ValueError(f"cr id {ext.cr} outside 32 bits")
    for name in ("mu_cr", "sigma_cr"):
        value = getattr(ext, name)
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be finite and non-negative, got {value}")


ORMCC_EXT = StructExtension(OrmccExt, "!BIdd", check=check_ext,
                            example=OrmccExt(1, 7, 500_000.0, 20_000.0))

CI_VERSION = 1
CI_TYPE = 1
_CI = struct.Struct("!BBHIIQd")
CI_LEN = _CI.size  # 28 bytes


@dataclass(frozen=True, slots=True)
class Ci:
    """A congestion indication CI(mu) from receiver ``rid``."""

    rid: int
    seq: int
    echo_ns: int
    trac: float


def encode_ci(ci: Ci) -> bytes:
    """The feedback payload for ``ci``."""
    return _CI.pack(CI_VERSION, CI_TYPE, 0, ci.rid & _U32, ci.seq & _U32, ci.echo_ns, ci.trac)


def decode_ci(data: bytes) -> Ci:
    """Parse a CI; ValueError for anything a receiver never sends."""
    if len(data) != CI_LEN:
        raise ValueError(f"CI is {len(data)} bytes, expected {CI_LEN}")
    version, kind, _, rid, seq, echo_ns, trac = _CI.unpack(data)
    if version != CI_VERSION or kind != CI_TYPE:
        raise ValueError(f"unknown CI version/type {version}/{kind}")
    if not (math.isfinite(trac) and trac >= 0):
        raise ValueError(f"TRAC must be finite and non-negative, got {trac}")
    return Ci(rid, seq, echo_ns, trac)
