"""The one place that runs commands: in the root namespace or inside a node's netns."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

from mcclab.commands import Cmd
from mcclab.net.setns import NETNS_DIR

log = logging.getLogger(__name__)


class CommandError(RuntimeError):
    """A command that had to succeed failed."""

    def __init__(self, command: Cmd, returncode: int, output: str):
        self.command, self.returncode, self.output = command, returncode, output
        super().__init__(f"command failed ({returncode}): {command}\n{output.strip()}")


# Node namespaces whose commands run on another machine. A lab on allocated hosts
# (mcclab.testbed.lab) maps each node's namespace name to a function that returns
# the local argv running a command on the node's host over SSH (``spawn``: a
# long-lived process, which must be stoppable there). Every layer's commands and
# processes pass through full_argv, so this is the one place they are redirected.
# Filled while such a lab is up and emptied by its teardown; empty otherwise.
REMOTE: dict[str, Callable[[tuple[str, ...], bool], list[str]]] = {}


def full_argv(command: Cmd, spawn: bool = False) -> list[str]:
    """The argv that actually runs, entering the node's network namespace if needed
    (or reaching its host, see REMOTE; ``spawn`` marks a long-lived process)."""
    if command.netns is None:
        return list(command.argv)
    remote = REMOTE.get(command.netns)
    if remote is not None:
        return remote(command.argv, spawn)
    # nsenter --net is lighter than `ip netns exec`, which also remounts /sys.
    return ["nsenter", f"--net={NETNS_DIR / command.netns}", "--", *command.argv]


class Runner:
    """Executes Cmd values, logging every line to an optional transcript file."""

    def __init__(self, transcript: Path | None = None, dry_run: bool = False):
        self.transcript = transcript
        self.dry_run = dry_run
        self.history: list[Cmd] = []

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
            full_argv(command), input=command.input, capture_output=True, text=True,
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
