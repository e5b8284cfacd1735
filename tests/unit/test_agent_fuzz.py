"""Fuzzing every registered protocol's header parser: nothing escapes, every drop is counted.

Random bytes rarely get past the magic number, so most inputs are valid
datagrams of the protocol with bytes flipped, truncated or appended, which reach
every check. A datagram the parser accepts must re-encode to the same bytes.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.runtime.header import HEADER_LEN, Drop, DropCounter, Header, encode
from agents.runtime.registry import protocols
from agents.runtime.session import Session
from agents.sim import Simulation

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


def check(parser, spec, data: bytes, channel: int | None, counter: DropCounter) -> object:
    result = parser.parse(data, channel)
    if isinstance(result, Header):
        used = HEADER_LEN + data[11]
        assert encode(result, spec.extension, len(data))[:used] == data[:used]
    else:
        assert isinstance(result, Drop)
        counter.add(result)
    return result


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300), channel=st.one_of(st.none(), st.integers(0, 5)))
def test_random_bytes(name, data, channel):
    spec, parser = spec_parser(name)
    counter = DropCounter()
    result = check(parser, spec, data, channel, counter)
    assert counter.total == (0 if isinstance(result, Header) else 1)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=2000, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 4))
def test_mutated_datagrams(name, seed, rounds):
    spec, parser = spec_parser(name)
    rng = random.Random(seed)
    data = valid_datagram(spec, rng)
    for _ in range(rounds):
        data = mutate(data, rng)
    counter = DropCounter()
    result = check(parser, spec, data, None, counter)
    assert counter.total == (0 if isinstance(result, Header) else 1)


@pytest.mark.parametrize("name", NAMES)
def test_hundred_thousand_inputs(name):
    spec, parser = spec_parser(name)
    rng = random.Random(20261121)
    counter = DropCounter()
    accepted = 0
    n = 100_000
    for i in range(n):
        if i % 4 == 0:
            data = rng.randbytes(rng.randrange(64))
        else:
            data = mutate(valid_datagram(spec, rng), rng)
        channel = rng.choice([None, 0, 1, 2, 3])
        if isinstance(check(parser, spec, data, channel, counter), Header):
            accepted += 1
    assert accepted + counter.total == n
    # The mix reaches every check the protocol can fail (EXTENSION needs an extension).
    reached = {r for r, c in counter.counts.items() if c}
    expected = set(Drop) - ({Drop.EXTENSION} if spec.extension.max_len == 0 else set())
    assert reached >= expected, expected - reached


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
    parser = spec.parser(SESSION_ID, len(session.channels))
    sim = Simulation(session)
    node = sim.add("r", "receiver")
    rng = random.Random(7)
    expected = DropCounter()
    for i in range(5000):
        channel = rng.randrange(len(session.channels))
        data = mutate(valid_datagram(spec, rng, len(session.channels)), rng)
        result = parser.parse(data, channel)
        if isinstance(result, Drop):
            expected.add(result)
        sim.inject("r", 0.5 + i * 1e-4, data, channel)
    sim.run(2.0)
    agent = node.agent
    assert agent.stats.drops.counts == expected.counts
    for reason, count in expected.counts.items():
        assert agent.metrics.value("mcc_agent_malformed_datagrams_total",
                                   reason=str(reason)) == count
    assert node.records("stop")[0]["dropped"] == {str(r): c for r, c in expected.counts.items()
                                                   if c}
