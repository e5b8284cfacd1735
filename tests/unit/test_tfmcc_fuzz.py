"""Fuzzing TFMCC's two parsers: the data-packet extension (through the runtime's header
parser) and the receiver report (through a running sender's feedback entry point).

Neither may raise on any input. Each verdict is computed here independently of the code
under test (:func:`reference`, :func:`report_ok`, after docs/agents.md's drop table and
agents/tfmcc/wire.py's field rules), and a running agent must count every bad datagram
by reason in its stats, its metrics and its stop record.
"""

from __future__ import annotations

import math
import random
import struct
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agents.tfmcc
from agents.runtime.feedback import FEEDBACK_MAGIC, FRAME
from agents.runtime.header import HEADER_LEN, MAGIC, MAX_EXT_LEN, Drop, Header, encode
from agents.runtime.session import Session
from agents.sim import Simulation
from agents.tfmcc.wire import REPORT_LEN, TFMCC_EXT, Report, TfmccExt, decode_report, encode_report

SPEC = agents.tfmcc.SPEC
SESSION_ID = 0xC0FFEE
PARSER = SPEC.parser(SESSION_ID, 1)
ACCEPT = "accept"
_FIXED = struct.Struct("!HBBIHBBIQ")
_EXT = struct.Struct("!dIHHIdIQI")
_REPORT = struct.Struct("!BBHIHHQIQddI")


def ext_ok(raw: bytes) -> bool:
    """The extension rules of wire.py, restated: 44 bytes, rate finite and positive,
    suppression rate finite and non-negative, flags within the low nibble, R_max > 0."""
    if len(raw) != _EXT.size:
        return False
    rate, _clr, _rnd, flags, rmax, supp, _rid, _ns, _delay = _EXT.unpack(raw)
    return (math.isfinite(rate) and rate > 0 and math.isfinite(supp) and supp >= 0
            and not flags & ~0x0F and rmax > 0)


def reference(data: bytes, channel: int | None) -> str:
    """The verdict docs/agents.md's table gives for a datagram of a 1-channel session."""
    if len(data) < HEADER_LEN:
        return Drop.SHORT
    magic, version, proto, session, chan, flags, ext_len, _seq, _ns = _FIXED.unpack_from(data)
    if magic != MAGIC:
        return Drop.MAGIC
    if version != 1:
        return Drop.VERSION
    if proto != SPEC.protocol_id:
        return Drop.PROTOCOL
    if session != SESSION_ID:
        return Drop.SESSION
    if chan >= 1 or (channel is not None and chan != channel):
        return Drop.CHANNEL
    if flags:
        return Drop.FLAGS
    if ext_len > min(_EXT.size, MAX_EXT_LEN) or HEADER_LEN + ext_len > len(data):
        return Drop.EXT_LENGTH
    return ACCEPT if ext_ok(data[HEADER_LEN:HEADER_LEN + ext_len]) else Drop.EXTENSION


def valid_ext(rng: random.Random) -> TfmccExt:
    return TfmccExt(rng.uniform(8e3, 1e7), rng.getrandbits(32), rng.getrandbits(16),
                    rng.randrange(16), rng.randrange(1, 10**6), rng.uniform(0, 1e7),
                    rng.getrandbits(32), rng.getrandbits(63), rng.getrandbits(20))


def mutate(data: bytes, rng: random.Random) -> bytes:
    """Break one thing: a header byte, the extension's bytes or a field of it, the
    extension length, the length of the datagram."""
    buf = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:
        buf[rng.randrange(HEADER_LEN)] = rng.randrange(256)
    elif kind == 1:  # the extension's bytes
        for _ in range(rng.randint(1, 3)):
            buf[HEADER_LEN + rng.randrange(_EXT.size)] = rng.randrange(256)
    elif kind == 2:  # a value the sender never produces
        field = rng.choice([(0, "!d", [math.nan, -1.0, math.inf, 0.0]),
                            (24, "!d", [math.nan, -5.0, math.inf]),
                            (14, "!I", [0]), (12, "!H", [0x10, 0xFFFF])])
        offset, fmt, values = field
        struct.pack_into(fmt, buf, HEADER_LEN + offset, rng.choice(values))
    elif kind == 3:
        buf[11] = rng.randrange(256)
    else:
        del buf[rng.randrange(len(buf) + 1):]
    return bytes(buf)


def datagram(rng: random.Random) -> bytes:
    header = Header(SPEC.protocol_id, SESSION_ID, 0, rng.getrandbits(32), rng.getrandbits(63),
                    0, valid_ext(rng))
    return encode(header, TFMCC_EXT, rng.choice([0, 100, 1000]))


@settings(max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200), st.sampled_from([None, 0, 1]))
def test_parser_never_raises_on_random_bytes(data, channel):
    result = PARSER.parse(data, channel)
    assert isinstance(result, (Header, Drop))
    assert (result if isinstance(result, Drop) else ACCEPT) == reference(data, channel)


@settings(max_examples=2000)
@given(st.binary(min_size=0, max_size=120))
def test_report_decoder_raises_only_value_error(data):
    try:
        decode_report(data)
    except ValueError:
        assert not report_ok(data)
    else:
        assert report_ok(data)


def test_mutated_datagrams_reach_every_verdict():
    rng = random.Random(3)
    verdicts: Counter[str] = Counter()
    for _ in range(20_000):
        data = mutate(datagram(rng), rng)
        channel = rng.choice([None, 0])
        result = PARSER.parse(data, channel)
        verdict = result if isinstance(result, Drop) else ACCEPT
        assert verdict == reference(data, channel)
        if isinstance(result, Header):  # an accepted datagram re-encodes to its bytes
            used = HEADER_LEN + data[11]
            assert encode(result, TFMCC_EXT, len(data))[:used] == data[:used]
        verdicts[verdict] += 1
    expected = {ACCEPT, Drop.SHORT, Drop.MAGIC, Drop.VERSION, Drop.PROTOCOL, Drop.SESSION,
                Drop.CHANNEL, Drop.FLAGS, Drop.EXT_LENGTH, Drop.EXTENSION}
    assert set(verdicts) == expected


def session() -> Session:
    return Session.model_validate({
        "protocol": "tfmcc", "flow": "fuzz", "session_id": SESSION_ID, "source": "10.0.0.1",
        "channels": [{"group": "239.9.9.1", "port": 7000}], "feedback_port": 7001,
        "params": SPEC.example_params})


def assert_counted(node, expected: Counter[str]) -> None:
    agent = node.agent
    assert {str(r): c for r, c in agent.stats.drops.counts.items() if c} == dict(expected)
    for reason in Drop:
        assert agent.metrics.value("mcc_agent_malformed_datagrams_total",
                                   reason=str(reason)) == expected.get(reason, 0)
    assert node.records("stop")[0]["dropped"] == dict(expected)


def test_bad_datagrams_are_counted_by_a_running_receiver():
    sim = Simulation(session())
    node = sim.add("r", "receiver")
    rng = random.Random(7)
    expected: Counter[str] = Counter()
    for i in range(5000):
        data = mutate(datagram(rng), rng) if rng.random() < 0.8 else datagram(rng)
        verdict = reference(data, 0)
        if verdict != ACCEPT:
            expected[verdict] += 1
        sim.inject("r", 0.5 + i * 1e-4, data, 0)
    sim.run(2.0)
    assert len(expected) >= 8
    assert_counted(node, expected)


def report_ok(body: bytes) -> bool:
    """The report rules of wire.py, restated."""
    if len(body) != REPORT_LEN:
        return False
    version, kind, flags, _rid, _rnd, pad, _e, _d, _rx, rate, p, _rtt = _REPORT.unpack(body)
    return (version == 1 and kind == 1 and pad == 0 and not flags & ~0x0F
            and math.isfinite(rate) and rate > 0 and math.isfinite(p) and 0 <= p <= 1)


def bad_report(rng: random.Random) -> bytes:
    good = bytearray(encode_report(Report(rng.getrandbits(32), 1, 3, 0, 0, 0, 1e5, 0.01, 1000)))
    kind = rng.randrange(4)
    if kind == 0:
        return rng.randbytes(rng.randrange(120))
    if kind == 1:
        return bytes(good[:rng.randrange(REPORT_LEN)]) + rng.randbytes(rng.randrange(2))
    if kind == 2:
        struct.pack_into("!d", good, 32, rng.choice([math.nan, -1.0, 0.0, math.inf]))
        return bytes(good)
    struct.pack_into("!d", good, 40, rng.choice([math.nan, -0.1, 1.5]))
    return bytes(good)


@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_bad_feedback_is_counted_by_a_running_agent(role):
    sim = Simulation(session())
    node = sim.add("x", role)
    rng = random.Random(11)
    expected: Counter[str] = Counter()
    accepted = 0
    for i in range(3000):
        roll = rng.random()
        if roll < 0.1:  # a broken frame
            frame = bytearray(FRAME.pack(FEEDBACK_MAGIC, 1, SPEC.protocol_id, 0, SESSION_ID))
            pos, verdict = rng.choice([(0, Drop.MAGIC), (4, Drop.VERSION), (5, Drop.PROTOCOL),
                                       (8, Drop.SESSION)])
            frame[pos] ^= 0x5A
            data = bytes(frame) + encode_report(Report(1, 0, 3, 0, 0, 0, 1e5, 0.01, 1000))
        elif roll < 0.15:
            data, verdict = FEEDBACK_MAGIC[:rng.randrange(4)], Drop.SHORT
        else:
            body = (encode_report(Report(rng.getrandbits(32), 0, 3, 0, 0, 0, 1e5, 0.01, 1000))
                    if roll < 0.3 else bad_report(rng))
            data = FRAME.pack(FEEDBACK_MAGIC, 1, SPEC.protocol_id, 0, SESSION_ID) + body
            # a receiver expects no feedback at all; a sender takes valid reports
            verdict = ACCEPT if role == "sender" and report_ok(body) else Drop.FEEDBACK
        if verdict == ACCEPT:
            accepted += 1
        else:
            expected[verdict] += 1
        sim.loop.call_at(0.5 + i * 1e-4, lambda d=data: node.agent.deliver_feedback(d, "p:1"))
    sim.run(2.0)
    assert_counted(node, expected)
    if role == "sender":
        core = node.agent.core
        assert accepted > 100 and core.counts["fb_rx"] == accepted
        assert core.counts["fb_malformed"] == expected[Drop.FEEDBACK]
