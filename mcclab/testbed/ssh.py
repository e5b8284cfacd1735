"""Commands, processes and files on allocated hosts, over SSH.

Commands stay data: where the lab runs a ``Cmd`` inside a node's namespace
(``nsenter --net=/run/netns/mcl-<node> -- argv``), :class:`SshRunner` runs it
on the node's host (``ssh OPTIONS -- HOST 'argv'``, the argv shell-quoted), so
the lab's own command builders (``mcclab.net.node_config`` and the routing
planners) drive a testbed host unchanged.

Every connection to a host shares one master connection (``ControlMaster``,
kept ``CONTROL_PERSIST`` seconds after the last use), so a command costs one
round trip, not a key exchange. ``BatchMode`` makes a missing key fail at once
instead of prompting. Host keys are checked as the inventory says
(``mcclab_strict_host_key_checking``).

A long-lived process (:meth:`Ssh.spawn`) runs in a session of its own on the
host, and writes its process group id to a pid file there first, so
:meth:`Ssh.stop` ends the whole group whatever became of the SSH connection.
:func:`tied` wraps such a client so that ending it on the controller ends the
remote group too (the experiment runner stops a launch by ending its local
process group).
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mcclab.commands import Cmd
from mcclab.execute import CommandError, RemoteRoutes, Runner
from mcclab.net.node_config import netns_name
from mcclab.state import LabState, TrackedProcess, kill_groups, proc_start_time
from mcclab.testbed.inventory import Host, Inventory

CONTROL_PERSIST = 60  # seconds an idle master connection stays open
CONNECT_TIMEOUT = 10  # seconds
# Runs as the remote command of a spawn: a new session (so a process group of its
# own), its id into the pid file ($1), then the process itself.
SPAWN_SCRIPT = 'echo $$ > "$1" && shift && exec "$@"'
# Ends the process group named in the pid file ($1): TERM, then KILL after $2 tenths.
# (dash's kill takes no "--": a negative pid after the signal names the group.)
_STOP = ('pg=$(cat "$1" 2>/dev/null) || exit 0; [ -n "$pg" ] || exit 0; '
         'kill -TERM "-$pg" 2>/dev/null || exit 0; i=0; '
         'while kill -0 "-$pg" 2>/dev/null; do i=$((i+1)); '
         'if [ "$i" -ge "$2" ]; then kill -KILL "-$pg" 2>/dev/null; sleep 0.1; break; fi; '
         'sleep 0.1; done; exit 0')
# Runs on the controller around the ssh client of a process ($2...), so that ending
# the client ends the remote process too, as ending a local process would: sshd does
# not signal a command whose session closes. The client runs in the background on the
# wrapper's stdin (fd 3 carries it past the shell's /dev/null for background jobs);
# on TERM or INT the wrapper ends the client, then runs $1 (a command line ending the
# remote process group through its pid file) and exits; otherwise it exits as the
# client did.
TIE_SCRIPT = ('stop=$1; shift; exec 3<&0; "$@" <&3 3<&- & c=$!; exec 3<&-; '
              'trap \'trap "" TERM INT; kill -TERM "$c" 2>/dev/null; eval "$stop"; '
              'exit 143\' TERM INT; wait "$c"')
# Seconds the remote process gets between TERM and KILL when its client is ended; under
# the 3 s the runner waits for a stopped process (mcclab.state.kill_groups).
TIE_GRACE = 2.0


def tied(client: Sequence[str], stop: Sequence[str]) -> list[str]:
    """The local argv running ``client`` (an ssh argv starting a remote process) so that
    a TERM or INT to it also runs ``stop`` (an ssh argv ending that process)."""
    return ["sh", "-c", TIE_SCRIPT, "mcclab-tie", shlex.join(stop), *client]


class SshError(RuntimeError):
    """A host could not be reached or a remote step failed."""


@dataclass
class RemoteProcess:
    """A long-lived process on a host: the local ssh client that carries it, and the
    remote pid file naming its process group."""

    node: str
    what: str
    pid_file: str
    client: TrackedProcess
    log: Path

    def alive(self) -> bool:
        """True while its ssh client runs (it ends when the remote process does)."""
        return self.client.alive()


class Ssh:
    """The SSH client of one run: the inventory's hosts, one master connection each."""

    def __init__(self, inventory: Inventory, control_dir: Path,
                 state: LabState | None = None, persist: int = CONTROL_PERSIST):
        self.inventory = inventory
        # Control sockets live here; a unix socket path must stay under 108 bytes and
        # %C (a hash of host, port and user) is 40 of them.
        self.control_dir = control_dir
        self.state = state
        self.persist = persist
        self.processes: list[RemoteProcess] = []

    def host(self, node: str) -> Host:
        """The host of ``node``; SshError if the inventory has none."""
        try:
            return self.inventory.hosts[node]
        except KeyError:
            raise SshError(f"node {node!r} has no host in {self.inventory.source}") from None

    def options(self, node: str) -> list[str]:
        """The ssh options for ``node``'s host (without the client command or target)."""
        host, inv = self.host(node), self.inventory
        opts = ["-o", "BatchMode=yes",
                "-o", f"StrictHostKeyChecking={inv.strict_host_key_checking}",
                "-o", "ControlMaster=auto",
                "-o", f"ControlPath={self.control_dir}/%C",
                "-o", f"ControlPersist={self.persist}",
                "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
                "-o", "ServerAliveInterval=5",
                "-o", "LogLevel=ERROR",
                "-p", str(host.port)]
        if inv.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={inv.known_hosts}"]
        if host.identity_file:
            opts += ["-i", host.identity_file, "-o", "IdentitiesOnly=yes"]
        return opts

    def argv(self, node: str, argv: Sequence[str]) -> list[str]:
        """The local argv that runs ``argv`` on ``node``'s host (quoted for its shell)."""
        return [*self.inventory.ssh_command, *self.options(node), "--",
                self.host(node).target(), shlex.join(argv)]

    def script_argv(self, node: str, script: str, *args: str) -> list[str]:
        """The local argv that runs a POSIX sh ``script`` with ``args`` on the host
        (``sh -c``, whatever the login shell is)."""
        return self.argv(node, ["sh", "-c", script, "mcclab", *args])

    def run(self, node: str, argv: Sequence[str], timeout: float = 30.0, check: bool = True,
            stdin: bytes | None = None) -> str:
        """Run ``argv`` on ``node``'s host and return its stdout; raise SshError when a
        command that must succeed fails (255: ssh itself failed)."""
        try:
            proc = subprocess.run(self.argv(node, argv), input=stdin, capture_output=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise SshError(f"{node}: {shlex.join(argv)} took longer than {timeout:g} s"
                           ) from exc
        if proc.returncode != 0 and check:
            where = "ssh to" if proc.returncode == 255 else "on"
            raise SshError(f"{where} {node} ({self.host(node).target()}): "
                           f"{shlex.join(argv)} failed ({proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace').strip()[-500:]}")
        return proc.stdout.decode(errors="replace")

    def put(self, node: str, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write ``data`` to ``path`` on the host (its directory is made), over the same
        connection as the commands."""
        payload = data.encode() if isinstance(data, str) else data
        self.run(node, ["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1" && chmod "$2" "$1"',
                        "mcclab", path, f"{mode:o}"], stdin=payload)

    def get(self, node: str, path: str, timeout: float = 60.0) -> bytes:
        """The content of ``path`` on the host."""
        proc = subprocess.run(self.argv(node, ["cat", path]), capture_output=True,
                              timeout=timeout, check=False)
        if proc.returncode != 0:
            raise SshError(f"{node}: cannot read {path}: "
                           f"{proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout

    def spawn(self, node: str, argv: Sequence[str], log: Path, what: str, pid_file: str,
              stdin: int | None = None) -> RemoteProcess:
        """Start ``argv`` on the host in a session of its own, output to the local ``log``.

        The local ssh client runs in its own process group and is recorded in the
        lab state (when there is one), so teardown ends it; the remote group is ended
        by :meth:`stop` through ``pid_file``.
        """
        log.parent.mkdir(parents=True, exist_ok=True)
        command = ["setsid", "-w", "sh", "-c", SPAWN_SCRIPT, "mcclab", pid_file, *argv]
        with log.open("ab") as out:
            proc = subprocess.Popen(self.argv(node, command),
                                    stdin=subprocess.DEVNULL if stdin is None else stdin,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        client = (self.state.add_process(proc.pid, f"ssh {node}: {what}") if self.state
                  else TrackedProcess(proc.pid, proc_start_time(proc.pid) or -1, what))
        remote = RemoteProcess(node, what, pid_file, client, log)
        self.processes.append(remote)
        return remote

    def stop_argv(self, node: str, pid_file: str, grace: float = 3.0) -> list[str]:
        """The local argv ending the process group named by ``pid_file`` on ``node``'s host:
        TERM, KILL after ``grace`` seconds (nothing when the group is gone already)."""
        return self.script_argv(node, _STOP, pid_file, str(max(1, round(grace * 10))))

    def stop_files(self, groups: Sequence[tuple[str, str]], grace: float = 3.0) -> None:
        """End the process groups named by remote pid files, ``(node, pid_file)`` each:
        TERM to all at once, KILL to what is left after ``grace``."""
        pending = [subprocess.Popen(self.stop_argv(node, pid_file, grace),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for node, pid_file in groups]
        for waiter in pending:
            try:
                waiter.wait(timeout=grace + CONNECT_TIMEOUT + 5)
            except subprocess.TimeoutExpired:
                waiter.kill()
                waiter.wait()

    def stop(self, procs: Sequence[RemoteProcess], grace: float = 3.0) -> None:
        """End each remote process group (TERM, KILL after ``grace``), then its client."""
        self.stop_files([(p.node, p.pid_file) for p in procs], grace)
        # The clients end with their remote processes; this reaps them (and ends any
        # whose connection hangs).
        kill_groups([p.client for p in procs], grace=2.0)
        for p in procs:
            if p in self.processes:
                self.processes.remove(p)

    def stop_all(self, grace: float = 3.0) -> None:
        """End every process this client started and has not stopped yet."""
        self.stop(list(reversed(self.processes)), grace)

    def close(self) -> None:
        """End the master connections (they would end by themselves once idle)."""
        for node in self.inventory.hosts:
            subprocess.run([*self.inventory.ssh_command, *self.options(node), "-O", "exit",
                            "--", self.host(node).target()],
                           capture_output=True, timeout=10, check=False)


class SshRunner(Runner):
    """A Runner whose node commands run on the nodes' hosts over SSH.

    A ``Cmd`` for namespace ``mcl-<node>`` runs on ``node``'s host, through the
    node's route in ``remote`` once the lab that owns the hosts has made it (see
    ``mcclab.testbed.lab``), which also decides where long-lived processes started
    through :meth:`argv` run; a command with no namespace runs here, on the
    controller, as the lab's runner does. What a command does is its builder's
    business: this runner only sends it where its namespace says (the TCP window
    ceilings, for one, come planned per host, ``mcclab.experiment.launch.host_windows``).
    """

    def __init__(self, ssh: Ssh, transcript: Path | None = None,
                 remote: RemoteRoutes | None = None):
        super().__init__(transcript=transcript, remote=remote)
        self.ssh = ssh
        self.nodes = {netns_name(node): node for node in ssh.inventory.hosts}

    def node_of(self, command: Cmd) -> str | None:
        """The node a command runs on (None: the controller); SshError for another namespace."""
        if command.netns is None:
            return None
        try:
            return self.nodes[command.netns]
        except KeyError:
            raise SshError(f"{command}: namespace {command.netns!r} is no node of "
                           f"{self.ssh.inventory.source}") from None

    def run(self, command: Cmd, timeout: float = 30.0) -> str:
        """Run one command (on its node's host) and return its stdout."""
        node = self.node_of(command)
        if node is None:
            return super().run(command, timeout)
        # The node's route once the lab has made it (it moves run-folder paths in the argv
        # to the host's folder, and the lab collects the files they name); before that,
        # while the lab configures the hosts, ssh itself.
        route = self.remote.get(command.netns or "")
        argv = route(command.argv, False) if route is not None else self.ssh.argv(
            node, command.argv)
        try:
            # A command's stdin (``ip -batch -``) goes over the connection too.
            proc = subprocess.run(argv, input=getattr(command, "input", None),
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise SshError(f"{node}: {command} took longer than {timeout:g} s") from exc
        self._record(command, proc.returncode)
        if proc.returncode == 255:
            # ssh's own failure: the host is unreachable, whether or not the command
            # was allowed to fail.
            raise SshError(f"ssh to {node} failed: {proc.stderr.strip()[-500:]}")
        if proc.returncode != 0 and command.check:
            raise CommandError(command, proc.returncode, proc.stdout + proc.stderr)
        return proc.stdout
