"""Which launches the fork server runs, and what it imports for them."""

from __future__ import annotations

import sys

from agents.runtime.registry import package, protocol_packages, protocols
from mcclab import forkserver
from mcclab.forkserver import FORKABLE, forkable, preload, start_tool
from mcclab.net.setns import NETNS_DIR


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
    every = {package(name) for name in protocols()}
    assert {"agents.cbr", "agents.rlc", "agents.webrc"} <= every <= set(protocol_packages())
    modules = preload(["agents.run", "mcclab.traffic.udp_onoff", "agents.run"])
    assert every <= set(modules)
    assert "agents.run" in modules and "mcclab.traffic.udp_onoff" in modules
    assert len(modules) == len(set(modules))
    assert preload([]) == []
    assert set(FORKABLE) == {"agents.run", "agents.host", "mcclab.traffic.udp_onoff",
                             "mcclab.traffic.onoff_host"}
    hosts = preload(["agents.host"])  # an agent host runs any protocol, as agents.run does
    assert hosts[0] == "agents.host" and every <= set(hosts)


class _Server:
    """Stands in for a ForkServer: records what it was asked to fork."""

    def __init__(self) -> None:
        self.forked: list[tuple] = []

    def spawn(self, state, module, args, netns, log, what):
        self.forked.append((module, list(args), netns, log, what))
        return "forked"


def test_start_tool_forks_what_it_can_and_executes_the_rest(monkeypatch, tmp_path) -> None:
    executed: list[tuple] = []
    monkeypatch.setattr(forkserver, "spawn",
                        lambda state, cmd, log, what, runner=None:
                        executed.append((cmd, log, what)) or "exec")
    py, log = sys.executable, tmp_path / "a.out"
    agent = [py, "-m", "agents.run", "receiver", "--node", "h1"]
    server = _Server()

    assert start_tool(None, server, agent, "mcl-h1", log, "agent") == "forked"
    assert server.forked == [("agents.run", ["receiver", "--node", "h1"],
                              NETNS_DIR / "mcl-h1", log, "agent")]
    assert executed == []

    iperf = ["iperf3", "-s", "-p", "5201"]
    assert start_tool(None, server, iperf, "mcl-h2", log, "server") == "exec"
    assert start_tool(None, None, agent, "mcl-h1", log, "agent, no server") == "exec"
    assert [(c.argv, c.netns, w) for c, _, w in executed] == [
        (tuple(iperf), "mcl-h2", "server"), (tuple(agent), "mcl-h1", "agent, no server")]
    assert len(server.forked) == 1
