"""The agents' datagram format: a fixed 24-byte header, a bounded protocol extension, padding.

All fields are in network byte order::

     0      2    3    4          8        10    11     12         16                 24
     +------+----+----+----------+--------+-----+------+----------+------------------+-----
     |magic |ver |prot| session  |channel |flags|extlen| sequence |  send time (ns)  | ext
     +------+----+----+----------+--------+-----+------+----------+------------------+-----

The extension (``extlen`` bytes, at most the protocol's ``max_len`` and never more
than :data:`MAX_EXT_LEN`) belongs to the protocol: each protocol registers an
:class:`Extension` that turns those bytes into a value and back. Whatever follows
the extension is padding up to the packet size and is never interpreted.

:meth:`HeaderParser.parse` never raises: a datagram is either a :class:`Header`
or a :class:`Drop` reason, and the caller counts the reason.
"""

from __future__ import annotations

import enum
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import astuple, dataclass
from typing import Any, ClassVar

MAGIC = 0x4D43  # "MC"
VERSION = 1
FIXED = struct.Struct("!HBBIHBBIQ")
HEADER_LEN = FIXED.size  # 24
MAX_EXT_LEN = 64
MAX_DATAGRAM = 65507  # largest UDP payload over IPv4

RUNTIME_FLAGS = 0x0F  # low nibble: reserved for the runtime, must be zero in version 1
PROTOCOL_FLAGS = 0xF0  # high nibble: each protocol declares which of these bits it uses

_U8, _U16, _U32, _U64 = (1 << 8) - 1, (1 << 16) - 1, (1 << 32) - 1, (1 << 64) - 1


class Drop(enum.StrEnum):
    """Why a datagram was dropped; the value is the ``reason`` label of the drop counter."""

    SHORT = "short"  # shorter than the fixed header
    MAGIC = "magic"  # not an agent datagram
    VERSION = "version"  # a header version this runtime does not speak
    PROTOCOL = "protocol"  # another protocol's datagram
    SESSION = "session"  # another session's datagram
    CHANNEL = "channel"  # channel outside the session, or not the one it arrived on
    FLAGS = "flags"  # reserved or undeclared flag bits set
    EXT_LENGTH = "ext_length"  # extension longer than allowed or than the datagram
    EXTENSION = "extension"  # the protocol rejected the extension (decoder, or the core)
    # Feedback datagrams (unicast) only, past the frame checks of agents.runtime.feedback:
    PEER = "peer"  # from a source no reply can reach (UDP port 0, multicast, broadcast)
    FEEDBACK = "feedback"  # the core rejected the body (not a message it expects)


# The reasons HeaderParser.parse returns (the others are decided after it).
PARSER_DROPS: tuple[Drop, ...] = (Drop.SHORT, Drop.MAGIC, Drop.VERSION, Drop.PROTOCOL,
                                  Drop.SESSION, Drop.CHANNEL, Drop.FLAGS, Drop.EXT_LENGTH,
                                  Drop.EXTENSION)


@dataclass(frozen=True, slots=True)
class Header:
    """One decoded header. ``ext`` is the protocol's extension value (None if it has none)."""

    protocol: int
    session: int
    channel: int
    seq: int
    send_ns: int
    flags: int = 0
    ext: Any = None


class Extension(ABC):
    """A protocol's extension area: ``encode`` a value to at most ``max_len`` bytes, and back.

    ``decode`` must raise ``ValueError`` (or ``struct.error``) for bytes it does not accept;
    the parser turns any exception it raises into a counted :attr:`Drop.EXTENSION`.
    """

    max_len: int = 0

    @abstractmethod
    def encode(self, value: Any) -> bytes:
        """The extension bytes for ``value``."""

    @abstractmethod
    def decode(self, raw: bytes) -> Any:
        """The value carried by ``raw``; raise ValueError if it is not valid."""

    def example(self) -> Any:
        """A valid value (used by the fuzz tests to build well-formed datagrams)."""
        return None


class NoExtension(Extension):
    """For protocols without an extension: the area must be empty."""

    max_len = 0

    def encode(self, value: Any) -> bytes:
        if value is not None:
            raise ValueError("this protocol has no header extension")
        return b""

    def decode(self, raw: bytes) -> None:
        if raw:
            raise ValueError("unexpected extension bytes")
        return None


class StructExtension(Extension):
    """A fixed-size extension: a dataclass packed with a :mod:`struct` format.

    ``check`` (optional) validates a decoded value and raises ValueError if it is
    out of range, e.g. a layer number above the protocol's maximum::

        @dataclass(frozen=True)
        class WebrcExt:
            cn: int
            tsi: int
            psn: int

        WEBRC_EXT = StructExtension(WebrcExt, "!HHH")
    """

    def __init__(self, cls: type, fmt: str, check: Callable[[Any], None] | None = None,
                 example: Any = None):
        self.cls = cls
        self.struct = struct.Struct(fmt)
        self.check = check
        self._example = example
        self.max_len = self.struct.size
        if self.max_len > MAX_EXT_LEN:
            raise ValueError(f"extension of {self.max_len} bytes exceeds {MAX_EXT_LEN}")

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, self.cls):
            raise ValueError(f"extension must be a {self.cls.__name__}, got {value!r}")
        if self.check is not None:
            self.check(value)
        return self.struct.pack(*astuple(value))

    def decode(self, raw: bytes) -> Any:
        if len(raw) != self.struct.size:
            raise ValueError(f"extension is {len(raw)} bytes, expected {self.struct.size}")
        value = self.cls(*self.struct.unpack(raw))
        if self.check is not None:
            self.check(value)
        return value

    def example(self) -> Any:
        """The example given, else all fields zero."""
        if self._example is not None:
            return self._example
        return self.decode(bytes(self.struct.size))


def _in_range(name: str, value: int, top: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= top:
        raise ValueError(f"header field {name}={value!r} outside 0..{top}")


def encode(header: Header, extension: Extension, size: int = 0) -> bytes:
    """The datagram for ``header``, zero-padded to ``size`` bytes (never shorter than needed).

    Raises ValueError for out-of-range fields: encoding is the sender's own data,
    so a bad value is a bug to surface, not traffic to drop.
    """
    _in_range("protocol", header.protocol, _U8)
    _in_range("session", header.session, _U32)
    _in_range("channel", header.channel, _U16)
    _in_range("seq", header.seq, _U32)
    _in_range("send_ns", header.send_ns, _U64)
    _in_range("flags", header.flags, _U8)
    if header.flags & RUNTIME_FLAGS:
        raise ValueError(f"flags {header.flags:#04x} use reserved runtime bits")
    ext = extension.encode(header.ext)
    if len(ext) > min(extension.max_len, MAX_EXT_LEN):
        raise ValueError(f"extension of {len(ext)} bytes exceeds {extension.max_len}")
    fixed = FIXED.pack(MAGIC, VERSION, header.protocol, header.session, header.channel,
                       header.flags, len(ext), header.seq, header.send_ns)
    used = HEADER_LEN + len(ext)
    if size > MAX_DATAGRAM:
        raise ValueError(f"packet size {size} exceeds the UDP maximum {MAX_DATAGRAM}")
    return fixed + ext + bytes(max(0, size - used))


class HeaderParser:
    """Decodes and checks datagrams for one session of one protocol; never raises."""

    __slots__ = ("protocol", "session", "channels", "extension", "flags_allowed")

    def __init__(self, protocol: int, session: int, channels: int, extension: Extension,
                 protocol_flags: int = 0):
        self.protocol = protocol
        self.session = session
        self.channels = channels
        self.extension = extension
        self.flags_allowed = protocol_flags & PROTOCOL_FLAGS

    def parse(self, data: bytes, channel: int | None = None) -> Header | Drop:
        """The header of ``data``, or why it must be dropped.

        ``channel``, when given, is the channel whose group and port the datagram
        arrived on; a header naming another channel is dropped.
        """
        if len(data) < HEADER_LEN:
            return Drop.SHORT
        magic, version, proto, session, chan, flags, ext_len, seq, send_ns = \
            FIXED.unpack_from(data)
        if magic != MAGIC:
            return Drop.MAGIC
        if version != VERSION:
            return Drop.VERSION
        if proto != self.protocol:
            return Drop.PROTOCOL
        if session != self.session:
            return Drop.SESSION
        if chan >= self.channels or (channel is not None and chan != channel):
            return Drop.CHANNEL
        if flags & ~self.flags_allowed:
            return Drop.FLAGS
        limit = min(self.extension.max_len, MAX_EXT_LEN)
        if ext_len > limit or HEADER_LEN + ext_len > len(data):
            return Drop.EXT_LENGTH
        try:
            ext = self.extension.decode(bytes(data[HEADER_LEN:HEADER_LEN + ext_len]))
        except Exception:  # a protocol decoder's failure is a counted drop, never a crash
            return Drop.EXTENSION
        return Header(proto, session, chan, seq, send_ns, flags, ext)


class DropCounter:
    """Dropped datagrams by reason (all reasons present, starting at zero)."""

    REASONS: ClassVar[tuple[Drop, ...]] = tuple(Drop)

    def __init__(self) -> None:
        self.counts: dict[Drop, int] = dict.fromkeys(Drop, 0)

    def add(self, reason: Drop) -> None:
        self.counts[reason] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())
