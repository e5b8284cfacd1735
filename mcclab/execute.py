"""The one place that runs commands: in the root namespace or inside a node's netns."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from mcclab.commands import Cmd
from mcclab.net.setns import NETNS_DIR

log = logging.getLogger(__name__)


class CommandError(RuntimeError):
    """A command that had to succeed failed."""

    def __init__(self, command: Cmd, returncode: int, output: str):
        self.command, self.returncode, self.output = command, returncode, output
        super().__init__(f"command failed ({returncode}): {command}\n{output.strip()}")


class RemoteCommand(Protocol):
    """How the commands of one node reach the machine that is that node.

    Called with a command's argv and whether it is a long-lived process
    (``spawn``, which must stay stoppable there); returns the local argv that
    runs it on that machine (for a testbed host, ``ssh OPTIONS -- HOST 'ARGV'``).
    """

    def __call__(self, argv: tuple[str, ...], spawn: bool) -> list[str]:
        """The local argv running ``argv`` on the node's machine."""
        ...


# Namespace name (``mcl-<node>``) -> how its commands reach the node's machine. The
# lab that owns the machines hands this to its Runner, as LabOptions.network_backend
# hands a lab its network backend: a namespace absent from it is a local one.
RemoteRoutes = Mapping[str, RemoteCommand]


def full_argv(command: Cmd, spawn: bool = False,
              remote: RemoteRoutes | None = None) -> list[str]:
    """The argv that actually runs ``command``: entering its node's network namespace
    here, or reaching the node's machine through ``remote`` when it names the
    namespace (``spawn`` marks a long-lived process)."""
    if command.netns is None:
        return list(command.argv)
    route = remote.get(command.netns) if remote is not None else None
    if route is not None:
        return route(command.argv, spawn)
    # nsenter --net is lighter than `ip netns exec`, which also remounts /sys.
    return ["nsenter", f"--net={NETNS_DIR / command.netns}", "--", *command.argv]


class Runner:
    """Executes Cmd values, logging every line to an optional transcript file.

    ``remote`` routes the commands of some namespaces to other machines (see
    :data:`RemoteRoutes`); the lab that owns those machines passes it in and may
    fill or empty it while it is up. Without it every namespace is local.
    """

    def __init__(self, transcript: Path | None = None, dry_run: bool = False,
                 remote: RemoteRoutes | None = None):
        self.transcript = transcript
        self.dry_run = dry_run
        self.remote: RemoteRoutes = remote if remote is not None else {}
        self.history: list[Cmd] = []

    def argv(self, command: Cmd, spawn: bool = False) -> list[str]:
        """The local argv that runs ``command`` where this runner sends it (``spawn``: a
        long-lived process, see :func:`mcclab.processes.spawn`)."""
        return full_argv(command, spawn, self.remote)

    def _record(self, command: Cmd, rc: int | None) -> None:
        """Append one line to the transcript."""
        self.history.append(command)
        if self.transcript is not None:
            with self.transcript.open("a") as fh:
                fh.write(f"{'' if rc is None else rc}\t{command}\n")

    def run(self, command: Cmd, timeout: float = 30.0) -> str:
        """Run one command and return its stdout; raise CommandError if it must succeed."""
        if self.dry_run:
            self._record(command, None)
            return ""
        proc = subprocess.run(
            self.argv(command), input=command.input, capture_output=True, text=True,
            timeout=timeout, check=False,
        )
        self._record(command, proc.returncode)
        if proc.returncode != 0 and command.check:
            raise CommandError(command, proc.returncode, proc.stdout + proc.stderr)
        return proc.stdout

    def run_all(self, commands: Iterable[Cmd]) -> None:
        """Run commands in order, stopping at the first required one that fails."""
        for command in commands:
            self.run(command)
