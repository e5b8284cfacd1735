"""Fuzzing every registered protocol's header parser and a simulated agent's two entry points.

Random bytes rarely get past the magic number, so most inputs are valid
datagrams of the protocol with bytes flipped, truncated or appended, which reach
every check. Each verdict must be the one docs/agents.md's table gives, computed
here by :func:`reference` (independently of the parser); a datagram the parser
accepts must re-encode to the same bytes. The agent tests count drops in the
agent's own stats, metrics and log. Real sockets: tests/unit/test_agent_fuzz_ports.py.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.runtime.header import HEADER_LEN, MAX_EXT_LEN, PARSER_DROPS, Drop, Header, encode
from agents.runtime.registry import protocols
from agents.runtime.session import Session
from agents.sim import Simulation
from bench.fuzz_ports import Gen, feedback_bad, feedback_valid_body, frame, hook, valid_ext

SESSION_ID = 0xC0FFEE
CHANNELS = 3
NAMES = sorted(protocols())


def spec_parser(name):
    spec = protocols()[name]
    return spec, spec.parser(SESSION_ID, CHANNELS)


def valid_datagram(spec, rng: random.Random, channels: int = CHANNELS) -> bytes:
    """A datagram the protocol's sender could send."""
    header = Header(spec.protocol_id, SESSION_ID, rng.randrange(channels), rng.getrandbits(32),
                    rng.getrandbits(64), 0, spec.extension.example())
    return encode(header, spec.extension, rng.choice([0, HEADER_LEN, 100, 1000]))


def mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0 and buf:  # flip some bytes, mostly in the header
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(min(len(buf), HEADER_LEN + 8))
            buf[pos] = rng.randrange(256)
    elif kind == 1:  # truncate
        del buf[rng.randrange(len(buf) + 1):]
    elif kind == 2:  # append garbage
        buf += rng.randbytes(rng.randrange(80))
    else:  # set the extension length to anything
        if len(buf) > 11:
            buf[11] = rng.randrange(256)
    return bytes(buf)


ACCEPT = "accept"


def reference(spec, data: bytes, channel: int | None, channels: int = CHANNELS) -> str:
    """The verdict of the documented checks, in their order: a drop reason, or ACCEPT."""
    if len(data) < HEADER_LEN:
        return Drop.SHORT
    if data[:2] != b"MC":
        return Drop.MAGIC
    if data[2] != 1:
        return Drop.VERSION
    if data[3] != spec.protocol_id:
        return Drop.PROTOCOL
    if int.from_bytes(data[4:8], "big") != SESSION_ID:
        return Drop.SESSION
    chan = int.from_bytes(data[8:10], "big")
    if chan >= channels or (channel is not None and chan != channel):
        return Drop.CHANNEL
    if data[10] & ~(spec.flags & 0xF0) & 0xFF:
        return Drop.FLAGS
    ext_len = data[11]
    if ext_len > min(spec.extension.max_len, MAX_EXT_LEN) or HEADER_LEN + ext_len > len(data):
        return Drop.EXT_LENGTH
    try:
        spec.extension.decode(data[HEADER_LEN:HEADER_LEN + ext_len])
    except Exception:
        return Drop.EXTENSION
    return ACCEPT


def check(parser, spec, data: bytes, channel: int | None) -> str:
    """Parse ``data``; the verdict must be the reference's. Returns it."""
    result = parser.parse(data, channel)
    expected = reference(spec, data, channel)
    if isinstance(result, Header):
        assert expected == ACCEPT, (data, expected)
        used = HEADER_LEN + data[11]
        assert encode(result, spec.extension, len(data))[:used] == data[:used]
        return ACCEPT
    assert result is expected, (data, result, expected)
    return result


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300), channel=st.one_of(st.none(), st.integers(0, 5)))
def test_random_bytes(name, data, channel):
    spec, parser = spec_parser(name)
    check(parser, spec, data, channel)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=2000, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 4))
def test_mutated_datagrams(name, seed, rounds):
    spec, parser = spec_parser(name)
    rng = random.Random(seed)
    data = valid_datagram(spec, rng)
    for _ in range(rounds):
        data = mutate(data, rng)
    check(parser, spec, data, None)


@pytest.mark.parametrize("name", NAMES)
def test_hundred_thousand_inputs(name):
    spec, parser = spec_parser(name)
    rng = random.Random(20261121)
    verdicts: Counter[str] = Counter()
    for i in range(100_000):
        if i % 4 == 0:
            data = rng.randbytes(rng.randrange(64))
        else:
            data = mutate(valid_datagram(spec, rng), rng)
        verdicts[check(parser, spec, data, rng.choice([None, 0, 1, 2, 3]))] += 1
    # The mix reaches every check the protocol can fail (EXTENSION needs an extension),
    # and some datagrams survive the mutations.
    expected = set(PARSER_DROPS) - ({Drop.EXTENSION} if spec.extension.max_len == 0 else set())
    assert set(verdicts) - {ACCEPT} == expected
    assert verdicts[ACCEPT] > 1000


def session_for(name: str) -> Session:
    """A session of the protocol with its example parameters."""
    spec = protocols()[name]
    params = spec.example_params
    count = CHANNELS if spec.channels is None else spec.channels(spec.params(**params))
    channels = [{"group": f"239.9.9.{i + 1}", "port": 7000} for i in range(count)]
    # a protocol that uses unicast feedback needs a feedback port in its session
    feedback = {"feedback_port": 7001} if spec.feedback else {}
    return Session.model_validate({"protocol": name, "flow": "fuzz", "session_id": SESSION_ID,
                                   "source": "10.0.0.1", "channels": channels, "params": params,
                                   **feedback})


@pytest.mark.parametrize("name", NAMES)
def test_bad_datagrams_are_counted_by_a_running_agent(name):
    """End to end: the agent's stats, metrics and log count every bad datagram by reason."""
    session = session_for(name)
    spec = session.spec
    sim = Simulation(session)
    node = sim.add("r", "receiver")
    rng = random.Random(7)
    gen = Gen(spec, session, rng)
    expected: Counter[str] = Counter()
    sent = 0
    while sent < 5000:
        channel = rng.randrange(len(session.channels))
        header = Header(spec.protocol_id, SESSION_ID, channel, rng.getrandbits(32),
                        rng.getrandbits(64), 0, valid_ext(gen, channel))
        data = mutate(encode(header, spec.extension, rng.choice([0, 100, 1000])), rng)
        verdict = reference(spec, data, channel, len(session.channels))
        if verdict == ACCEPT and contradicts(gen, data, channel):
            continue  # a core's own check (counted too): tests/unit/test_agent_fuzz_ports.py
        if verdict != ACCEPT:
            expected[verdict] += 1
        sim.inject("r", 0.5 + sent * 1e-4, data, channel)
        sent += 1
    sim.run(2.0)
    assert_counted(node, expected)


def contradicts(gen: Gen, data: bytes, channel: int) -> bool:
    """Whether a parsed datagram's extension names another layer than its channel (the
    cores of these protocols reject it)."""
    layer = hook(gen.spec, "layer")  # the protocol's own fuzzing hook (agents/<p>/fuzz.py)
    if layer is None:
        return False
    ext = gen.spec.extension.decode(data[HEADER_LEN:HEADER_LEN + data[11]])
    return layer(ext) != layer(valid_ext(gen, channel))


def assert_counted(node, expected: Counter[str]) -> None:
    """The agent's stats, metrics and stop record all count ``expected`` drops by reason."""
    agent = node.agent
    assert {str(r): c for r, c in agent.stats.drops.counts.items() if c} == dict(expected)
    for reason in Drop:
        assert agent.metrics.value("mcc_agent_malformed_datagrams_total",
                                   reason=str(reason)) == expected.get(reason, 0)
    assert node.records("stop")[0]["dropped"] == dict(expected)


FEEDBACK = sorted(n for n in NAMES if protocols()[n].feedback)


@pytest.mark.parametrize("role", ["sender", "receiver"])
@pytest.mark.parametrize("name", FEEDBACK)
def test_bad_feedback_is_counted_by_a_running_agent(name, role):
    """The feedback entry point: every bad frame, refused body and unreachable peer counted
    by reason; valid feedback reaches the core."""
    session = session_for(name)
    sim = Simulation(session)
    node = sim.add("x", role)
    gen = Gen(session.spec, session, random.Random(11), now_ns=lambda: 500_000_000)
    expected: Counter[str] = Counter()
    valid = 0
    for i in range(4000):
        body = feedback_valid_body(gen, role)
        roll = gen.rng.random()
        peer: str | None = "10.0.0.9:4000"
        if body is not None and roll < 0.2:
            data, verdict = frame(gen, body), ACCEPT
        elif body is not None and roll < 0.25:
            data, verdict, peer = frame(gen, body), Drop.PEER, None
        else:
            data, verdict = feedback_bad(gen, role)
        if verdict == ACCEPT:
            valid += 1
        else:
            expected[verdict] += 1
        sim.loop.call_at(0.5 + i * 1e-4, lambda d=data, p=peer: node.agent.deliver_feedback(
            d, p, None))
    sim.run(1.0)
    assert_counted(node, expected)
    assert node.agent.stats.feedback_rx == valid
    assert node.agent.metrics.value("mcc_agent_feedback_received_total") == valid
    assert expected[Drop.FEEDBACK] > 100
