"""Fuzzing every port a running agent reads, through real sockets on loopback.

Each protocol's receiver (member sockets; the feedback socket where it has one)
and, for feedback protocols, its sender's feedback port get 10,000 datagrams
each from :mod:`bench.fuzz_ports` (``make bench-fuzz`` sends 100,000 and adds
forged sources, which need root: tests/integration/test_agent_fuzz_peers.py).
The counts asserted are the agent's own (``/metrics``), against what the test
sent by construction.
"""

from __future__ import annotations

import pytest

from agents.runtime.header import Drop
from agents.runtime.registry import protocols
from bench.fuzz_ports import VALID, fuzz_protocol, parse_counters

COUNT = 10_000


@pytest.mark.parametrize("host", [False, True], ids=["process", "host"])
@pytest.mark.parametrize("name", sorted(protocols()))
def test_every_port_survives_and_counts_every_bad_datagram(name, host, tmp_path):
    # host: the agent runs inside an agent host (agents.host), behind its guarded loop
    results = fuzz_protocol(name, COUNT, odd_peers=False, workdir=tmp_path, host=host)
    spec = protocols()[name]
    kinds = {r.port.split(" (")[0] for r in results}
    expected_ports = {"receiver data"} | ({"receiver feedback", "sender feedback"}
                                          if spec.feedback else set())
    assert kinds == expected_ports
    for r in results:
        assert r.crashes == 0, r.error
        assert r.error == "", r.error
        assert r.sent == COUNT
        assert r.kernel_drops == 0  # else the counts below could not be exact
        # the agent's counters, per reason, equal what was sent for that reason
        assert r.counted == r.expected, (r.port, r.counted, r.expected)
        assert r.uncounted == 0
        # the mix reaches the checks it is meant to reach
        assert {Drop.SHORT, Drop.MAGIC, Drop.VERSION, Drop.PROTOCOL, Drop.SESSION,
                Drop.EXT_LENGTH} <= set(r.counted), r.counted
        if r.port.startswith("receiver data"):
            assert r.counted[VALID] > COUNT // 5
            assert {Drop.CHANNEL, Drop.FLAGS} <= set(r.counted)
            assert (Drop.EXTENSION in r.counted) == (spec.extension.max_len > 0)
        else:
            assert Drop.FEEDBACK in r.counted
    if spec.feedback:  # valid feedback was answered or absorbed, as the protocol does
        sender = next(r for r in results if r.port.startswith("sender"))
        assert sender.counted[VALID] > COUNT // 5
        if name == "stair":  # every valid probe was echoed back to its source
            assert sender.replies == sender.counted[VALID]


def test_counter_parser_reads_the_exposition_format():
    text = (
        '# HELP mcc_agent_malformed_datagrams_total Datagrams dropped, by reason\n'
        'mcc_agent_malformed_datagrams_total{flow="f",node="n",protocol="cbr",'
        'reason="ext_length",role="receiver"} 12.0\n'
        'mcc_agent_packets_received_total{flow="f",node="n",protocol="cbr",role="receiver"} '
        '3.0\n'
        'mcc_agent_packets_received_created{flow="f",node="n"} 1.7e9\n'
        'mcc_agent_loss_fraction{flow="f",node="n",protocol="cbr",role="receiver"} 0.5\n')
    assert parse_counters(text) == {"malformed:ext_length": 12.0, "packets_received": 3.0}
