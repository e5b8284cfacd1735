"""The lab on allocated hosts: the routes in full_argv, path and metrics-endpoint rewriting,
and times moved between each host's clocks and the controller's (the runner's own start
paths, on hosts whose clocks are hours apart from the controller's)."""

from __future__ import annotations

import csv
import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from mcclab import execute
from mcclab.commands import cmd
from mcclab.lab import LabOptions
from mcclab.model.loader import load_topology
from mcclab.net.node_config import netns_name
from mcclab.testbed.clocks import ClockOffset
from mcclab.testbed.inventory import Host, Inventory
from mcclab.testbed.lab import TestbedLab, TestbedLabs, shift_event_times
from mcclab.testbed.ssh import TIE_GRACE, SshError, tied

REPO = Path(__file__).resolve().parents[2]


def test_full_argv_goes_to_the_routed_namespace_only():
    calls = []
    routes = {"mcl-d1": lambda argv, spawn: calls.append((argv, spawn)) or ["ssh", "d1", *argv]}
    assert execute.full_argv(cmd("true", netns="mcl-d1"), remote=routes) == ["ssh", "d1", "true"]
    assert execute.full_argv(cmd("sleep", 1, netns="mcl-d1"), spawn=True, remote=routes) == [
        "ssh", "d1", "sleep", "1"]
    assert calls == [(("true",), False), (("sleep", "1"), True)]
    # other namespaces and the root are untouched, and so is d1 without the routes
    assert execute.full_argv(cmd("true", netns="mcl-d2"), remote=routes)[:2] == [
        "nsenter", "--net=/run/netns/mcl-d2"]
    assert execute.full_argv(cmd("true", netns="mcl-d1"))[0] == "nsenter"
    assert execute.full_argv(cmd("true"), remote=routes) == ["true"]


def test_shift_event_times():
    text = '{"t": 10.5, "event": "stats"}\nnot json\n{"event": "x"}\n{"t": 3}\n'
    out = shift_event_times(text, 0.25).splitlines()
    assert json.loads(out[0]) == {"t": 10.25, "event": "stats"}
    assert out[1] == "not json" and json.loads(out[2]) == {"event": "x"}
    assert json.loads(out[3]) == {"t": 2.75}
    assert shift_event_times(text, 0.25).endswith("\n")


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setattr("mcclab.state.STATE_ROOT", tmp_path / "state")
    topo = load_topology(REPO / "topologies" / "webrc-dumbbell.yaml")
    hosts = {n: Host(address=f"pc{i}", control=("192.168.1.5" if n == "d1" else None))
             for i, n in enumerate(topo.nodes)}
    inv = Inventory(source="i", format="emulab", hosts=hosts, ssh_command=(sys.executable,))
    labs = TestbedLabs(inv, control_dir=tmp_path / "cm")
    with pytest.raises(RuntimeError, match="folder is not known"):
        labs(topo, LabOptions(lab_id="default-x"))
    labs.started(tmp_path / "results" / "default" / "x")
    return labs(topo, LabOptions(lab_id="default-x"))


def test_run_paths_and_metrics_addresses_are_rewritten(lab, tmp_path):
    assert isinstance(lab, TestbedLab)
    run = str(tmp_path / "results" / "default" / "x")
    argv = ("python", "-m", "agents.run", "receiver", "--session", f"{run}/sessions/w.json",
            "--log", f"{run}/logs/w-d1.jsonl", "--metrics", "172.30.0.5:9464", "other/path")
    out = lab._rewrite("d1", argv)
    assert out[5] == "/tmp/mcclab-ssh/default-x/run/sessions/w.json"
    assert out[7] == "/tmp/mcclab-ssh/default-x/run/logs/w-d1.jsonl"
    # the endpoint goes to the host's loopback, whatever control address the host has
    assert out[9] == "127.0.0.1:9464"
    assert out[10] == "other/path"
    assert lab._files["d1"] == {f"{run}/sessions/w.json", f"{run}/logs/w-d1.jsonl"}
    assert lab._rewrite("s1", ("x", "--metrics", "172.30.0.4:9465"))[2] == "127.0.0.1:9465"
    # an address elsewhere in the argv is left alone
    assert lab._rewrite("s1", ("x", "--dest", "172.30.0.4:9465"))[2] == "172.30.0.4:9465"
    assert lab.monitoring_hosts.lab is lab


def test_spawned_commands_write_their_group_to_a_pid_file(lab):
    remote = lab._argv_for("d1")
    lab._pushed = True  # no hosts to copy to here
    words = remote(("iperf3", "-s"), True)
    assert words[-1] == ("setsid -w sh -c 'echo $$ > \"$1\" && shift && exec \"$@\"' mcclab "
                         "/tmp/mcclab-ssh/default-x/pids/0.pgid iperf3 -s")
    assert lab._spawned == [("d1", "/tmp/mcclab-ssh/default-x/pids/0.pgid")]
    # tied to its local client: ending that (a launch's stop time) ends the remote group
    # through the same pid file (tests/unit/test_testbed_ssh.py runs the tie)
    client = lab.ssh.argv("d1", shlex.split(words[-1]))
    assert words == tied(client, lab.ssh.stop_argv("d1", lab._spawned[0][1], TIE_GRACE))
    assert remote(("true",), False)[-1] == "true"
    assert len(lab._spawned) == 1


# --- times across clocks (mcclab.testbed.timebase) ------------------------------------------

AHEAD = 12345.6  # s1's clocks: booted 3.4 hours before the controller
BEHIND = -4321.5  # d1's clocks: booted 1.2 hours after it


class _FakePopen:
    """Records the argv a launch would run, starts nothing."""

    calls: list[list[str]] = []

    def __init__(self, argv, **kwargs):
        _FakePopen.calls.append(list(argv))
        self.pid = os.getpid()


def _clocked(lab) -> None:
    """Give the lab measured clocks (s1 ahead, d1 behind) and its routes, as up() does."""
    lab.clocks = {
        "s1": ClockOffset("s1", "pc-s1", 0.01, AHEAD, 4e-5, 8e-5, 9, AHEAD + 30.0),
        "d1": ClockOffset("d1", "pc-d1", -0.02, BEHIND, 6e-5, 1.2e-4, 9, BEHIND),
    }
    lab._pushed = True  # no hosts to copy to here
    for node in ("s1", "d1"):
        lab.remote[netns_name(node)] = lab._argv_for(node)


def _remote_words(local_argv: list[str]) -> list[str]:
    """The argv the host runs, out of the local ssh argv (its last word, quoted)."""
    return shlex.split(local_argv[-1])


def _value(words: list[str], flag: str) -> float:
    return float(words[words.index(flag) + 1])


def test_runners_t0_reaches_each_host_on_its_own_clock(lab, tmp_path, monkeypatch):
    """The runner's own start path (agent host on s1, on/off UDP source on d1) sends each
    host the run's t0 on that host's monotonic clock."""
    from mcclab.experiment.launch import Launch
    from mcclab.experiment.runner import RunState, _start

    _clocked(lab)
    _FakePopen.calls = []
    monkeypatch.setattr("mcclab.processes.subprocess.Popen", _FakePopen)
    run = lab.run_dir
    st = RunState(run, started="now", t0=1000.25)
    host = Launch("agent-host-1", "host", "s1",
                  ("python", "-m", "agents.host", "--plan", f"{run}/sessions/h.json"),
                  0.0, None, f"{run}/logs/agent-host-1.out")
    source = Launch("onoff", "source", "d1",
                    ("python", "-m", "mcclab.traffic.udp_onoff", "send", "--log",
                     f"{run}/logs/onoff-source-d1.jsonl"), 2.0, None,
                    f"{run}/logs/onoff-source-d1.jsonl")
    _start(lab, host, st, 0)
    _start(lab, source, st, 1)
    on_s1, on_d1 = (_remote_words(argv) for argv in _FakePopen.calls)
    assert _value(on_s1, "--t0") == pytest.approx(1000.25 + AHEAD, abs=1e-6)
    assert _value(on_d1, "--t0") == pytest.approx(1000.25 + BEHIND, abs=1e-6)
    # each value sent is recorded with the offset it was moved by, and its uncertainty
    lab.record_clocks()
    moved = json.loads((run / "clocks.json").read_text())["translations"]
    assert [(t["node"], t["what"], t["uncertainty_s"]) for t in moved] == [
        ("s1", "--t0 of agents.host", 4e-5), ("d1", "--t0 of mcclab.traffic.udp_onoff", 6e-5)]
    assert moved[0]["controller_s"] == 1000.25
    assert moved[0]["host_s"] == pytest.approx(1000.25 + AHEAD)


def test_a_time_for_a_host_whose_clock_is_not_measured_is_refused(lab):
    _clocked(lab)
    del lab.clocks["d1"]
    with pytest.raises(SshError, match="d1: --t0 is a time on the controller's clock"):
        lab._argv_for("d1")(("python", "-m", "agents.host", "--t0", "5.0"), True)
    # a command without a time still goes
    assert lab._argv_for("d1")(("iperf3", "-s"), True)[-1].endswith("iperf3 -s")


def test_armed_starts_and_event_logs_come_back_on_the_controllers_clock(lab, monkeypatch):
    """iperf3 clients armed by the runner on two hosts note their starts on the hosts' boot
    clocks; copied back, tables/starts.csv has their true lags."""
    from mcclab.experiment.launch import Launch, LaunchPlan
    from mcclab.experiment.runner import RunState, _starter, _write_starts

    _clocked(lab)
    _FakePopen.calls = []
    monkeypatch.setattr("mcclab.experiment.starts.subprocess.Popen", _FakePopen)
    run = lab.run_dir
    lp = LaunchPlan(launches=[
        Launch("tcp", "client", "s1", ("iperf3", "-c", "10.0.0.9"), 5.0, None,
               f"{run}/logs/tcp-client-s1-0.txt", peer="d1"),
        Launch("tcp2", "client", "d1", ("iperf3", "-c", "10.0.0.8"), 7.0, None,
               f"{run}/logs/tcp2-client-d1-0.txt", peer="s1"),
    ])
    st = RunState(run, started="now")
    st.t0 = _starter(lab, lp, st).begin()
    assert len(_FakePopen.calls) == 2
    st.starts.boot_t0 = 800.0  # the controller's boot clock at t0
    marks = f"{run}/logs/armed-starts.txt"
    remote = lab.remote_path(marks)
    # what each host's wrapper wrote: began 0.3 s (s1) and 0.1 s (d1) late, host clocks
    wrote = {("s1", remote): f"0 {805.3 + AHEAD + 30.0:.2f}\n",
             ("d1", remote): f"1 {807.1 + BEHIND:.2f}\n",
             ("d1", lab.remote_path(f"{run}/logs/x.jsonl")):
                 json.dumps({"t": 1010.0 + BEHIND, "event": "stats"}) + "\n"}
    lab._files["d1"].add(f"{run}/logs/x.jsonl")
    monkeypatch.setattr(lab.ssh, "get", lambda node, path: wrote[(node, path)].encode())
    lab._collect()
    _write_starts(lp, st)
    with (run / "tables" / "starts.csv").open() as fh:
        lags = {row["flow"]: float(row["lag_s"]) for row in csv.DictReader(fh)}
    assert lags == {"tcp": pytest.approx(0.3, abs=0.006), "tcp2": pytest.approx(0.1, abs=0.006)}
    assert json.loads((run / "logs" / "x.jsonl").read_text())["t"] == pytest.approx(1010.0)
    lab.record_clocks()
    back = {(t["node"], t["what"]): t
            for t in json.loads((run / "clocks.json").read_text())["translations"]}
    assert back[("s1", "logs/armed-starts.txt")]["clock"] == "boottime"
    assert back[("s1", "logs/armed-starts.txt")]["offset_s"] == AHEAD + 30.0
    assert back[("d1", "logs/armed-starts.txt")]["uncertainty_s"] == 6e-5
    assert back[("d1", "logs/x.jsonl")] == {
        "node": "d1", "direction": "to-controller", "clock": "monotonic",
        "what": "logs/x.jsonl", "offset_s": BEHIND, "uncertainty_s": 6e-5, "values": 1}
