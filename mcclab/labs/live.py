"""A lab's live network: ``mcclab lab start`` brings it up in the background.

The network's owner is an ordinary ``mcclab up TOPOLOGY`` started detached in
its own session (so its own process group): it takes the machine-wide lab lock,
records the lab under /run/mcclab like any lab, and holds it until SIGTERM,
when it tears it down. ``mcclab clean`` therefore treats it like any lab in
use, and one left by a crashed owner like any leftover. The student's work
folder keeps ``live.json`` naming that owner, so later commands find the
network (:func:`find_live`) and ``mcclab lab reset`` stops it (:func:`stop`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from mcclab.labs.checks import LiveLab
from mcclab.state import STATE_ROOT, LabState, all_states, destroy, proc_start_time, stop_owner

LIVE_FILE = "live.json"
UP_LOG = "up.log"


class StartError(RuntimeError):
    """The lab's network did not come up; the message says why."""


@dataclass
class LiveRecord:
    """What ``live.json`` keeps: the owner of the network and what it runs."""

    pid: int
    start_time: int | None
    topology: str
    routing_backend: str
    lab_id: str = ""


def read_record(work_dir: Path) -> LiveRecord | None:
    """The work folder's live.json, or None."""
    try:
        return LiveRecord(**json.loads((work_dir / LIVE_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _owned_state(record: LiveRecord, states: list[LabState]) -> LabState | None:
    """The recorded lab that ``record``'s owner holds, if it is still alive."""
    for state in states:
        if (
            state.owner_pid == record.pid
            and state.owner_alive()
            and (record.start_time is None or state.owner_start == record.start_time)
        ):
            return state
    return None


def find_live(work_dir: Path, states: Callable[[], list[LabState]] = all_states) -> LiveLab | None:
    """The lab's network if it is up now (its owner alive and its routing ready), else None."""
    record = read_record(work_dir)
    if record is None:
        return None
    state = _owned_state(record, states())
    if state is None or state.status != "up":
        return None
    return LiveLab(state.lab_id, record.routing_backend, state.path)


def up_argv(topology: Path, timeout: float, wait: float) -> list[str]:
    """The command that owns a lab's network: ``mcclab up`` holding it until SIGTERM."""
    return [
        sys.executable,
        "-m",
        "mcclab",
        "up",
        str(topology),
        "--hold",
        "--timeout",
        f"{timeout:g}",
        "--wait",
        f"{wait:g}",
    ]


def _tail(path: Path, lines: int = 12) -> str:
    """The end of a log, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def start(
    topology: Path,
    routing_backend: str,
    work_dir: Path,
    timeout: float = 90.0,
    wait: float = 0.0,
    poll: float = 0.25,
) -> LiveLab:
    """Start the network's owner detached and return once its routing is ready.

    Raises StartError (with the owner's last output) when the owner exits first or
    the network is not up within ``timeout + wait + 30`` seconds; the owner is then
    stopped, so nothing is left behind.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    log = work_dir / UP_LOG
    with log.open("wb") as out:
        # start_new_session: its own session and process group, so the student's
        # Ctrl-C in this terminal, or this command's exit, does not end the network.
        proc = subprocess.Popen(
            up_argv(topology, timeout, wait),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "COLUMNS": "200"},
        )
    record = LiveRecord(proc.pid, proc_start_time(proc.pid), str(topology), routing_backend)
    (work_dir / LIVE_FILE).write_text(json.dumps(asdict(record), indent=1))
    deadline = time.monotonic() + timeout + wait + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            (work_dir / LIVE_FILE).unlink(missing_ok=True)
            raise StartError(f"the network did not come up:\n{_tail(log)}")
        state = _owned_state(record, all_states())
        # Ready once routing is up and the owner has recorded the topology after it.
        if state is not None and state.status == "up" and (state.path / TOPOLOGY_FILE).is_file():
            record.lab_id = state.lab_id
            (work_dir / LIVE_FILE).write_text(json.dumps(asdict(record), indent=1))
            return LiveLab(state.lab_id, routing_backend, state.path)
        time.sleep(poll)
    _stop_pid(proc.pid)
    (work_dir / LIVE_FILE).unlink(missing_ok=True)
    raise StartError(f"the network was not up after {deadline:.0f} s:\n{_tail(log)}")


def _stop_pid(pid: int, grace: float = 30.0) -> None:
    """SIGTERM a process group leader and wait for it (its teardown runs on SIGTERM)."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = 0 if Path(f"/proc/{pid}").exists() else pid
        if done:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def stop(work_dir: Path, grace: float = 30.0) -> str | None:
    """Stop this lab's network (only this lab's) and forget it; returns the lab id stopped,
    or None when it was not up. An owner that does not exit in ``grace`` seconds has its
    lab destroyed from the record, as ``mcclab clean`` would."""
    record = read_record(work_dir)
    if record is None:
        return None
    state = _owned_state(record, all_states())
    stopped = None
    if state is not None:
        stopped = state.lab_id
        if not stop_owner(state, grace):
            destroy(state)
    (work_dir / LIVE_FILE).unlink(missing_ok=True)
    return stopped


def any_live_state() -> LabState | None:
    """The lab up on this machine now, whoever started it (one lab at a time)."""
    for state in all_states():
        if state.owner_alive() and state.status == "up":
            return state
    return None


def state_dir(lab_id: str) -> Path:
    """Where a lab's record and router directories are."""
    return STATE_ROOT / lab_id


TOPOLOGY_FILE = "topology.yaml"


def record_topology(state_path: Path, topology: object) -> None:
    """Keep a live lab's resolved topology in its state folder (``mcclab up`` calls this),
    so shell, exec, capture and link commands can name its nodes and links."""
    import yaml

    dump = topology.model_dump(mode="json")  # type: ignore[attr-defined]
    (state_path / TOPOLOGY_FILE).write_text(yaml.safe_dump(dump, sort_keys=False))


class NoLiveLab(RuntimeError):
    """No lab is up on this machine (or its topology is unknown)."""


def current(topology: Path | None = None):  # noqa: ANN201 - returns (LabState, Topology)
    """The lab up now and its topology (``topology`` overrides the recorded one)."""
    from mcclab.model.loader import load_topology, resolve_topology

    state = any_live_state()
    if state is None:
        raise NoLiveLab("no lab is up: start one with 'mcclab lab start N' or 'mcclab up FILE'")
    if topology is not None:
        return state, load_topology(topology)
    recorded = state.path / TOPOLOGY_FILE
    if not recorded.is_file():
        raise NoLiveLab(
            f"lab {state.lab_id} did not record its topology: give it with --topology FILE"
        )
    import yaml

    return state, resolve_topology(yaml.safe_load(recorded.read_text()), recorded)


def capture_dir(state: LabState, results: Path = Path("results")) -> Path:
    """Where ``mcclab capture`` puts pcaps: the started lab's work folder's captures/
    (so its checks see them), else results/captures/."""
    from mcclab.labs.catalogue import discover
    from mcclab.model.loader import SpecError

    try:
        labs = discover()
    except SpecError:
        labs = []
    for lab in labs:
        record = read_record(lab.work_dir(results))
        if record is not None and record.lab_id == state.lab_id:
            return lab.work_dir(results) / "captures"
    return results / "captures"
