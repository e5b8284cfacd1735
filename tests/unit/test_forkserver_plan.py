"""Which launches the fork server runs, and what it imports for them."""

from __future__ import annotations

import sys

from agents.runtime.registry import BUILTIN_MODULES
from mcclab.forkserver import FORKABLE, forkable, preload


def test_agents_and_onoff_tools_are_forked_with_their_arguments() -> None:
    py = sys.executable
    argv = (py, "-m", "agents.run", "receiver", "--session", "s.json", "--node", "h1")
    assert forkable(argv) == ("agents.run", ["receiver", "--session", "s.json", "--node", "h1"])
    assert forkable([py, "-m", "mcclab.traffic.udp_onoff", "recv"]) == (
        "mcclab.traffic.udp_onoff", ["recv"])


def test_other_commands_are_executed_as_before() -> None:
    py = sys.executable
    assert forkable(["iperf3", "-s", "-p", "5201"]) is None
    assert forkable([py, "-m", "mcclab.probes.mcast_probe", "recv"]) is None
    assert forkable([py, "-c", "print(1)"]) is None
    # Another interpreter would not see this one's imports.
    assert forkable(["/usr/bin/python2", "-m", "agents.run", "sender"]) is None
    assert forkable([py, "-m"]) is None


def test_preload_covers_every_builtin_protocol_once() -> None:
    modules = preload(["agents.run", "mcclab.traffic.udp_onoff", "agents.run"])
    assert set(BUILTIN_MODULES) <= set(modules)
    assert "agents.run" in modules and "mcclab.traffic.udp_onoff" in modules
    assert len(modules) == len(set(modules))
    assert preload([]) == []
    assert set(FORKABLE) == {"agents.run", "mcclab.traffic.udp_onoff"}
