"""What a run on allocated hosts refuses up front (``mcclab.testbed.support``), and the
command lines that refuse it before any host is contacted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from mcclab.cli import app
from mcclab.experiment.loader import resolve
from mcclab.testbed.support import unsupported
from tests.unit.test_testbed_cli import _setup


def _problems(name: str, *sets: str, profile: str = "quick"):
    res = resolve(name, profile, list(sets))
    return unsupported(res.experiment, res.topology)


def test_the_default_experiment_runs_on_hosts_as_it_is():
    # The experiment the SSH backend's integration test runs on stand-ins.
    assert _problems("default") == []
    assert _problems("default", profile="paper") == []


def test_agent_hosts_are_refused_naming_experiment_field_and_the_process_mode():
    (problem,) = _problems("default", "agents.mode=host", "agents.hosts=2")
    assert (problem.experiment, problem.field, problem.value) == ("default", "agents.mode",
                                                                 "host")
    text = problem.message()
    assert text.startswith("default: agents.mode: host: not supported on allocated hosts: ")
    assert "/run/netns/mcl-<node>" in text and "each node is a machine of its own" in text
    assert "instead: --set agents.mode=process" in text
    # The advice, taken, leaves nothing to refuse.
    assert _problems("default", "agents.mode=host", "agents.mode=process") == []


def test_captures_are_refused_naming_each_capture_and_its_host():
    (problem,) = _problems("default", "captures=[{on: rl-rr, filter: pim}, {on: d1}]")
    assert (problem.field, problem.value) == ("captures", "2 captures")
    assert "captures[0] on rl-rr (rl's host); captures[1] on d1 (d1's host)" in problem.why
    assert problem.instead.startswith("--set captures=[]")
    assert _problems("default", "captures=[{on: d1}]", "captures=[]") == []


def test_window_ceilings_run_on_hosts_and_are_not_refused():
    # The locked route runs on the sender's host and the primer is planned per host
    # (mcclab.experiment.launch.host_windows): ORMCC's model (20 packets on Fig. 4's
    # eight TCP flows) and a flow's own ceiling both run.
    assert _problems("ormcc-fig4") == []
    assert _problems("default", "tcp.model=ormcc") == []
    assert _problems("default", "tcp=null", "flows.tcp.max_window=20pkt") == []


def test_every_refusal_at_once_in_the_order_of_the_spec():
    problems = _problems("ormcc-fig4", "agents.mode=host", "captures=[{on: r1}]")
    assert [p.field for p in problems] == ["agents.mode", "captures"]


def test_a_lan_is_the_testbeds_and_is_not_refused(tmp_path):
    spec = {"name": "lan-check", "topology": "topologies/lan.yaml", "duration": "20s",
            "flows": [{"name": "m", "type": "multicast", "protocol": "webrc", "sender": "src",
                       "receivers": ["h1", "h2"]}]}
    path = tmp_path / "lan-check.yaml"
    path.write_text(yaml.safe_dump(spec))
    res = resolve(str(path), "paper")
    assert "lan1" in res.topology.names("lan")
    assert unsupported(res.experiment, res.topology) == []


# A client that notes every call: a refused run must not make one.
NOTING_SSH = """
import sys
with open(sys.argv[1], "a") as out:
    out.write(" ".join(sys.argv[2:]) + "\\n")
sys.exit(255)
"""


def _noting_inventory(tmp_path: Path) -> tuple[Path, Path]:
    calls = tmp_path / "calls.txt"
    (tmp_path / "noting_ssh.py").write_text(NOTING_SSH)
    nodes = ["rl", "rr", "s1", "d1", "s2", "d2"]
    lines = [f"{node} ansible_host=10.9.0.{i + 1}" for i, node in enumerate(nodes)]
    lines += ["[all:vars]",
              f"mcclab_ssh_command={sys.executable} {tmp_path / 'noting_ssh.py'} {calls}"]
    inv = tmp_path / "inv.ini"
    inv.write_text("\n".join(lines) + "\n")
    return inv, calls


def test_run_on_hosts_refuses_before_any_host_is_contacted_or_folder_made(tmp_path):
    inv, calls = _noting_inventory(tmp_path)
    results = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", "default", "--inventory", str(inv),
                                      "--results", str(results), "--set", "agents.mode=host",
                                      "--set", "captures=[{on: rl-rr}]"])
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())
    assert "refused on hosts: default: agents.mode: host: not supported" in out
    assert "refused on hosts: default: captures: 1 capture: not supported" in out
    assert "--set captures=[]" in out  # not eaten as markup
    assert "no run was started" in out
    assert not calls.exists()
    assert not (results / "default").exists()


def test_run_on_hosts_names_a_bad_inventory_and_the_refusals_together(tmp_path):
    inv, calls = _noting_inventory(tmp_path)
    inv.write_text(inv.read_text().replace("d2 ansible_host=10.9.0.6\n", ""))
    result = CliRunner().invoke(app, ["run", "default", "--inventory", str(inv), "--results",
                                      str(tmp_path / "results"), "--set", "agents.mode=host"])
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())
    assert "invalid inventory" in out and "d2" in out
    assert "refused on hosts: default: agents.mode: host" in out
    assert not calls.exists()


def test_testbed_check_lists_the_refusals_with_the_hosts(tmp_path, monkeypatch):
    inv = _setup(tmp_path, monkeypatch)
    result = CliRunner().invoke(app, ["testbed", "check", "default", "-i", str(inv), "--json",
                                      "--set", "agents.mode=host"])
    assert result.exit_code == 1, result.output
    out = json.loads(result.output)
    assert not out["ok"]
    assert [(u["experiment"], u["field"], u["value"]) for u in out["unsupported"]] == [
        ("default", "agents.mode", "host")]
    # The hosts are still checked, and they are fine.
    assert all(row["problems"] == [] for row in out["hosts"].values())
    assert set(out["hosts"]) == {"rl", "rr", "s1", "d1", "s2", "d2"}
    plain = CliRunner().invoke(app, ["testbed", "check", "default", "-i", str(inv),
                                     "--set", "agents.mode=process"])
    assert plain.exit_code == 0, plain.output
    assert "refused on hosts" not in plain.output
