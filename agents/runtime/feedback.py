"""Unicast feedback datagrams between a session's receivers and its sender.

Some protocols need a return path: ORMCC's congestion indications, STAIR's RTT
probes. A core asks for one with :class:`~agents.runtime.actions.Feedback`; the
runtime wraps the core's bytes in a 12-byte frame that names the protocol and the
session, so a stray datagram on the feedback port is counted and dropped instead
of reaching the core::

     0        4    5    6         8          12
     +--------+----+----+---------+----------+-------
     | "MCFB" |ver |prot|reserved | session  | data
     +--------+----+----+---------+----------+-------

Like :class:`~agents.runtime.header.HeaderParser`, :func:`parse_feedback` never raises.
"""

from __future__ import annotations

import struct
from ipaddress import IPv4Address

from agents.runtime.header import Drop

FEEDBACK_MAGIC = b"MCFB"
FEEDBACK_VERSION = 1
FRAME = struct.Struct("!4sBBHI")
FRAME_LEN = FRAME.size  # 12
MAX_FEEDBACK_DATA = 512  # a congestion report or probe, never bulk data
_BROADCAST = IPv4Address("255.255.255.255")


def encode_feedback(protocol: int, session: int, data: bytes) -> bytes:
    """The framed datagram; ValueError if ``data`` is longer than :data:`MAX_FEEDBACK_DATA`."""
    if len(data) > MAX_FEEDBACK_DATA:
        raise ValueError(f"feedback of {len(data)} bytes exceeds {MAX_FEEDBACK_DATA}")
    return FRAME.pack(FEEDBACK_MAGIC, FEEDBACK_VERSION, protocol, 0, session) + bytes(data)


def parse_feedback(raw: bytes, protocol: int, session: int) -> bytes | Drop:
    """The core's bytes inside ``raw``, or why the datagram must be dropped."""
    if len(raw) < FRAME_LEN:
        return Drop.SHORT
    magic, version, proto, reserved, sess = FRAME.unpack_from(raw)
    if magic != FEEDBACK_MAGIC:
        return Drop.MAGIC
    if version != FEEDBACK_VERSION or reserved != 0:
        return Drop.VERSION
    if proto != protocol:
        return Drop.PROTOCOL
    if sess != session:
        return Drop.SESSION
    if len(raw) - FRAME_LEN > MAX_FEEDBACK_DATA:
        return Drop.EXT_LENGTH
    return bytes(raw[FRAME_LEN:])


def reply_peer(addr: str, port: int) -> str | None:
    """The peer string of a datagram's source, or None when no reply could reach it: UDP
    source port 0 ("no reply expected"), or an address that is not one host's (multicast,
    limited broadcast, unspecified), which a forged datagram can carry."""
    if not 1 <= port <= 65535:
        return None
    try:
        ip = IPv4Address(addr)
    except ValueError:
        return None
    if ip.is_multicast or ip.is_unspecified or ip == _BROADCAST:
        return None
    return format_peer(addr, port)


def format_peer(addr: str, port: int) -> str:
    """A peer string as cores see it: ``ADDR:PORT``."""
    return f"{addr}:{port}"


def parse_peer(peer: str) -> tuple[str, int]:
    """``ADDR:PORT`` -> (addr, port); ValueError for anything else."""
    addr, sep, port = peer.rpartition(":")
    if not sep or not addr or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"feedback peer {peer!r} is not ADDR:PORT")
    return addr, int(port)
