"""The SSH executor: the argv it builds, and commands, files and process groups driven
through a stand-in client that runs the remote command locally with ``sh -c`` (as sshd
hands it to the login shell), so quoting and process handling are real without a network."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcclab.commands import Cmd, cmd
from mcclab.execute import CommandError
from mcclab.state import (
    LabState,
    TrackedProcess,
    kill_groups,
    proc_start_time,
    proc_stat_fields,
)
from mcclab.testbed.inventory import Host, Inventory
from mcclab.testbed.ssh import SPAWN_SCRIPT, Ssh, SshError, SshRunner, tied

# Takes ssh's arguments: writes them to $FAKE_SSH_LOG, answers -O at once, and runs the
# command string after "-- TARGET" with sh -c, as sshd does.
FAKE_SSH = """
import os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_SSH_LOG"], "a") as fh:
    fh.write(repr(args) + "\\n")
if "-O" in args:
    sys.exit(0)
rest = args[args.index("--") + 1:]
if rest[0] == "unreachable":
    sys.stderr.write("ssh: connect to host unreachable: No route to host\\n")
    sys.exit(255)
os.execvp("sh", ["sh", "-c", " ".join(rest[1:])])
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    script = tmp_path / "fake_ssh.py"
    script.write_text(FAKE_SSH)
    monkeypatch.setenv("FAKE_SSH_LOG", str(tmp_path / "ssh.log"))
    inv = Inventory(source="inv.ini", format="ansible-ini",
                    hosts={"h1": Host(address="10.1.0.1", user="root", port=2222,
                                      identity_file="/k/id"),
                           "h2": Host(address="unreachable")},
                    ssh_command=(sys.executable, str(script)),
                    strict_host_key_checking="yes", known_hosts="/k/known")
    return Ssh(inv, tmp_path / "cm")


def test_argv_quotes_the_command_and_sets_the_options(fake):
    argv = fake.argv("h1", ["echo", "a b", "$HOME", "it's"])
    assert argv[-3:] == ["--", "root@10.1.0.1", "echo 'a b' '$HOME' 'it'\"'\"'s'"]
    opts = " ".join(argv[2:-3])
    for want in ("BatchMode=yes", "StrictHostKeyChecking=yes", "ControlMaster=auto",
                 f"ControlPath={fake.control_dir}/%C", "ControlPersist=60",
                 "UserKnownHostsFile=/k/known", "-i /k/id", "-p 2222"):
        assert want in opts
    with pytest.raises(SshError, match="node 'h9' has no host in inv.ini"):
        fake.argv("h9", ["true"])


def test_run_returns_stdout_of_the_words_exactly(fake):
    out = fake.run("h1", [sys.executable, "-c", "import sys; print(sys.argv[1:])",
                          "a b", "$HOME", "it's", ";", "*"])
    assert out.strip() == repr(["a b", "$HOME", "it's", ";", "*"])


def test_run_failures(fake):
    with pytest.raises(SshError, match=r"on h1 \(root@10.1.0.1\): sh -c 'exit 3' failed \(3\)"):
        fake.run("h1", ["sh", "-c", "exit 3"])
    assert fake.run("h1", ["sh", "-c", "exit 3"], check=False) == ""
    with pytest.raises(SshError, match="ssh to h2"):
        fake.run("h2", ["true"])


def test_put_and_get_through_the_connection(fake, tmp_path):
    target = tmp_path / "remote" / "deep" / "f.conf"
    fake.put("h1", str(target), "line 1\n'quoted' $x\n", mode=0o600)
    assert target.read_text() == "line 1\n'quoted' $x\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert fake.get("h1", str(target)) == b"line 1\n'quoted' $x\n"
    with pytest.raises(SshError, match="cannot read"):
        fake.get("h1", str(tmp_path / "none"))


def _group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (a zombie waiting for its reaper
    does not)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = proc_stat_fields(int(entry.name))
        if fields is not None and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def test_spawn_runs_in_its_own_group_and_stop_ends_the_group(fake, tmp_path):
    pid_file = tmp_path / "p.pgid"
    log = tmp_path / "logs" / "sleeper.out"
    # The remote process starts a child: stop must end both (the whole group).
    proc = fake.spawn("h1", ["sh", "-c", "sleep 60 & echo started; wait"], log, "sleeper",
                      str(pid_file))
    deadline = time.monotonic() + 10
    while not (pid_file.exists() and "started" in log.read_text()):
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.02)
    pgid = int(pid_file.read_text())
    assert pgid != os.getpgid(0)
    fields = proc_stat_fields(pgid)
    assert fields is not None and int(fields[2]) == pgid  # pgrp: a group of its own
    assert proc.alive() and _group_alive(pgid)
    fake.stop([proc], grace=1.0)
    assert not _group_alive(pgid)
    assert not proc.alive()
    assert fake.processes == []


def test_stop_kills_what_ignores_term(fake, tmp_path):
    pid_file = tmp_path / "p.pgid"
    proc = fake.spawn("h1", ["sh", "-c", "trap '' TERM; echo up; while :; do sleep 0.1; done"],
                      tmp_path / "t.out", "stubborn", str(pid_file))
    deadline = time.monotonic() + 10
    while "up" not in (tmp_path / "t.out").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    pgid = int(pid_file.read_text())
    started = time.monotonic()
    fake.stop([proc], grace=0.5)
    assert not _group_alive(pgid)
    assert time.monotonic() - started < 8


def test_spawn_records_the_client_in_the_lab_state(fake, tmp_path, monkeypatch):
    monkeypatch.setattr("mcclab.state.STATE_ROOT", tmp_path / "state")
    state = LabState(lab_id="ssh-test")
    fake.state = state
    proc = fake.spawn("h1", ["sleep", "30"], tmp_path / "s.out", "sleep",
                      str(tmp_path / "s.pgid"))
    assert [p.what for p in state.processes] == ["ssh h1: sleep"]
    assert state.processes[0].pid == proc.client.pid
    fake.stop_all(grace=0.5)
    assert not proc.alive()


def test_close_asks_each_master_to_exit(fake, tmp_path):
    fake.close()
    lines = (tmp_path / "ssh.log").read_text().splitlines()
    assert len(lines) == 2 and all("'-O', 'exit'" in line for line in lines)


def test_runner_runs_node_commands_on_their_hosts(fake, tmp_path):
    runner = SshRunner(fake, transcript=tmp_path / "commands.log")
    assert runner.run(cmd("echo", "on h1", netns="mcl-h1")) == "on h1\n"
    log = (tmp_path / "ssh.log").read_text()
    assert "'root@10.1.0.1', \"echo 'on h1'\"" in log
    # no namespace: the controller itself, as in the lab
    assert runner.run(cmd("echo", "here")) == "here\n"
    assert "here" not in (tmp_path / "ssh.log").read_text()
    assert runner.run(cmd("false", netns="mcl-h1", check=False)) == ""
    with pytest.raises(CommandError):
        runner.run(cmd("false", netns="mcl-h1"))
    # unreachable is never a quiet failure, even for a command allowed to fail
    with pytest.raises(SshError, match="ssh to h2 failed"):
        runner.run(cmd("true", netns="mcl-h2", check=False))
    with pytest.raises(SshError, match="namespace 'mcl-x' is no node"):
        runner.run(cmd("true", netns="mcl-x"))
    # a command's stdin (ip -batch -) reaches the host
    fed = Cmd(("sh", "-c", "cat; echo done"), "mcl-h1", input="route a\nroute b\n")
    assert runner.run(fed) == "route a\nroute b\ndone\n"
    transcript = (tmp_path / "commands.log").read_text().splitlines()
    assert transcript[0] == "0\t[mcl-h1] echo 'on h1'"



# --- a process tied to its client: ended on the host when its local client is ------------

def _tied_popen(fake, tmp_path, remote: list[str], stdin=subprocess.DEVNULL,
                tie: bool = True) -> tuple[subprocess.Popen, Path, Path]:
    """Start ``remote`` on h1 as the testbed lab's route does (a spawn writing its group to
    a pid file, tied to its client unless ``tie`` is false)."""
    pid_file, log = tmp_path / "t.pgid", tmp_path / "t.out"
    client = fake.argv("h1", ["setsid", "-w", "sh", "-c", SPAWN_SCRIPT, "mcclab",
                              str(pid_file), *remote])
    argv = tied(client, fake.stop_argv("h1", str(pid_file), 1.0)) if tie else client
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return proc, pid_file, log


def _wait_for(what, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_ending_a_tied_client_ends_the_remote_group(fake, tmp_path):
    """What the runner does at a launch's stop time (TERM to the local group, KILL after
    3 s) ends the remote process group too."""
    sleeper = ["sh", "-c", "sleep 60 & echo started; wait"]
    # Untied, the remote group outlives its client (sshd does not signal it): the
    # premise of the tie.
    proc, pid_file, log = _tied_popen(fake, tmp_path, sleeper, tie=False)
    _wait_for(lambda: pid_file.exists() and "started" in log.read_text())
    pgid = int(pid_file.read_text())
    kill_groups([TrackedProcess(proc.pid, proc_start_time(proc.pid) or -1, "untied")])
    assert _group_alive(pgid)
    fake.stop_files([("h1", str(pid_file))], grace=0.5)
    assert not _group_alive(pgid)
    pid_file.unlink()

    proc, pid_file, log = _tied_popen(fake, tmp_path, sleeper)
    _wait_for(lambda: pid_file.exists() and "started" in log.read_text())
    pgid = int(pid_file.read_text())
    started = time.monotonic()
    kill_groups([TrackedProcess(proc.pid, proc_start_time(proc.pid) or -1, "tied")])
    assert not _group_alive(pgid)
    # within the runner's grace, so by the tie and not by the KILL that follows it
    assert time.monotonic() - started < 3.0


def test_a_tied_client_passes_its_input_and_its_exit_status(fake, tmp_path):
    """An armed start's gate is the client's stdin: the remote side sees its end of file
    only when the gate opens; a remote process that ends by itself ends the client with
    its status."""
    read_fd, write_fd = os.pipe()
    proc, _, log = _tied_popen(fake, tmp_path, ["sh", "-c", 'read _g; echo "gate open"; exit 3'],
                               stdin=read_fd)
    os.close(read_fd)
    time.sleep(0.5)
    assert "gate open" not in log.read_text() and proc.poll() is None
    os.close(write_fd)
    assert proc.wait(timeout=10) == 3
    assert "gate open" in log.read_text()
