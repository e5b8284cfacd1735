"""Feedback from odd sources, forged through a raw socket on loopback (needs root).

A STAIR sender used to echo a probe to whatever sent it: from UDP source port 0
the reply address ``ADDR:0`` raised out of the event loop, and from a broadcast
address the kernel's EACCES did. Now the runtime drops feedback no reply can
reach (port 0, multicast or limited-broadcast source) with reason ``peer``, and
a refused reply is a counted send error. Every feedback port (both feedback
protocols, sender and receiver) gets valid and malformed datagrams, some from
forged sources; the agent's own counters must account for each.
"""

from __future__ import annotations

import pytest

from agents.runtime.header import Drop
from bench.fuzz_ports import VALID, fuzz_protocol

pytestmark = pytest.mark.root
COUNT = 4000


@pytest.mark.parametrize("name", ["ormcc", "stair"])
def test_feedback_from_odd_sources_is_dropped_and_counted(name, tmp_path):
    results = fuzz_protocol(name, COUNT, odd_peers=True, workdir=tmp_path, seed=5)
    for r in results:
        assert r.crashes == 0, r.error
        assert r.error == "", r.error
        assert r.kernel_drops == 0
        assert r.counted == r.expected, (r.port, r.counted, r.expected)
    feedback = [r for r in results if "feedback" in r.port]
    assert {r.port.split(" (")[0] for r in feedback} == {"receiver feedback", "sender feedback"}
    sender = next(r for r in feedback if r.port.startswith("sender"))
    assert sender.counted[Drop.PEER] > 0
    if name == "stair":
        # a probe from 127.255.255.255 is valid, but its echo is refused (EACCES): a send
        # error, not a crash; every other valid probe is echoed
        assert sender.send_errors > 0
        assert sender.replies + sender.send_errors == sender.counted[VALID]
        receiver = next(r for r in feedback if r.port.startswith("receiver"))
        assert receiver.counted[Drop.PEER] > 0
