"""TCP window ceilings on allocated hosts: the host modes of ``mcclab.net.tcp_window`` (their
argvs, a real listener on the loopback, the primer's log), the launch planner's commands per
host (``mcclab.experiment.launch.window_setup``/``host_windows``), and those commands going
through the testbed lab's runner like any node's command."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcclab.commands import Cmd
from mcclab.execute import CommandError
from mcclab.experiment.launch import WINDOW_PORT, host_windows, plan_launches, window_setup
from mcclab.experiment.loader import resolve
from mcclab.lab import LabOptions
from mcclab.model.addressing import plan_addresses
from mcclab.net.node_config import netns_name
from mcclab.net.tcp_window import (
    HostTarget,
    Prime,
    bind,
    listen_argv,
    listen_limit,
    main,
    parse_target,
    prime_cmd,
    prime_host_argv,
)
from mcclab.testbed.inventory import Host, Inventory
from mcclab.testbed.lab import TestbedLab
from mcclab.testbed.ssh import Ssh, SshRunner

PY = "/opt/venv/bin/python"
MODULE = [PY, "-m", "mcclab.net.tcp_window"]
REPO = Path(__file__).resolve().parents[2]


def test_listen_and_prime_argvs_name_the_module_mode_and_targets():
    assert listen_argv(["10.0.1.2", "10.0.2.2"], 5199, 3, PY, limit_s=30) == [
        *MODULE, "listen", "--port", "5199", "--expect", "3", "--limit", "30",
        "10.0.1.2", "10.0.2.2"]
    targets = [HostTarget("10.0.1.2", 5199, 20), HostTarget("10.0.2.2", 5199, 8)]
    assert prime_host_argv(targets, PY) == [
        *MODULE, "prime", "10.0.1.2:5199:20", "10.0.2.2:5199:8"]
    assert prime_host_argv(targets[:1], PY, "/r/logs/w.log", "s1") == [
        *MODULE, "prime", "--log", "/r/logs/w.log", "--node", "s1", "10.0.1.2:5199:20"]
    with pytest.raises(ValueError):
        listen_argv(["d1"], 5199, 1, PY)


def test_a_target_word_round_trips_and_a_bad_one_is_refused():
    t = HostTarget("10.0.1.2", 40001, 20)
    assert parse_target(t.word()) == t
    for bad in ("10.0.1.2:40001", "10.0.1.2:x:20", "10.0.1.2:1:-3"):
        with pytest.raises(SystemExit, match="ADDRESS:PORT:SEGMENTS"):
            parse_target(bad)


def test_the_lab_mode_is_unchanged_without_a_host_mode(monkeypatch):
    # No mode word: the lab's primer, its pairs on stdin.
    seen = []
    monkeypatch.setattr("mcclab.net.tcp_window.prime_all", seen.append)
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("mcl-s1 mcl-d1 10.0.1.2 8\n"))
    main([])
    assert seen == [[Prime("mcl-s1", "mcl-d1", "10.0.1.2", 8)]]


# --- the host modes, run here ---------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect_and_close(port: int) -> None:
    """What a primer does to the listener: a connection, closed by this side first."""
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


def _refused(port: int) -> bool:
    try:
        _connect_and_close(port)
    except ConnectionRefusedError:
        return True
    return False


def test_a_listener_returns_once_bound_and_ends_after_the_connections_it_expects():
    port = _free_port()
    # The runner waits for the command: it must return while the listener goes on
    # (a listener that stayed in the foreground would hold the runner to its limit).
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mcclab.net.tcp_window", "listen", "--port",
                           str(port), "--expect", "2", "--limit", "20", "127.0.0.1"],
                          capture_output=True, text=True, timeout=10, cwd=REPO, check=True)
    assert done.stdout == f"127.0.0.1 {port}\n"
    assert time.monotonic() - started < 8
    _connect_and_close(port)
    time.sleep(0.2)
    _connect_and_close(port)  # still there after one: it expects two
    deadline = time.monotonic() + 5
    while not _refused(port):
        assert time.monotonic() < deadline, "the listener outlived the connections it expected"
        time.sleep(0.05)


def test_a_port_held_by_an_earlier_listener_can_be_bound_again():
    # A listener whose primer failed lingers to its limit; the next run binds all the same.
    port = _free_port()
    first = bind(["127.0.0.1"], port)
    second = bind(["127.0.0.1"], port)
    for sock in first + second:
        sock.close()


def test_the_primer_logs_what_each_cache_held_once_every_ceiling_is_there(tmp_path,
                                                                          monkeypatch):
    log = tmp_path / "logs" / "tcp-windows.log"
    seen = []

    def held(targets: list[HostTarget]) -> list[str]:
        seen.append(targets)
        return [f"{t.address} cwnd {t.segments}" for t in targets]

    monkeypatch.setattr("mcclab.net.tcp_window.prime_here", held)
    main(["prime", "--log", str(log), "--node", "s2", "10.0.2.2:5199:8", "10.0.1.2:5199:20"])
    assert seen == [[HostTarget("10.0.2.2", 5199, 8), HostTarget("10.0.1.2", 5199, 20)]]
    assert log.read_text() == "s2: 10.0.2.2 cwnd 8\ns2: 10.0.1.2 cwnd 20\n"

    def lacking(targets: list[HostTarget]) -> list[str]:
        raise SystemExit("tcp_window: s1 -> 10.0.1.2: the TCP metrics cache holds cwnd 51")

    monkeypatch.setattr("mcclab.net.tcp_window.prime_here", lacking)
    with pytest.raises(SystemExit, match="cwnd 51"):
        main(["prime", "--log", str(log), "--node", "s1", "10.0.1.2:5199:20"])
    assert log.read_text() == "s2: 10.0.2.2 cwnd 8\ns2: 10.0.1.2 cwnd 20\n"


# --- the planner: commands per host ---------------------------------------------------------

LOG = Path("/r/logs/tcp-windows.log")


def test_each_receiver_listens_once_before_any_sender_primes_all_its_flows():
    pairs = [("s1", "d1", "10.0.1.2", 20), ("s1", "d2", "10.0.2.2", 20),
             ("s2", "d2", "10.0.2.2", 8)]
    limit = listen_limit(2)  # two senders' hosts prime one after another
    assert limit > listen_limit(1)
    assert host_windows(pairs, PY, LOG) == [
        Cmd((*MODULE, "listen", "--port", str(WINDOW_PORT), "--expect", "1", "--limit",
             f"{limit:g}", "10.0.1.2"), "mcl-d1"),
        Cmd((*MODULE, "listen", "--port", str(WINDOW_PORT), "--expect", "2", "--limit",
             f"{limit:g}", "10.0.2.2"), "mcl-d2"),
        Cmd((*MODULE, "prime", "--log", str(LOG), "--node", "s1",
             f"10.0.1.2:{WINDOW_PORT}:20", f"10.0.2.2:{WINDOW_PORT}:20"), "mcl-s1"),
        Cmd((*MODULE, "prime", "--log", str(LOG), "--node", "s2",
             f"10.0.2.2:{WINDOW_PORT}:8"), "mcl-s2")]
    assert host_windows([], PY, LOG) == []


def _ormcc() -> tuple:
    # What the integration test runs: the paper's TCP (20 packets) on the TCP flow s2->d2.
    res = resolve("default", "quick", ["tcp.model=ormcc"])
    return res.experiment, plan_addresses(res.topology), res.topology


def test_on_hosts_the_planner_sends_a_listener_to_d2_and_the_primer_to_s2():
    exp, plan, topo = _ormcc()
    remote = {netns_name(n) for n in topo.nodes}
    d2 = str(plan.address_of("d2"))
    route, listener, primer = window_setup(exp, plan, PY, remote, LOG)
    # the locked route first, on the sender's host; nothing left for the controller
    assert route.netns == "mcl-s2" and "cwnd" in route.argv
    assert listener == Cmd((*MODULE, "listen", "--port", str(WINDOW_PORT), "--expect", "1",
                            "--limit", f"{listen_limit(1):g}", d2), "mcl-d2")
    assert primer == Cmd((*MODULE, "prime", "--log", str(LOG), "--node", "s2",
                          f"{d2}:{WINDOW_PORT}:20"), "mcl-s2")


def test_the_launch_plan_primes_on_hosts_into_the_runs_log_when_told_they_are_hosts():
    exp, plan, topo = _ormcc()
    run = Path("/results/default/r1")
    on_hosts = plan_launches(exp, plan, run, python=PY,
                             remote={netns_name(n) for n in topo.nodes}).setup
    primer = on_hosts[-1]
    assert primer.netns == "mcl-s2" and primer.argv[3:7] == (
        "prime", "--log", str(run / "logs" / "tcp-windows.log"), "--node")
    in_a_lab = plan_launches(exp, plan, run, python=PY).setup
    assert in_a_lab[-1].netns is None and in_a_lab[-1].input


def test_in_a_lab_the_planner_keeps_one_primer_entering_the_namespaces():
    exp, plan, _ = _ormcc()
    d2 = str(plan.address_of("d2"))
    route, primer = window_setup(exp, plan, PY, log=LOG)
    assert route.netns == "mcl-s2"
    assert primer == prime_cmd([Prime("mcl-s2", "mcl-d2", d2, 20)], PY)
    # namespaces routed elsewhere that no ceiling involves change nothing
    assert window_setup(exp, plan, PY, {"mcl-s1", "mcl-rl"}, LOG) == [route, primer]


def test_a_ceiling_between_a_host_and_a_local_namespace_is_refused():
    exp, plan, _ = _ormcc()
    with pytest.raises(ValueError, match="s2 -> d2: d2 is another machine"):
        window_setup(exp, plan, PY, {"mcl-d2"}, LOG)


# --- carried out by the testbed lab's runner, as any node's commands ------------------------

@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A TestbedLab whose routes are made (as up() makes them) and whose ssh runs nothing:
    each ssh argv the runner would run is recorded."""
    monkeypatch.setattr("mcclab.state.STATE_ROOT", tmp_path / "state")
    exp, _, topo = _ormcc()
    hosts = {n: Host(address=f"pc-{n}") for n in topo.nodes}
    inv = Inventory(source="i", format="emulab", hosts=hosts, ssh_command=("ssh",))
    lab = TestbedLab(topo, LabOptions(lab_id="default-x"), inv,
                     tmp_path / "results" / "default" / "x", control_dir=tmp_path / "cm")
    lab.state.save()  # its folder holds the runner's transcript
    for node in hosts:
        lab.remote[netns_name(node)] = lab._argv_for(node)
    ran: list[list[str]] = []

    def fake_run(argv, **kwargs):  # noqa: ANN001, ANN202
        ran.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr("mcclab.testbed.ssh.subprocess.run", fake_run)
    lab.ran = ran  # type: ignore[attr-defined]
    lab.exp = exp  # type: ignore[attr-defined]
    return lab


def test_the_lab_runner_sends_each_planned_command_to_its_nodes_host(lab):
    setup = window_setup(lab.exp, lab.plan, PY, set(lab.runner.remote),
                         lab.run_dir / "logs" / "tcp-windows.log")
    lab.runner.run_all(setup)
    # in the planned order, each over ssh to its own node's host; none on the controller
    assert [argv[0] for argv in lab.ran] == ["ssh"] * 3
    assert [argv[-2] for argv in lab.ran] == ["pc-s2", "pc-d2", "pc-s2"]
    # the log goes to the host's run folder, and teardown collects it from s2's host
    local = str(lab.run_dir / "logs" / "tcp-windows.log")
    assert "--log /tmp/mcclab-ssh/default-x/run/logs/tcp-windows.log" in lab.ran[2][-1]
    assert local not in lab.ran[2][-1]
    assert local in lab._files["s2"]


def test_a_primer_that_finds_no_ceiling_fails_the_setup_naming_the_host(lab, monkeypatch):
    ran: list[list[str]] = []

    def cache_without_ceiling(argv, **kwargs):  # noqa: ANN001, ANN202
        ran.append(list(argv))
        if " prime " in argv[-1]:
            return subprocess.CompletedProcess(argv, 1, "", "tcp_window: pc-s2 -> 10.0.2.2: "
                                               "the TCP metrics cache holds cwnd 51, not 20")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr("mcclab.testbed.ssh.subprocess.run", cache_without_ceiling)
    setup = window_setup(lab.exp, lab.plan, PY, set(lab.runner.remote), LOG)
    flow = Cmd(("iperf3", "-c", "10.0.2.2"), "mcl-s2")
    with pytest.raises(CommandError, match=r"(?s)\[mcl-s2\] .* prime .*cwnd 51, not 20"):
        lab.runner.run_all([*setup, flow])
    assert len(ran) == len(setup)  # nothing after the primer ran


def test_the_runner_runs_a_command_without_a_namespace_here_whatever_its_argv(lab,
                                                                              monkeypatch):
    # The lab's own primer names no node: on the controller it is just a command, as any.
    seen: list[list[str]] = []

    def local_run(argv, **kwargs):  # noqa: ANN001, ANN202
        seen.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "here\n", "")

    monkeypatch.setattr("mcclab.execute.subprocess.run", local_run)
    primer = prime_cmd([Prime("mcl-s2", "mcl-d2", "10.0.2.2", 8)], PY)
    assert isinstance(lab.runner, SshRunner) and isinstance(lab.runner.ssh, Ssh)
    assert lab.runner.run(primer) == "here\n"
    assert seen == [list(primer.argv)] and lab.ran == []
