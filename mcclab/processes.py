"""Start long-running processes inside a node, each in its own process group, and track them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mcclab.commands import Cmd
from mcclab.execute import Runner, full_argv
from mcclab.state import LabState, TrackedProcess, kill_group


def spawn(state: LabState, command: Cmd, log: Path, what: str,
          runner: Runner | None = None) -> TrackedProcess:
    """Start ``command`` in a new session (so its pgid is its pid) and record it.

    ``runner`` decides where it runs (a node's namespace here, or the node's
    machine when the runner's lab routes it there); without one, here.

    Its pid is known only once Popen returns; until it is recorded, the lab's
    cgroup (which the child joined at its fork) is what `mcclab clean` finds it by.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = (runner.argv(command, spawn=True) if runner is not None
            else full_argv(command, spawn=True))
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
    return state.add_process(proc.pid, what)


def stop(proc: TrackedProcess) -> None:
    """End a tracked process group."""
    kill_group(proc)
