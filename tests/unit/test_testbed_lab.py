"""The lab on allocated hosts: the routes in full_argv, path and metrics-endpoint rewriting,
and event-log times moved onto the controller's clock."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mcclab import execute
from mcclab.commands import cmd
from mcclab.lab import LabOptions
from mcclab.model.loader import load_topology
from mcclab.testbed.inventory import Host, Inventory
from mcclab.testbed.lab import TestbedLab, TestbedLabs, shift_event_times

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
    assert remote(("true",), False)[-1] == "true"
    assert len(lab._spawned) == 1
