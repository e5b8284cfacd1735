"""The agents' header codec: round trip, field bounds, extensions, every drop reason."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.runtime.header import (
    FIXED,
    HEADER_LEN,
    MAGIC,
    MAX_DATAGRAM,
    MAX_EXT_LEN,
    PARSER_DROPS,
    VERSION,
    Drop,
    DropCounter,
    Header,
    HeaderParser,
    NoExtension,
    StructExtension,
    encode,
)


@dataclass(frozen=True)
class WaveExt:
    """A WEBRC-like extension: channel number, time slot index, packet sequence number."""

    cn: int
    tsi: int
    psn: int


def _check_wave(ext: WaveExt) -> None:
    if ext.tsi >= 100:
        raise ValueError("tsi out of range")


WAVE = StructExtension(WaveExt, "!HHH", _check_wave)
NONE = NoExtension()


def parser(ext=NONE, channels=4, flags=0):
    return HeaderParser(7, 99, channels, ext, flags)


def header(**kw):
    base = {"protocol": 7, "session": 99, "channel": 1, "seq": 5, "send_ns": 123}
    return Header(**{**base, **kw})


def test_fixed_header_is_24_bytes():
    assert HEADER_LEN == 24
    data = encode(header(), NONE)
    assert len(data) == HEADER_LEN
    assert data[:2] == b"MC"


@given(protocol=st.just(7), session=st.just(99), channel=st.integers(0, 3),
       seq=st.integers(0, 2**32 - 1), send_ns=st.integers(0, 2**64 - 1),
       flags=st.sampled_from([0x00, 0x10, 0x30, 0xF0]), size=st.integers(0, 2000),
       cn=st.integers(0, 65535), tsi=st.integers(0, 99), psn=st.integers(0, 65535))
def test_round_trip_with_extension(protocol, session, channel, seq, send_ns, flags, size,
                                   cn, tsi, psn):
    h = Header(protocol, session, channel, seq, send_ns, flags, WaveExt(cn, tsi, psn))
    data = encode(h, WAVE, size)
    assert len(data) == max(size, HEADER_LEN + WAVE.max_len)
    assert parser(WAVE, flags=0xF0).parse(data, channel) == h


def test_padding_is_ignored_and_extension_is_not_padding():
    data = encode(header(ext=WaveExt(1, 2, 3)), WAVE, 1000)
    assert len(data) == 1000
    assert data[11] == WAVE.max_len  # extlen covers the extension only
    assert parser(WAVE).parse(data).ext == WaveExt(1, 2, 3)


@pytest.mark.parametrize(("field", "value"), [
    ("protocol", 256), ("session", 2**32), ("channel", 65536), ("seq", 2**32), ("seq", -1),
    ("send_ns", 2**64), ("flags", 256), ("flags", 0x01), ("channel", True), ("seq", 1.5),
])
def test_encode_refuses_out_of_range_fields(field, value):
    with pytest.raises(ValueError):
        encode(header(**{field: value}), NONE)


def test_encode_refuses_oversized_packets_and_wrong_extensions():
    with pytest.raises(ValueError):
        encode(header(), NONE, MAX_DATAGRAM + 1)
    assert len(encode(header(), NONE, MAX_DATAGRAM)) == MAX_DATAGRAM
    with pytest.raises(ValueError):
        encode(header(ext=WaveExt(1, 2, 3)), NONE)  # protocol without extension
    with pytest.raises(ValueError):
        encode(header(ext=None), WAVE)  # extension missing
    with pytest.raises(ValueError):
        encode(header(ext=WaveExt(1, 200, 3)), WAVE)  # fails the protocol's check


def test_extension_size_is_bounded():
    @dataclass
    class Big:
        blob: bytes

    with pytest.raises(ValueError):
        StructExtension(Big, f"!{MAX_EXT_LEN + 1}s")
    assert StructExtension(Big, f"!{MAX_EXT_LEN}s").max_len == MAX_EXT_LEN


def raw(magic=MAGIC, version=VERSION, proto=7, session=99, channel=1, flags=0, ext_len=0,
        seq=5, send_ns=123, tail=b""):
    return FIXED.pack(magic, version, proto, session, channel, flags, ext_len, seq,
                      send_ns) + tail


# One datagram per drop reason; the parser must report exactly that reason.
MALFORMED = {
    Drop.SHORT: (NONE, b"MC\x01"),
    Drop.MAGIC: (NONE, raw(magic=0x4D44)),
    Drop.VERSION: (NONE, raw(version=2)),
    Drop.PROTOCOL: (NONE, raw(proto=8)),
    Drop.SESSION: (NONE, raw(session=98)),
    Drop.CHANNEL: (NONE, raw(channel=4)),
    Drop.FLAGS: (NONE, raw(flags=0x10)),
    Drop.EXT_LENGTH: (WAVE, raw(ext_len=7, tail=bytes(20))),  # more than the protocol's 6
    Drop.EXTENSION: (WAVE, raw(ext_len=6, tail=struct.pack("!HHH", 1, 500, 2))),  # tsi 500
}


def test_every_drop_reason_has_a_case():
    assert set(MALFORMED) == set(PARSER_DROPS)


@pytest.mark.parametrize("reason", PARSER_DROPS)
def test_each_malformed_class_is_reported_and_counted(reason):
    ext, data = MALFORMED[reason]
    counter = DropCounter()
    result = parser(ext).parse(data)
    assert result is reason
    counter.add(result)
    assert counter.counts[reason] == 1 and counter.total == 1


def test_more_drop_cases():
    p = parser(WAVE, flags=0x10)
    assert p.parse(b"") is Drop.SHORT
    assert p.parse(raw()[:HEADER_LEN - 1]) is Drop.SHORT
    assert p.parse(raw(ext_len=6, tail=bytes(5))) is Drop.EXT_LENGTH  # runs past the end
    assert p.parse(raw(ext_len=5, tail=bytes(5))) is Drop.EXTENSION  # wrong size for struct
    assert p.parse(raw(flags=0x20, ext_len=6, tail=bytes(6))) is Drop.FLAGS  # undeclared bit
    assert p.parse(raw(flags=0x02, ext_len=6, tail=bytes(6))) is Drop.FLAGS  # runtime bit
    assert isinstance(p.parse(raw(flags=0x10, ext_len=6, tail=bytes(6))), Header)
    assert parser().parse(raw(ext_len=1, tail=b"x")) is Drop.EXT_LENGTH  # no extension allowed
    assert parser().parse(raw(channel=2), channel=1) is Drop.CHANNEL  # arrived on another group


def test_a_crashing_extension_decoder_is_a_counted_drop():
    class Broken(NoExtension):
        max_len = 4

        def decode(self, raw):
            raise ZeroDivisionError

    assert parser(Broken()).parse(raw(ext_len=4, tail=bytes(4))) is Drop.EXTENSION


def test_parser_accepts_memoryview_and_bytearray():
    data = encode(header(), NONE, 100)
    assert parser().parse(memoryview(data)) == header()
    assert parser().parse(bytearray(data)) == header()
