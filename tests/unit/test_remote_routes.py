"""Where a command runs is decided by the runner that runs it, from the routes its lab
handed it: two labs in one process keep their own, and a route receives the argv."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from mcclab.commands import Cmd, cmd
from mcclab.execute import Runner
from mcclab.experiment.starts import Gate, spawn_armed
from mcclab.forkserver import start_tool
from mcclab.lab import LabOptions
from mcclab.model.loader import load_topology
from mcclab.processes import spawn
from mcclab.state import LabState, kill_group
from mcclab.testbed import lab as testbed_lab
from mcclab.testbed.inventory import Host, Inventory
from mcclab.testbed.lab import TestbedLab

REPO = Path(__file__).resolve().parents[2]
# Writes its remaining words, space-separated, into the file named by its first.
RECORD = "import sys; open(sys.argv[1], 'w').write(' '.join(sys.argv[2:]))"


class FakeRemote:
    """A route to a pretend machine: notes what it is asked, and runs the command here
    as a small program that writes the words it was given into a file."""

    def __init__(self, out: Path):
        self.out = out
        self.calls: list[tuple[tuple[str, ...], bool]] = []

    def __call__(self, argv: tuple[str, ...], spawn: bool) -> list[str]:
        self.calls.append((argv, spawn))
        return [sys.executable, "-c", RECORD, str(self.out), *argv]


def _wait_for(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.02)
    return path.read_text()


def test_two_runners_keep_their_own_routes(tmp_path):
    a, b = FakeRemote(tmp_path / "a"), FakeRemote(tmp_path / "b")
    runner_a, runner_b = Runner(remote={"mcl-d1": a}), Runner(remote={"mcl-d1": b})
    plain = Runner()
    command = cmd("ip", "addr", netns="mcl-d1")
    assert runner_a.argv(command)[-3:] == [str(tmp_path / "a"), "ip", "addr"]
    assert runner_b.argv(command, spawn=True)[-3:] == [str(tmp_path / "b"), "ip", "addr"]
    assert plain.argv(command) == ["nsenter", "--net=/run/netns/mcl-d1", "--", "ip", "addr"]
    assert a.calls == [(("ip", "addr"), False)] and b.calls == [(("ip", "addr"), True)]
    # run() goes where argv() says: the route's program really ran, with the words
    runner_a.run(cmd("echo", "x y", netns="mcl-d1"))
    assert (tmp_path / "a").read_text() == "echo x y"
    assert not (tmp_path / "b").exists()


def test_a_runners_routes_are_the_lab_s_live_mapping(tmp_path):
    routes: dict = {}
    runner = Runner(remote=routes)
    command = cmd("true", netns="mcl-r0")
    assert runner.argv(command)[0] == "nsenter"
    routes["mcl-r0"] = FakeRemote(tmp_path / "r0")
    assert runner.argv(command)[-1] == "true" and runner.argv(command)[0] == sys.executable
    routes.clear()
    assert runner.argv(command)[0] == "nsenter"


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setattr("mcclab.state.STATE_ROOT", tmp_path / "state")
    return LabState(lab_id="routes-unit")


@pytest.mark.parametrize("how", ["spawn", "start_tool", "armed"])
def test_processes_started_through_a_runner_take_its_route(tmp_path, state, how):
    remote = FakeRemote(tmp_path / "seen")
    runner = Runner(remote={"mcl-h1": remote})
    log = tmp_path / "p.out"
    gate = Gate()
    if how == "spawn":
        proc = spawn(state, Cmd(("agent", "--x", "1"), "mcl-h1"), log, "p", runner=runner)
    elif how == "start_tool":
        proc = start_tool(state, None, ["agent", "--x", "1"], "mcl-h1", log, "p",
                          runner=runner)
    else:
        proc = spawn_armed(state, Cmd(("agent", "--x", "1"), "mcl-h1"), gate, log, "p",
                           runner=runner)
    gate.release()
    try:
        assert _wait_for(tmp_path / "seen") == "agent --x 1"
    finally:
        kill_group(proc)
    assert remote.calls == [(("agent", "--x", "1"), True)]
    assert [p.what for p in state.processes] == ["p"]


class _Routers:
    """Stands in for RemoteRouters: nothing to start on pretend hosts."""

    def __init__(self, *args: object):
        self.remedies: list[str] = []

    def start(self, progress: object) -> None:
        pass

    def wait_ready(self, timeout: float, progress: object) -> None:
        pass

    def stop(self) -> None:
        pass

    def collect(self, folder: Path) -> None:
        pass


def _testbed_lab(tmp_path: Path, name: str, prefix: str) -> TestbedLab:
    """A TestbedLab of the dumbbell whose hosts are named ``<prefix><i>``."""
    topo = load_topology(REPO / "topologies" / "webrc-dumbbell.yaml")
    hosts = {n: Host(address=f"{prefix}{i}") for i, n in enumerate(topo.nodes)}
    inv = Inventory(source=name, format="emulab", hosts=hosts, ssh_command=("ssh",))
    run_dir = tmp_path / "results" / name
    run_dir.mkdir(parents=True)
    lab = TestbedLab(topo, LabOptions(lab_id=name), inv, run_dir, tmp_path / f"cm-{name}")
    # No hosts behind it: the SSH client does nothing.
    lab.ssh.run = lambda node, argv, **kw: ""  # type: ignore[method-assign]
    lab.ssh.stop_files = lambda groups, grace=3.0: None  # type: ignore[method-assign]
    lab.ssh.close = lambda: None  # type: ignore[method-assign]
    return lab


def test_two_testbed_labs_in_one_process_route_to_their_own_hosts(tmp_path, monkeypatch):
    monkeypatch.setattr("mcclab.state.STATE_ROOT", tmp_path / "state")
    monkeypatch.setattr(testbed_lab, "configure", lambda runner, topo, plan: None)
    monkeypatch.setattr(testbed_lab, "measure_all", lambda ssh: {})
    monkeypatch.setattr(testbed_lab, "RemoteRouters", _Routers)
    first = _testbed_lab(tmp_path, "first", "pcA").up()
    second = _testbed_lab(tmp_path, "second", "pcB").up()
    agent = Cmd(("python", "-m", "agents.run"), "mcl-d1")
    a, b = first.runner.argv(agent, spawn=True), second.runner.argv(agent, spawn=True)
    d1 = list(first.topo.nodes).index("d1")
    assert f"pcA{d1}" in a and f"pcB{d1}" not in a
    assert f"pcB{d1}" in b and f"pcA{d1}" not in b
    assert "/tmp/mcclab-ssh/first/pids/0.pgid" in a[-1]
    assert "/tmp/mcclab-ssh/second/pids/0.pgid" in b[-1]
    # The first lab's teardown takes its own routes away and leaves the second's.
    first.down()
    assert first.runner.argv(agent)[0] == "nsenter"
    assert f"pcB{d1}" in second.runner.argv(agent)
    second.down()
    assert second.runner.argv(agent)[0] == "nsenter"


def test_the_fork_server_only_forks_into_namespaces_of_this_machine(tmp_path, state):
    class Server:
        def __init__(self) -> None:
            self.forked: list[str] = []

        def spawn(self, state, module, args, netns, log, what):  # noqa: ANN001, ANN202
            self.forked.append(str(netns))
            return "forked"

    server, remote = Server(), FakeRemote(tmp_path / "seen")
    runner = Runner(remote={"mcl-h1": remote})
    agent = [sys.executable, "-m", "agents.run", "receiver"]
    assert start_tool(state, server, agent, "mcl-h2", tmp_path / "a.out", "local",
                      runner=runner) == "forked"
    proc = start_tool(state, server, agent, "mcl-h1", tmp_path / "b.out", "remote",
                      runner=runner)
    try:
        assert _wait_for(tmp_path / "seen").endswith("-m agents.run receiver")
    finally:
        kill_group(proc)
    assert server.forked == ["/run/netns/mcl-h2"]
    assert remote.calls == [(tuple(agent), True)]
