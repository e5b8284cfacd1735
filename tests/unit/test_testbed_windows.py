"""TCP window ceilings on allocated hosts: the host modes' argvs (``mcclab.net.tcp_window``)
and their sequencing over SSH (``mcclab.testbed.windows``, through ``SshRunner``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcclab.commands import cmd
from mcclab.experiment.launch import window_setup
from mcclab.experiment.loader import resolve
from mcclab.model.addressing import plan_addresses
from mcclab.net.tcp_window import (
    HostTarget,
    Prime,
    listen_argv,
    main,
    parse_listening,
    parse_primes,
    parse_target,
    prime_cmd,
    prime_host_argv,
)
from mcclab.testbed.inventory import load_inventory
from mcclab.testbed.ssh import Ssh, SshError, SshRunner
from mcclab.testbed.windows import (
    HostPriming,
    PrimingError,
    is_primer,
    plan_priming,
    prime_on_hosts,
)

PY = "/opt/venv/bin/python"
NODES = {"mcl-s1": "s1", "mcl-s2": "s2", "mcl-d1": "d1", "mcl-d2": "d2"}


def test_listen_and_prime_argvs_name_the_module_mode_and_targets():
    assert listen_argv(["10.0.1.2", "10.0.2.2"], PY, limit_s=30) == [
        PY, "-m", "mcclab.net.tcp_window", "listen", "--limit", "30", "10.0.1.2", "10.0.2.2"]
    assert prime_host_argv([HostTarget("10.0.1.2", 40001, 20),
                            HostTarget("10.0.2.2", 40002, 8)], PY) == [
        PY, "-m", "mcclab.net.tcp_window", "prime", "10.0.1.2:40001:20", "10.0.2.2:40002:8"]
    with pytest.raises(ValueError):
        listen_argv(["d1"], PY)


def test_a_target_word_round_trips_and_a_bad_one_is_refused():
    t = HostTarget("10.0.1.2", 40001, 20)
    assert parse_target(t.word()) == t
    for bad in ("10.0.1.2:40001", "10.0.1.2:x:20", "10.0.1.2:1:-3"):
        with pytest.raises(SystemExit, match="ADDRESS:PORT:SEGMENTS"):
            parse_target(bad)


def test_the_listeners_output_gives_its_ports_by_address():
    assert parse_listening("10.0.1.2 40001\n10.0.2.2 40002\nready\n") == {
        "10.0.1.2": 40001, "10.0.2.2": 40002}


def test_the_lab_mode_is_unchanged_without_a_host_mode(monkeypatch):
    # No mode word: the lab's primer, its pairs on stdin.
    seen = []
    monkeypatch.setattr("mcclab.net.tcp_window.prime_all", seen.append)
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("mcl-s1 mcl-d1 10.0.1.2 8\n"))
    main([])
    assert seen == [[Prime("mcl-s1", "mcl-d1", "10.0.1.2", 8)]]


def test_the_lab_primer_is_recognised_and_nothing_else_is():
    primer = prime_cmd([Prime("mcl-s1", "mcl-d1", "10.0.1.2", 8)], PY)
    assert is_primer(primer)
    assert not is_primer(cmd(PY, "-m", "mcclab.net.tcp_window", netns="mcl-s1"))
    assert not is_primer(cmd(PY, "-m", "mcclab.probes.mcast"))
    assert not is_primer(cmd(PY, "-m", "mcclab.net.tcp_window", "prime", "10.0.1.2:1:8"))


def test_each_sender_primes_its_flows_and_each_receiver_listens_once():
    primes = [Prime("mcl-s1", "mcl-d1", "10.0.1.2", 20),
              Prime("mcl-s1", "mcl-d2", "10.0.2.2", 20),
              Prime("mcl-s2", "mcl-d2", "10.0.2.2", 8)]
    plan = plan_priming(primes, NODES)
    assert plan.listeners == {"d1": ["10.0.1.2"], "d2": ["10.0.2.2"]}
    assert plan.primers == {"s1": [("10.0.1.2", 20), ("10.0.2.2", 20)],
                            "s2": [("10.0.2.2", 8)]}
    ports = {"10.0.1.2": 4001, "10.0.2.2": 4002}
    assert plan.prime_argvs(ports, PY) == {
        "s1": [PY, "-m", "mcclab.net.tcp_window", "prime", "10.0.1.2:4001:20",
               "10.0.2.2:4002:20"],
        "s2": [PY, "-m", "mcclab.net.tcp_window", "prime", "10.0.2.2:4002:8"]}
    with pytest.raises(PrimingError, match="'mcl-x9' is no node"):
        plan_priming([Prime("mcl-x9", "mcl-d1", "10.0.1.2", 8)], NODES)


def test_the_ormcc_model_on_the_default_experiment_plans_one_primer_for_s2():
    # What the integration test runs: the paper's TCP (20 packets) on the TCP flow s2->d2.
    res = resolve("default", "quick", ["tcp.model=ormcc"])
    plan = plan_addresses(res.topology)
    setup = window_setup(res.experiment, plan, PY)
    (primer,) = [c for c in setup if is_primer(c)]
    # the locked route comes first and runs on the sender's host (its namespace)
    assert [c.netns for c in setup[:setup.index(primer)]] == ["mcl-s2"]
    d2 = str(plan.address_of("d2"))
    hosts = plan_priming(parse_primes(primer.input or ""), NODES)
    assert hosts.listeners == {"d2": [d2]} and hosts.primers == {"s2": [(d2, 20)]}


# Stands in for ssh: runs the host-mode argv's part here, noting each step in a log.
# argv: LOG NODE FAILING STALL PYTHON -m MODULE MODE ARGS...
FAKE_HOST = r"""
import sys, time
log, node, failing, stall, mode, args = *sys.argv[1:5], sys.argv[8], sys.argv[9:]
def note(what):
    with open(log, "a") as fh:
        fh.write(f"{what} {node}\n")
if mode == "listen":
    note("listen-start")
    if stall == "stall":
        time.sleep(30)
    for i, address in enumerate(args[2:]):  # after --limit N
        print(address, 41000 + i)
    print("ready", flush=True)
    sys.stdin.read()  # the controller closes our stdin when the primers are done
    note("listen-end")
else:
    note("prime " + " ".join(args))
    if node == failing:
        sys.exit(f"tcp_window: {node} -> 10.0.2.2: the TCP metrics cache holds cwnd 51, not 8")
    for word in args:
        print(word.split(":")[0], "cwnd", word.split(":")[2])
"""


class FakeSsh:
    """``Ssh.argv`` that runs the command here through FAKE_HOST: the primer of node
    ``failing`` fails, and with ``stall`` no listener reports its ports."""

    def __init__(self, tmp: Path, failing: str = "", stall: bool = False):
        self.log = tmp / "steps.log"
        self.script = tmp / "fake_host.py"
        self.script.write_text(FAKE_HOST)
        self.failing, self.stall = failing, "stall" if stall else "-"

    def argv(self, node: str, argv: list[str]) -> list[str]:
        return [sys.executable, str(self.script), str(self.log), node, self.failing,
                self.stall, *argv]

    def steps(self) -> list[str]:
        return self.log.read_text().splitlines()


def _plan() -> HostPriming:
    return plan_priming([Prime("mcl-s1", "mcl-d1", "10.0.1.2", 20),
                         Prime("mcl-s2", "mcl-d2", "10.0.2.2", 8)], NODES)


def test_listeners_are_up_before_any_primer_and_end_after_all(tmp_path):
    ssh = FakeSsh(tmp_path)
    out = prime_on_hosts(ssh, _plan(), PY)
    assert out == {"s1": "10.0.1.2 cwnd 20\n", "s2": "10.0.2.2 cwnd 8\n"}
    steps = ssh.steps()
    kinds = [s.split()[0] for s in steps]
    last_start = max(i for i, k in enumerate(kinds) if k == "listen-start")
    first_prime = min(i for i, k in enumerate(kinds) if k == "prime")
    last_prime = max(i for i, k in enumerate(kinds) if k == "prime")
    first_end = min(i for i, k in enumerate(kinds) if k == "listen-end")
    assert last_start < first_prime and last_prime < first_end, steps
    assert kinds.count("listen-start") == kinds.count("listen-end") == 2
    # each primer got the port its receiver's listener reported
    assert "prime 10.0.1.2:41000:20 s1" in steps and "prime 10.0.2.2:41000:8 s2" in steps


def test_a_primer_that_finds_no_ceiling_fails_naming_its_host_and_listeners_still_end(
        tmp_path):
    ssh = FakeSsh(tmp_path, failing="s2")
    with pytest.raises(PrimingError, match=r"not primed on s2 \(1\): .*cwnd 51, not 8"):
        prime_on_hosts(ssh, _plan(), PY)
    assert [s.split()[0] for s in ssh.steps()].count("listen-end") == 2


def test_a_listener_that_never_gets_ready_fails_before_any_primer(tmp_path, monkeypatch):
    monkeypatch.setattr("mcclab.testbed.windows.READY_TIMEOUT_S", 1.0)
    monkeypatch.setattr("mcclab.testbed.windows.END_TIMEOUT_S", 0.5)
    ssh = FakeSsh(tmp_path, stall=True)
    with pytest.raises(PrimingError, match="listener on d1 timed out"):
        prime_on_hosts(ssh, _plan(), PY)
    assert not any(s.startswith("prime") for s in ssh.steps())


def _runner(tmp_path: Path, failing: str = "") -> tuple[SshRunner, FakeSsh]:
    topo = resolve("default", "quick").topology
    inv = tmp_path / "inv.ini"
    inv.write_text("".join(f"{n} ansible_host=10.9.0.{i + 1}\n"
                           for i, n in enumerate(topo.nodes)))
    ssh = Ssh(load_inventory(inv, topo), tmp_path)
    fake = FakeSsh(tmp_path, failing=failing)
    ssh.argv = fake.argv  # type: ignore[method-assign]
    return SshRunner(ssh, primed_log=tmp_path / "logs" / "tcp-windows.log"), fake


def test_the_runner_sends_the_lab_primer_to_the_hosts_and_logs_the_caches(tmp_path):
    runner, fake = _runner(tmp_path)
    primer = prime_cmd([Prime("mcl-s2", "mcl-d2", "10.0.2.2", 8)], PY)
    assert runner.run(primer) == "s2: 10.0.2.2 cwnd 8\n"
    assert (tmp_path / "logs" / "tcp-windows.log").read_text() == "s2: 10.0.2.2 cwnd 8\n"
    assert [s.split()[0] for s in fake.steps()] == ["listen-start", "prime", "listen-end"]


def test_the_runner_fails_the_setup_when_a_ceiling_is_not_primed(tmp_path):
    runner, _ = _runner(tmp_path, failing="s2")
    primer = prime_cmd([Prime("mcl-s2", "mcl-d2", "10.0.2.2", 8)], PY)
    with pytest.raises(SshError, match="window ceiling not primed on s2"):
        runner.run_all([primer, cmd("echo", "a flow would start here")])
    assert not (tmp_path / "logs" / "tcp-windows.log").exists()
